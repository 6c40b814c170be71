//! The server's runs in the run store, and its conversations read back from it.
//!
//! With a [`ServerStore`] ([`crate::ChatService::with_store`]) every run the
//! server starts is recorded through an `agent_store::RunRecording`: the chat is
//! a thread (created at its first run, titled from the user's first message), the
//! run's row and status, its event log (never blocking the stream; a store too far
//! behind cancels the run rather than lose its record), one usage fact per model
//! call, and each turn's messages as the model saw them.
//!
//! `GET /api/chats` lists the threads, `GET /api/chats/{id}` returns one with its
//! messages, `DELETE /api/chats/{id}` removes it (its runs and events too; usage
//! stays). Without a store they answer 404 `no_store`.
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
use agent_store::{NewRun, Pricing, RunEnd, RunRecording, RunStatus, Store, Thread};
use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::access::Account;
use crate::server::{AppState, refuse};

/// Threads listed by `GET /api/chats`, at most.
const LIST_LIMIT: u32 = 500;

/// The store a server records its runs in.
#[derive(Clone)]
pub struct ServerStore {
    store: Store,
    owner: String,
    pricing: Option<Pricing>,
}

impl std::fmt::Debug for ServerStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerStore")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl ServerStore {
    /// Records into `store`; `owner` names this server process in the runs it
    /// starts (so a restart can mark the runs of a dead process interrupted).
    pub fn new(store: Store, owner: impl Into<String>) -> Self {
        Self {
            store,
            owner: owner.into(),
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

    /// Prices each model call with `pricing`.
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = Some(pricing);
        self
    }

    /// Starts recording a run of chat `chat_id` (a warning, and no recording,
    /// when the store refuses).
    pub(crate) async fn begin(
        &self,
        run: &RunMeta,
        account: &str,
        chat_id: &str,
        title: &str,
    ) -> Option<RunRecording> {
        let now = agent_store::recorder::now_ms();
        let new = NewRun {
            id: run.run_id.clone(),
            thread_id: Some(chat_id.to_owned()),
            graph: run.graph.clone(),
            model: run.model.clone(),
            prompt_hash: run.prompt_hash.clone(),
            owner: self.owner.clone(),
            started_ms: now,
        };
        let thread = Thread {
            id: chat_id.to_owned(),
            title: title.to_owned(),
            graph: run.graph.clone(),
            created_ms: now,
            updated_ms: now,
        };
        let started = RunRecording::start(
            self.store.clone(),
            account,
            &new,
            Some(thread),
            self.pricing.clone(),
        )
        .await;
        match started {
            Ok(recording) => Some(recording),
            Err(error) => {
                tracing::error!(run_id = %run.run_id, %error, "the run store refused the run; it is not recorded");
                None
            }
        }
    }
}

/// What a started run is, for its record.
#[derive(Debug, Clone)]
pub(crate) struct RunMeta {
    pub(crate) run_id: String,
    pub(crate) graph: String,
    pub(crate) model: String,
    pub(crate) prompt_hash: Option<String>,
}

/// Writes the end of a recorded run; failures go to the log.
pub(crate) async fn end(recording: RunRecording, outcome: &Result<RunOutput, RunError>) {
    let run_id = recording.run_id().to_owned();
    let end = match outcome {
        Ok(output) => RunEnd {
            status: if output.paused.is_some() {
                RunStatus::Paused
            } else {
                RunStatus::Done
            },
            error: None,
            new_messages: output.new_messages(),
        },
        Err(error) => RunEnd {
            status: match error {
                RunError::Cancelled => RunStatus::Interrupted,
                _ => RunStatus::Failed,
            },
            error: Some(error.to_string()),
            new_messages: &[],
        },
    };
    for failure in recording.finish(end).await {
        tracing::error!(run_id = %run_id, failure = %failure, "the run store did not take the whole run");
    }
}

fn no_store() -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        "no_store",
        "this server keeps no conversations (it has no run store)",
    )
}

fn not_found(id: &str) -> Response {
    let _ = id;
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

/// `GET /api/chats`: the threads, most recent first.
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(account): Extension<Account>,
) -> Response {
    let Some(store) = state.service.store() else {
        return no_store();
    };
    match store.store.account(account.0).threads(LIST_LIMIT).await {
        Ok(threads) => {
            let chats: Vec<_> = threads
                .iter()
                .map(|t| json!({"id": t.id, "title": t.title, "graph": t.graph, "created_ms": t.created_ms, "updated_ms": t.updated_ms}))
                .collect();
            json_response(json!({ "chats": chats }))
        }
        Err(error) => failed(error),
    }
}

/// `GET /api/chats/{id}`: one thread with its messages as the model saw them.
pub(crate) async fn load(
    State(state): State<AppState>,
    Extension(account): Extension<Account>,
    Path(id): Path<String>,
) -> Response {
    let Some(store) = state.service.store() else {
        return no_store();
    };
    let rows = store.store.account(account.0);
    let thread = match rows.thread(&id).await {
        Ok(Some(thread)) => thread,
        Ok(None) => return not_found(&id),
        Err(error) => return failed(error),
    };
    match rows.messages(&id).await {
        Ok(messages) => json_response(json!({
            "id": thread.id, "title": thread.title, "graph": thread.graph,
            "created_ms": thread.created_ms, "updated_ms": thread.updated_ms,
            "messages": messages,
        })),
        Err(error) => failed(error),
    }
}

/// `DELETE /api/chats/{id}`: removes a thread (`204`).
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(account): Extension<Account>,
    Path(id): Path<String>,
) -> Response {
    let Some(store) = state.service.store() else {
        return no_store();
    };
    match store.store.account(account.0).delete_thread(&id).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => not_found(&id),
        Err(error) => failed(error),
    }
}
