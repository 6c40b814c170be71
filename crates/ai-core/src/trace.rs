//! Trace context: the W3C `traceparent` a run continues, and the seam through
//! which a telemetry exporter links a run's span to it.
//!
//! A run's [`RunContext`] carries the trace id (32 lower-case hex digits when it
//! came from a `traceparent` or from [`RunContext::generate`]) and, when a caller
//! sent one, the span id of the caller's span. [`TraceParent`] parses and formats
//! the header (version `00` only, the rest refused with a [`TraceParentError`]).
//!
//! ai-core exports nothing. An exporter installs a [`SpanLinker`] once per process
//! ([`install_span_linker`]); the loop calls [`link_run_span`] right after it
//! creates a run's span, so the exporter can make the caller's span that span's
//! parent. With no linker installed the call does nothing. Whether spans may carry
//! content (prompts, model text, the redacted views of tool arguments and
//! results) is one process-wide switch, off unless an exporter turns it on
//! ([`set_capture_content`]); raw tool arguments and results never reach a span.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::RunContext;

/// The `sampled` bit of the trace flags.
pub const FLAG_SAMPLED: u8 = 0x01;

/// A parsed W3C `traceparent` (version `00`): the trace id, the caller's span id
/// and the trace flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace id; never all zeroes.
    pub trace_id: [u8; 16],
    /// The caller's span id (the parent of the spans that continue it); never all
    /// zeroes.
    pub parent_id: [u8; 8],
    /// The trace flags ([`FLAG_SAMPLED`]).
    pub flags: u8,
}

/// Why a `traceparent` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceParentError {
    /// It is not four `-`-separated fields of 2, 32, 16 and 2 characters.
    #[error("a traceparent is four fields: version-traceid-parentid-flags")]
    Shape,
    /// A field holds something other than lower-case hex digits.
    #[error("a traceparent field is not lower-case hex")]
    NotHex,
    /// The version is not `00`.
    #[error("traceparent version {0} is not supported (only 00)")]
    Version(String),
    /// The trace id is all zeroes.
    #[error("the trace id of a traceparent is all zeroes")]
    ZeroTraceId,
    /// The parent id is all zeroes.
    #[error("the parent id of a traceparent is all zeroes")]
    ZeroParentId,
}

impl TraceParent {
    /// Parses a `traceparent` header value (surrounding whitespace is ignored).
    pub fn parse(value: &str) -> Result<Self, TraceParentError> {
        let mut fields = value.trim().split('-');
        let (Some(version), Some(trace), Some(parent), Some(flags), None) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return Err(TraceParentError::Shape);
        };
        if version.len() != 2 || trace.len() != 32 || parent.len() != 16 || flags.len() != 2 {
            return Err(TraceParentError::Shape);
        }
        let [version_byte] = decode_hex::<1>(version)?;
        if version_byte != 0 {
            return Err(TraceParentError::Version(version.to_owned()));
        }
        let trace_id = decode_hex::<16>(trace)?;
        let parent_id = decode_hex::<8>(parent)?;
        let [flags] = decode_hex::<1>(flags)?;
        if trace_id == [0; 16] {
            return Err(TraceParentError::ZeroTraceId);
        }
        if parent_id == [0; 8] {
            return Err(TraceParentError::ZeroParentId);
        }
        Ok(Self {
            trace_id,
            parent_id,
            flags,
        })
    }

    /// The trace id as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> String {
        hex::encode(self.trace_id)
    }

    /// The parent id as 16 lower-case hex digits.
    pub fn parent_id_hex(&self) -> String {
        hex::encode(self.parent_id)
    }

    /// Whether the caller sampled this trace.
    pub fn sampled(&self) -> bool {
        self.flags & FLAG_SAMPLED != 0
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            self.trace_id_hex(),
            self.parent_id_hex(),
            self.flags
        )
    }
}

impl std::str::FromStr for TraceParent {
    type Err = TraceParentError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Decodes exactly `N` bytes of lower-case hex.
fn decode_hex<const N: usize>(text: &str) -> Result<[u8; N], TraceParentError> {
    if !text
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(TraceParentError::NotHex);
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(text, &mut out).map_err(|_| TraceParentError::NotHex)?;
    Ok(out)
}

/// Decodes a trace id of 32 lower-case hex digits, not all zeroes.
pub fn parse_trace_id(text: &str) -> Option<[u8; 16]> {
    (text.len() == 32)
        .then(|| decode_hex::<16>(text).ok())
        .flatten()
        .filter(|id| *id != [0; 16])
}

/// Decodes a span id of 16 lower-case hex digits, not all zeroes.
pub fn parse_span_id(text: &str) -> Option<[u8; 8]> {
    (text.len() == 16)
        .then(|| decode_hex::<8>(text).ok())
        .flatten()
        .filter(|id| *id != [0; 8])
}

/// Whether `state` is a W3C `tracestate` value a run may carry on: at most 512
/// bytes, at most 32 comma-separated `key=value` members, keys of lower-case
/// letters, digits and `_-*/@`, values of printable ASCII without `,` and `=`.
pub fn valid_trace_state(state: &str) -> bool {
    let members: Vec<&str> = state
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    let key_ok = |key: &str| {
        !key.is_empty()
            && key.len() <= 256
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/@".contains(&b))
    };
    let value_ok = |value: &str| {
        !value.is_empty()
            && value.len() <= 256
            && value
                .bytes()
                .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
            && !value.ends_with(' ')
    };
    state.len() <= 512
        && !members.is_empty()
        && members.len() <= 32
        && members.iter().all(|m| {
            m.split_once('=')
                .is_some_and(|(key, value)| key_ok(key) && value_ok(value))
        })
}

/// What an exporter does with a run's span right after it is created: links it to
/// the trace (and the caller's span) its [`RunContext`] names.
pub trait SpanLinker: Send + Sync {
    /// Links `span`, the span of the run `context` describes.
    fn link(&self, span: &tracing::Span, context: &RunContext);

    /// The trace context of the current span (the model call's or the tool
    /// call's, when an outgoing request is made inside it), as the exporter
    /// knows it; `None` when there is no exported span to name.
    fn current(&self) -> Option<TraceParent> {
        None
    }
}

static LINKER: OnceLock<Box<dyn SpanLinker>> = OnceLock::new();
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Installs the process's span linker. The first one installed stays; returns
/// whether this one was installed.
pub fn install_span_linker(linker: Box<dyn SpanLinker>) -> bool {
    LINKER.set(linker).is_ok()
}

/// Links a run's span through the installed [`SpanLinker`]; without one, does
/// nothing.
pub fn link_run_span(span: &tracing::Span, context: &RunContext) {
    if let Some(linker) = LINKER.get() {
        linker.link(span, context);
    }
}

/// The W3C trace headers of an outgoing request a run makes (to a model
/// provider, an MCP server): `traceparent` names the current exported span
/// (through the installed [`SpanLinker`]) or, with no exporter, the run's trace
/// and the caller's span, so the provider's side still joins the caller's trace;
/// `tracestate` is the caller's, unchanged. `None` when the run's trace id is
/// not a W3C trace id, or when no span can be named.
pub fn outgoing_headers(context: &RunContext) -> Option<(String, Option<String>)> {
    let exported = LINKER.get().and_then(|linker| linker.current());
    let parent = match exported {
        Some(current) => current,
        None => TraceParent {
            trace_id: parse_trace_id(&context.trace_id)?,
            parent_id: parse_span_id(context.parent_span_id.as_deref()?)?,
            flags: context.trace_flags.unwrap_or(FLAG_SAMPLED),
        },
    };
    Some((parent.to_string(), context.trace_state.clone()))
}

/// Turns on (or off) content in spans: prompts and model text, and the redacted
/// views of tool arguments and results. Off by default.
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether spans may carry content (see [`set_capture_content`]).
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_spec_example_round_trips() {
        let parent = TraceParent::parse(SAMPLE).unwrap();
        assert_eq!(parent.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parent.parent_id_hex(), "00f067aa0ba902b7");
        assert!(parent.sampled());
        assert_eq!(parent.to_string(), SAMPLE);
    }

    #[test]
    fn malformed_values_are_refused_with_a_reason() {
        let cases = [
            ("", TraceParentError::Shape),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                TraceParentError::Shape,
            ),
            (&format!("{SAMPLE}-00"), TraceParentError::Shape),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                TraceParentError::NotHex,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
                TraceParentError::NotHex,
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                TraceParentError::Version("ff".into()),
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                TraceParentError::ZeroTraceId,
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                TraceParentError::ZeroParentId,
            ),
            (
                "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                TraceParentError::NotHex,
            ),
        ];
        for (value, want) in cases {
            assert_eq!(TraceParent::parse(value), Err(want), "{value:?}");
        }
    }

    #[test]
    fn trace_states_follow_the_w3c_rules() {
        for good in [
            "ro=1",
            "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
            "a@b=x y",
            "k_1-*/=v",
        ] {
            assert!(valid_trace_state(good), "{good:?}");
        }
        let long = vec!["k=v"; 33].join(",");
        for bad in ["", "k", "=v", "K=v", "k=", "k=a,b", "k=v=w", ",", &long] {
            assert!(!valid_trace_state(bad), "{bad:?}");
        }
        assert!(!valid_trace_state(&format!("k={}", "v".repeat(600))));
    }

    #[test]
    fn without_an_exporter_outgoing_requests_continue_the_caller_span() {
        let caller = TraceParent::parse(SAMPLE).unwrap();
        let context = RunContext::continuing(&caller).with_trace_state(Some("ro=1"));
        let (parent, state) = outgoing_headers(&context).unwrap();
        assert_eq!(parent, SAMPLE);
        assert_eq!(state.as_deref(), Some("ro=1"));
        // A trace started here has no span to name without an exporter.
        assert_eq!(outgoing_headers(&RunContext::generate()), None);
        assert_eq!(outgoing_headers(&RunContext::new("r", "not-w3c")), None);
    }

    proptest! {
        #[test]
        fn any_valid_parent_round_trips(trace in any::<[u8; 16]>(), parent in any::<[u8; 8]>(), flags in any::<u8>()) {
            prop_assume!(trace != [0; 16] && parent != [0; 8]);
            let value = TraceParent { trace_id: trace, parent_id: parent, flags };
            prop_assert_eq!(TraceParent::parse(&value.to_string()), Ok(value));
        }

        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,80}") {
            let _ = TraceParent::parse(&text);
        }

        #[test]
        fn near_valid_text_never_panics(text in "[0-9a-fA-F-]{50,60}") {
            if let Ok(parent) = TraceParent::parse(&text) {
                prop_assert_eq!(parent.to_string(), text.trim());
            }
        }
    }
}
