//! A run's span in the run's trace: the caller's span as its parent when the
//! run continues a caller's trace, and otherwise a new trace whose id is the
//! run's own trace id (no second id invented).
//!
//! The first case is OpenTelemetry's remote parent. The second has no parent
//! span, and the SDK draws a root span's trace id from its id generator; so the
//! linker puts the wanted id in the span's parent context ([`NewTrace`]), the
//! [`RunTracer`] hands it to the [`RunIds`] generator of its thread just before
//! the SDK builds the span, and the generator gives it back as the new trace id.

use std::cell::Cell;

use ai_core::RunContext;
use ai_core::trace::{TraceParent, parse_span_id, parse_trace_id};
use opentelemetry::Context;
use opentelemetry::trace::{
    SpanBuilder, SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The trace id a root span must get (a value of its parent context).
#[derive(Debug, Clone, Copy)]
struct NewTrace(TraceId);

thread_local! {
    /// The trace id the next root span built on this thread gets.
    static NEXT_TRACE_ID: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// Ids of new spans: random, but a root span's trace id is the one its run
/// asked for (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct RunIds(RandomIdGenerator);

impl IdGenerator for RunIds {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE_ID
            .with(Cell::take)
            .unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        self.0.new_span_id()
    }
}

/// The SDK's tracer, with a root span's trace id taken from its parent context.
#[derive(Debug, Clone)]
pub(crate) struct RunTracer(pub(crate) SdkTracer);

impl Tracer for RunTracer {
    type Span = opentelemetry_sdk::trace::Span;

    fn build_with_context(&self, builder: SpanBuilder, parent_cx: &Context) -> Self::Span {
        let wanted = (!parent_cx.span().span_context().is_valid())
            .then(|| parent_cx.get::<NewTrace>().map(|new| new.0))
            .flatten();
        if let Some(trace_id) = wanted {
            NEXT_TRACE_ID.with(|next| next.set(Some(trace_id)));
        }
        let span = self.0.build_with_context(builder, parent_cx);
        NEXT_TRACE_ID.with(|next| next.set(None));
        span
    }
}

/// The [`ai_core::trace::SpanLinker`] agent-graph calls for each run's span.
pub(crate) struct Linker;

impl ai_core::trace::SpanLinker for Linker {
    fn link(&self, span: &tracing::Span, context: &RunContext) {
        let Some(parent) = parent_context(context) else {
            return;
        };
        if let Err(error) = span.set_parent(parent) {
            tracing::debug!(%error, "a run span could not join its trace");
        }
    }

    fn current(&self) -> Option<TraceParent> {
        let context = tracing::Span::current().context();
        let span = context.span();
        let current = span.span_context();
        current.is_valid().then(|| TraceParent {
            trace_id: current.trace_id().to_bytes(),
            parent_id: current.span_id().to_bytes(),
            flags: current.trace_flags().to_u8(),
        })
    }
}

/// The OpenTelemetry parent of a run's span: the caller's span (with its trace
/// flags and `tracestate`), or a new trace with the run's trace id; none when
/// the trace id is not a W3C trace id.
pub(crate) fn parent_context(context: &RunContext) -> Option<Context> {
    let trace_id = TraceId::from_bytes(parse_trace_id(&context.trace_id)?);
    let parent = context.parent_span_id.as_deref().and_then(parse_span_id);
    Some(match parent {
        Some(span_id) => {
            let flags = context
                .trace_flags
                .map_or(TraceFlags::SAMPLED, TraceFlags::new);
            let state = context
                .trace_state
                .as_deref()
                .and_then(|state| state.parse::<TraceState>().ok())
                .unwrap_or_default();
            let remote =
                SpanContext::new(trace_id, SpanId::from_bytes(span_id), flags, true, state);
            Context::new().with_remote_span_context(remote)
        }
        None => Context::new().with_value(NewTrace(trace_id)),
    })
}
