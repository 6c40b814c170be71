//! A started run as its caller holds it: [`RunHandle`], itself the run's
//! [`EventStream`], with its outcome, [`OutputFuture`], and its cancel token; who
//! may cancel the run by being dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ai_core::{AiEvent, CancellationToken};
use futures::{FutureExt, Stream};
use tokio::sync::oneshot;
use tokio_util::sync::DropGuard;

use super::{Queue, RunError, RunOutput, Slot};

/// The events of one run, in order. Ends after the `done` event.
///
/// Dropping the stream cancels the run (the model call and running tools stop, and the
/// outcome resolves to [`RunError::Cancelled`]) unless the stream was detached
/// ([`EventStream::detach`], [`RunHandle::detach`]) or came from
/// [`RunHandle::into_parts`].
///
/// The run never waits for the stream: while the consumer is behind, consecutive
/// `text_delta`s (and `reasoning_delta`s) are merged into one queued event, so a
/// stalled consumer costs one growing text per gap, not one event per token; the
/// concatenated text is unchanged and no other event is dropped.
pub struct EventStream {
    pub(super) queue: Arc<Queue>,
    pub(super) cancel_on_drop: Option<DropGuard>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("pending", &self.queue.len())
            .field("cancels_on_drop", &self.cancel_on_drop.is_some())
            .finish()
    }
}

impl EventStream {
    /// Dropping the returned stream no longer cancels the run.
    pub fn detach(mut self) -> Self {
        if let Some(guard) = self.cancel_on_drop.take() {
            guard.disarm();
        }
        self
    }

    /// Events waiting to be read (after merging): how far behind the consumer is,
    /// for metrics and tests.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Deltas merged into an already queued delta so far, because the consumer was
    /// behind.
    pub fn coalesced(&self) -> u64 {
        self.queue.coalesced()
    }
}

impl Stream for EventStream {
    type Item = AiEvent;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AiEvent>> {
        loop {
            return match self.queue.poll_pop(cx) {
                Poll::Ready(Some(Slot::Event(event))) => Poll::Ready(Some(event)),
                // A lossless queue drops nothing; nothing to report.
                Poll::Ready(Some(Slot::Gap(_))) => continue,
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        // Free what is queued and stop queueing; the guard (if armed) then cancels.
        self.queue.receiver_gone();
    }
}

/// The final result of one run. Resolves exactly once, whether or not anyone reads
/// the events.
///
/// Dropping it cancels the run only when it came from [`RunHandle::into_parts`];
/// otherwise the [`EventStream`] decides (see [`RunHandle`]).
pub struct OutputFuture {
    pub(super) rx: oneshot::Receiver<Result<RunOutput, RunError>>,
    pub(super) cancel_on_drop: Option<DropGuard>,
}

impl std::fmt::Debug for OutputFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputFuture")
            .field("cancels_on_drop", &self.cancel_on_drop.is_some())
            .finish_non_exhaustive()
    }
}

impl Future for OutputFuture {
    type Output = Result<RunOutput, RunError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.rx.poll_unpin(cx).map(|r| {
            r.unwrap_or_else(|_| Err(RunError::Internal("the run ended without a result".into())))
        })
    }
}

/// A started run: a stream of its events, its outcome and its cancel token.
///
/// The handle is itself the event stream. Read the events, then the outcome:
///
/// ```
/// # use agent_graph::Agent;
/// # use agent_testing::{ScriptedModel, Turn};
/// use ai_core::event::AiEventKind;
/// use futures::StreamExt;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::builder(ScriptedModel::new([Turn::text("Hi!")])).build()?;
/// let mut run = agent.run("Hello");
/// while let Some(event) = run.next().await {
///     if let AiEventKind::TextDelta { delta } = &event.kind {
///         print!("{delta}");
///     }
/// }
/// let output = run.into_outcome().await?;
/// assert_eq!(output.content, "Hi!");
/// # Ok(())
/// # }
/// ```
///
/// Who may cancel the run by being dropped:
/// - the handle itself, and what [`RunHandle::into_events`] returns: dropping the
///   events cancels the run (a UI that goes away stops it).
/// - [`RunHandle::into_outcome`] (events not wanted) and the outcome half of
///   [`RunHandle::into_parts`]: the run goes on whatever happens to the events, and
///   dropping the outcome cancels it (a caller that only wants the result).
/// - after [`RunHandle::detach`]: nobody; the run ends on its own (answer, error or
///   limit) or by [`RunHandle::cancel`] / [`RunHandle::cancel_token`].
///
/// The events and the outcome are not fields: moving one out would drop the other
/// half and, with it, cancel the run.
///
/// ```compile_fail
/// # async fn f(agent: agent_graph::Agent) {
/// let outcome = agent.run("Hello").outcome; // use `into_outcome()`
/// # }
/// ```
pub struct RunHandle {
    pub(super) events: EventStream,
    pub(super) outcome: OutputFuture,
    pub(super) cancel: CancellationToken,
    pub(super) run_id: ai_core::Id,
}

impl Stream for RunHandle {
    type Item = AiEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AiEvent>> {
        Pin::new(&mut self.events).poll_next(cx)
    }
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle")
            .field("events", &self.events)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl RunHandle {
    /// The run's id: every event of the run carries it, and a recorded run is
    /// stored under it.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Cancels the run: the in-flight model stream and tools stop, and the run ends
    /// with an `error` (cancelled) and `done`.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// A token that cancels the run when fired.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Splits the handle; dropping the event stream does not stop the run, dropping
    /// the outcome does.
    pub fn into_parts(mut self) -> (EventStream, OutputFuture) {
        if let Some(guard) = self.events.cancel_on_drop.take() {
            self.outcome.cancel_on_drop = Some(guard);
        }
        (self.events, self.outcome)
    }

    /// The outcome alone: the events (read or not) are discarded and the run goes
    /// on to its end; dropping the returned future cancels it.
    pub fn into_outcome(self) -> OutputFuture {
        self.into_parts().1
    }

    /// The events alone, as the handle streams them: dropping them cancels the run;
    /// the outcome is discarded (the `assistant_final` or `error` event still says
    /// how the run ended).
    pub fn into_events(self) -> EventStream {
        self.events
    }

    /// Events waiting to be read (see [`EventStream::pending`]).
    pub fn pending(&self) -> usize {
        self.events.pending()
    }

    /// Detaches the run from its handle: dropping the events, the outcome or the
    /// handle no longer cancels it. It still stops on [`RunHandle::cancel`].
    pub fn detach(mut self) -> Self {
        for guard in [
            self.events.cancel_on_drop.take(),
            self.outcome.cancel_on_drop.take(),
        ]
        .into_iter()
        .flatten()
        {
            guard.disarm();
        }
        self
    }
}
