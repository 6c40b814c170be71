//! The recorder against a real SQLite store, and against logs that are slow,
//! stuck or failing: it never blocks the caller, merges deltas, loses and
//! duplicates nothing, and says when it is too far behind.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent_store::{
    EventLog, RecordError, RecorderOptions, RunRecorder, Store, StoreError, StoreLog,
};
use ai_core::event::AiEventKind;
use ai_core::{AiEvent, RunContext};
use futures::future::BoxFuture;
use tokio::sync::Semaphore;

fn event(kind: AiEventKind) -> AiEvent {
    AiEvent::new(&RunContext::new("run-1", "trace-1"), kind)
}

fn text(delta: &str) -> AiEvent {
    event(AiEventKind::TextDelta {
        delta: delta.into(),
    })
}

fn reasoning(delta: &str) -> AiEvent {
    event(AiEventKind::ReasoningDelta {
        delta: delta.into(),
    })
}

fn tool_start() -> AiEvent {
    event(AiEventKind::ToolCallStart {
        tool_call_id: "c1".into(),
        tool_name: "core__get_current_time".into(),
        args: serde_json::json!({}),
    })
}

async fn sqlite() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("runs.db"))
        .await
        .unwrap();
    (dir, store)
}

/// The stored text of the run's deltas, and the kinds of its rows.
async fn stored(store: &Store) -> (String, String, Vec<&'static str>) {
    let rows = store.account("acme").events("run-1", None).await.unwrap();
    let seqs: Vec<u64> = rows.iter().map(|r| r.seq).collect();
    assert_eq!(
        seqs,
        (0..rows.len() as u64).collect::<Vec<_>>(),
        "contiguous"
    );
    let mut text = String::new();
    let mut thought = String::new();
    let mut kinds = Vec::new();
    for row in rows {
        match row.event.kind {
            AiEventKind::TextDelta { delta } => {
                text.push_str(&delta);
                kinds.push("text");
            }
            AiEventKind::ReasoningDelta { delta } => {
                thought.push_str(&delta);
                kinds.push("reasoning");
            }
            _ => kinds.push("other"),
        }
    }
    (text, thought, kinds)
}

#[tokio::test]
async fn deltas_are_merged_into_rows_and_nothing_is_lost() {
    let (_dir, store) = sqlite().await;
    let log = Arc::new(StoreLog::new(store.clone(), "acme"));
    let recorder = RunRecorder::start(log, "run-1", 0, RecorderOptions::default());
    let mut expected = String::new();
    for i in 0..300 {
        let piece = format!("w{i} ");
        expected.push_str(&piece);
        recorder.record(&text(&piece)).unwrap();
    }
    recorder.record(&tool_start()).unwrap();
    for _ in 0..40 {
        recorder.record(&reasoning("hm ")).unwrap();
    }
    let summary = recorder.finish().await;
    assert_eq!(summary.events, 341);
    assert_eq!(summary.unwritten, None);
    let (text, thought, kinds) = stored(&store).await;
    assert_eq!(text, expected);
    assert_eq!(thought, "hm ".repeat(40));
    assert_eq!(summary.rows, kinds.len() as u64);
    // Queued within one window: one row per run of deltas.
    assert_eq!(kinds, ["text", "other", "reasoning"]);
}

/// How a [`FaultyLog`] misbehaves.
enum Fault {
    /// Waits for a permit before each write.
    Gated(Arc<Semaphore>),
    /// The first writes land and then report a failure (a timeout after the
    /// commit), so every retry repeats rows that are already stored: this
    /// many times.
    LandsThenFails(AtomicU32),
    /// Never works.
    Down,
}

/// A log that writes to a store's log (none: nowhere) the way its [`Fault`] says.
struct FaultyLog {
    inner: Option<StoreLog>,
    fault: Fault,
}

impl FaultyLog {
    fn new(store: &Store, fault: Fault) -> Arc<Self> {
        let inner = Some(StoreLog::new(store.clone(), "acme"));
        Arc::new(Self { inner, fault })
    }

    /// Appends to the store's log.
    async fn write(
        &self,
        run_id: &str,
        first_seq: u64,
        events: &[AiEvent],
    ) -> Result<(), StoreError> {
        let inner = self.inner.as_ref().expect("a log over a store");
        inner.append(run_id, first_seq, events).await
    }
}

impl EventLog for FaultyLog {
    fn append<'a>(
        &'a self,
        run_id: &'a str,
        first_seq: u64,
        events: &'a [AiEvent],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            match &self.fault {
                Fault::Gated(gate) => {
                    gate.acquire().await.unwrap().forget();
                    self.write(run_id, first_seq, events).await
                }
                Fault::LandsThenFails(failures) => {
                    self.write(run_id, first_seq, events).await?;
                    let failing = failures
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                    if failing {
                        return Err(StoreError::Database("timed out after the commit".into()));
                    }
                    Ok(())
                }
                Fault::Down => Err(StoreError::Database("connection refused".into())),
            }
        })
    }
}

#[tokio::test]
async fn a_stuck_store_never_blocks_the_run_and_a_full_backlog_is_an_error() {
    let (_dir, store) = sqlite().await;
    let gate = Arc::new(Semaphore::new(0));
    let log = FaultyLog::new(&store, Fault::Gated(Arc::clone(&gate)));
    let mut options = RecorderOptions::default();
    options.backlog = 50;
    let recorder = RunRecorder::start(log, "run-1", 0, options);
    // The writer is stuck in its first write: `record` still returns at once,
    // until the backlog is full.
    let mut taken = 0;
    let refused = loop {
        match recorder.record(&tool_start()) {
            Ok(()) => taken += 1,
            Err(error) => break error,
        }
        if taken % 10 == 0 {
            tokio::task::yield_now().await;
        }
        assert!(taken < 1_000, "the backlog never filled");
    };
    assert_eq!(refused, RecordError::Backlog(50));
    assert!(refused.to_string().contains("50 events behind"));
    // Unstuck, everything that was taken is written.
    gate.add_permits(1_000);
    let summary = recorder.finish().await;
    assert_eq!(summary.events, taken);
    let (_, _, kinds) = stored(&store).await;
    assert_eq!(kinds.len() as u64, taken);
}

#[tokio::test]
async fn failed_writes_are_retried_without_duplicates() {
    let (_dir, store) = sqlite().await;
    let log = FaultyLog::new(&store, Fault::LandsThenFails(AtomicU32::new(3)));
    let mut options = RecorderOptions::default();
    options.merge_window = Duration::from_millis(20);
    let recorder = RunRecorder::start(log, "run-1", 0, options);
    let mut expected = String::new();
    for i in 0..200 {
        let piece = format!("{i},");
        expected.push_str(&piece);
        recorder.record(&text(&piece)).unwrap();
        if i % 25 == 0 {
            recorder.record(&tool_start()).unwrap();
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    }
    let summary = recorder.finish().await;
    assert!(summary.retries >= 3, "{summary:?}");
    assert_eq!(summary.unwritten, None);
    let (text, _, kinds) = stored(&store).await;
    assert_eq!(text, expected);
    assert_eq!(kinds.len() as u64, summary.rows);
}

/// A log that never works: `finish` gives up at its deadline and says so.
#[tokio::test(start_paused = true)]
async fn a_store_that_stays_down_is_reported_not_hidden() {
    let mut options = RecorderOptions::default();
    options.finish_deadline = Duration::from_secs(5);
    let down = Arc::new(FaultyLog {
        inner: None,
        fault: Fault::Down,
    });
    let recorder = RunRecorder::start(down, "run-1", 0, options);
    recorder.record(&text("lost?")).unwrap();
    let summary = recorder.finish().await;
    assert_eq!(summary.rows, 0);
    assert_eq!(summary.events, 1);
    assert!(summary.retries >= 3, "{summary:?}");
    assert_eq!(
        summary.unwritten.as_deref(),
        Some("store database error: connection refused")
    );
}
