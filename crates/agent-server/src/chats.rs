//! The server's runs in the run store, and its conversations read back from it.
//!
//! With a [`ServerStore`] ([`crate::ChatService::with_store`]) every run the
//! server starts is recorded through an `agent_store::RunRecording`: the chat is
//! a thread (created at its first run, titled from the user's first message), the
//! run's row and status, its event log (never blocking the stream; a store too far
//! behind cancels the run rather than lose its record), one usage fact per model
//! call, and each turn's messages as the model saw them.
//!
//! `GET /api/chat/{id}/stream` for a chat with no response running in this
//! process follows its latest run from the store: the run's events so far, then
//! new ones as its server writes them (another server on the store, or this one
//! before a restart), until the run ends. A run whose process died (as the owner
//! check tells) is marked `interrupted` and the stream ends with an error.
//!
//! `GET /api/chats` lists the threads, `GET /api/chats/{id}` returns one with its
//! messages as UI messages (tool calls as their redacted views), `DELETE
//! /api/chats/{id}` removes it (its runs and events too; usage stays). Without a
//! store they answer 404 `no_store`.
//!
//! With a store, an approval id is marked used in the store (whichever server on
//! it redeems the id, and across restarts), and bootstrap gives every server on
//! the store the same approval key: an approval asked before a restart is
//! honoured after it, once.
//!
//! Every request acts for an account ([`Account`], from its token): the server's
//! own tokens are `local`, each `Access::with_account` token its account. A chat
//! id is the account's own: another account's chat of the same id is another
//! chat, and one account never lists, loads, continues, resumes or deletes
//! another's (`404`, as for a chat that does not exist).

use agent_graph::run::{RunError, RunOutput};
use agent_store::{NewRun, Pricing, RunRecording, RunStatus, Store, Thread};
use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::access::Account;
use crate::server::{AppState, refuse};

/// Threads listed by `GET /api/chats`, at most.
const LIST_LIMIT: u32 = 500;

/// The store a server records its runs in, and this server as the owner of
/// the runs it runs (an instance under a lease; see
/// `agent_durable::lease`).
#[derive(Clone)]
pub struct ServerStore {
    store: Store,
    instance: std::sync::Arc<agent_durable::lease::Instance>,
    pricing: Option<Pricing>,
}

/// How often a stream that follows another server's run reads the store.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

impl std::fmt::Debug for ServerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerStore")
            .field("instance", &self.instance.id())
            .finish_non_exhaustive()
    }
}

impl ServerStore {
    /// Records into `instance`'s store, the runs owned by `instance` (whose
    /// lease says this server is alive; a run whose owner's lease ran out is
    /// taken over by a server that finds it).
    pub fn new(instance: std::sync::Arc<agent_durable::lease::Instance>) -> Self {
        Self {
            store: instance.store().clone(),
            instance,
            pricing: None,
        }
    }

    /// Marks an approval (its MAC bytes) used in the store, whichever server on
    /// it redeems the id: `Ok(())` the first time.
    pub(crate) async fn use_approval(
        &self,
        tag: &[u8; 32],
        expiry: u64,
    ) -> Result<(), crate::approval::ApprovalError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        match self
            .store
            .use_approval(&hex::encode(tag), expiry, now)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(crate::approval::ApprovalError::Replayed),
            Err(error) => {
                tracing::error!(%error, "an approval could not be recorded as used; refused");
                Err(crate::approval::ApprovalError::Unrecorded)
            }
        }
    }

    /// The store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// This server as the owner of its runs.
    pub(crate) fn instance(&self) -> &std::sync::Arc<agent_durable::lease::Instance> {
        &self.instance
    }

    /// Prices each model call with `pricing`.
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = Some(pricing);
        self
    }

    /// Starts recording a run of chat `chat_id`, held under `run.lease`,
    /// without waiting for the store (a start it refuses is logged when the
    /// run's record is finished).
    pub(crate) fn begin(
        &self,
        run: &RunMeta,
        account: &str,
        chat_id: &str,
        title: &str,
    ) -> RunRecording {
        let now = agent_store::recorder::now_ms();
        let new = NewRun {
            id: run.run_id.clone(),
            thread_id: Some(chat_id.to_owned()),
            graph: run.graph.clone(),
            model: run.model.clone(),
            prompt_hash: run.prompt_hash.clone(),
            owner: String::new(),
            started_ms: now,
        };
        let lease = run.lease.clone().unwrap_or_else(|| self.instance.new_run());
        let new = NewRun {
            owner: lease.epoch.id().to_owned(),
            ..new
        };
        let fence = lease.fence();
        if run.resumed {
            return RunRecording::resumed(self.store.clone(), account, &new, self.pricing.clone())
                .with_fence(fence);
        }
        let thread = Thread {
            id: chat_id.to_owned(),
            title: title.to_owned(),
            graph: run.graph.clone(),
            created_ms: now,
            updated_ms: now,
        };
        RunRecording::begin(
            self.store.clone(),
            account,
            &new,
            Some(thread),
            self.pricing.clone(),
        )
        .with_fence(fence)
    }
}

/// How long a request waits for a run of its chat that another process is
/// running (or recording) before it continues from the thread as stored.
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How often it looks meanwhile.
const SETTLE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

impl ServerStore {
    /// The messages of `account`'s thread `chat_id` as stored (empty for a new
    /// chat), once the thread's latest run, when another process runs it, has
    /// ended and been recorded (at most [`SETTLE_WAIT`]): a chat continued on
    /// another server right after a run continues after that run.
    pub(crate) async fn thread_messages(
        &self,
        account: &str,
        chat_id: &str,
    ) -> Result<Vec<ai_core::Message>, agent_store::StoreError> {
        let rows = self.store.account(account.to_owned());
        let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
        while tokio::time::Instant::now() < deadline {
            let latest = rows.latest_run(chat_id).await?;
            let elsewhere = match latest {
                Some(run)
                    if run.status == RunStatus::Running && run.run.owner != self.instance.id() =>
                {
                    !self.owner_dead(&run).await
                }
                _ => false,
            };
            if !elsewhere {
                break;
            }
            tokio::time::sleep(SETTLE_EVERY).await;
        }
        rows.messages(chat_id).await
    }
}

/// What a started run is, for its record.
#[derive(Debug, Clone)]
pub(crate) struct RunMeta {
    pub(crate) run_id: String,
    pub(crate) graph: String,
    pub(crate) model: String,
    pub(crate) prompt_hash: Option<String>,
    /// How many of the run's first messages its thread holds as stored; `None`
    /// when the thread could not be read (the run's messages are then not
    /// written, so a stored result is never replaced by a client's).
    pub(crate) kept: Option<usize>,
    /// A durable run started again after its server died: its row and thread
    /// are stored already.
    pub(crate) resumed: bool,
    /// The lease this server holds the run under (with a store).
    pub(crate) lease: Option<agent_durable::lease::RunLease>,
}

/// Writes the end of a recorded run that continued the first `kept` messages of
/// its thread as stored (`None`: its messages are not written); failures go to
/// the log.
pub(crate) async fn end(
    recording: RunRecording,
    outcome: &Result<RunOutput, RunError>,
    kept: Option<usize>,
) {
    let run_id = recording.run_id().to_owned();
    let mut end = run_end(outcome, kept.unwrap_or(0));
    if kept.is_none() {
        end.conversation = &[];
    }
    for failure in recording.finish(end).await {
        tracing::error!(run_id = %run_id, failure = %failure, "the run store did not take the whole run");
    }
}

pub use agent_durable::run_end;

fn no_store() -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        "no_store",
        "this server keeps no conversations (it has no run store)",
    )
}

fn not_found() -> Response {
    refuse(StatusCode::NOT_FOUND, "not_found", "no such chat")
}

fn failed(error: agent_store::StoreError) -> Response {
    tracing::error!(%error, "the run store failed");
    refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        "the conversation store is not available; try again",
    )
}

fn json_response(value: serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// The request account's rows, when the server has a store.
fn rows(state: &AppState, account: Account) -> Option<agent_store::AccountStore<'_>> {
    state
        .service
        .store()
        .map(|store| store.store.account(account.0))
}

/// A thread as the chats endpoints show it (without its messages).
fn thread_json(thread: &Thread) -> serde_json::Value {
    json!({
        "id": thread.id, "title": thread.title, "graph": thread.graph,
        "created_ms": thread.created_ms, "updated_ms": thread.updated_ms,
    })
}

/// `GET /api/chats`: the threads, most recent first.
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(account): Extension<Account>,
) -> Response {
    state.service.started_runs(account.name()).await;
    let Some(rows) = rows(&state, account) else {
        return no_store();
    };
    match rows.threads(LIST_LIMIT).await {
        Ok(threads) => {
            let chats: Vec<_> = threads.iter().map(thread_json).collect();
            json_response(json!({ "chats": chats }))
        }
        Err(error) => failed(error),
    }
}

/// `GET /api/chats/{id}`: one thread with its messages as UI messages (see
/// [`crate::ui_messages`]: tool calls as their redacted views).
pub(crate) async fn load(
    State(state): State<AppState>,
    Extension(account): Extension<Account>,
    Path(id): Path<String>,
) -> Response {
    let scoped = crate::server::scope(account.name(), &id);
    state.service.recorded(&scoped).await;
    let Some(rows) = rows(&state, account) else {
        return no_store();
    };
    let thread = match rows.thread(&id).await {
        Ok(Some(thread)) => thread,
        Ok(None) => return not_found(),
        Err(error) => return failed(error),
    };
    let shown = async {
        let messages = rows.messages(&id).await?;
        let mut events = Vec::new();
        for run in rows.runs_of_thread(&id).await? {
            events.extend(
                rows.events(&run.run.id, None)
                    .await?
                    .into_iter()
                    .map(|e| e.event),
            );
        }
        let views = crate::ui_messages::call_views(&events);
        let approvals = state.service.approvals();
        let issue = |call: &str, tool: &str, hash: &str| approvals.issue(&scoped, call, tool, hash);
        Ok::<_, agent_store::StoreError>(crate::ui_messages::ui_messages(&messages, &views, &issue))
    };
    match shown.await {
        Ok(messages) => {
            let mut chat = thread_json(&thread);
            chat["messages"] = json!(messages);
            json_response(chat)
        }
        Err(error) => failed(error),
    }
}

/// Longest title `PATCH /api/chats/{id}` takes, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// `PATCH /api/chats/{id}` with `{"title": "..."}` (1 to [`MAX_TITLE_CHARS`]
/// characters once trimmed, hidden characters included as they are): renames
/// a thread; answers the thread.
pub(crate) async fn rename(
    State(state): State<AppState>,
    Extension(account): Extension<Account>,
    Path(id): Path<String>,
    body: axum::body::Body,
) -> Response {
    let bytes = match crate::server::read_body(&state.access, body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let title = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(body) => match body.get("title").and_then(|t| t.as_str()).map(str::trim) {
            Some(t) if !t.is_empty() && t.chars().count() <= MAX_TITLE_CHARS => t.to_owned(),
            _ => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    &format!("title must be a string of 1 to {MAX_TITLE_CHARS} characters"),
                );
            }
        },
        Err(_) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the body must be JSON: {\"title\": \"...\"}",
            );
        }
    };
    let Some(rows) = rows(&state, account) else {
        return no_store();
    };
    let now = agent_store::recorder::now_ms();
    match rows.rename_thread(&id, &title, now).await {
        Ok(true) => {}
        Ok(false) => return not_found(),
        Err(error) => return failed(error),
    }
    match rows.thread(&id).await {
        Ok(Some(thread)) => json_response(thread_json(&thread)),
        Ok(None) => not_found(),
        Err(error) => failed(error),
    }
}

/// `DELETE /api/chats/{id}`: removes a thread (`204`).
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(account): Extension<Account>,
    Path(id): Path<String>,
) -> Response {
    let Some(rows) = rows(&state, account) else {
        return no_store();
    };
    match rows.delete_thread(&id).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => not_found(),
        Err(error) => failed(error),
    }
}

/// `GET /api/chat/{id}/stream` for a chat with no response running in this
/// process: its latest run replayed from the store's event log through a UI
/// stream encoder, then followed while it runs (on another server, or before a
/// restart of this one), ending when the run does. A run whose process died ends
/// with an error frame. `None` when the chat's latest run is not running (the
/// caller answers `204`).
pub(crate) async fn follow(
    service: std::sync::Arc<crate::ChatService>,
    account: &str,
    chat_id: &str,
    scoped: String,
    encoder: Option<Box<dyn crate::stream::StreamEncoder>>,
) -> Option<Response> {
    let store = service.store()?.clone();
    let rows = store.store.account(account.to_owned());
    let latest = rows.latest_run(chat_id).await.ok()??;
    if latest.status != RunStatus::Running && !recently_interrupted(&latest) {
        return None;
    }
    let mut encoder = encoder.unwrap_or_else(|| {
        Box::new(crate::ui_stream::UiStreamEncoder::new(
            crate::server::answer_id(&latest.run.id),
        ))
    });
    let headers = encoder.headers();
    let (tx, rx) = tokio::sync::mpsc::channel::<axum::body::Bytes>(64);
    let account = account.to_owned();
    let run_id = latest.run.id.clone();
    let attempt = latest.attempt;
    tokio::spawn(async move {
        let approval = |call: &str, tool: &str, hash: &str| {
            service.approvals().issue(&scoped, call, tool, hash)
        };
        let mut next = None;
        loop {
            let rows = store.store.account(account.clone());
            let Ok(events) = rows.events(&run_id, next).await else {
                break;
            };
            for stored in &events {
                next = Some(stored.seq);
                let shown = crate::server::shown_error(stored.event.clone());
                let frames = encoder.frames(&shown, &approval);
                for frame in frames {
                    if tx.send(frame).await.is_err() {
                        return;
                    }
                }
            }
            let Ok(Some(run)) = rows.run(&run_id).await else {
                break;
            };
            // The run went on in another process, which wrote its log anew:
            // what this stream sent is not what the log holds now.
            if run.attempt != attempt {
                let moved = ai_core::AiEvent::new(
                    &ai_core::RunContext::new(run_id.clone(), String::new()),
                    ai_core::event::AiEventKind::Error {
                        code: "run_moved".into(),
                        message: "The answer started over where it was cut, in another process. Reload to follow it.".into(),
                    },
                );
                for frame in encoder.frames(&moved, &approval) {
                    let _ = tx.send(frame).await;
                }
                break;
            }
            let dead = run.status == RunStatus::Running && store.owner_dead(&run).await;
            match run.status {
                RunStatus::Running if dead => {
                    // A durable run stays running: this server goes on with it
                    // (when it takes over runs), else the next one to start.
                    // Either way this stream ends: the run's log starts over.
                    // A server that does not take runs over interrupts it.
                    let settled = service.settle_orphans().await.is_ok_and(|n| n > 0);
                    let taken = service.takes_over() && settled;
                    if matches!(rows.run(&run_id).await, Ok(Some(r)) if r.status == RunStatus::Running)
                    {
                        let message = if taken {
                            "The server running this answer stopped; this server goes on with it. Reload to follow it."
                        } else {
                            "The server running this answer stopped; the answer goes on when a server starts again. Reload to follow it."
                        };
                        let waiting = ai_core::AiEvent::new(
                            &ai_core::RunContext::new(run_id.clone(), String::new()),
                            ai_core::event::AiEventKind::Error {
                                code: "run_moved".into(),
                                message: message.into(),
                            },
                        );
                        for frame in encoder.frames(&waiting, &approval) {
                            let _ = tx.send(frame).await;
                        }
                        break;
                    }
                }
                RunStatus::Running => tokio::time::sleep(FOLLOW_EVERY).await,
                RunStatus::Interrupted => {
                    let stopped = ai_core::AiEvent::new(
                        &ai_core::RunContext::new(run_id.clone(), String::new()),
                        ai_core::event::AiEventKind::Error {
                            code: "run_interrupted".into(),
                            message: "The server running this answer stopped before it ended; send the message again.".into(),
                        },
                    );
                    for frame in encoder.frames(&stopped, &approval) {
                        let _ = tx.send(frame).await;
                    }
                    break;
                }
                // Done, failed or paused: what it wrote before ending is read
                // on the next pass; then the stream ends.
                _ if events.is_empty() => break,
                _ => {}
            }
        }
        for frame in encoder.end() {
            let _ = tx.send(frame).await;
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (frame, rx))
    });
    Some(crate::server::streaming(headers, frames))
}

/// An interrupted run resumed within a minute of its end still shows how it
/// ended.
fn recently_interrupted(run: &agent_store::RunRecord) -> bool {
    run.status == RunStatus::Interrupted
        && agent_store::recorder::now_ms() - run.updated_ms < 60_000
}

impl ServerStore {
    /// Whether a running run's owner is gone: it holds no lease (it died,
    /// stopped, or stalled past its lease). Never inferred from a host name or
    /// a process id. A store that cannot say counts the owner as alive.
    async fn owner_dead(&self, run: &agent_store::RunRecord) -> bool {
        let now = agent_store::recorder::now_ms();
        matches!(self.store.owner_alive(&run.run.owner, now).await, Ok(false))
    }
}
