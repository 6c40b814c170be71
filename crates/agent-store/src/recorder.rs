//! [`RunRecorder`]: a run's events written to the store in the background, so a
//! slow or failing store delays persistence, never the run or its UI stream.
//!
//! - [`RunRecorder::record`] never waits: it queues the event (a bounded backlog of
//!   [`RecorderOptions::backlog`] events taken and not yet written) or, when the
//!   backlog is full, returns
//!   [`RecordError::Backlog`], on which the caller fails the run rather than lose
//!   its record.
//! - Consecutive text deltas (and reasoning deltas) of the same source are merged
//!   ([`AiEvent::absorb`]) into one row per [`RecorderOptions::merge_window`], so a
//!   replay shows the same text without a row per token.
//! - A failed write is retried with backoff (the same rows at the same positions:
//!   appends are idempotent, so a write that landed but timed out is not
//!   duplicated) and reported with `tracing::warn!`; it is never dropped.
//! - [`RunRecorder::finish`] flushes what is queued and waits for it to be written,
//!   up to a deadline, and says how it went.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use ai_core::AiEvent;
use futures::future::BoxFuture;
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
                .writer()
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
///
/// Taking an event wakes nothing: it is merged or queued under a lock, and the
/// writer task wakes once per merge window (or when 512 rows are
/// waiting) to write what was taken meanwhile. A stream of deltas costs the
/// run a lock and a string append each, not a task switch each.
#[derive(Debug)]
pub struct RunRecorder {
    shared: Arc<Shared>,
    backlog: usize,
    task: tokio::task::JoinHandle<RecordSummary>,
}

/// Rows the writer holds before it writes without waiting for the window.
const BATCH_ROWS: usize = 512;

/// What the run and the writer share.
#[derive(Debug)]
struct Shared {
    taken: Mutex<Taken>,
    /// Wakes the writer early: a full batch, or the end.
    wake: tokio::sync::Notify,
}

/// Events taken and not yet handed to the writer.
#[derive(Debug, Default)]
struct Taken {
    /// Rows taken since the writer last took them: the last may still take
    /// deltas, so a row holds the deltas of one merge window at most.
    rows: Vec<AiEvent>,
    /// Events in `rows` (merged deltas count each).
    events: usize,
    /// Events taken and not yet written: `events` and those the writer holds.
    unwritten: usize,
    /// Events taken in all.
    total: u64,
    /// No more events (the recorder is finishing).
    closed: bool,
}

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
        let shared = Arc::new(Shared {
            taken: Mutex::new(Taken::default()),
            wake: tokio::sync::Notify::new(),
        });
        let writer = Writer {
            log,
            shared: Arc::clone(&shared),
            run_id: run_id.into(),
            next_seq: first_seq,
            options,
            batch: Vec::new(),
            batch_events: 0,
            summary: RecordSummary {
                events: 0,
                rows: 0,
                retries: 0,
                unwritten: None,
            },
        };
        let task = tokio::spawn(writer.run());
        Self {
            shared,
            backlog,
            task,
        }
    }

    /// Takes `event` without waiting: merged into the last row when it
    /// continues it ([`AiEvent::absorb`]) and that row is still being taken
    /// (rows the writer took, once per merge window, take no more).
    pub fn record(&self, event: &AiEvent) -> Result<(), RecordError> {
        let mut taken = self.shared.lock();
        if taken.closed {
            return Err(RecordError::Stopped);
        }
        if taken.unwritten >= self.backlog {
            return Err(RecordError::Backlog(self.backlog));
        }
        taken.unwritten += 1;
        taken.events += 1;
        taken.total += 1;
        let merged = ai_core::event::merge_into(&mut taken.rows, event);
        if !merged && taken.rows.len() >= BATCH_ROWS {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Writes everything taken (retrying until the finish deadline) and stops.
    pub async fn finish(self) -> RecordSummary {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
        self.task.await.unwrap_or_else(|error| RecordSummary {
            events: 0,
            rows: 0,
            retries: 0,
            unwritten: Some(format!("the recorder task failed: {error}")),
        })
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Taken> {
        self.taken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

struct Writer {
    log: Arc<dyn EventLog>,
    shared: Arc<Shared>,
    run_id: String,
    next_seq: u64,
    options: RecorderOptions,
    /// Rows taken from the run and not written yet; after a failed attempt
    /// they are final (a write that landed before failing is repeated
    /// identically), and newer rows only follow them.
    batch: Vec<AiEvent>,
    /// Events in `batch`.
    batch_events: usize,
    summary: RecordSummary,
}

impl Writer {
    async fn run(mut self) -> RecordSummary {
        let window = self.options.merge_window;
        let mut tick = tokio::time::interval_at(Instant::now() + window, window);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.shared.wake.notified() => {}
                _ = tick.tick() => {}
            }
            let closed = self.take();
            if closed {
                break;
            }
            if !self.batch.is_empty() {
                self.write(None).await;
            }
        }
        let deadline = Instant::now() + self.options.finish_deadline;
        self.write(Some(deadline)).await;
        self.summary.events = self.shared.lock().total;
        self.summary
    }

    /// Moves the rows the run took into the batch (the next delta starts a new
    /// row); whether the recorder is finishing.
    fn take(&mut self) -> bool {
        let mut taken = self.shared.lock();
        self.batch_events += std::mem::take(&mut taken.events);
        self.batch.reserve_exact(taken.rows.len());
        self.batch.append(&mut taken.rows);
        taken.closed
    }

    /// Writes the batch, retrying with backoff until it is written or, with a
    /// deadline, until it passes (without one, until the next tick: a failure
    /// leaves the rows in the batch).
    async fn write(&mut self, deadline: Option<Instant>) {
        let mut delay = Duration::from_millis(50);
        while !self.batch.is_empty() {
            match self
                .log
                .append(&self.run_id, self.next_seq, &self.batch)
                .await
            {
                Ok(()) => {
                    let written = self.batch.len() as u64;
                    self.next_seq += written;
                    self.summary.rows += written;
                    self.summary.unwritten = None;
                    self.batch.clear();
                    let events = std::mem::take(&mut self.batch_events);
                    let mut taken = self.shared.lock();
                    taken.unwritten = taken.unwritten.saturating_sub(events);
                    return;
                }
                Err(error) => {
                    self.summary.retries += 1;
                    if self.summary.retries.is_power_of_two() {
                        tracing::warn!(run_id = %self.run_id, %error, rows = self.batch.len(), failures = self.summary.retries, "writing the run's events failed; retrying");
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
