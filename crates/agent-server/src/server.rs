//! The chat service and its axum router: `POST /api/chat` (UI message stream, or
//! the data stream with `?protocol=data`, see [`crate::chat`]), the stream's
//! reattach and stop routes, and the listings (`GET /api/tools`, `/api/graphs`,
//! `/api/limits`).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_graph::Graph;
use agent_store::StoredMessage;
use ai_core::{
    CompletionPort, RunContext, ToolPolicy, ToolRunner,
    approval::{Approver, GrantLedger},
    policy::{CatalogError, PolicyDecision},
    tool::RegisteredTool,
};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router, middleware};
use chat_protocol::contract::{self, RequestError, Transcript};
use chat_protocol::transcript::TranscriptStore;
use futures::StreamExt;
use futures::future::{FutureExt, Shared};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::access::Access;
use crate::approval::Approvals;
use crate::listener::ClientSlots;
use crate::resume::ActiveStreams;

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

/// `400 invalid_request` naming the field.
pub(crate) fn invalid(error: &RequestError) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"error": "invalid_request", "path": error.path, "message": error.message})
            .to_string(),
    )
        .into_response()
}

/// Resolves when a run's record is written (or its writer was dropped).
type Recorded = Shared<oneshot::Receiver<()>>;

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
    /// The run owner, with a store: every run recorded there.
    runs: Option<agent_durable::Runs>,
    /// Where runs go instead of running here (a durable engine), if anywhere.
    /// Whether this server goes on with the runs of stopped servers.
    take_over: bool,
    /// Per chat, the record of its run that ended in this process and is being
    /// written: a chat loaded right after its answer waits for it (briefly).
    finishing: Mutex<std::collections::HashMap<String, Recorded>>,
    /// The limits and stream slots of requests answered on a caller's own
    /// routes ([`ChatService::respond`]), made on first use.
    pub(crate) own_routes: std::sync::OnceLock<(Arc<Access>, Arc<ClientSlots>)>,
}

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

/// Says the record of a chat's ended run is written, when dropped.
pub(crate) struct Finishing {
    done: Option<oneshot::Sender<()>>,
}

impl Drop for Finishing {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

impl ChatService {
    /// Builds the service. Runs defer approvals: a call that needs one pauses the
    /// run and the client is asked; the runner's approver (a ledger that holds no
    /// grant) only makes such tools part of the catalog.
    pub fn new(setup: ChatSetup) -> Result<Self, CatalogError> {
        let deferred: Arc<dyn Approver> = Arc::new(GrantLedger::new());
        let runner = ToolRunner::new(setup.tools, setup.policy)?.with_approver(deferred);
        Ok(Self::assemble(
            (setup.model, setup.model_id),
            runner,
            setup.graph,
        ))
    }

    /// Serves `agent`: its model and model id, its tools and policy (shared,
    /// not built again) and its graph (system prompt, tool selection, limits,
    /// settings), configured once. The agent's own approver is not asked: a
    /// call that its policy puts behind an approval pauses the run and the
    /// client is asked, as with [`ChatService::new`].
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_graph::Agent;
    /// # use agent_testing::{ScriptedModel, Turn};
    /// let agent = Agent::builder(ScriptedModel::new([Turn::text("Hi!")]))
    ///     .system("Be brief.")
    ///     .build()?;
    /// let service = Arc::new(agent_server::ChatService::from_agent(&agent));
    /// # drop(service);
    /// # Ok::<(), agent_graph::agent::AgentError>(())
    /// ```
    pub fn from_agent(agent: &agent_graph::Agent) -> Self {
        let deferred: Arc<dyn Approver> = Arc::new(GrantLedger::new());
        let runner = agent.runner().rebound(deferred);
        Self::assemble(
            (Arc::clone(agent.model()), agent.model_name().to_owned()),
            runner,
            agent.graph().clone(),
        )
    }

    /// The service around a model, a runner that defers approvals and a graph.
    fn assemble(
        (model, model_id): (Arc<dyn CompletionPort>, String),
        runner: ToolRunner,
        graph: Graph,
    ) -> Self {
        Self {
            model,
            model_id,
            runner: Arc::new(runner),
            graphs: crate::graphs::ServedGraphs::new(graph),
            approvals: Approvals::random(),
            transcript: TranscriptStore::default(),
            client_calls: TranscriptStore::default(),
            active: ActiveStreams::default(),
            limits: contract::Limits::default(),
            runs: None,
            take_over: true,
            finishing: Mutex::new(std::collections::HashMap::new()),
            own_routes: std::sync::OnceLock::new(),
        }
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

    /// Records every run through `runs` (the run owner, on its store) and
    /// serves the conversations kept there (see [`crate::chats`]): the stored
    /// thread is the truth, a run and its user turn are stored before the model
    /// is called, each call is decided once.
    pub fn with_runs(mut self, runs: agent_durable::Runs) -> Self {
        self.runs = Some(runs);
        self
    }

    /// Whether this server goes on with the runs of servers that stopped
    /// ([`ChatService::settle_orphans`]; default: yes). Off, it marks them
    /// interrupted.
    pub fn with_take_over(mut self, take_over: bool) -> Self {
        self.take_over = take_over;
        self
    }

    /// Uses this approval key and lifetime instead of a random key (ids then
    /// survive restarts of servers sharing the key).
    pub fn with_approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }

    /// Whether this server takes runs over (see [`ChatService::with_take_over`]).
    pub(crate) fn takes_over(&self) -> bool {
        self.take_over
    }

    /// The approval ids of this service.
    pub(crate) fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The run owner, when the service has a store.
    pub(crate) fn runs(&self) -> Option<&agent_durable::Runs> {
        self.runs.as_ref()
    }

    /// The model-facing record of the calls this server ran.
    pub(crate) fn transcript(&self) -> &TranscriptStore {
        &self.transcript
    }

    /// The client tool calls handed out and not answered yet.
    pub(crate) fn client_calls(&self) -> &TranscriptStore {
        &self.client_calls
    }

    /// The responses streaming in this process.
    pub(crate) fn active(&self) -> &ActiveStreams {
        &self.active
    }

    /// What a request may attach.
    pub(crate) fn limits(&self) -> &contract::Limits {
        &self.limits
    }

    /// The model.
    pub(crate) fn model(&self) -> &Arc<dyn CompletionPort> {
        &self.model
    }

    /// The model's id.
    pub(crate) fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The runner.
    pub(crate) fn runner(&self) -> &Arc<ToolRunner> {
        &self.runner
    }

    /// The graph named `name`, when the service offers it.
    pub(crate) fn graph_named(&self, name: &str) -> Option<Arc<Graph>> {
        self.graphs.get(name).cloned()
    }

    /// Marks the record of chat `scoped`'s ended run as being written, until the
    /// returned guard is dropped.
    pub(crate) fn finishing(&self, scoped: &str) -> Finishing {
        let (done, waiter) = oneshot::channel();
        self.finishing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(scoped.to_owned(), waiter.shared());
        Finishing { done: Some(done) }
    }

    /// Waits (briefly) for the record of chat `scoped`'s run that ended in this
    /// process to be written, so a chat loaded right after its answer holds it.
    pub(crate) async fn recorded(&self, scoped: &str) {
        let waiter = self
            .finishing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(scoped)
            .cloned();
        if let Some(waiter) = waiter {
            let _ = tokio::time::timeout(RECORD_WAIT, waiter).await;
            let mut finishing = self
                .finishing
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if finishing.get(scoped).is_some_and(|w| w.peek().is_some()) {
                finishing.remove(scoped);
            }
        }
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
    /// stored with one), if the account may use it; with a store, the chat's
    /// stored messages too, read with its graph (`None` when that read failed:
    /// the plan reads them again and reports it).
    pub(crate) async fn graph_for(
        &self,
        chat: &ChatRef,
        requested: Option<&str>,
    ) -> Result<(Arc<Graph>, Option<Vec<StoredMessage>>), crate::graphs::GraphRefusal> {
        let (graph, stored) = match &self.runs {
            Some(runs) => {
                let rows = runs.store().account(chat.account.clone());
                match rows.graph_and_messages(&chat.id).await {
                    Ok(Some((graph, stored))) => (Some(graph), Some(stored)),
                    Ok(None) => (None, Some(Vec::new())),
                    Err(_) => (None, None),
                }
            }
            None => (None, None),
        };
        let graph = graph.filter(|g| !g.is_empty());
        let graph = self
            .graphs
            .resolve(&chat.account, requested, graph.as_deref())?;
        Ok((graph, stored))
    }

    /// The router (mount it in an axum app, or serve it with [`crate::serve`]):
    /// the page on the host checks, every `/api` route on the host and token checks
    /// of `access` (see [`crate::access`]).
    pub fn router(self: Arc<Self>, access: Access) -> Router {
        let auth: Arc<dyn crate::access::Authenticate> = Arc::new(access.clone());
        self.router_with_auth(access, auth)
    }

    /// The router with `auth` deciding who calls each `/api` route and as
    /// which account (see [`crate::access::Authenticate`]), on any address:
    /// `access`'s host checks, limits and CORS apply, its tokens do not.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use agent_graph::Agent;
    /// # use agent_testing::{ScriptedModel, Turn};
    /// use agent_server::access::{Access, Account, AuthError, auth_fn};
    /// # let agent = Agent::builder(ScriptedModel::new([Turn::text("Hi!")])).build().unwrap();
    /// let service = Arc::new(agent_server::ChatService::from_agent(&agent));
    /// let auth = auth_fn(|parts| match parts.headers.get("x-user") {
    ///     Some(user) => Ok(Account(user.to_str().unwrap_or("").to_owned())),
    ///     None => Err(AuthError::Unauthorized("sign in first".into())),
    /// });
    /// let app: axum::Router = service.router_with_auth(Access::tokens(Vec::new()), Arc::new(auth));
    /// # drop(app);
    /// ```
    pub fn router_with_auth(
        self: Arc<Self>,
        access: Access,
        auth: Arc<dyn crate::access::Authenticate>,
    ) -> Router {
        let access = Arc::new(access);
        let guard = Arc::new(crate::access::ApiGuard {
            access: Arc::clone(&access),
            auth,
        });
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
            .route("/api/chat", post(crate::chat::chat))
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
                guard,
                crate::access::api_layer,
            ))
            .layer(middleware::from_fn_with_state(
                access,
                crate::access::cors_layer,
            ));
        page.merge(api)
            .route_layer(middleware::from_fn(crate::traffic::request_span))
            .with_state(state)
    }
}

/// A chat as one request names it: its id in the request's account (the key of
/// every in-memory map and of its approvals), the id the client uses (the
/// thread's id in the account's store), the account and the title of a new
/// thread.
pub(crate) struct ChatRef {
    pub(crate) scoped: String,
    pub(crate) id: String,
    pub(crate) account: String,
    pub(crate) title: String,
}

/// The key of chat `chat_id` of `account` in the server's maps: distinct for
/// distinct (account, id) pairs, whatever characters either holds.
pub(crate) fn scope(account: &str, chat_id: &str) -> String {
    format!("{}:{account}:{chat_id}", account.len())
}

/// The transcript as one account sees it.
pub(crate) struct ScopedTranscript<'a> {
    inner: &'a TranscriptStore,
    account: &'a str,
}

impl<'a> ScopedTranscript<'a> {
    /// `inner` as `account` sees it.
    pub(crate) fn new(inner: &'a TranscriptStore, account: &'a str) -> Self {
        Self { inner, account }
    }
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

#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) service: Arc<ChatService>,
    pub(crate) access: Arc<Access>,
    pub(crate) streams: Arc<ClientSlots>,
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

/// The id of the message that answers with run `run_id`: the same for a
/// client that follows the run through another server (see
/// [`crate::chats::follow`]).
pub(crate) fn answer_id(run_id: &str) -> String {
    agent_durable::answer_id(run_id)
}

/// The receiving end of a response's frames (see [`coalesced`]).
pub(crate) type FrameReceiver = futures::channel::mpsc::Receiver<Bytes>;

/// Most bytes [`coalesced`] puts in one chunk.
const COALESCE_MAX: usize = 64 * 1024;

/// The frames of `rx` as body chunks: the frames ready when the connection
/// asks for more go out as one chunk (one HTTP chunk, one write), and a lone
/// frame goes out at once, never held for company.
///
/// The channel is `futures`' rather than tokio's: tokio's bounded channel
/// keeps blocks of 32 slots (over 1.5 KiB with its header, for every open
/// stream) where a stream's channel holds one or two frames at a time; this
/// one allocates per frame in flight.
pub(crate) fn coalesced(mut rx: FrameReceiver) -> impl futures::Stream<Item = Bytes> + Send {
    futures::stream::poll_fn(move |cx| {
        let first = match rx.poll_next_unpin(cx) {
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

/// `frames`, cancelling `gone` when the response body is dropped (the client
/// went away, or its stream was let go).
pub(crate) fn watched(
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
    gone: tokio_util::sync::CancellationToken,
) -> impl futures::Stream<Item = Bytes> + Send + 'static {
    let guard = gone.drop_guard();
    frames.map(move |frame| {
        let _held = &guard;
        frame
    })
}

/// `POST /api/chat/{id}/stop`: stops the chat's run wherever it runs (this
/// process at once; another server, or a durable engine's worker, at its next
/// lease renewal, through the store): `202`, or `204` when none runs.
async fn stop_run(
    State(state): State<AppState>,
    Extension(account): Extension<crate::access::Account>,
    axum::extract::Path(chat_id): axum::extract::Path<String>,
) -> Response {
    let scoped = scope(account.name(), &chat_id);
    let here = state
        .service
        .active
        .get(&scoped)
        .inspect(|replay| replay.stop());
    let stored = match &state.service.runs {
        Some(runs) => match runs.stop(account.name(), &chat_id).await {
            Ok(asked) => asked,
            Err(error) => {
                tracing::warn!(%error, "a Stop could not be asked through the store");
                false
            }
        },
        None => false,
    };
    if here.is_some() || stored {
        StatusCode::ACCEPTED.into_response()
    } else {
        StatusCode::NO_CONTENT.into_response()
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
        use futures::SinkExt;
        let (mut tx, rx) = futures::channel::mpsc::channel::<Bytes>(8);
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
