//! Correlation ids carried by a run.

use serde::{Deserialize, Serialize};

use crate::Id;
use crate::trace::TraceParent;

/// Identity of one run and the ids that correlate it with the request that caused
/// it. They come in with the request; no layer invents new ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunContext {
    /// Id of this run (every event carries it).
    pub run_id: Id,
    /// Distributed trace id: 32 lower-case hex digits when it came from a W3C
    /// `traceparent` or from [`RunContext::generate`] (the id an exporter gives the
    /// run's spans); any other text is carried in events but not exported as a trace.
    pub trace_id: Id,
    /// The caller's span id (16 lower-case hex digits), when the run continues a
    /// caller's trace: the parent of the run's span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<String>,
    /// Id of the ingress request (HTTP request, CLI invocation) that started the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_request_id: Option<Id>,
    /// Id of the conversation (a chat's thread) the run belongs to, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The caller's W3C trace flags, when the run continues a caller's trace
    /// (bit 0: the caller sampled it); `None` for a trace started here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_flags: Option<u8>,
    /// The caller's W3C `tracestate` (vendor entries), carried unchanged to the
    /// run's span and to the requests the run makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_state: Option<String>,
}

impl RunContext {
    /// A context with the given ids and no ingress request id.
    pub fn new(run_id: impl Into<Id>, trace_id: impl Into<Id>) -> Self {
        Self {
            run_id: run_id.into(),
            trace_id: trace_id.into(),
            parent_span_id: None,
            ingress_request_id: None,
            conversation_id: None,
            trace_flags: None,
            trace_state: None,
        }
    }

    /// A context with a fresh run id (a UUID) starting a new trace whose id is the
    /// same UUID as 32 lower-case hex digits, a valid W3C trace id (for an ingress
    /// point that received no trace context).
    pub fn generate() -> Self {
        let id = uuid::Uuid::now_v7();
        Self::new(id.to_string(), id.simple().to_string())
    }

    /// A context with a fresh run id continuing the caller's trace `parent`: its
    /// trace id, and the caller's span as the run span's parent.
    pub fn continuing(parent: &TraceParent) -> Self {
        let mut context = Self::generate();
        context.trace_id = parent.trace_id_hex().into();
        context.parent_span_id = Some(parent.parent_id_hex());
        context.trace_flags = Some(parent.flags);
        context
    }

    /// [`RunContext::continuing`] the `traceparent` value given, when there is one
    /// and it is valid; otherwise [`RunContext::generate`] (a new trace starts
    /// here). A malformed value is logged and ignored, never an error of the run.
    pub fn from_traceparent(value: Option<&str>) -> Self {
        match value.map(TraceParent::parse) {
            Some(Ok(parent)) => Self::continuing(&parent),
            Some(Err(error)) => {
                tracing::debug!(%error, "ignoring a malformed traceparent");
                Self::generate()
            }
            None => Self::generate(),
        }
    }

    /// Sets the caller's `tracestate` when it is a valid W3C value (at most 512
    /// bytes of printable ASCII, at most 32 `key=value` members) and the run
    /// continues a caller's trace; a state without a parent, or a malformed one,
    /// is dropped, as the W3C rules say.
    pub fn with_trace_state(mut self, state: Option<&str>) -> Self {
        self.trace_state = state
            .map(str::trim)
            .filter(|_| self.parent_span_id.is_some())
            .filter(|s| crate::trace::valid_trace_state(s))
            .map(str::to_owned);
        self
    }

    /// Sets the conversation (thread) id.
    pub fn with_conversation_id(mut self, id: impl Into<String>) -> Self {
        self.conversation_id = Some(id.into());
        self
    }

    /// Sets the ingress request id.
    pub fn with_ingress_request_id(mut self, id: impl Into<Id>) -> Self {
        self.ingress_request_id = Some(id.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_trace_id_is_a_w3c_trace_id() {
        let context = RunContext::generate();
        assert_eq!(context.trace_id.len(), 32);
        assert!(crate::trace::parse_trace_id(&context.trace_id).is_some());
        assert_eq!(context.trace_id, context.run_id.replace('-', ""));
        assert_eq!(context.parent_span_id, None);
    }

    #[test]
    fn a_traceparent_is_continued_and_a_bad_one_ignored() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = RunContext::from_traceparent(Some(value));
        assert_eq!(context.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.parent_span_id.as_deref(), Some("00f067aa0ba902b7"));
        assert_ne!(context.run_id, context.trace_id);
        assert_eq!(context.trace_flags, Some(1));
        let fresh = RunContext::from_traceparent(Some("00-zz"));
        assert_eq!(fresh.parent_span_id, None);
        assert_eq!(fresh.trace_id.len(), 32);
        assert_eq!(fresh.trace_flags, None);
    }

    #[test]
    fn a_trace_state_is_kept_only_beside_a_parent_and_only_when_valid() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let continued =
            RunContext::from_traceparent(Some(value)).with_trace_state(Some("ro=1,x@y=z"));
        assert_eq!(continued.trace_flags, Some(0));
        assert_eq!(continued.trace_state.as_deref(), Some("ro=1,x@y=z"));
        let bad = RunContext::from_traceparent(Some(value)).with_trace_state(Some("no equals"));
        assert_eq!(bad.trace_state, None);
        let orphan = RunContext::generate().with_trace_state(Some("ro=1"));
        assert_eq!(orphan.trace_state, None);
    }
}
