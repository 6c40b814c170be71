//! `POST /api/chat`: a checked request becomes a run.
//!
//! With a run store the thread is the truth and the run owner
//! (`agent_durable::Runs`) records the run from its first moment:
//!
//! 1. The request is planned on the thread as stored ([`crate::plan`]): its
//!    history continues the stored thread, its client tool outputs are
//!    checked, its approval ids verified.
//! 2. The run owner opens the turn in one transaction: the decisions the
//!    request carries (approvals, denials, client tool outputs) recorded once
//!    per call with their approval ids used up, the thread claimed, the run
//!    and the user's message (with its id) stored, all before the model is
//!    called. A call decided before, by any request or approval id, is
//!    answered from that record: the response follows the run that carried
//!    the decision out, and nothing runs again. A chat with a run running is
//!    waited for (two sends to one chat are ordered: the second is planned
//!    again on the thread the first left), at most [`BUSY_WAIT`], then
//!    refused with `409 chat_busy`.
//! 3. The response streams the run ([`crate::relay`]), or, with a durable
//!    engine, follows it from the store while the engine runs it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use agent_durable::engine::Submitted;
use agent_durable::{RunSpec, RunsError, ThreadTurn};
use agent_graph::Graph;
use agent_graph::journal::RunStart;
use agent_graph::prompt::Params;
use agent_graph::run::{PAUSED_RUN_VERSION, PausedRun, RunDeps};
use agent_store::TurnMessage;
use ai_core::{Message, RunContext};
use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chat_protocol::StreamEncoder;
use chat_protocol::contract::{self, ChatRequest, RequestError};

use crate::plan::{Plan, Redeemed};
use crate::relay::{Client, Live, Relay};
use crate::server::{AppState, ChatRef, ChatService, ScopedTranscript, invalid, refuse, scope};

/// How long a request waits for another run of its chat to end before it is
/// refused with `409 chat_busy`.
pub(crate) const BUSY_WAIT: Duration = Duration::from_secs(30);
/// How often it looks meanwhile.
const BUSY_POLL: Duration = Duration::from_millis(100);

/// The chat endpoint's query: which stream protocol to answer in.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ChatQuery {
    /// `ui` (the UI message stream, the default) or `data` (AI SDK 4's data stream).
    protocol: Option<String>,
}

/// What a run's record says of it: its graph, model and prompt hash.
pub(crate) type RecordOf = (String, String, Option<String>);

/// A run started for a response.
struct Started {
    live: Live,
    cancel: tokio_util::sync::CancellationToken,
}

/// What a planned request became.
enum Launched {
    /// A run in this process.
    Started(Started),
    /// A run handed to the durable engine (followed from the store).
    Submitted(String),
}

/// Why a planned request did not start: the run owner's refusal (the caller
/// waits, follows or plans again), or a response already.
enum NotLaunched {
    Runs(RunsError),
    Refused(Response),
}

impl From<RunsError> for NotLaunched {
    fn from(error: RunsError) -> Self {
        Self::Runs(error)
    }
}

/// A checked request, scoped to its account, with what answers it.
struct Request {
    chat: ChatRequest,
    chat_ref: ChatRef,
    graph: Arc<Graph>,
    /// The chat's stored messages, read with its graph (for the first plan).
    stored: Option<Vec<agent_store::StoredMessage>>,
    context: RunContext,
    encoder: Box<dyn StreamEncoder>,
}

pub(crate) async fn chat(
    State(state): State<AppState>,
    Extension(account): Extension<crate::access::Account>,
    query: Result<Query<ChatQuery>, axum::extract::rejection::QueryRejection>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Response {
    let protocol = match &query {
        Ok(Query(query)) => query.protocol.clone(),
        Err(_) => Some(String::new()),
    };
    let bytes = match crate::server::read_body(&state.access, body).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    let service = Arc::clone(&state.service);
    let request = match checked(&service, account, &bytes, (protocol.as_deref(), &headers)).await {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let client = crate::listener::ClientKey::account(&request.chat_ref.account);
    let Some(permit) = state.streams.try_acquire(Some(client)) else {
        return too_many_streams();
    };
    let Request {
        chat,
        mut chat_ref,
        graph,
        mut stored,
        context,
        mut encoder,
    } = request;
    let deadline = tokio::time::Instant::now() + BUSY_WAIT;
    let mut replayed = HashSet::new();
    loop {
        let mut attempt = chat.clone();
        let plan = match service
            .plan(&mut attempt, &chat_ref, (&replayed, stored.take()))
            .await
        {
            Ok(plan) => plan,
            Err(refused) => return refused,
        };
        let warnings = plan.warnings.clone();
        chat_ref.title = title_of(&attempt.history);
        let launched = service
            .launch(&graph, &mut attempt, &chat_ref, (context.clone(), plan))
            .await;
        let refusal = match launched {
            Err(NotLaunched::Refused(refused)) => return refused,
            Err(NotLaunched::Runs(refusal)) => refusal,
            Ok(launched) => {
                for warning in warnings {
                    encoder.warn(warning);
                }
                return match launched {
                    Launched::Started(started) => {
                        stream_run(&state, service, chat_ref, started, (encoder, permit))
                    }
                    Launched::Submitted(run_id) => {
                        drop(permit);
                        follow(service, &chat_ref, &run_id, encoder).await
                    }
                };
            }
        };
        match service
            .refused(refusal, (&chat_ref, deadline), &mut replayed)
            .await
        {
            Ok(()) => {}
            Err(Refused::Follow(run_id)) => {
                return follow(service, &chat_ref, &run_id, encoder).await;
            }
            Err(Refused::Answer(response)) => return response,
        }
    }
}

/// The answer when every stream slot is taken.
fn too_many_streams() -> Response {
    refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        "too many open streams; try again",
    )
}

/// What a refused start comes to when the request does not plan again.
enum Refused {
    /// Follow the run that carried the request's decisions out.
    Follow(String),
    /// This response.
    Answer(Response),
}

impl ChatService {
    /// What the run owner's `refusal` of a planned request means: wait for
    /// the chat's running run (until `deadline`), or mark a replayed approval
    /// invalid, and plan again (`Ok`); or follow the run that decided a call
    /// before; or answer.
    async fn refused(
        &self,
        refusal: RunsError,
        (chat_ref, deadline): (&ChatRef, tokio::time::Instant),
        replayed: &mut HashSet<String>,
    ) -> Result<(), Refused> {
        match refusal {
            RunsError::Busy(run) => self
                .wait_idle(chat_ref, (&run, deadline))
                .await
                .map_err(Refused::Answer),
            RunsError::DecidedBefore { call_id, run_id } => {
                tracing::info!(call = %ai_core::text::log_field(&call_id), "a call decided before is answered from its record");
                Err(Refused::Follow(run_id))
            }
            RunsError::Replayed { call_id } => {
                replayed.insert(call_id);
                Ok(())
            }
            // A run that ended since the plan stored its answer: plan again
            // from the thread as it is now.
            RunsError::Moved => Ok(()),
            RunsError::Store(error) => Err(Refused::Answer(store_failed(&error))),
            other => {
                tracing::error!(error = %other, "the run could not start");
                Err(Refused::Answer(refuse(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the conversation store is not available; try again",
                )))
            }
        }
    }
}

/// The caller's W3C trace context (the `traceparent` and `tracestate`
/// headers): the run continues it; a new trace starts when there is none or it
/// is malformed (and a `tracestate` goes with its `traceparent` only).
fn trace_context(headers: &axum::http::HeaderMap) -> RunContext {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    RunContext::from_traceparent(header("traceparent")).with_trace_state(header("tracestate"))
}

/// The request in `bytes`, checked, of `account`'s chat, with the graph it
/// runs and the encoder of its response.
async fn checked(
    service: &Arc<ChatService>,
    account: crate::access::Account,
    bytes: &[u8],
    (protocol, headers): (Option<&str>, &axum::http::HeaderMap),
) -> Result<Request, Response> {
    let transcript = ScopedTranscript::new(service.transcript(), account.name());
    let mut chat =
        contract::parse(bytes, &transcript, service.limits()).map_err(|e| invalid(&e))?;
    let client_id = std::mem::take(&mut chat.chat_id);
    chat.chat_id = scope(account.name(), &client_id);
    let chat_ref = ChatRef {
        scoped: chat.chat_id.clone(),
        id: client_id,
        account: account.0,
        title: String::new(),
    };
    let (graph, stored) = service
        .graph_for(&chat_ref, chat.graph.as_deref())
        .await
        .map_err(|refusal| refusal.response())?;
    let context = trace_context(headers).with_conversation_id(chat_ref.id.clone());
    let encoder = encoder(protocol, &chat, &context.run_id).map_err(|e| invalid(&e))?;
    Ok(Request {
        chat,
        chat_ref,
        graph,
        stored,
        context,
        encoder,
    })
}

/// The response that follows run `run_id` of the chat from the store.
async fn follow(
    service: Arc<ChatService>,
    chat_ref: &ChatRef,
    run_id: &str,
    encoder: Box<dyn StreamEncoder>,
) -> Response {
    let (account, id) = (chat_ref.account.clone(), chat_ref.id.clone());
    crate::chats::follow_run(
        service,
        (&account, &id),
        chat_ref.scoped.clone(),
        run_id,
        Some(encoder),
    )
    .await
    .unwrap_or_else(|| StatusCode::NO_CONTENT.into_response())
}

/// The response streaming `started` to its client.
fn stream_run(
    state: &AppState,
    service: Arc<ChatService>,
    chat: ChatRef,
    started: Started,
    (encoder, permit): (Box<dyn StreamEncoder>, crate::listener::Slot),
) -> Response {
    let headers = encoder.headers();
    let (tx, rx) = futures::channel::mpsc::channel::<Bytes>(64);
    let replay = service
        .active()
        .open(&chat.scoped, headers, started.cancel.clone());
    let relay = Relay {
        heartbeat: state.access.heartbeat,
        detach_grace: state.access.detach_grace,
        write_timeout: state.access.write_timeout,
        replay,
        stop: started.cancel,
    };
    let gone = tokio_util::sync::CancellationToken::new();
    let client = Client {
        tx,
        _slot: Some(permit),
        gone: gone.clone(),
    };
    tokio::spawn(async move {
        service
            .respond(chat, started.live, encoder, Some(client), relay)
            .await;
    });
    crate::server::streaming(
        headers,
        crate::server::watched(crate::server::coalesced(rx), gone),
    )
}

/// A new thread's title: from the history's first user message.
fn title_of(history: &[Message]) -> String {
    history
        .iter()
        .find_map(|m| match m {
            Message::User { content, .. } => Some(agent_store::title_from(content)),
            _ => None,
        })
        .unwrap_or_else(|| agent_store::title_from(""))
}

/// The id of the message a response to `chat` streams, answering with run
/// `run_id`: the message the request continues, else a new one's.
pub(crate) fn encoder_message_id(chat: &ChatRequest, run_id: &str) -> String {
    chat.continuing
        .as_ref()
        .map_or_else(|| crate::server::answer_id(run_id), |(id, _)| id.clone())
}

/// The encoder of a response to `chat` in `protocol`, answering with run
/// `run_id`.
fn encoder(
    protocol: Option<&str>,
    chat: &ChatRequest,
    run_id: &str,
) -> Result<Box<dyn StreamEncoder>, RequestError> {
    use chat_protocol::data_stream::DataStreamEncoder;
    use chat_protocol::ui_stream::UiStreamEncoder;
    // As the AI SDK's own server: the response continues the last message only
    // when the request continues it; anything else is a new message.
    let message_id = encoder_message_id(chat, run_id);
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

impl ChatService {
    /// Waits until the chat's run `run` (or whichever runs then) ends, at
    /// most until `deadline`; then `409 chat_busy`.
    async fn wait_idle(
        &self,
        chat_ref: &ChatRef,
        (run, deadline): (&str, tokio::time::Instant),
    ) -> Result<(), Response> {
        let Some(runs) = self.runs() else {
            return Err(busy(run));
        };
        let rows = runs.store().account(chat_ref.account.clone());
        loop {
            match rows.running_run(&chat_ref.id).await {
                Ok(None) => return Ok(()),
                Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(BUSY_POLL).await;
                }
                Ok(Some(running)) => return Err(busy(&running.run.id)),
                Err(error) => return Err(store_failed(&error)),
            }
        }
    }

    /// Starts the run `plan` says, recorded by the run owner when the service
    /// has a store (its turn, with its decisions, opened before the model is
    /// called), or hands it to the durable engine.
    async fn launch(
        &self,
        graph: &Graph,
        chat: &mut ChatRequest,
        chat_ref: &ChatRef,
        (context, plan): (RunContext, Plan),
    ) -> Result<Launched, NotLaunched> {
        let run_id = context.run_id.to_string();
        let answer_id = encoder_message_id(chat, &run_id);
        let turn = turn_messages(chat, plan.kept, &run_id);
        let (start, record, deps) = match self.prepare_start(graph, chat, context, plan.redeemed) {
            Ok(prepared) => prepared,
            Err(error) => {
                tracing::error!(%error, "the graph could not be prepared");
                return Err(NotLaunched::Refused(refuse(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "graph_unavailable",
                    "the server's graph could not be prepared for this chat",
                )));
            }
        };
        let Some(runs) = self.runs() else {
            let handle = agent_graph::run::start(start, deps);
            let (live, cancel) = Live::plain(handle);
            return Ok(Launched::Started(Started { live, cancel }));
        };
        let mut spec = RunSpec::new(chat_ref.account.clone(), record)
            .with_answer_id(answer_id)
            .with_decisions(plan.decisions);
        if let Some(kept) = plan.kept {
            let mut thread =
                ThreadTurn::new(chat_ref.id.clone(), chat_ref.title.clone(), kept, turn);
            if let Some(seen) = plan.seen {
                thread = thread.with_seen(seen);
            }
            spec = spec.with_thread(thread);
        }
        if runs.engine().is_some() {
            if let Submitted::Queued(error) = runs.submit(&spec, start).await? {
                tracing::info!(%error, run_id = %run_id, "the run waits, stored, for the durable engine");
            }
            return Ok(Launched::Submitted(run_id));
        }
        let run = runs.start(spec, start, deps).await?;
        let cancel = run.cancel_token();
        Ok(Launched::Started(Started {
            live: Live::Recorded(Box::new(run)),
            cancel,
        }))
    }

    /// What a checked request starts: the graph prepared on its history, as a
    /// new run or as the continuation of a paused one with the user's decisions
    /// (each approval id checked against the server's key: a forged, expired,
    /// used or edited one is an invalid decision, and nothing of it runs); and
    /// what its record says (graph, model, prompt hash).
    pub(crate) fn prepare_start(
        &self,
        graph: &Graph,
        chat: &mut ChatRequest,
        context: RunContext,
        redeemed: Option<Redeemed>,
    ) -> Result<(RunStart, RecordOf, RunDeps), agent_graph::graph::GraphError> {
        let history = std::mem::take(&mut chat.history);
        let mut prepared = graph.prepare(
            context,
            self.runner(),
            self.model_id(),
            history,
            &Params::new(),
        )?;
        prepared.request.defer_approvals = true;
        let record = (
            graph.name.clone(),
            self.model_id().to_owned(),
            prepared.request.prompt_hash.clone(),
        );
        let deps = prepared.deps(Arc::clone(self.model()), Arc::clone(self.runner()));
        let start = match redeemed {
            None => RunStart::New {
                request: prepared.request,
            },
            Some((pending, decisions)) => {
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
            }
        };
        Ok((start, record, deps))
    }
}

/// The messages a turn adds to the thread: the history past the stored ones
/// it keeps (the user's new message, and results the request settled), the
/// user's message known by the id its client gave it (else `u-<run id>`).
pub(crate) fn turn_messages(
    chat: &ChatRequest,
    kept: Option<usize>,
    run_id: &str,
) -> Vec<TurnMessage> {
    let from = kept.unwrap_or(chat.history.len()).min(chat.history.len());
    let last_user = chat.history[from..]
        .iter()
        .rposition(|m| matches!(m, Message::User { .. }));
    chat.history[from..]
        .iter()
        .enumerate()
        .map(|(i, message)| TurnMessage {
            id: (Some(i) == last_user).then(|| {
                chat.user_message_id
                    .clone()
                    .unwrap_or_else(|| agent_durable::prompt_id(run_id))
            }),
            message: message.clone(),
        })
        .collect()
}

/// `409 chat_busy`: another answer of the chat (`run`) is running.
pub(crate) fn busy(run: &str) -> Response {
    tracing::debug!(run_id = %ai_core::text::log_field(run), "a send to a busy chat is refused");
    refuse(
        StatusCode::CONFLICT,
        "chat_busy",
        "another answer of this chat is still running; send again when it ends",
    )
}

/// `503 store_unavailable`.
pub(crate) fn store_failed(error: &agent_store::StoreError) -> Response {
    tracing::error!(%error, "the run store failed");
    refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        "the conversation store is not available; try again",
    )
}
