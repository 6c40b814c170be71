//! [`RunRecorder`]: a run's events written to the store in the background, so a
//! slow or failing store delays persistence, never the run or its UI stream.
//!
//! - [`RunRecorder::record`] never waits: it queues the event (a bounded backlog of
//!   [`RecorderOptions::backlog`] events taken and not yet written) or, when the
//!   backlog is full, returns
//!   [`RecordError::Backlog`], on which the caller fails the run rather than lose
//!   its record.
//! - Consecutive text deltas (and reasoning deltas) of the same source are merged
//!   into one row per [`RecorderOptions::merge_window`], so a replay shows the same
//!   text without a row per token.
//! - A failed write is retried with backoff (the same rows at the same positions:
//!   appends are idempotent, so a write that landed but timed out is not
//!   duplicated) and reported with `tracing::warn!`; it is never dropped.
//! - [`RunRecorder::finish`] flushes what is queued and waits for it to be written,
//!   up to a deadline, and says how it went.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ai_core::AiEvent;
use ai_core::event::AiEventKind;
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::Store;
use crate::error::StoreError;

/// Where a recorder writes: a run's event log (a seam for tests and for other
/// logs, such as a durable journal).
pub trait EventLog: Send + Sync + 'static {
    /// Appends `events` at positions `first_seq..` of `run_id` (idempotently).
    fn append<'a>(
        &'a self,
        run_id: &'a str,
        first_seq: u64,
        events: &'a [AiEvent],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// One account's event logs in a [`Store`].
#[derive(Debug, Clone)]
pub struct StoreLog {
    store: Store,
    account: String,
}

impl StoreLog {
    /// The logs of `account` in `store`.
    pub fn new(store: Store, account: impl Into<String>) -> Self {
        Self {
            store,
            account: account.into(),
        }
    }
}

impl EventLog for StoreLog {
    fn append<'a>(
        &'a self,
        run_id: &'a str,
        first_seq: u64,
        events: &'a [AiEvent],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.store
                .event_writer()
                .append(&self.account, run_id, first_seq, events, now_ms())
                .await
        })
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// How a recorder batches and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecorderOptions {
    /// Events queued and not yet written, at most.
    pub backlog: usize,
    /// Consecutive deltas within this window become one row; also the longest
    /// time an event waits before its batch is written.
    pub merge_window: Duration,
    /// The longest wait between retries of a failed write.
    pub max_retry_delay: Duration,
    /// How long [`RunRecorder::finish`] keeps retrying.
    pub finish_deadline: Duration,
}

impl Default for RecorderOptions {
    /// 10,000 events, 250 ms, retries up to every 2 s, 30 s to finish.
    fn default() -> Self {
        Self {
            backlog: 10_000,
            merge_window: Duration::from_millis(250),
            max_retry_delay: Duration::from_secs(2),
            finish_deadline: Duration::from_secs(30),
        }
    }
}

/// Why an event was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The store is too far behind: the backlog is full.
    #[error("the run store is {0} events behind; the run cannot be recorded")]
    Backlog(usize),
    /// The recorder stopped (finished, or its task ended).
    #[error("the run recorder has stopped")]
    Stopped,
}

/// What a finished recorder wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSummary {
    /// Events received.
    pub events: u64,
    /// Rows written (merged deltas are one row).
    pub rows: u64,
    /// Failed writes that were retried.
    pub retries: u64,
    /// The last write error, when the log was still failing at the deadline
    /// (rows from `rows` on were not written).
    pub unwritten: Option<String>,
}

/// Writes one run's events in the background (see the module docs).
#[derive(Debug)]
pub struct RunRecorder {
    sender: mpsc::UnboundedSender<AiEvent>,
    /// Events taken and not yet written (queued or pending in the writer).
    unwritten: Arc<AtomicUsize>,
    backlog: usize,
    task: tokio::task::JoinHandle<RecordSummary>,
}

/// Rows the writer holds before it writes without waiting for the window.
const BATCH_ROWS: usize = 512;

impl RunRecorder {
    /// Starts recording run `run_id` into `log`, from position `first_seq` (0 for
    /// a new run; after a resume, the next free position).
    pub fn start(
        log: Arc<dyn EventLog>,
        run_id: impl Into<String>,
        first_seq: u64,
        options: RecorderOptions,
    ) -> Self {
        let backlog = options.backlog.max(1);
        let (sender, receiver) = mpsc::unbounded_channel();
        let unwritten = Arc::new(AtomicUsize::new(0));
        let writer = Writer {
            log,
            unwritten: Arc::clone(&unwritten),
            pending_events: 0,
            run_id: run_id.into(),
            next_seq: first_seq,
            options,
            pending: Vec::new(),
            merge_started: None,
            summary: RecordSummary {
                events: 0,
                rows: 0,
                retries: 0,
                unwritten: None,
            },
        };
        let task = tokio::spawn(writer.run(receiver));
        Self {
            sender,
            unwritten,
            backlog,
            task,
        }
    }

    /// Queues `event` without waiting.
    pub fn record(&self, event: AiEvent) -> Result<(), RecordError> {
        if self.unwritten.fetch_add(1, Ordering::SeqCst) >= self.backlog {
            self.unwritten.fetch_sub(1, Ordering::SeqCst);
            return Err(RecordError::Backlog(self.backlog));
        }
        self.sender.send(event).map_err(|_| {
            self.unwritten.fetch_sub(1, Ordering::SeqCst);
            RecordError::Stopped
        })
    }

    /// Writes everything queued (retrying until the finish deadline) and stops.
    pub async fn finish(self) -> RecordSummary {
        drop(self.sender);
        self.task.await.unwrap_or_else(|error| RecordSummary {
            events: 0,
            rows: 0,
            retries: 0,
            unwritten: Some(format!("the recorder task failed: {error}")),
        })
    }
}

struct Writer {
    log: Arc<dyn EventLog>,
    unwritten: Arc<AtomicUsize>,
    /// Events in `pending` (merged deltas count each).
    pending_events: usize,
    run_id: String,
    next_seq: u64,
    options: RecorderOptions,
    /// Rows not written yet (the last may still take deltas).
    pending: Vec<AiEvent>,
    /// When the last pending row started taking deltas.
    merge_started: Option<Instant>,
    summary: RecordSummary,
}

impl Writer {
    async fn run(mut self, mut receiver: mpsc::UnboundedReceiver<AiEvent>) -> RecordSummary {
        let window = self.options.merge_window;
        let mut tick = tokio::time::interval_at(Instant::now() + window, window);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = receiver.recv() => match event {
                    Some(event) => {
                        self.take(event);
                        if self.pending.len() >= BATCH_ROWS {
                            self.write(None).await;
                        }
                    }
                    None => break,
                },
                _ = tick.tick() => {
                    if !self.pending.is_empty() {
                        self.write(None).await;
                    }
                }
            }
        }
        let deadline = Instant::now() + self.options.finish_deadline;
        self.write(Some(deadline)).await;
        self.summary
    }

    /// Adds an event: merged into the last pending row when both are deltas of
    /// the same kind and source within the merge window.
    fn take(&mut self, event: AiEvent) {
        self.summary.events += 1;
        self.pending_events += 1;
        let within = self
            .merge_started
            .is_some_and(|at| at.elapsed() < self.options.merge_window);
        if within
            && let Some(last) = self.pending.last_mut()
            && merge(last, &event)
        {
            return;
        }
        self.merge_started = is_delta(&event).then(Instant::now);
        self.pending.push(event);
    }

    /// Writes the pending rows, retrying with backoff until they are written or,
    /// with a deadline, until it passes (without one, until the next event may be
    /// taken: a failure leaves the rows pending for the next tick).
    async fn write(&mut self, deadline: Option<Instant>) {
        let mut delay = Duration::from_millis(50);
        while !self.pending.is_empty() {
            match self
                .log
                .append(&self.run_id, self.next_seq, &self.pending)
                .await
            {
                Ok(()) => {
                    let written = self.pending.len() as u64;
                    self.next_seq += written;
                    self.summary.rows += written;
                    self.summary.unwritten = None;
                    self.pending.clear();
                    self.merge_started = None;
                    self.unwritten
                        .fetch_sub(std::mem::take(&mut self.pending_events), Ordering::SeqCst);
                    return;
                }
                Err(error) => {
                    self.summary.retries += 1;
                    // The rows as attempted are final: a write that landed before
                    // failing must be repeated identically (no more merging).
                    self.merge_started = None;
                    if self.summary.retries.is_power_of_two() {
                        tracing::warn!(run_id = %self.run_id, %error, rows = self.pending.len(), failures = self.summary.retries, "writing the run's events failed; retrying");
                    }
                    self.summary.unwritten = Some(error.to_string());
                    let Some(deadline) = deadline else {
                        return;
                    };
                    if Instant::now() + delay > deadline {
                        return;
                    }
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(self.options.max_retry_delay);
                }
            }
        }
    }
}

fn is_delta(event: &AiEvent) -> bool {
    matches!(
        event.kind,
        AiEventKind::TextDelta { .. } | AiEventKind::ReasoningDelta { .. }
    )
}

/// Appends `next`'s delta to `last` when both are deltas of one kind from the
/// same source; whether it did.
fn merge(last: &mut AiEvent, next: &AiEvent) -> bool {
    let same_source = last.run_id == next.run_id
        && last.parent_tool_call_id == next.parent_tool_call_id
        && last.graph == next.graph
        && last.ingress_request_id == next.ingress_request_id;
    if !same_source {
        return false;
    }
    match (&mut last.kind, &next.kind) {
        (AiEventKind::TextDelta { delta }, AiEventKind::TextDelta { delta: more })
        | (AiEventKind::ReasoningDelta { delta }, AiEventKind::ReasoningDelta { delta: more }) => {
            delta.push_str(more);
            true
        }
        _ => false,
    }
}
