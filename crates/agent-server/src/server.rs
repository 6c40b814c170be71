//! The chat service and its axum router: `POST /api/chat` (UI message stream, or
//! the data stream with `?protocol=data`) and `GET /api/tools`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent_graph::{RunDeps, RunLimits, RunRequest};
use ai_core::{
    AiEvent, CompletionPort, Message, RunContext, ToolCatalog, ToolPolicy, ToolRunner,
    approval::{ApprovalGrant, GrantLedger},
    completion::ModelSettings,
    event::EventSink,
    policy::{CatalogError, PolicyDecision},
    runner::ToolCall,
    tool::{RegisteredTool, canonical_json},
};
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router, middleware};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::access::Access;
use crate::approval::Approvals;
use crate::contract::{self, ChatRequest, ContractError, DENIED};
use crate::data_stream::DataStreamEncoder;
use crate::listener::{ClientKey, ClientSlots};
use crate::transcript::TranscriptStore;
use crate::ui_stream::UiStreamEncoder;

/// Narrows the catalog a chat offers (a graph's selection); `None`: every tool the
/// policy allows.
pub type ToolSelection = Arc<dyn Fn(ToolCatalog) -> ToolCatalog + Send + Sync>;

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
    /// The system prompt of every run.
    pub system_prompt: String,
    /// Limits of every run.
    pub limits: RunLimits,
    /// Model settings of every run.
    pub settings: ModelSettings,
    /// Which tools are offered.
    pub select: Option<ToolSelection>,
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

fn invalid(error: &ContractError) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"error": "invalid_request", "path": error.path, "message": error.message})
            .to_string(),
    )
        .into_response()
}

/// The chat service: one model, one runner, one policy, shared by every request.
pub struct ChatService {
    model: Arc<dyn CompletionPort>,
    model_id: String,
    runner: Arc<ToolRunner>,
    ledger: Arc<GrantLedger>,
    system_prompt: String,
    limits: RunLimits,
    settings: ModelSettings,
    select: Option<ToolSelection>,
    approvals: Approvals,
    transcript: TranscriptStore,
}

impl std::fmt::Debug for ChatService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatService")
            .field("model_id", &self.model_id)
            .field("runner", &self.runner)
            .finish_non_exhaustive()
    }
}

/// Forwards a call's events into a channel of events.
struct Forward(std::sync::Mutex<Vec<AiEvent>>);

impl EventSink for Forward {
    fn emit(&self, event: AiEvent) {
        if let Ok(mut events) = self.0.lock() {
            events.push(event);
        }
    }
}

/// One response's encoder.
enum Wire {
    Ui(UiStreamEncoder),
    Data(DataStreamEncoder),
}

/// UI message stream chunks as SSE frames.
fn sse_frames(chunks: Vec<Value>) -> Vec<Bytes> {
    chunks
        .iter()
        .map(|chunk| Bytes::from(UiStreamEncoder::sse(chunk)))
        .collect()
}

/// Data stream lines as frames.
fn line_frames(lines: Vec<String>) -> Vec<Bytes> {
    lines.into_iter().map(Bytes::from).collect()
}

impl Wire {
    fn frames(
        &mut self,
        event: &AiEvent,
        approval: &dyn Fn(&str, &str, &str) -> String,
    ) -> Vec<Bytes> {
        match self {
            Self::Ui(encoder) => sse_frames(encoder.event(event, approval)),
            Self::Data(encoder) => line_frames(encoder.event(event, approval)),
        }
    }

    fn denied(&mut self, call_id: &str) -> Vec<Bytes> {
        match self {
            Self::Ui(encoder) => sse_frames(encoder.denied(call_id)),
            Self::Data(encoder) => line_frames(encoder.denied(call_id)),
        }
    }

    fn tool_error(&mut self, call_id: &str, text: &str) -> Vec<Bytes> {
        match self {
            Self::Ui(encoder) => sse_frames(encoder.tool_error(call_id, text)),
            Self::Data(encoder) => line_frames(encoder.tool_error(call_id, text)),
        }
    }

    fn finish(&mut self) -> Vec<Bytes> {
        match self {
            Self::Ui(encoder) => {
                let mut frames = sse_frames(encoder.finish());
                frames.push(Bytes::from_static(crate::ui_stream::DONE.as_bytes()));
                frames
            }
            Self::Data(encoder) => line_frames(encoder.finish()),
        }
    }

    fn heartbeat(&self) -> Option<Bytes> {
        match self {
            Self::Ui(_) => Some(Bytes::from_static(b": keep-alive\n\n")),
            Self::Data(_) => None,
        }
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::Ui(_) => crate::ui_stream::HEADERS,
            Self::Data(_) => crate::data_stream::HEADERS,
        }
    }
}

impl ChatService {
    /// Builds the service: the runner gets a grant ledger as its approver, so calls
    /// that need an approval are offered and run only with a server-checked grant.
    pub fn new(setup: ChatSetup) -> Result<Self, CatalogError> {
        let ledger = Arc::new(GrantLedger::new());
        let runner = ToolRunner::new(setup.tools, setup.policy)?
            .with_approver(Arc::clone(&ledger) as Arc<dyn ai_core::approval::Approver>);
        Ok(Self {
            model: setup.model,
            model_id: setup.model_id,
            runner: Arc::new(runner),
            ledger,
            system_prompt: setup.system_prompt,
            limits: setup.limits,
            settings: setup.settings,
            select: setup.select,
            approvals: Approvals::random(),
            transcript: TranscriptStore::default(),
        })
    }

    /// Uses this approval key and lifetime instead of a random key (ids then
    /// survive restarts of servers sharing the key).
    pub fn with_approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }

    fn catalog(&self, ctx: &RunContext) -> ToolCatalog {
        let catalog = self.runner.catalog(ctx);
        match &self.select {
            Some(select) => select(catalog),
            None => catalog,
        }
    }

    /// The tools offered, with effect and decision, for UIs.
    pub fn tools_listing(&self) -> Value {
        let ctx = RunContext::generate();
        let catalog = self.catalog(&ctx);
        let tools: Vec<Value> = catalog
            .specs()
            .iter()
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
            .route_layer(middleware::from_fn_with_state(
                Arc::clone(&access),
                crate::access::page_layer,
            ));
        let api = Router::new()
            .route("/api/chat", post(chat))
            .route("/api/tools", get(tools))
            .route_layer(middleware::from_fn_with_state(
                access,
                crate::access::api_layer,
            ));
        page.merge(api).with_state(state)
    }

    /// Streams one checked request's response into `tx` until it ends or the
    /// client goes away (then the run is cancelled).
    async fn respond(
        self: Arc<Self>,
        chat: ChatRequest,
        mut wire: Wire,
        tx: mpsc::Sender<Bytes>,
        heartbeat: Duration,
    ) {
        let context = RunContext::generate();
        let catalog = self.catalog(&context);
        let chat_id = chat.chat_id.clone();
        let approval =
            |call: &str, tool: &str, hash: &str| self.approvals.issue(&chat_id, call, tool, hash);
        let mut history = vec![Message::system(self.system_prompt.clone())];
        history.extend(chat.history);
        let cancel = ai_core::CancellationToken::new();
        // The decisions of a continuation, in order: a refused approval runs nothing.
        for decision in &chat.decisions {
            let frames = match self.approvals.redeem(
                &decision.approval_id,
                &chat.chat_id,
                &decision.tool_call_id,
                &decision.tool_name,
                &decision.args_hash,
            ) {
                Err(error) => {
                    tracing::warn!(chat = %ai_core::text::log_field(&chat.chat_id), error = %error, "approval refused");
                    history.push(Message::tool(
                        decision.tool_call_id.clone(),
                        format!("The call did not run: {error}."),
                    ));
                    wire.tool_error(
                        &decision.tool_call_id,
                        &format!("approval refused: {error}"),
                    )
                }
                Ok(()) if !decision.approved => {
                    let content = match &decision.reason {
                        Some(reason) => format!("{DENIED} Reason: {reason}"),
                        None => DENIED.to_owned(),
                    };
                    history.push(Message::tool(decision.tool_call_id.clone(), content));
                    wire.denied(&decision.tool_call_id)
                }
                Ok(()) => {
                    self.ledger.insert(ApprovalGrant {
                        run_id: context.run_id.clone(),
                        tool_call_id: decision.tool_call_id.clone(),
                        tool_id: decision.tool_name.clone(),
                        args_hash: decision.args_hash.clone(),
                    });
                    let sink = Forward(std::sync::Mutex::new(Vec::new()));
                    let arguments = canonical_json(&decision.args);
                    let exec = self
                        .runner
                        .exec(
                            &context,
                            &catalog,
                            ToolCall::new(&decision.tool_call_id, &decision.tool_name, &arguments),
                            &cancel,
                            &sink,
                        )
                        .await;
                    self.transcript.store(
                        &chat.chat_id,
                        &decision.tool_call_id,
                        arguments,
                        exec.model_content.clone(),
                    );
                    history.push(Message::tool(
                        decision.tool_call_id.clone(),
                        exec.model_content,
                    ));
                    let events = sink.0.into_inner().unwrap_or_default();
                    events
                        .iter()
                        .flat_map(|e| wire.frames(e, &approval))
                        .collect()
                }
            };
            for frame in frames {
                if tx.send(frame).await.is_err() {
                    return;
                }
            }
        }
        let mut request = RunRequest::new(context, self.model_id.clone(), history);
        request.limits = self.limits.clone();
        request.settings = self.settings.clone();
        request.defer_approvals = true;
        let handle = agent_graph::run(
            request,
            RunDeps {
                model: Arc::clone(&self.model),
                runner: Arc::clone(&self.runner),
                catalog: Arc::new(catalog),
            },
        );
        let stop = handle.cancel_token();
        let (mut events, outcome) = handle.into_parts();
        let mut gone = false;
        let mut beat = tokio::time::interval(heartbeat.max(Duration::from_millis(10)));
        beat.tick().await;
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                () = tx.closed() => { gone = true; break; }
                _ = beat.tick() => {
                    if let Some(frame) = wire.heartbeat()
                        && tx.send(frame).await.is_err()
                    {
                        gone = true;
                        break;
                    }
                    continue;
                }
            };
            let Some(event) = event else { break };
            for frame in wire.frames(&event, &approval) {
                if tx.send(frame).await.is_err() {
                    gone = true;
                    break;
                }
            }
            if gone {
                break;
            }
        }
        // A client that went away cancels the run (model stream and tools); the run
        // still ends with its one `done`, which nobody reads.
        if gone {
            stop.cancel();
        }
        drop(events);
        if let Ok(output) = outcome.await {
            remember(&self.transcript, &chat.chat_id, &output.messages);
        }
        if !gone {
            for frame in wire.finish() {
                if tx.send(frame).await.is_err() {
                    break;
                }
            }
        }
    }
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
struct AppState {
    service: Arc<ChatService>,
    access: Arc<Access>,
    streams: Arc<ClientSlots>,
}

/// The `protocol` query parameter (`None` when absent).
fn protocol(uri: &Uri) -> Option<&str> {
    uri.query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("protocol="))
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

async fn tools(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.service.tools_listing().to_string(),
    )
        .into_response()
}

/// The request body, within the size and time limits.
async fn read_body(access: &Access, body: Body) -> Result<Bytes, Response> {
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

async fn chat(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    uri: Uri,
    body: Body,
) -> Response {
    let data = match protocol(&uri) {
        None | Some("ui") => false,
        Some("data") => true,
        Some(_) => {
            return invalid(&ContractError {
                path: "?protocol".into(),
                message: "must be \"ui\" or \"data\"".into(),
            });
        }
    };
    let bytes = match read_body(&state.access, body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let chat = match contract::parse(&bytes, &state.service.transcript) {
        Ok(chat) => chat,
        Err(error) => return invalid(&error),
    };
    let client = peer.map(|Extension(ConnectInfo(addr))| ClientKey::of(addr.ip()));
    let Some(permit) = state.streams.try_acquire(client) else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "too many open streams; try again",
        );
    };
    let message_id = chat
        .continuing
        .as_ref()
        .map(|(id, _)| id.clone())
        .or_else(|| chat.message_id.clone())
        .unwrap_or_else(|| format!("msg-{}", uuid::Uuid::new_v4()));
    let known: Vec<String> = chat
        .continuing
        .as_ref()
        .map(|(_, calls)| calls.clone())
        .unwrap_or_default();
    let wire = match (data, chat.continuing.is_some()) {
        (false, false) => Wire::Ui(UiStreamEncoder::new(message_id)),
        (false, true) => Wire::Ui(UiStreamEncoder::continuing(message_id, known)),
        (true, false) => Wire::Data(DataStreamEncoder::new(message_id)),
        (true, true) => Wire::Data(DataStreamEncoder::continuing(message_id, known)),
    };
    let headers = wire.headers();
    let (tx, mut rx) = mpsc::channel::<Bytes>(64);
    let service = Arc::clone(&state.service);
    let heartbeat = state.access.heartbeat;
    tokio::spawn(async move {
        service.respond(chat, wire, tx, heartbeat).await;
        drop(permit);
    });
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .map(Ok::<Bytes, std::convert::Infallible>);
    let mut response = Response::new(Body::from_stream(stream));
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
