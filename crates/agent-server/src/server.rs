//! The chat service and its axum router: `POST /api/chat` (UI message stream, or
//! the data stream with `?protocol=data`) and `GET /api/tools`.

use std::sync::Arc;
use std::time::Duration;

use agent_graph::Graph;
use agent_graph::journal::RunStart;
use agent_graph::prompt::Params;
use agent_graph::run::{
    Decision, PAUSED_RUN_VERSION, PausedRun, PendingApproval, RunDeps, RunHandle,
};
use ai_core::{
    CompletionPort, Message, RunContext, ToolPolicy, ToolRunner,
    approval::{Approver, GrantLedger},
    policy::{CatalogError, PolicyDecision},
    tool::RegisteredTool,
};
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router, middleware};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::access::Access;
use crate::approval::Approvals;
use crate::contract::{self, ChatRequest, RequestError, Transcript};
use crate::data_stream::DataStreamEncoder;
use crate::listener::{ClientKey, ClientSlots};
use crate::resume::{ActiveStreams, Replay};
use crate::stream::StreamEncoder;
use crate::transcript::TranscriptStore;
use crate::ui_stream::UiStreamEncoder;

/// What the service runs.
pub struct ChatSetup {
    /// The model.
    pub model: Arc<dyn CompletionPort>,
    /// Its id.
    pub model_id: String,
    /// The tools.
    pub tools: Vec<RegisteredTool>,
    /// The policy. Calls it puts behind an approval pause the run and ask the
    /// user through the stream (server-bound approvals).
    pub policy: ToolPolicy,
    /// The graph a chat runs unless it names another the service offers (see
    /// [`ChatService::with_graph`]): its prompt, tool selection, limits and
    /// settings.
    pub graph: Graph,
}

/// A JSON refusal: `{"error": error, "message": message}` with `status`.
pub(crate) fn refuse(status: StatusCode, error: &str, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"error": error, "message": message}).to_string(),
    )
        .into_response()
}

fn invalid(error: &RequestError) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"error": "invalid_request", "path": error.path, "message": error.message})
            .to_string(),
    )
        .into_response()
}

/// The chat service: one model, one runner and its graphs, shared by every request.
pub struct ChatService {
    model: Arc<dyn CompletionPort>,
    model_id: String,
    runner: Arc<ToolRunner>,
    graphs: crate::graphs::ServedGraphs,
    approvals: Approvals,
    transcript: TranscriptStore,
    /// Calls of client tools handed to a chat's client and not answered yet:
    /// (chat id, call id) to (arguments, tool id).
    client_calls: TranscriptStore,
    active: ActiveStreams,
    limits: contract::Limits,
    store: Option<crate::chats::ServerStore>,
    /// Whether runs recorded in the store are durable (journaled steps).
    durable: bool,
    /// Where runs go instead of running here (a durable engine), if anywhere.
    submitter: Option<Arc<dyn crate::durable::RunSubmitter>>,
    /// Whether this server goes on with the durable runs of a dead server it
    /// finds while following them.
    take_over: bool,
    /// Per chat, when the record of its latest run is finished: a run's record
    /// is finished after the one before it, so a chat's messages are stored in
    /// the order of its runs even when a record is slower than the next run.
    records: std::sync::Mutex<std::collections::HashMap<String, ChatRecord>>,
}

/// Resolves when a run's record is finished (or its run was dropped).
type RecordDone = futures::future::Shared<tokio::sync::oneshot::Receiver<()>>;

/// The latest run of a chat in this process whose record is not finished.
struct ChatRecord {
    run_id: String,
    /// The thread as the run's record will leave it, once the run has ended
    /// (dropped when the record leaves the thread as it was).
    thread: futures::future::Shared<tokio::sync::oneshot::Receiver<Arc<Vec<Message>>>>,
    recorded: RecordDone,
    /// When its start (row and thread) is written.
    started: agent_store::StartWritten,
}

/// A run made the latest of its chat (see `ChatService::register`).
struct Registration {
    /// Says the run's record is finished.
    done: tokio::sync::oneshot::Sender<()>,
    /// Says what the run's record leaves the thread as.
    thread: tokio::sync::oneshot::Sender<Arc<Vec<Message>>>,
    /// When the record of the run before it is finished.
    previous: Option<RecordDone>,
}

/// How long a request waits for a run of its chat in this process to end
/// before it continues from the thread as stored.
const RUN_WAIT: Duration = Duration::from_secs(30);
/// How long loading a chat waits for its ended run's record.
const RECORD_WAIT: Duration = Duration::from_secs(5);

impl std::fmt::Debug for ChatService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatService")
            .field("model_id", &self.model_id)
            .field("runner", &self.runner)
            .field("graph", &self.graphs.default_graph().name)
            .finish_non_exhaustive()
    }
}

impl ChatService {
    /// Builds the service. Runs defer approvals: a call that needs one pauses the
    /// run and the client is asked; the runner's approver (a ledger that holds no
    /// grant) only makes such tools part of the catalog.
    pub fn new(setup: ChatSetup) -> Result<Self, CatalogError> {
        let deferred: Arc<dyn Approver> = Arc::new(GrantLedger::new());
        let runner = ToolRunner::new(setup.tools, setup.policy)?.with_approver(deferred);
        Ok(Self {
            model: setup.model,
            model_id: setup.model_id,
            runner: Arc::new(runner),
            graphs: crate::graphs::ServedGraphs::new(setup.graph),
            approvals: Approvals::random(),
            transcript: TranscriptStore::default(),
            client_calls: TranscriptStore::default(),
            active: ActiveStreams::default(),
            limits: contract::Limits::default(),
            store: None,
            submitter: None,
            durable: true,
            take_over: true,
            records: std::sync::Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// Also offers `graph` (by its name; one named like the default replaces
    /// it): a request's `graph` picks it for a new chat. Its tools are the
    /// service's tools it selects, under the service's policy.
    pub fn with_graph(mut self, graph: Graph) -> Self {
        self.graphs.insert(graph);
        self
    }

    /// Limits `account` to the graphs named in `graphs` (by default an account
    /// may use every graph): `GET /api/graphs` lists only those, and a request
    /// naming another is refused (`403 graph_forbidden`).
    pub fn with_account_graphs(
        mut self,
        account: impl Into<String>,
        graphs: impl IntoIterator<Item = String>,
    ) -> Self {
        self.graphs.limit(account.into(), graphs);
        self
    }

    /// Holds attached files to `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: contract::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Records every run in `store` and serves the conversations kept there
    /// (see [`crate::chats`]).
    pub fn with_store(mut self, store: crate::chats::ServerStore) -> Self {
        self.store = Some(store);
        self
    }

    /// Whether the runs of a service with a store are durable (default: yes):
    /// each step journaled in the store before the next, so a server started
    /// after this one died goes on with them ([`ChatService::settle_orphans`]).
    /// Without a store runs are never durable.
    pub fn with_durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// Whether a stream following a run of a server that died makes this
    /// server go on with it ([`ChatService::settle_orphans`]; default: yes).
    /// Off, the run waits for a server started with it in mind.
    pub fn with_take_over(mut self, take_over: bool) -> Self {
        self.take_over = take_over;
        self
    }

    /// Runs go to a durable engine instead of running in this process (with
    /// a store only): each run's row written, the run submitted through
    /// `submitter` (the engine runs it and writes its events to the store),
    /// and its answer streamed to the client from the store (the UI message
    /// stream).
    pub fn with_submitter(mut self, submitter: Arc<dyn crate::durable::RunSubmitter>) -> Self {
        self.submitter = Some(submitter);
        self
    }

    /// See [`ChatService::with_take_over`].
    pub(crate) fn takes_over(&self) -> bool {
        self.take_over && self.durable
    }

    /// The approval ids of this service.
    pub(crate) fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The run store, when the service has one.
    pub(crate) fn store(&self) -> Option<&crate::chats::ServerStore> {
        self.store.as_ref()
    }

    /// Uses this approval key and lifetime instead of a random key (ids then
    /// survive restarts of servers sharing the key).
    pub fn with_approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }

    /// The ids of the tools `graph` offers.
    fn tool_ids(&self, graph: &Graph, ctx: &RunContext) -> Vec<String> {
        let catalog = graph.select_tools(self.runner.catalog(ctx));
        catalog.specs().iter().map(|s| s.id.to_string()).collect()
    }

    /// The tools offered by the graphs `account` may use, with effect and
    /// decision, for UIs (`GET /api/graphs` says which graph offers which): a
    /// tool only another account's graphs offer is not listed.
    pub fn tools_listing(&self, account: &str) -> Value {
        let ctx = RunContext::generate();
        let offered: std::collections::HashSet<String> = self
            .graphs
            .usable(account)
            .flat_map(|graph| self.tool_ids(graph, &ctx))
            .collect();
        let catalog = self.runner.catalog(&ctx);
        let tools: Vec<Value> = catalog
            .specs()
            .iter()
            .filter(|spec| offered.contains(spec.id.as_str()))
            .map(|spec| {
                let decision = match self.runner.policy().decide(&ctx, &spec.id, spec.effect) {
                    PolicyDecision::Allow => "allow",
                    PolicyDecision::RequireApproval => "approval",
                    PolicyDecision::Deny => "deny",
                };
                json!({"id": spec.id.as_str(), "description": spec.description,
                       "effect": spec.effect, "decision": decision})
            })
            .collect();
        json!({"tools": tools})
    }

    /// The graphs `account` may use, for UIs: `{"default", "graphs": [{name,
    /// description, tools}]}` (see `GET /api/graphs`).
    pub fn graphs_listing(&self, account: &str) -> Value {
        let ctx = RunContext::generate();
        let graphs: Vec<Value> = self
            .graphs
            .usable(account)
            .map(|graph| {
                json!({"name": graph.name, "description": graph.description,
                       "tools": self.tool_ids(graph, &ctx)})
            })
            .collect();
        let default = self.graphs.default_for(account).map(|g| g.name.clone());
        json!({"default": default, "graphs": graphs})
    }

    /// What a client may attach, for UIs (see `GET /api/limits`).
    pub fn limits_listing(&self) -> Value {
        json!({"attachments": {
            "maxFileBytes": self.limits.max_file_bytes,
            "maxRequestFileBytes": self.limits.max_request_file_bytes,
            "imageTypes": ai_core::message::IMAGE_MEDIA_TYPES,
        }})
    }

    /// The graph a request of `chat` names runs (the chat's own when it is
    /// stored with one), if the account may use it.
    async fn graph_for(
        &self,
        chat: &ChatRef,
        requested: Option<&str>,
    ) -> Result<Arc<Graph>, crate::graphs::GraphRefusal> {
        let thread = match &self.store {
            Some(store) => store
                .store()
                .account(chat.account.clone())
                .thread(&chat.id)
                .await
                .ok()
                .flatten()
                .map(|t| t.graph)
                .filter(|g| !g.is_empty()),
            None => None,
        };
        self.graphs
            .resolve(&chat.account, requested, thread.as_deref())
    }

    /// The router (mount it in an axum app, or serve it with [`crate::serve`]):
    /// the page on the host checks, every `/api` route on the host and token checks
    /// of `access` (see [`crate::access`]).
    pub fn router(self: Arc<Self>, access: Access) -> Router {
        let access = Arc::new(access);
        let state = AppState {
            service: self,
            streams: ClientSlots::new(access.max_streams, access.max_streams_per_client()),
            access: Arc::clone(&access),
        };
        let page = Router::new()
            .route("/", get(index))
            .route("/assets/app.js", get(app_js))
            .route("/assets/app.css", get(app_css))
            .route("/assets/highlight.js", get(highlight_js))
            .route_layer(middleware::from_fn_with_state(
                Arc::clone(&access),
                crate::access::page_layer,
            ));
        let api = Router::new()
            .route("/api/chat", post(chat))
            .route("/api/chat/{id}/stream", get(reattach))
            .route("/api/chat/{id}/stop", post(stop_run))
            .route("/api/tools", get(tools))
            .route("/api/graphs", get(graphs))
            .route("/api/limits", get(limits))
            .route("/api/chats", get(crate::chats::list))
            .route(
                "/api/chats/{id}",
                get(crate::chats::load)
                    .patch(crate::chats::rename)
                    .delete(crate::chats::delete),
            )
            .route_layer(middleware::from_fn_with_state(
                Arc::clone(&access),
                crate::access::api_layer,
            ))
            .layer(middleware::from_fn_with_state(
                access,
                crate::access::cors_layer,
            ));
        page.merge(api).with_state(state)
    }

    /// Starts the run a checked request asks for: the graph prepared on its
    /// history; continued with the user's decisions when it answers approvals
    /// (each approval id checked against the server's key: a forged, expired,
    /// used or edited one is an invalid decision, and nothing of it runs).
    async fn start_run(
        &self,
        graph: &Graph,
        chat: &mut ChatRequest,
        chat_ref: &ChatRef,
        context: RunContext,
        kept: Option<usize>,
    ) -> Result<Started, agent_graph::graph::GraphError> {
        let (start, mut meta, deps) = self.prepare_start(graph, chat, context, kept).await?;
        meta.lease = self.store.as_ref().map(|s| s.instance().new_run());
        let recording = self
            .store
            .as_ref()
            .map(|store| store.begin(&meta, &chat_ref.account, &chat_ref.id, &chat_ref.title));
        let handle = match (
            self.store.as_ref().filter(|_| self.durable),
            &meta.lease,
            &recording,
        ) {
            (Some(store), Some(lease), Some(recording)) => {
                let record = (
                    meta.graph.clone(),
                    meta.model.clone(),
                    meta.prompt_hash.clone(),
                );
                let saved = crate::durable::SavedStart::new(start, kept, record);
                let journal = crate::durable::journal_for(
                    store.store(),
                    &chat_ref.account,
                    &saved,
                    (lease.clone(), Some(recording.started())),
                );
                agent_graph::run::durable(saved.start, deps, journal)
            }
            _ => agent_graph::run::start(start, deps),
        };
        Ok((handle, meta, recording))
    }

    /// What a checked request starts: the graph prepared on its history, as a
    /// new run or as the continuation of a paused one with the user's decisions
    /// (each approval id checked against the server's key: a forged, expired,
    /// used or edited one is an invalid decision, and nothing of it runs).
    async fn prepare_start(
        &self,
        graph: &Graph,
        chat: &mut ChatRequest,
        context: RunContext,
        kept: Option<usize>,
    ) -> Result<(RunStart, crate::chats::RunMeta, RunDeps), agent_graph::graph::GraphError> {
        let history = std::mem::take(&mut chat.history);
        let mut prepared = graph.prepare(
            context,
            &self.runner,
            &self.model_id,
            history,
            &Params::new(),
        )?;
        prepared.request.defer_approvals = true;
        let meta = crate::chats::RunMeta {
            run_id: prepared.request.context.run_id.clone(),
            graph: graph.name.clone(),
            model: self.model_id.clone(),
            prompt_hash: prepared.request.prompt_hash.clone(),
            kept,
            resumed: false,
            lease: None,
        };
        let deps = prepared.deps(Arc::clone(&self.model), Arc::clone(&self.runner));
        let start = if chat.decisions.is_empty() {
            RunStart::New {
                request: prepared.request,
            }
        } else {
            let (pending, decisions) = self.redeem(chat).await;
            let paused = PausedRun {
                version: PAUSED_RUN_VERSION,
                request: prepared.request,
                pending,
                client_calls: Vec::new(),
                usage: Vec::new(),
                records: Vec::new(),
                model_turns: 0,
            };
            RunStart::Continue { paused, decisions }
        };
        Ok((start, meta, deps))
    }

    /// Hands the run a checked request asks for to the durable engine (see
    /// [`ChatService::with_submitter`]): its row and thread written, then
    /// submitted with the run id as its idempotency key. Returns the run id.
    async fn submit_run(
        &self,
        graph: &Graph,
        chat: &mut ChatRequest,
        chat_ref: &ChatRef,
        context: RunContext,
        kept: Option<usize>,
    ) -> Result<String, String> {
        let (Some(store), Some(submitter)) = (&self.store, &self.submitter) else {
            return Err("no durable engine".into());
        };
        let (start, meta, _) = self
            .prepare_start(graph, chat, context, kept)
            .await
            .map_err(|e| e.to_string())?;
        let now = agent_store::recorder::now_ms();
        let rows = store.store().account(chat_ref.account.clone());
        // Decisions about a paused run that waits for them in its invocation
        // go to it; else the continuation is a run of its own.
        let waiting = match &start {
            RunStart::Continue { .. } => awakeable_of(&rows, &chat_ref.id).await,
            _ => None,
        };
        let bound: Vec<agent_durable::restate::BoundCall> = match &start {
            RunStart::Continue { paused, .. } => paused
                .pending
                .iter()
                .map(|p| agent_durable::restate::BoundCall {
                    tool_call_id: p.tool_call_id.clone(),
                    tool_name: p.tool_name.clone(),
                    args_hash: p.args_hash.clone(),
                })
                .collect(),
            _ => Vec::new(),
        };
        rows.create_thread(&agent_store::Thread {
            id: chat_ref.id.clone(),
            title: chat_ref.title.clone(),
            graph: meta.graph.clone(),
            created_ms: now,
            updated_ms: now,
        })
        .await
        .map_err(|e| e.to_string())?;
        rows.start_run(&agent_store::NewRun {
            id: meta.run_id.clone(),
            thread_id: Some(chat_ref.id.clone()),
            graph: meta.graph.clone(),
            model: meta.model.clone(),
            prompt_hash: meta.prompt_hash.clone(),
            owner: agent_durable::restate::RESTATE_OWNER.to_owned(),
            started_ms: now,
        })
        .await
        .map_err(|e| e.to_string())?;
        if let (Some((awakeable, paused_id)), RunStart::Continue { decisions, .. }) =
            (&waiting, &start)
        {
            let mut next = agent_durable::restate::Continuation::new(
                meta.run_id.clone(),
                paused_id.clone(),
                (bound, decisions.clone()),
            );
            next.kept = kept;
            next.started_ms = now;
            if let Err(error) = submitter.resume(awakeable, &next).await {
                let failed = agent_store::RunStatus::Failed;
                let message = format!("the paused run did not take the decisions: {error}");
                let _ = rows
                    .set_run_status(&meta.run_id, failed, Some(&message), now)
                    .await;
                return Err(message);
            }
            return Ok(meta.run_id);
        }
        let mut input = agent_durable::restate::RunInput::new(chat_ref.account.clone(), start);
        input.thread_id = Some(chat_ref.id.clone());
        input.graph = meta.graph;
        input.model = meta.model;
        input.prompt_hash = meta.prompt_hash;
        input.started_ms = now;
        input.kept = kept;
        if let Err(error) = submitter.submit(&input).await {
            let failed = agent_store::RunStatus::Failed;
            let message = format!("the durable engine did not take the run: {error}");
            let _ = rows
                .set_run_status(&meta.run_id, failed, Some(&message), now)
                .await;
            return Err(message);
        }
        Ok(meta.run_id)
    }

    /// Goes on with the durable runs that servers on this store left running
    /// when they died (their owner's lease ran out), each as this server's
    /// under a new generation, with no client (a client attaches with `GET
    /// /api/chat/{id}/stream`); returns how many it took. A run another
    /// server took first is left to it; one that cannot start (no saved
    /// start, its graph is not this server's, its start unreadable) is marked
    /// interrupted. The runs of `agent chat` processes are theirs
    /// (`agent runs resume`).
    pub async fn resume_orphans(self: &Arc<Self>) -> Result<usize, agent_store::StoreError> {
        let Some(store) = self.store.clone() else {
            return Ok(0);
        };
        let now = agent_store::recorder::now_ms();
        let mut resumed = 0;
        for orphan in store.store().orphaned_runs(now).await? {
            let of_server = match orphan.kind.as_deref() {
                Some(kind) => kind == "serve",
                None => orphan.owner.starts_with("serve:"),
            };
            if of_server && self.resume_orphan(&store, &orphan).await? {
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    /// Takes `orphan` over and starts it again (see
    /// [`ChatService::resume_orphans`]); `false` when it was not taken.
    async fn resume_orphan(
        self: &Arc<Self>,
        store: &crate::chats::ServerStore,
        orphan: &agent_store::Orphan,
    ) -> Result<bool, agent_store::StoreError> {
        let now = agent_store::recorder::now_ms();
        let saved = orphan
            .start
            .as_deref()
            .ok_or_else(|| "it has no saved start".to_owned())
            .and_then(|text| {
                serde_json::from_str::<crate::durable::SavedStart>(text).map_err(|e| e.to_string())
            })
            .and_then(|saved| match self.graphs.get(&saved.graph) {
                Some(graph) => Ok((saved, graph)),
                None => Err(format!("this server has no graph `{}`", saved.graph)),
            });
        let (saved, graph) = match saved {
            Ok(found) => found,
            Err(error) => {
                let message = format!("the run cannot go on: {error}");
                if store
                    .store()
                    .interrupt_orphan(orphan, &message, now)
                    .await?
                {
                    tracing::error!(run_id = %orphan.run_id, %error, "a run a stopped server left cannot start again; marked interrupted");
                }
                return Ok(false);
            }
        };
        let key = (orphan.account_id.as_str(), orphan.run_id.as_str());
        let instance = store.instance();
        let Some(fence) = store
            .store()
            .claim_run(key, &orphan.fence(), &instance.id(), now)
            .await?
        else {
            return Ok(false);
        };
        let lease = instance.taken(&fence);
        let journal = Arc::new(
            agent_durable::StoreJournal::new(
                store.store().clone(),
                orphan.account_id.clone(),
                None,
            )
            .with_lease(lease.clone()),
        );
        let handle = match graph.durable(
            saved.start.clone(),
            Arc::clone(&self.model),
            Arc::clone(&self.runner),
            journal,
        ) {
            Ok(handle) => handle,
            Err(error) => {
                let rows = store.store().account(orphan.account_id.clone());
                let message = format!("the run cannot go on: {error}");
                rows.set_run_status(
                    &orphan.run_id,
                    agent_store::RunStatus::Interrupted,
                    Some(&message),
                    now,
                )
                .await?;
                return Ok(false);
            }
        };
        store
            .store()
            .account(orphan.account_id.clone())
            .clear_events(&orphan.run_id)
            .await?;
        let chat_id = orphan.thread_id.clone().unwrap_or_default();
        let meta = crate::chats::RunMeta {
            run_id: orphan.run_id.clone(),
            graph: saved.graph,
            model: saved.model,
            prompt_hash: saved.prompt_hash,
            kept: saved.kept,
            resumed: true,
            lease: Some(lease),
        };
        let chat = ChatRef {
            scoped: scope(&orphan.account_id, &chat_id),
            id: chat_id,
            account: orphan.account_id.clone(),
            title: String::new(),
        };
        let recording = store.begin(&meta, &chat.account, &chat.id, &chat.title);
        let encoder: Box<dyn StreamEncoder> = Box::new(crate::ui_stream::UiStreamEncoder::new(
            answer_id(&orphan.run_id),
        ));
        let replay = self
            .active
            .open(&chat.scoped, encoder.headers(), handle.cancel_token());
        let service = Arc::clone(self);
        tracing::info!(run_id = %orphan.run_id, "a durable run of a stopped server goes on here");
        let relay = Relay {
            heartbeat: crate::DEFAULT_HEARTBEAT,
            detach_grace: Duration::ZERO,
            write_timeout: crate::DEFAULT_WRITE_TIMEOUT,
            replay,
        };
        tokio::spawn(async move {
            service
                .respond(chat, (handle, meta, Some(recording)), encoder, None, relay)
                .await;
        });
        Ok(true)
    }

    /// The runs stopped servers left (their owner's lease ran out): gone on
    /// with here when this server takes runs over
    /// ([`ChatService::resume_orphans`]), else marked interrupted; returns
    /// how many it settled.
    pub async fn settle_orphans(self: &Arc<Self>) -> Result<usize, agent_store::StoreError> {
        if self.takes_over() {
            return self.resume_orphans().await;
        }
        let Some(store) = self.store.as_ref() else {
            return Ok(0);
        };
        let now = agent_store::recorder::now_ms();
        let mut settled = 0;
        for orphan in store.store().orphaned_runs(now).await? {
            let of_server = orphan.kind.as_deref() == Some("serve")
                || (orphan.kind.is_none() && orphan.owner.starts_with("serve:"));
            let error = "the server running it stopped during the run";
            if of_server && store.store().interrupt_orphan(&orphan, error, now).await? {
                settled += 1;
            }
        }
        Ok(settled)
    }

    /// Looks for runs stopped servers left, every lease renewal interval, and
    /// settles them ([`ChatService::settle_orphans`]) while the service lives
    /// (a server with a store).
    pub fn watch_orphans(self: &Arc<Self>) {
        let Some(every) = self
            .store
            .as_ref()
            .map(|s| s.instance().timing().renew_every)
        else {
            return;
        };
        let service = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(service) = service.upgrade() else {
                    return;
                };
                match service.settle_orphans().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(runs = n, "settled runs a stopped server left"),
                    Err(error) => {
                        tracing::warn!(%error, "could not look for runs stopped servers left")
                    }
                }
            }
        });
    }

    /// The thread of chat `chat` as the store will hold it once the runs before
    /// this request are recorded: the conversation of the chat's latest run in
    /// this process when it has one (its record may still be under way), else
    /// the stored messages (see [`crate::chats::ServerStore::thread_messages`]).
    async fn stored_thread(
        &self,
        store: &crate::chats::ServerStore,
        chat: &ChatRef,
    ) -> Result<Vec<Message>, agent_store::StoreError> {
        let running = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&chat.scoped)
            .map(|record| (record.thread.clone(), record.recorded.clone()));
        if let Some((thread, recorded)) = running {
            let waited = tokio::time::timeout(RUN_WAIT, async {
                match thread.await {
                    Ok(conversation) => Some(conversation),
                    Err(_) => {
                        let _ = recorded.await;
                        None
                    }
                }
            })
            .await;
            if let Ok(Some(conversation)) = waited {
                return Ok(conversation.as_ref().clone());
            }
        }
        store.thread_messages(&chat.account, &chat.id).await
    }

    /// With a store, makes `chat`'s history the stored thread continued by the
    /// request (see [`crate::thread`]). Returns the stored messages and how
    /// many of the history's first messages are theirs (`None` without a store,
    /// or when the thread could not be read: the request's history is used and
    /// the run's messages are not written).
    async fn continue_stored(
        &self,
        chat: &mut ChatRequest,
        chat_ref: &ChatRef,
    ) -> (Vec<Message>, Option<usize>) {
        let Some(store) = &self.store else {
            return (Vec::new(), None);
        };
        match self.stored_thread(store, chat_ref).await {
            Ok(stored) => {
                let continued = crate::thread::continue_thread(&stored, chat);
                chat.history = continued.history;
                (stored, Some(continued.kept))
            }
            Err(error) => {
                tracing::error!(%error, "the chat's stored thread could not be read; the client's history is used and this run's messages are not stored");
                (Vec::new(), None)
            }
        }
    }

    /// Waits (briefly) for the start of the chat's latest run in this process
    /// to be written and, when that run has ended, for its record, so a chat
    /// loaded right after its answer holds that answer. A run still going is
    /// not waited for.
    pub(crate) async fn recorded(&self, scoped: &str) {
        let ended = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(scoped)
            .map(|record| {
                (
                    record.thread.clone(),
                    record.recorded.clone(),
                    record.started.clone(),
                )
            });
        let Some((thread, recorded, started)) = ended else {
            return;
        };
        let _ = tokio::time::timeout(RECORD_WAIT, started).await;
        let running = futures::FutureExt::now_or_never(thread).is_none();
        if !running {
            let _ = tokio::time::timeout(RECORD_WAIT, recorded).await;
        }
    }

    /// Checks that each first output of a client tool answers a call this server
    /// handed to this chat's client (or a call the chat's stored thread holds
    /// unanswered, as any server on the store handed it), for that tool and
    /// those arguments, and records it: from then on the recorded output is the
    /// call's result (one output per call).
    fn accept_client_outputs(
        &self,
        chat: &ChatRequest,
        stored: &[Message],
    ) -> Result<(), RequestError> {
        let open = crate::thread::unanswered(stored);
        for output in &chat.client_outputs {
            let issued = self
                .client_calls
                .recall(&chat.chat_id, &output.tool_call_id)
                .or_else(|| {
                    open.get(output.tool_call_id.as_str())
                        .map(|(tool, arguments)| ((*arguments).to_owned(), (*tool).to_owned()))
                });
            match issued {
                Some((arguments, tool))
                    if tool == output.tool_name && arguments == output.arguments => {}
                _ => {
                    return Err(RequestError {
                        path: output.path.clone(),
                        message:
                            "answers no call of this client tool that this chat is waiting for"
                                .into(),
                    });
                }
            }
        }
        for output in &chat.client_outputs {
            self.transcript.store(
                &chat.chat_id,
                &output.tool_call_id,
                output.arguments.clone(),
                output.result.clone(),
            );
        }
        Ok(())
    }

    /// The calls a continuation answers, and the user's decisions about them as
    /// this server checked them.
    async fn redeem(&self, chat: &ChatRequest) -> (Vec<PendingApproval>, Vec<Decision>) {
        let mut redeemed = (Vec::new(), Vec::new());
        for answer in &chat.decisions {
            let pending = PendingApproval {
                tool_call_id: answer.tool_call_id.clone(),
                tool_name: answer.tool_name.clone(),
                args: answer.args.clone(),
                args_hash: answer.args_hash.clone(),
                raw: None,
            };
            // Used once: across every server on the store and restarts when
            // there is one, else in this process.
            let checked = match self.approvals.verify(
                &answer.approval_id,
                &chat.chat_id,
                &answer.tool_call_id,
                &answer.tool_name,
                &answer.args_hash,
            ) {
                Ok((tag, expiry)) => match &self.store {
                    Some(store) => store.use_approval(&tag, expiry).await,
                    None => self.approvals.mark_used(tag, expiry),
                },
                Err(error) => Err(error),
            };
            let decision = match checked {
                Err(error) => {
                    tracing::warn!(chat = %ai_core::text::log_field(&chat.chat_id), error = %error, "approval refused");
                    Decision::invalid(&answer.tool_call_id, error.to_string())
                }
                Ok(()) if answer.approved => Decision::approve(&answer.tool_call_id),
                Ok(()) => Decision::deny(&answer.tool_call_id, answer.reason.clone()),
            };
            redeemed.0.push(pending);
            redeemed.1.push(decision);
        }
        redeemed
    }

    /// Makes run `run_id` the latest of chat `chat_id` in this process (see
    /// `records`): the senders that say its record is finished and what it
    /// leaves the thread as, and when the record of the run before it is.
    fn register(
        &self,
        chat_id: &str,
        run_id: &str,
        started: agent_store::StartWritten,
    ) -> Registration {
        let (done, waiter) = tokio::sync::oneshot::channel::<()>();
        let (thread, thread_waiter) = tokio::sync::oneshot::channel();
        let entry = ChatRecord {
            run_id: run_id.to_owned(),
            thread: futures::FutureExt::shared(thread_waiter),
            recorded: futures::FutureExt::shared(waiter),
            started,
        };
        let previous = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(chat_id.to_owned(), entry);
        Registration {
            done,
            thread,
            previous: previous.map(|record| record.recorded),
        }
    }

    /// Waits (briefly) until the starts of the account's runs in this process
    /// are written, so a list right after a new chat holds it.
    pub(crate) async fn started_runs(&self, account: &str) {
        let prefix = scope(account, "");
        let started: Vec<agent_store::StartWritten> = self
            .records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(chat, _)| chat.starts_with(&prefix))
            .map(|(_, record)| record.started.clone())
            .collect();
        let _ = tokio::time::timeout(RECORD_WAIT, futures::future::join_all(started)).await;
    }

    /// Streams a run's events into `tx` through `encoder` until the run ends, and
    /// into `replay` for clients that reattach; a client that goes away cancels
    /// the run (its last frames still reach the replay). Records the model-facing
    /// arguments and results of the calls it ran.
    async fn respond(
        self: Arc<Self>,
        chat: ChatRef,
        (handle, meta, recording): Started,
        mut encoder: Box<dyn StreamEncoder>,
        client: Option<Client>,
        relay: Relay,
    ) {
        let Relay {
            heartbeat,
            detach_grace,
            write_timeout,
            replay,
        } = relay;
        let chat_id = chat.scoped;
        let approval =
            |call: &str, tool: &str, hash: &str| self.approvals.issue(&chat_id, call, tool, hash);
        let mut recording = recording;
        let (recorded, mut thread, previous) = match &recording {
            Some(recording) => {
                let registered = self.register(&chat_id, &meta.run_id, recording.started());
                (
                    Some(registered.done),
                    Some(registered.thread),
                    registered.previous,
                )
            }
            None => (None, None, None),
        };
        let stop = handle.cancel_token();
        let (mut events, outcome) = handle.into_parts();
        let mut beat = tokio::time::interval(heartbeat.max(Duration::from_millis(10)));
        beat.tick().await;
        // Resolves when the client goes away (its response body was dropped):
        // one waiter for the response, not one registered and dropped per
        // frame.
        let mut gone = Box::pin({
            let watched = client.as_ref().map(|c| c.gone.clone());
            async move {
                match watched {
                    Some(gone) => gone.cancelled_owned().await,
                    None => std::future::pending().await,
                }
            }
        });
        let mut client = client;
        // Once the client is gone: when the run is cancelled unless a client
        // reattached (`GET /api/chat/{id}/stream`) by then.
        let mut detached: Option<tokio::time::Instant> = None;
        // This server's lease on the run: lost, the run stops before anything
        // else, and its end is for the server that takes it over to write.
        let lease_lost = meta.lease.as_ref().map(|l| l.epoch.lost().clone());
        let mut lost = Box::pin(async move {
            match lease_lost {
                Some(token) => token.cancelled_owned().await,
                None => std::future::pending().await,
            }
        });
        let mut held = true;
        loop {
            let grace_over = async {
                match detached {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            let frames = tokio::select! {
                event = events.next() => match event {
                    Some(event) => {
                        if let Some(recording) = &mut recording
                            && let Err(error) = recording.record(&event)
                        {
                            // Past the backlog the run stops rather than lose its record.
                            tracing::error!(%error, "the run cannot be recorded; cancelling it");
                            stop.cancel();
                        }
                        if let ai_core::event::AiEventKind::ClientToolCall { tool_call_id, tool_name, args } = &event.kind {
                            self.client_calls.store(&chat_id, tool_call_id, ai_core::tool::canonical_json(args), tool_name.clone());
                        }
                        encoder.frames(&shown_error(event), &approval)
                    }
                    None => break,
                },
                () = lost.as_mut(), if held => {
                    tracing::warn!(run_id = %meta.run_id, "this server lost its lease on the run; it stops here");
                    held = false;
                    stop.cancel();
                    continue;
                }
                () = gone.as_mut(), if client.is_some() => {
                    client = None;
                    detached = detach(&stop, detach_grace);
                    continue;
                }
                () = grace_over => {
                    detached = if replay.readers() > 0 {
                        detach(&stop, detach_grace)
                    } else {
                        tracing::debug!("no client came back for the run; cancelling it");
                        stop.cancel();
                        None
                    };
                    continue;
                }
                _ = beat.tick(), if client.is_some() => {
                    if let (Some(to), Some(frame)) = (&client, encoder.heartbeat())
                        && send_all(to, vec![frame], write_timeout).await.is_err()
                    {
                        client = None;
                        detached = detach(&stop, detach_grace);
                    }
                    continue;
                }
            };
            let had_client = client.is_some();
            if !deliver(&mut client, &replay, frames, write_timeout).await && had_client {
                detached = detach(&stop, detach_grace);
            }
        }
        drop(gone);
        drop(events);
        let outcome = outcome.await;
        if let Ok(output) = &outcome {
            remember(&self.transcript, &chat_id, &output.messages);
        }
        // The next run of the chat continues from what this one's record writes.
        if let (Some(thread), Some(_), Some(_), Ok(output)) =
            (thread.take(), &recording, meta.kept, &outcome)
        {
            let _ = thread.send(Arc::new(output.conversation().to_vec()));
        }
        drop(thread);
        // The client's stream ends first: a slow store delays the record, never
        // the chat.
        deliver(&mut client, &replay, encoder.end(), write_timeout).await;
        drop(client);
        self.active.close(&chat_id, &replay);
        if let Some(previous) = previous {
            let _ = previous.await;
        }
        match recording {
            Some(recording) if held => crate::chats::end(recording, &outcome, meta.kept).await,
            Some(recording) => recording.abandon().await,
            None => {}
        }
        if let Some(done) = recorded {
            let _ = done.send(());
            let mut records = self
                .records
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Forget the chat unless a later run has taken its place.
            if records
                .get(&chat_id)
                .is_some_and(|record| record.run_id == meta.run_id)
            {
                records.remove(&chat_id);
            }
        }
    }
}

/// A run started for a response: its handle, what it is, and its record (with
/// a store).
type Started = (
    RunHandle,
    crate::chats::RunMeta,
    Option<agent_store::RunRecording>,
);

/// The awakeable the chat's latest run waits on, when it is paused in a durable
/// engine's invocation, and that run's id; taken (the decisions go to it
/// once).
async fn awakeable_of(
    rows: &agent_store::AccountStore<'_>,
    chat_id: &str,
) -> Option<(String, String)> {
    let latest = rows.latest_run(chat_id).await.ok()??;
    if latest.status != agent_store::RunStatus::Paused {
        return None;
    }
    let state = rows.take_paused(&latest.run.id).await.ok()??;
    state["awakeable"]
        .as_str()
        .map(|a| (a.to_owned(), latest.run.id.clone()))
}

/// A chat as one request names it: its id in the request's account (the key of
/// every in-memory map and of its approvals), the id the client uses (the
/// thread's id in the account's store), the account and the title of a new
/// thread.
struct ChatRef {
    scoped: String,
    id: String,
    account: String,
    title: String,
}

/// The key of chat `chat_id` of `account` in the server's maps: distinct for
/// distinct (account, id) pairs, whatever characters either holds.
pub(crate) fn scope(account: &str, chat_id: &str) -> String {
    format!("{}:{account}:{chat_id}", account.len())
}

/// The transcript as one account sees it.
struct ScopedTranscript<'a> {
    inner: &'a TranscriptStore,
    account: &'a str,
}

impl Transcript for ScopedTranscript<'_> {
    fn recall(&self, chat_id: &str, tool_call_id: &str) -> Option<(String, String)> {
        self.inner
            .recall(&scope(self.account, chat_id), tool_call_id)
    }
}

/// A provider's error text stays in the server log: it may carry what the browser
/// must not see (an upstream URL, an account name, a quota detail). The client
/// gets what failed and the request id to find it by.
pub(crate) fn shown_error(event: ai_core::AiEvent) -> ai_core::AiEvent {
    let ai_core::event::AiEventKind::Error { code, message } = &event.kind else {
        return event;
    };
    if !(code.starts_with("provider_") || code == "invalid_request") {
        return event;
    }
    tracing::warn!(
        run_id = %ai_core::text::log_field(&event.run_id),
        code = %code,
        message = %ai_core::text::log_field(message),
        "the model provider failed"
    );
    let shown = format!(
        "The model provider could not answer ({code}). Request id: {}.",
        event.run_id
    );
    let code = code.clone();
    ai_core::AiEvent {
        kind: ai_core::event::AiEventKind::Error {
            code,
            message: shown,
        },
        ..event
    }
}

/// How a response reaches its clients.
struct Relay {
    /// How often a quiet UI message stream gets a comment.
    heartbeat: Duration,
    /// How long the run goes on once its client went away (see
    /// [`Access::detach_grace`]).
    detach_grace: Duration,
    /// How long a frame may wait for the client to take it (see
    /// [`Access::write_timeout`]).
    write_timeout: Duration,
    /// Its frames, for clients that reattach.
    replay: Arc<Replay>,
}

/// The client a response streams to: its frames' channel, the stream slot it
/// holds (freed with it, when it goes away or reads too slowly), and the
/// token its response body cancels when dropped.
struct Client {
    tx: mpsc::Sender<Bytes>,
    _slot: Option<crate::listener::Slot>,
    gone: tokio_util::sync::CancellationToken,
}

/// The client went away: the run is cancelled now when there is no grace,
/// else at the deadline returned.
fn detach(
    stop: &tokio_util::sync::CancellationToken,
    grace: Duration,
) -> Option<tokio::time::Instant> {
    if grace.is_zero() {
        stop.cancel();
        return None;
    }
    Some(tokio::time::Instant::now() + grace)
}

/// Keeps `frames` for reattaching clients and sends them to the client while it
/// is there; `false` when it went away just now (closed, or took nothing for
/// `write_timeout`: its stream and slot are let go).
async fn deliver(
    client: &mut Option<Client>,
    replay: &Replay,
    frames: Vec<Bytes>,
    write_timeout: Duration,
) -> bool {
    for frame in &frames {
        replay.push(frame);
    }
    let Some(to) = client else {
        return true;
    };
    if send_all(to, frames, write_timeout).await.is_err() {
        *client = None;
        return false;
    }
    true
}

/// Sends `frames` in order; `Err` when the client is gone or takes nothing
/// for `write_timeout`.
async fn send_all(client: &Client, frames: Vec<Bytes>, write_timeout: Duration) -> Result<(), ()> {
    for frame in frames {
        match tokio::time::timeout(write_timeout, client.tx.send(frame)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(()),
            Err(_) => {
                tracing::debug!("the client read nothing in time; its stream is let go");
                return Err(());
            }
        }
    }
    Ok(())
}

/// Records the model-facing arguments and results of every call in `messages`.
fn remember(transcript: &TranscriptStore, chat_id: &str, messages: &[Message]) {
    let mut arguments = std::collections::HashMap::new();
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    arguments.insert(call.id.clone(), call.arguments.clone());
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => {
                if let Some(args) = arguments.remove(tool_call_id) {
                    transcript.store(chat_id, tool_call_id, args, content.clone());
                }
            }
            _ => {}
        }
    }
}

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) service: Arc<ChatService>,
    pub(crate) access: Arc<Access>,
    streams: Arc<ClientSlots>,
}

async fn highlight_js(headers: HeaderMap) -> Response {
    crate::page::file(crate::page::Asset::Highlight, &headers)
}

async fn index(headers: HeaderMap) -> Response {
    crate::page::file(crate::page::Asset::Index, &headers)
}

async fn app_js(headers: HeaderMap) -> Response {
    crate::page::file(crate::page::Asset::Script, &headers)
}

async fn app_css(headers: HeaderMap) -> Response {
    crate::page::file(crate::page::Asset::Styles, &headers)
}

/// `GET /api/tools`: the tools of the graphs the request's account may use.
async fn tools(
    State(state): State<AppState>,
    Extension(account): Extension<crate::access::Account>,
) -> Response {
    json_ok(state.service.tools_listing(account.name()))
}

/// `GET /api/graphs`: the graphs the request's account may use.
async fn graphs(
    State(state): State<AppState>,
    Extension(account): Extension<crate::access::Account>,
) -> Response {
    json_ok(state.service.graphs_listing(account.name()))
}

/// `GET /api/limits`: what a client may attach.
async fn limits(State(state): State<AppState>) -> Response {
    json_ok(state.service.limits_listing())
}

/// A `200` JSON response.
pub(crate) fn json_ok(value: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// The request body, within the size and time limits.
pub(crate) async fn read_body(access: &Access, body: Body) -> Result<Bytes, Response> {
    let read = axum::body::to_bytes(body, access.max_body_bytes);
    match tokio::time::timeout(access.body_timeout, read).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            "the request body is over the limit",
        )),
        Err(_) => Err(refuse(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            "the request body did not arrive in time",
        )),
    }
}

/// The chat endpoint's query: which stream protocol to answer in.
#[derive(Debug, serde::Deserialize)]
struct ChatQuery {
    /// `ui` (the UI message stream, the default) or `data` (AI SDK 4's data stream).
    protocol: Option<String>,
}

/// The id of the message that answers with run `run_id`: the same for a
/// client that follows the run through another server (see
/// [`crate::chats::follow`]).
pub(crate) fn answer_id(run_id: &str) -> String {
    format!("msg-{run_id}")
}

/// The encoder of a response to `chat` in `protocol`, answering with run
/// `run_id`.
fn encoder(
    protocol: Option<&str>,
    chat: &ChatRequest,
    run_id: &str,
) -> Result<Box<dyn StreamEncoder>, RequestError> {
    // As the AI SDK's own server: the response continues the last message only
    // when the request continues it; anything else is a new message.
    let message_id = chat
        .continuing
        .as_ref()
        .map_or_else(|| answer_id(run_id), |(id, _)| id.clone());
    let known: Vec<String> = chat
        .continuing
        .as_ref()
        .map(|(_, calls)| calls.clone())
        .unwrap_or_default();
    match protocol {
        None | Some("ui") => Ok(Box::new(UiStreamEncoder::continuing(message_id, known))),
        Some("data") if chat.format == contract::BodyFormat::AiSdk4 => {
            Ok(Box::new(DataStreamEncoder::continuing(message_id, known)))
        }
        Some("data") => Ok(Box::new(DataStreamEncoder::announcing(
            message_id,
            chat.continued_calls.clone(),
        ))),
        Some(_) => Err(RequestError {
            path: "?protocol".into(),
            message: "must be \"ui\" or \"data\"".into(),
        }),
    }
}

async fn chat(
    State(state): State<AppState>,
    Extension(account): Extension<crate::access::Account>,
    query: Result<Query<ChatQuery>, axum::extract::rejection::QueryRejection>,
    body: Body,
) -> Response {
    let protocol = match &query {
        Ok(Query(query)) => query.protocol.clone(),
        Err(_) => Some(String::new()),
    };
    let bytes = match read_body(&state.access, body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let transcript = ScopedTranscript {
        inner: &state.service.transcript,
        account: account.name(),
    };
    let mut chat = match contract::parse(&bytes, &transcript, &state.service.limits) {
        Ok(chat) => chat,
        Err(error) => return invalid(&error),
    };
    // From here on the chat is known by its key in this account.
    let client_id = std::mem::take(&mut chat.chat_id);
    chat.chat_id = scope(account.name(), &client_id);
    let mut chat_ref = ChatRef {
        scoped: chat.chat_id.clone(),
        id: client_id,
        account: account.0,
        title: String::new(),
    };
    let graph = match state
        .service
        .graph_for(&chat_ref, chat.graph.as_deref())
        .await
    {
        Ok(graph) => graph,
        Err(refusal) => return refusal.response(),
    };
    let (stored, kept) = state.service.continue_stored(&mut chat, &chat_ref).await;
    if let Err(error) = state.service.accept_client_outputs(&chat, &stored) {
        return invalid(&error);
    }
    // The stored files the thread carries count against the request's file
    // budget too: the oldest are left out of the model's request past it.
    let omitted = crate::thread::bound_files(
        &mut chat.history,
        state.service.limits.max_request_file_bytes,
    );
    if omitted > 0 {
        tracing::info!(
            omitted,
            "older files of the chat left out of the model request"
        );
    }
    let context = RunContext::generate();
    let encoder = match encoder(protocol.as_deref(), &chat, &context.run_id) {
        Ok(encoder) => encoder,
        Err(error) => return invalid(&error),
    };
    // Streams count against the request's account: a token gets its own
    // share, whichever address its requests come from.
    let client = Some(ClientKey::account(&chat_ref.account));
    let Some(permit) = state.streams.try_acquire(client) else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "too many open streams; try again",
        );
    };
    chat_ref.title = chat
        .history
        .iter()
        .find_map(|m| match m {
            Message::User { content, .. } => Some(agent_store::title_from(content)),
            _ => None,
        })
        .unwrap_or_else(|| agent_store::title_from(""));
    if state.service.submitter.is_some() {
        let submitted = state
            .service
            .submit_run(&graph, &mut chat, &chat_ref, context, kept)
            .await;
        drop(permit);
        return match submitted {
            Ok(_) => {
                let service = Arc::clone(&state.service);
                let (account, id) = (chat_ref.account.clone(), chat_ref.id.clone());
                crate::chats::follow(service, &account, &id, chat_ref.scoped, Some(encoder))
                    .await
                    .unwrap_or_else(|| StatusCode::NO_CONTENT.into_response())
            }
            Err(error) => {
                tracing::error!(%error, "a run could not be handed to the durable engine");
                refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "engine_unavailable",
                    "the durable engine did not take the run; try again",
                )
            }
        };
    }
    let started = match state
        .service
        .start_run(&graph, &mut chat, &chat_ref, context, kept)
        .await
    {
        Ok(started) => started,
        Err(error) => {
            tracing::error!(%error, "the graph could not be prepared");
            return refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "graph_unavailable",
                "the server's graph could not be prepared for this chat",
            );
        }
    };
    let headers = encoder.headers();
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let service = Arc::clone(&state.service);
    let replay = service
        .active
        .open(&chat.chat_id, headers, started.0.cancel_token());
    let relay = Relay {
        heartbeat: state.access.heartbeat,
        detach_grace: state.access.detach_grace,
        write_timeout: state.access.write_timeout,
        replay,
    };
    let gone = tokio_util::sync::CancellationToken::new();
    let client = Client {
        tx,
        _slot: Some(permit),
        gone: gone.clone(),
    };
    tokio::spawn(async move {
        service
            .respond(chat_ref, started, encoder, Some(client), relay)
            .await;
    });
    streaming(headers, watched(coalesced(rx), gone))
}

/// `frames`, cancelling `gone` when the response body is dropped (the client
/// went away, or its stream was let go).
fn watched(
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
    gone: tokio_util::sync::CancellationToken,
) -> impl futures::Stream<Item = Bytes> + Send + 'static {
    let guard = gone.drop_guard();
    frames.map(move |frame| {
        let _held = &guard;
        frame
    })
}

/// Most bytes [`coalesced`] puts in one chunk.
const COALESCE_MAX: usize = 64 * 1024;

/// The frames of `rx` as body chunks: the frames ready when the connection
/// asks for more go out as one chunk (one HTTP chunk, one write), and a lone
/// frame goes out at once, never held for company.
fn coalesced(mut rx: mpsc::Receiver<Bytes>) -> impl futures::Stream<Item = Bytes> + Send {
    futures::stream::poll_fn(move |cx| {
        let first = match rx.poll_recv(cx) {
            std::task::Poll::Ready(Some(frame)) => frame,
            other => return other,
        };
        let Ok(mut next) = rx.try_recv() else {
            return std::task::Poll::Ready(Some(first));
        };
        let mut chunk = bytes::BytesMut::with_capacity(first.len() + next.len() + 512);
        chunk.extend_from_slice(&first);
        loop {
            chunk.extend_from_slice(&next);
            if chunk.len() >= COALESCE_MAX {
                break;
            }
            match rx.try_recv() {
                Ok(frame) => next = frame,
                Err(_) => break,
            }
        }
        std::task::Poll::Ready(Some(chunk.freeze()))
    })
}

/// A streaming response with a protocol's `headers`.
pub(crate) fn streaming(
    headers: &[(&str, &str)],
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
) -> Response {
    let body = Body::from_stream(frames.map(Ok::<Bytes, std::convert::Infallible>));
    let mut response = Response::new(body);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// `POST /api/chat/{id}/stop`: cancels the chat's run in this process (`202`),
/// or `204` when none runs here.
async fn stop_run(
    State(state): State<AppState>,
    Extension(account): Extension<crate::access::Account>,
    axum::extract::Path(chat_id): axum::extract::Path<String>,
) -> Response {
    let scoped = scope(account.name(), &chat_id);
    match state.service.active.get(&scoped) {
        Some(replay) => {
            replay.stop();
            StatusCode::ACCEPTED.into_response()
        }
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// `GET /api/chat/{id}/stream`: the running response of the chat, from its first
/// frame, or `204` when there is none (see [`crate::resume`]).
async fn reattach(
    State(state): State<AppState>,
    Extension(account): Extension<crate::access::Account>,
    axum::extract::Path(chat_id): axum::extract::Path<String>,
) -> Response {
    if chat_id.is_empty() || chat_id.len() > contract::MAX_CHAT_ID_LEN {
        return refuse(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the chat id must be 1 to 128 characters",
        );
    }
    let scoped = scope(account.name(), &chat_id);
    let attached = state
        .service
        .active
        .get(&scoped)
        .and_then(|replay| Some((replay.headers(), replay.reader()?)));
    if let Some((headers, frames)) = attached {
        return streaming(headers, frames);
    }
    // Not running here: a run of this chat another server (or this one before a
    // restart) is running, replayed from the store and followed.
    let followed = crate::chats::follow(
        Arc::clone(&state.service),
        account.name(),
        &chat_id,
        scoped,
        None,
    )
    .await;
    followed.unwrap_or_else(|| StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod coalesce_tests {
    use super::*;

    #[tokio::test]
    async fn ready_frames_go_out_as_one_chunk_and_a_lone_frame_at_once() {
        let (tx, rx) = mpsc::channel::<Bytes>(8);
        let mut body = Box::pin(coalesced(rx));
        for frame in ["a", "b", "c"] {
            tx.send(Bytes::from_static(frame.as_bytes())).await.unwrap();
        }
        assert_eq!(body.next().await, Some(Bytes::from_static(b"abc")));
        tx.send(Bytes::from_static(b"d")).await.unwrap();
        assert_eq!(body.next().await, Some(Bytes::from_static(b"d")));
        let waiting = tokio::time::timeout(Duration::from_millis(20), body.next()).await;
        assert!(
            waiting.is_err(),
            "nothing is made up while nothing is ready"
        );
        drop(tx);
        assert_eq!(body.next().await, None);
    }
}
