//! The conversations kept in the run store, read back: `GET /api/chats` lists
//! the threads, `GET /api/chats/{id}` returns one with its messages as UI
//! messages (tool calls as their redacted views; message ids and metadata as
//! the live stream gave them; the answer still running included), `PATCH
//! /api/chats/{id}` renames it, `DELETE /api/chats/{id}` removes it (its runs
//! and events too; usage stays). Without a store they answer 404 `no_store`.
//!
//! `GET /api/chat/{id}/stream` for a chat with no response running in this
//! process follows its running run from the store: the run's events so far,
//! then new ones as its process writes them (another server on the store, a
//! durable engine's worker, or this one before a restart), until the run ends.
//! A run whose owner's lease ran out is taken over (or marked interrupted) and
//! the stream ends saying so.
//!
//! Every request acts for an account ([`Account`], from its token): the server's
//! own tokens are `local`, each `Access::with_account` token its account. A chat
//! id is the account's own: another account's chat of the same id is another
//! chat, and one account never lists, loads, continues, resumes or deletes
//! another's (`404`, as for a chat that does not exist).

use agent_store::{RunStatus, Thread};
use ai_core::approval::ApprovalBinding;
use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::access::Account;
use crate::server::{AppState, refuse};
use chat_protocol::stream::ApprovalIssuer;

/// Threads listed by `GET /api/chats`, at most.
const LIST_LIMIT: u32 = 500;

/// How often a stream that follows another process's run reads the store.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

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
        .runs()
        .map(|runs| runs.store().account(account.0))
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
/// [`chat_protocol::ui_messages`]: tool calls as their redacted views, ids and
/// metadata as the live stream gave them, the answer still running included).
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
    let stored = match StoredChat::read(&rows, &id).await {
        Ok(stored) => stored,
        Err(error) => return failed(error),
    };
    let approvals = state.service.approvals();
    let sign = |binding: &ApprovalBinding| approvals.issue(binding);
    let issue = ApprovalIssuer {
        scope: &scoped,
        sign: &sign,
    };
    let mut chat = thread_json(&thread);
    chat["messages"] = json!(stored.shown(issue));
    json_response(chat)
}

/// What the store holds of one chat: its messages, the events of its runs,
/// each run's metadata, and its running run's events.
struct StoredChat {
    messages: Vec<chat_protocol::ui_messages::ThreadMessage>,
    events: Vec<ai_core::AiEvent>,
    metadata: std::collections::HashMap<String, serde_json::Value>,
    running: Option<(String, Vec<ai_core::AiEvent>)>,
}

impl StoredChat {
    async fn read(
        rows: &agent_store::AccountStore<'_>,
        id: &str,
    ) -> Result<Self, agent_store::StoreError> {
        let messages = rows
            .stored_messages(id)
            .await?
            .into_iter()
            .map(thread_message)
            .collect();
        let mut chat = Self {
            messages,
            events: Vec::new(),
            metadata: std::collections::HashMap::new(),
            running: None,
        };
        for run in rows.runs_of_thread(id).await? {
            let logged: Vec<ai_core::AiEvent> = rows
                .events(&run.run.id, None)
                .await?
                .into_iter()
                .map(|e| e.event)
                .collect();
            if let Some(shown) = chat_protocol::ui_messages::run_metadata(&logged) {
                chat.metadata.insert(run.run.id.clone(), shown);
            }
            if run.status == RunStatus::Running {
                chat.running = Some((run.run.id.clone(), logged.clone()));
            }
            chat.events.extend(logged);
        }
        Ok(chat)
    }

    /// The chat's messages as UI messages, with its running answer.
    fn shown(
        &self,
        issue: chat_protocol::ui_messages::IssueApproval<'_>,
    ) -> Vec<serde_json::Value> {
        let views = chat_protocol::ui_messages::call_views(&self.events);
        let mut shown =
            chat_protocol::ui_messages::ui_messages(&self.messages, &views, issue, &self.metadata);
        if let Some((run_id, logged)) = &self.running {
            let answer = crate::server::answer_id(run_id);
            chat_protocol::ui_messages::with_running_answer(&mut shown, &answer, logged, issue);
        }
        shown
    }
}

/// A stored message as the protocol's thread message.
fn thread_message(stored: agent_store::StoredMessage) -> chat_protocol::ui_messages::ThreadMessage {
    chat_protocol::ui_messages::ThreadMessage {
        seq: stored.seq,
        id: stored.id,
        run_id: stored.run_id,
        message: stored.message,
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
/// process: its running run replayed from the store's event log through a UI
/// stream encoder, then followed while it runs (on another server, a durable
/// engine's worker, or before a restart of this one), ending when the run does.
/// `None` when the chat's latest run is not running (the caller answers `204`).
pub(crate) async fn follow(
    service: std::sync::Arc<crate::ChatService>,
    account: &str,
    chat_id: &str,
    scoped: String,
    encoder: Option<Box<dyn chat_protocol::StreamEncoder>>,
) -> Option<Response> {
    let runs = service.runs()?.clone();
    let rows = runs.store().account(account.to_owned());
    let latest = rows.latest_run(chat_id).await.ok()??;
    if latest.status != RunStatus::Running && !recently_interrupted(&latest) {
        return None;
    }
    Some(stream_stored(service, (account, scoped), latest, encoder))
}

/// Run `run_id` of `account`'s chat streamed from the store (see [`follow`]),
/// also when it already ended (its whole answer, then the end): the response
/// to a request whose decisions an earlier request carried out in that run.
/// Waits briefly for the run's row (the other request may still be opening
/// it); `None` when it never comes.
pub(crate) async fn follow_run(
    service: std::sync::Arc<crate::ChatService>,
    (account, _chat_id): (&str, &str),
    scoped: String,
    run_id: &str,
    encoder: Option<Box<dyn chat_protocol::StreamEncoder>>,
) -> Option<Response> {
    let runs = service.runs()?.clone();
    let rows = runs.store().account(account.to_owned());
    for _ in 0..50 {
        if let Ok(Some(run)) = rows.run(run_id).await {
            return Some(stream_stored(service, (account, scoped), run, encoder));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    None
}

/// The UI stream of stored run `run` (see [`follow`]).
fn stream_stored(
    service: std::sync::Arc<crate::ChatService>,
    (account, scoped): (&str, String),
    run: agent_store::RunRecord,
    encoder: Option<Box<dyn chat_protocol::StreamEncoder>>,
) -> Response {
    let mut encoder = encoder.unwrap_or_else(|| {
        Box::new(chat_protocol::ui_stream::UiStreamEncoder::new(
            crate::server::answer_id(&run.run.id),
        ))
    });
    let headers = encoder.headers();
    let (tx, rx) = tokio::sync::mpsc::channel::<axum::body::Bytes>(64);
    let account = account.to_owned();
    let every = crate::DEFAULT_HEARTBEAT;
    tokio::spawn(async move {
        let sign = |binding: &ApprovalBinding| service.approvals().issue(binding);
        let approval = ApprovalIssuer {
            scope: &scoped,
            sign: &sign,
        };
        let mut follower = Follower::new(&run);
        let mut beat = tokio::time::interval(every.max(std::time::Duration::from_millis(10)));
        beat.reset();
        loop {
            let frames = tokio::select! {
                followed = follower.next(&service, &account) => match followed {
                    Some(Followed::Event(event)) => {
                        encoder.frames(&crate::server::shown_error(*event), approval)
                    }
                    Some(Followed::Warning(message)) => {
                        encoder.warn(message);
                        encoder.flush_warnings()
                    }
                    None => break,
                },
                _ = beat.tick() => encoder.heartbeat().into_iter().collect(),
            };
            for frame in frames {
                if tx.send(frame).await.is_err() {
                    return;
                }
            }
        }
        for frame in encoder.end() {
            let _ = tx.send(frame).await;
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (frame, rx))
    });
    crate::server::streaming(headers, frames)
}

/// How a run's new attempt goes on from what a follower sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resync {
    /// Its log begins with what was sent: the rest follows.
    Rest,
    /// Its log has not caught up with what was sent yet.
    NotYet,
    /// Its log says something else.
    Diverged,
}

/// Whether `new` (a log, deltas merged) begins with `sent` (the last sent
/// delta may be the start of a longer one), and what follows.
fn continuation(
    sent: &[ai_core::AiEvent],
    mut new: Vec<ai_core::AiEvent>,
) -> (Resync, Vec<ai_core::AiEvent>) {
    use ai_core::event::AiEventKind::{ReasoningDelta, TextDelta};
    for (i, was) in sent.iter().enumerate() {
        let Some(now) = new.get(i) else {
            return (Resync::NotYet, Vec::new());
        };
        if was == now {
            continue;
        }
        let last = i + 1 == sent.len();
        let texts = match (&was.kind, &now.kind) {
            (TextDelta { delta: a }, TextDelta { delta: b })
            | (ReasoningDelta { delta: a }, ReasoningDelta { delta: b }) => Some((
                a.len(),
                b.starts_with(a.as_str()),
                a.starts_with(b.as_str()),
            )),
            _ => None,
        };
        let newest = i + 1 == new.len();
        return match texts {
            Some((sent_len, true, _)) if last => {
                let mut rest = new.split_off(i);
                if let TextDelta { delta } | ReasoningDelta { delta } = &mut rest[0].kind {
                    *delta = delta.split_off(sent_len);
                }
                (Resync::Rest, rest)
            }
            Some((_, _, true)) if newest => (Resync::NotYet, Vec::new()),
            _ => (Resync::Diverged, Vec::new()),
        };
    }
    let rest = new.split_off(sent.len());
    (Resync::Rest, rest)
}

/// What a follower reads: the run's next event, or a warning about the run
/// (its engine cannot be reached).
enum Followed {
    Event(Box<ai_core::AiEvent>),
    Warning(String),
}

/// What a follower of an engine's run is told while the engine cannot be
/// reached (the run lives: the engine retries it when it is back).
const ENGINE_DOWN: &str =
    "Restate cannot be reached; retrying: the answer goes on when it is back.";

/// How long a follower waits for a run's new attempt to catch up with what
/// it sent (the attempt replays its recorded steps at once; what it has to
/// run again may never match).
const RESYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long an engine's run may be quiet before its follower asks whether
/// the engine is reachable.
const ENGINE_QUIET: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads one stored run's events as its process writes them.
struct Follower {
    run_id: String,
    attempt: i64,
    next: Option<u64>,
    pending: std::collections::VecDeque<ai_core::AiEvent>,
    done: bool,
    /// Since when the run wrote nothing.
    quiet_since: tokio::time::Instant,
    /// Whether the follower was told its engine cannot be reached (said once
    /// until the run writes again).
    engine_down: bool,
    /// What it sent, consecutive deltas merged: a run that starts over in
    /// another attempt (taken over, or retried by its engine) is followed on
    /// when its new log begins with it.
    sent: Vec<ai_core::AiEvent>,
    /// Since when a new attempt's log has not caught up with what was sent.
    behind_since: Option<tokio::time::Instant>,
}

impl Follower {
    fn new(run: &agent_store::RunRecord) -> Self {
        Self {
            run_id: run.run.id.clone(),
            attempt: run.attempt,
            next: None,
            pending: std::collections::VecDeque::new(),
            done: false,
            quiet_since: tokio::time::Instant::now(),
            engine_down: false,
            sent: Vec::new(),
            behind_since: None,
        }
    }

    /// An error event of the followed run, saying how the stream ends.
    fn said(&mut self, code: &str, message: &str) -> Option<ai_core::AiEvent> {
        self.done = true;
        Some(ai_core::AiEvent::new(
            &ai_core::RunContext::new(self.run_id.clone(), String::new()),
            ai_core::event::AiEventKind::Error {
                code: code.into(),
                message: message.into(),
            },
        ))
    }

    /// The run's next event (an error event saying why the stream ends
    /// early), or a warning that its engine cannot be reached; `None` once
    /// the run ended and its events were read. Cancel-safe: what it read is
    /// kept only once read whole.
    async fn next(
        &mut self,
        service: &std::sync::Arc<crate::ChatService>,
        account: &str,
    ) -> Option<Followed> {
        self.next_event(service, account)
            .await
            .map(|event| match event {
                Ok(event) => Followed::Event(Box::new(event)),
                Err(warning) => Followed::Warning(warning),
            })
    }

    async fn next_event(
        &mut self,
        service: &std::sync::Arc<crate::ChatService>,
        account: &str,
    ) -> Option<Result<ai_core::AiEvent, String>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                ai_core::event::merge_into(&mut self.sent, &event);
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            let rows = service.runs()?.store().account(account.to_owned());
            let (Ok(events), Ok(Some(run))) = (
                rows.events(&self.run_id, self.next).await,
                rows.run(&self.run_id).await,
            ) else {
                tokio::time::sleep(FOLLOW_EVERY).await;
                continue;
            };
            // The run went on in another process, which wrote its log anew:
            // what this stream sent is not what the log holds now.
            if run.attempt != self.attempt {
                match self.resync(&rows, run.attempt).await {
                    Some(Resync::Rest) => continue,
                    Some(Resync::Diverged) => {
                        return self.said("run_moved", "The answer started over where it was cut, in another process. Reload to follow it.").map(Ok);
                    }
                    Some(Resync::NotYet) | None => {
                        // A new attempt that does not catch up soon is said
                        // too: what it will write may never match.
                        let behind = *self
                            .behind_since
                            .get_or_insert_with(tokio::time::Instant::now);
                        if behind.elapsed() > RESYNC_WAIT {
                            return self.said("run_moved", "The answer started over where it was cut, in another process. Reload to follow it.").map(Ok);
                        }
                        tokio::time::sleep(FOLLOW_EVERY).await;
                        continue;
                    }
                }
            }
            let read_all = events.is_empty();
            if !read_all {
                self.quiet_since = tokio::time::Instant::now();
                self.engine_down = false;
            }
            for stored in events {
                self.next = Some(stored.seq);
                self.pending.push_back(stored.event);
            }
            if !self.pending.is_empty() {
                continue;
            }
            match run.status {
                RunStatus::Running => {
                    if let Some(said) = self.owner_gone(service, (account, &run)).await {
                        return Some(Ok(said));
                    }
                    if self.engine_unreachable(service, &run).await {
                        return Some(Err(ENGINE_DOWN.to_owned()));
                    }
                    tokio::time::sleep(FOLLOW_EVERY).await;
                }
                RunStatus::Interrupted => {
                    return self.said("run_interrupted", "The server running this answer stopped before it ended; send the message again.").map(Ok);
                }
                // Done, failed or paused: what it wrote before ending was read.
                _ if read_all => return None,
                _ => {}
            }
        }
    }

    /// Follows the run's new attempt: its log read from the start, and when it
    /// begins with what was sent, the rest queued (`None` when the store
    /// failed).
    async fn resync(
        &mut self,
        rows: &agent_store::AccountStore<'_>,
        attempt: i64,
    ) -> Option<Resync> {
        let events = rows.events(&self.run_id, None).await.ok()?;
        let last = events.last().map(|e| e.seq);
        let mut merged: Vec<ai_core::AiEvent> = Vec::with_capacity(events.len());
        for stored in events {
            ai_core::event::merge_into(&mut merged, &stored.event);
        }
        let (resync, rest) = continuation(&self.sent, merged);
        if resync == Resync::Rest {
            self.behind_since = None;
            tracing::debug!(run_id = %self.run_id, attempt, "a follower goes on with the run's new attempt");
            self.pending = rest.into();
            self.next = last;
            self.attempt = attempt;
        }
        Some(resync)
    }

    /// Whether the run is its engine's, has been quiet a while, and the
    /// engine does not answer (said once per quiet spell).
    async fn engine_unreachable(
        &mut self,
        service: &std::sync::Arc<crate::ChatService>,
        run: &agent_store::RunRecord,
    ) -> bool {
        if self.engine_down
            || run.run.owner != agent_durable::engine::ENGINE_OWNER
            || self.quiet_since.elapsed() < ENGINE_QUIET
        {
            return false;
        }
        let Some(engine) = service.runs().and_then(|runs| runs.engine()) else {
            return false;
        };
        self.engine_down = !engine.reachable().await;
        if !self.engine_down {
            self.quiet_since = tokio::time::Instant::now();
        }
        self.engine_down
    }

    /// When the run's owner holds no lease: the run settled (taken over by
    /// this server or another, or interrupted) and, when it goes on, the event
    /// that ends the stream (an interrupted run is said by the next read).
    async fn owner_gone(
        &mut self,
        service: &std::sync::Arc<crate::ChatService>,
        (account, run): (&str, &agent_store::RunRecord),
    ) -> Option<ai_core::AiEvent> {
        let store = service.runs()?.store().clone();
        let now = agent_store::recorder::now_ms();
        if !matches!(store.owner_alive(&run.run.owner, now).await, Ok(false)) {
            return None;
        }
        let taken = service.settle_orphans().await.is_ok_and(|n| n > 0) && service.takes_over();
        let rows = store.account(account.to_owned());
        let still = rows.run(&self.run_id).await.ok().flatten();
        if still.is_none_or(|r| r.status != RunStatus::Running) {
            return None;
        }
        let message = if taken {
            "The server running this answer stopped; this server goes on with it. Reload to follow it."
        } else {
            "The server running this answer stopped; the answer goes on when a server starts again. Reload to follow it."
        };
        self.said("run_moved", message)
    }
}

/// An interrupted run resumed within a minute of its end still shows how it
/// ended.
fn recently_interrupted(run: &agent_store::RunRecord) -> bool {
    run.status == RunStatus::Interrupted
        && agent_store::recorder::now_ms() - run.updated_ms < 60_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use ai_core::AiEvent;
    use ai_core::event::AiEventKind;

    fn event(kind: AiEventKind) -> AiEvent {
        AiEvent::new(&ai_core::RunContext::new("r", "t"), kind)
    }

    fn text(delta: &str) -> AiEvent {
        event(AiEventKind::TextDelta {
            delta: delta.into(),
        })
    }

    fn call(id: &str) -> AiEvent {
        event(AiEventKind::ToolCallStart {
            tool_call_id: id.into(),
            tool_name: "app__x".into(),
            args: serde_json::json!({}),
        })
    }

    #[test]
    fn a_new_attempt_that_begins_with_what_was_sent_goes_on_from_there() {
        let sent = vec![call("c1"), text("Hello wo")];
        let (resync, rest) = continuation(&sent, vec![call("c1"), text("Hello world"), call("c2")]);
        assert_eq!(resync, Resync::Rest);
        assert_eq!(rest, vec![text("rld"), call("c2")]);
        let (resync, rest) = continuation(&sent, vec![call("c1"), text("Hello wo")]);
        assert_eq!((resync, rest.len()), (Resync::Rest, 0));
    }

    #[test]
    fn a_new_attempt_behind_waits_and_one_that_differs_is_said() {
        let sent = vec![call("c1"), text("Hello wo")];
        assert_eq!(continuation(&sent, vec![call("c1")]).0, Resync::NotYet);
        assert_eq!(
            continuation(&sent, vec![call("c1"), text("Hel")]).0,
            Resync::NotYet
        );
        assert_eq!(
            continuation(&sent, vec![call("c1"), text("Bye")]).0,
            Resync::Diverged
        );
        assert_eq!(continuation(&sent, vec![call("c9")]).0, Resync::Diverged);
        // A delta that is not the last one sent must match whole.
        let sent = vec![text("Hel"), call("c1")];
        assert_eq!(
            continuation(&sent, vec![text("Hello"), call("c1")]).0,
            Resync::Diverged
        );
    }
}
