//! [`RunRecording`]: everything the store keeps of one run, written as it goes:
//! the run's row and status, its thread (created when new), its event log
//! (through a [`RunRecorder`]: never blocking the run), one usage fact per model
//! call (from its `usage_report` events, priced when a price is known), and at
//! the end the thread's messages: the run's conversation, replacing what the
//! thread held after the history the run continued.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::Shared;
use tokio::sync::oneshot;

use ai_core::event::AiEventKind;
use ai_core::{AiEvent, Message};

use crate::account::{CallUsage, Fence, NewRun, RunStatus, Thread};
use crate::batch::RunEndWrite;
use crate::error::StoreError;
use crate::recorder::{RecordError, RecorderOptions, RunRecorder, StoreLog, now_ms};
use crate::store::Store;

/// Prices a model call: `(a model name, the call's usage)` to a cost in
/// millionths, when known. Asked first with the model the call asked for (the
/// configured name), then, when it knows no price for that, with the name the
/// provider reported.
pub type Pricing = Arc<dyn Fn(&str, &CallUsage) -> Option<i64> + Send + Sync>;

/// How a recorded run ended.
#[derive(Debug)]
pub struct RunEnd<'a> {
    /// Its final status.
    pub status: RunStatus,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// The run's whole conversation (without the system prompt), which the
    /// thread becomes; empty when the run produced none (the thread is left as
    /// it is).
    pub conversation: &'a [Message],
    /// How many of the conversation's first messages came from the thread as
    /// stored (the history the run continued): the thread keeps those and
    /// replaces the rest, so a rewound turn (an edit, a regeneration) is
    /// replaced rather than repeated.
    pub kept: u64,
    /// The id of the answer the run streamed: the first message the run adds
    /// past `kept` is known by it (live, after a reload, through another
    /// server).
    pub answer_id: Option<String>,
}

/// One run being recorded (see the module docs).
pub struct RunRecording {
    store: Store,
    account: String,
    recorder: RunRecorder,
    run_id: String,
    thread: Option<String>,
    pricing: Option<Pricing>,
    usage: Vec<CallUsage>,
    refused: Option<RecordError>,
    /// Resolves when the start is written (at once after
    /// [`RunRecording::start`]); with why it was not.
    started: StartWritten,
    /// The owner and generation the run is held under: its end is written
    /// only while they still hold it.
    fence: Option<Fence>,
}

impl std::fmt::Debug for RunRecording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRecording")
            .field("account", &self.account)
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl RunRecording {
    /// Records the start of `run` for `account`, creating `thread` when it does
    /// not exist yet (an existing thread is left as it is).
    pub async fn start(
        store: Store,
        account: impl Into<String>,
        run: &NewRun,
        thread: Option<Thread>,
        pricing: Option<Pricing>,
    ) -> Result<Self, StoreError> {
        let account = account.into();
        write_start(&store, &account, run, thread.as_ref()).await?;
        let (written, started) = oneshot::channel();
        let _ = written.send(Ok(()));
        Ok(Self::recording(
            store, account, run, thread, pricing, started,
        ))
    }

    /// [`RunRecording::start`] without waiting for the store: the run's row and
    /// thread are written in the background, at once (before its status at the
    /// end; not through the batching writer, so other servers see the run), so a slow store never delays the run's
    /// first event. [`RunRecording::started`] tells when the start is written;
    /// a start the store refused is reported by [`RunRecording::finish`].
    pub fn begin(
        store: Store,
        account: impl Into<String>,
        run: &NewRun,
        thread: Option<Thread>,
        pricing: Option<Pricing>,
    ) -> Self {
        let account = account.into();
        let (written, started) = oneshot::channel();
        {
            let (store, account, run, thread) =
                (store.clone(), account.clone(), run.clone(), thread.clone());
            tokio::spawn(async move {
                let result = write_start(&store, &account, &run, thread.as_ref()).await;
                let _ = written.send(result.map_err(|e| e.to_string()));
            });
        }
        Self::recording(store, account, run, thread, pricing, started)
    }

    /// Records the rest of a run whose row is already stored (a durable run
    /// started again after its process died): its event log, which the caller
    /// cleared ([`crate::AccountStore::clear_events`]) and the run writes anew,
    /// its usage and its end. Its row and thread are not written again.
    pub fn resumed(
        store: Store,
        account: impl Into<String>,
        run: &NewRun,
        pricing: Option<Pricing>,
    ) -> Self {
        let (written, started) = oneshot::channel();
        let _ = written.send(Ok(()));
        let thread = run.thread_id.clone().map(|id| Thread {
            id,
            title: String::new(),
            graph: run.graph.clone(),
            created_ms: run.started_ms,
            updated_ms: run.started_ms,
        });
        Self::recording(store, account.into(), run, thread, pricing, started)
    }

    /// Resolves when the run's start is written (or its write failed): a
    /// reader of the store in this process that must see the run waits on it.
    pub fn started(&self) -> StartWritten {
        self.started.clone()
    }

    fn recording(
        store: Store,
        account: String,
        run: &NewRun,
        thread: Option<Thread>,
        pricing: Option<Pricing>,
        started: oneshot::Receiver<Result<(), String>>,
    ) -> Self {
        let log = Arc::new(StoreLog::new(store.clone(), account.clone()));
        let recorder = RunRecorder::start(log, run.id.clone(), 0, RecorderOptions::default());
        Self {
            store,
            account,
            recorder,
            run_id: run.id.clone(),
            thread: thread.map(|t| t.id),
            pricing,
            usage: Vec::new(),
            refused: None,
            started: StartWritten(started.shared()),
            fence: None,
        }
    }

    /// Writes the run's end only while `fence` still holds it (another process
    /// that took the run over writes its own end).
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Queues `event` for the log (never waits); a `usage_report` also becomes a
    /// usage fact. The first refusal (the store too far behind) is returned once;
    /// the caller decides whether the run may go on unrecorded.
    pub fn record(&mut self, event: &AiEvent) -> Result<(), RecordError> {
        if let AiEventKind::UsageReport {
            model,
            response_model,
            prompt_tokens,
            completion_tokens,
            cached_tokens,
            reasoning_tokens,
            cache_creation_tokens,
            cost_micros,
            ..
        } = &event.kind
        {
            let mut fact = CallUsage {
                run_id: self.run_id.clone(),
                call_seq: self.usage.len() as u64,
                thread_id: self.thread.clone(),
                model: model.clone(),
                response_model: response_model.clone(),
                prompt_tokens: *prompt_tokens,
                completion_tokens: *completion_tokens,
                cached_tokens: *cached_tokens,
                cache_creation_tokens: *cache_creation_tokens,
                reasoning_tokens: *reasoning_tokens,
                cost_micros: None,
                at_ms: now_ms(),
            };
            // What the provider or gateway charged, when it said; else the
            // configured price.
            fact.cost_micros = cost_micros.or_else(|| {
                let price = self.pricing.as_ref()?;
                price(model, &fact).or_else(|| price(response_model.as_deref()?, &fact))
            });
            self.usage.push(fact);
        }
        match self.recorder.record(event) {
            Ok(()) => Ok(()),
            Err(error) if self.refused.is_none() => {
                self.refused = Some(error.clone());
                Err(error)
            }
            Err(_) => Ok(()),
        }
    }

    /// Writes the rest: the queued events, the usage facts, the status and the
    /// thread's new messages. Returns what could not be written (the run itself
    /// already happened; the caller reports it).
    pub async fn finish(self, end: RunEnd<'_>) -> Vec<String> {
        let mut failures = Vec::new();
        match self.started.0.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => failures.push(format!("the run's start was not stored: {error}")),
            Err(_) => failures.push("the run's start was not stored: its writer stopped".into()),
        }
        let summary = self.recorder.finish().await;
        if let Some(error) = &summary.unwritten {
            failures.push(format!(
                "{} events of run `{}` were not stored: {error}",
                summary.events.saturating_sub(summary.rows),
                self.run_id
            ));
        }
        if let Some(error) = &self.refused {
            failures.push(error.to_string());
        }
        let thread = self
            .thread
            .filter(|_| !end.conversation.is_empty())
            .map(|thread| (thread, end.kept, end.conversation.to_vec(), end.answer_id));
        let write = RunEndWrite {
            run_id: self.run_id.clone(),
            status: end.status,
            error: end.error,
            at_ms: now_ms(),
            usage: self.usage,
            thread,
            fence: self.fence,
        };
        match self.store.writer().end_run(&self.account, write).await {
            Ok(()) => {}
            Err(StoreError::Fenced(_)) => failures.push(format!(
                "run `{}` was taken over by another process; its end is that process's to write",
                self.run_id
            )),
            Err(e) => failures.push(e.to_string()),
        }
        failures
    }
}

impl RunRecording {
    /// Stops recording a run this process no longer holds (its lease ran
    /// out): the events taken so far are written, its end is not (the
    /// process that takes it over writes it).
    pub async fn abandon(self) {
        let summary = self.recorder.finish().await;
        if let Some(error) = summary.unwritten {
            tracing::warn!(run_id = %self.run_id, %error, "events of an abandoned run were not stored");
        }
    }
}

/// Resolves when a run's start is written, or its write failed (see
/// [`RunRecording::started`]).
#[derive(Clone)]
pub struct StartWritten(Shared<oneshot::Receiver<Result<(), String>>>);

impl std::fmt::Debug for StartWritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StartWritten")
    }
}

impl std::future::Future for StartWritten {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        self.0.poll_unpin(cx).map(|_| ())
    }
}

/// The run's row, and its thread when new.
async fn write_start(
    store: &Store,
    account: &str,
    run: &NewRun,
    thread: Option<&Thread>,
) -> Result<(), StoreError> {
    let rows = store.account(account.to_owned());
    if let Some(thread) = thread {
        rows.create_thread(thread).await?;
    }
    rows.start_run(run).await
}

/// A thread's title from the text of its first message: the first line, at most
/// 60 characters (`…` when cut), `untitled` when blank.
pub fn title_from(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut title: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        title.push('…');
    }
    if title.is_empty() {
        "untitled".into()
    } else {
        title
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        assert_eq!(
            title_from("\n  Capital of France?\nmore"),
            "Capital of France?"
        );
        assert_eq!(title_from(""), "untitled");
        assert_eq!(title_from(&"x".repeat(70)), format!("{}…", "x".repeat(60)));
    }
}
