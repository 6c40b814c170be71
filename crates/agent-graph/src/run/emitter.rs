//! How a run emits its events: [`Emitter`], into the run's own queue (a
//! top-level run) or its parent's sink (a subagent), never waiting, and into a
//! durable run's capture.

use std::sync::Arc;

use ai_core::{
    AiEvent, RunContext,
    event::{AiEventKind, EventSink},
};

use super::Queue;
use crate::journal::Capture;

/// Emits events without ever waiting: a slow or absent consumer cannot stall a run.
/// A top-level run's emitter owns the queue and dropping it ends the event stream; a
/// subagent's emitter forwards into its parent's queue, tagging every event.
pub(super) struct Emitter {
    pub(super) target: Target,
    /// The run's ids, on every event it emits.
    pub(super) ctx: RunContext,
    /// Set for a subagent: the parent's call id and the child graph.
    pub(super) nested: Option<(ai_core::Id, Option<ai_core::Id>)>,
    /// A durable run's events since its last recorded step.
    pub(super) capture: Option<Arc<Capture>>,
}

/// Where an [`Emitter`] delivers.
pub(super) enum Target {
    /// A top-level run's own queue.
    Queue(Arc<Queue>),
    /// A subagent's parent's sink.
    Sink(Arc<dyn EventSink>),
}

/// Pushes into a run's queue (the sink of nested events; events are tagged by the
/// call that emits them), and into a durable run's capture.
struct QueueSink(Arc<Queue>, Option<Arc<Capture>>);

impl EventSink for QueueSink {
    fn emit(&self, event: AiEvent) {
        if let Some(capture) = &self.1 {
            capture.push(&event);
        }
        self.0.push(event);
    }
}

impl Emitter {
    /// Emits an event of `kind` of this run.
    pub(super) fn emit(&self, kind: AiEventKind) {
        self.push(AiEvent::new(&self.ctx, kind));
    }

    /// Emits `event`, tagged when this is a subagent's emitter.
    pub(super) fn push(&self, event: AiEvent) {
        let event = match &self.nested {
            Some((parent, graph)) => event.nested(parent, graph.clone()),
            None => event,
        };
        if let Some(capture) = &self.capture {
            capture.push(&event);
        }
        match &self.target {
            Target::Queue(queue) => {
                queue.push(event);
            }
            Target::Sink(sink) => sink.emit(event),
        }
    }

    /// Emits a replayed step's events again (not captured: they are recorded).
    pub(super) fn replay(&self, events: &[AiEvent]) {
        for event in events {
            match &self.target {
                Target::Queue(queue) => {
                    queue.push(event.clone());
                }
                Target::Sink(sink) => sink.emit(event.clone()),
            }
        }
    }

    /// Where tools of this run emit nested events.
    pub(super) fn nested_sink(&self) -> Arc<dyn EventSink> {
        match &self.target {
            Target::Queue(queue) => Arc::new(QueueSink(Arc::clone(queue), self.capture.clone())),
            Target::Sink(sink) => Arc::clone(sink),
        }
    }
}

impl EventSink for Emitter {
    fn emit(&self, event: AiEvent) {
        self.push(event);
    }
}

impl Drop for Emitter {
    fn drop(&mut self) {
        if let Target::Queue(queue) = &self.target {
            queue.close();
        }
    }
}
