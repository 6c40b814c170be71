//! The chat endpoint on a route of the caller's own axum router: a request
//! answered by a [`ChatService`] (approvals, the run store, graphs and
//! reattach as on [`ChatService::router`]), or a bare run streamed as the UI
//! message stream or AI SDK 4's data stream.

use std::sync::Arc;

use agent_graph::RunHandle;
use axum::Extension;
use axum::extract::{Query, Request, State};
use axum::response::Response;
use chat_protocol::StreamEncoder;
use chat_protocol::data_stream::DataStreamEncoder;
use chat_protocol::stream::ApprovalIssuer;
use chat_protocol::ui_stream::UiStreamEncoder;
use futures::StreamExt;

use crate::access::{Access, Account};
use crate::listener::ClientSlots;
use crate::server::{AppState, ChatService};

impl ChatService {
    /// Answers one chat request (the body `useChat` sends; `?protocol=data`
    /// for AI SDK 4's data stream) on a route of the caller's own router, as
    /// `account`: the same checks, approvals, store records and stream as
    /// `POST /api/chat` of [`ChatService::router`]. The caller authenticates
    /// the request (its own middleware or extractor) and names the account;
    /// the body and stream limits are [`Access`]'s defaults.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use agent_server::{ChatService, access::Account};
    /// use axum::{Router, extract::{Request, State}, routing::post};
    ///
    /// async fn chat(State(service): State<Arc<ChatService>>, request: Request) -> axum::response::Response {
    ///     // Your own authentication decides the account.
    ///     service.serve_chat(Account("alice".into()), request).await
    /// }
    /// # fn app(service: Arc<ChatService>) -> Router {
    /// Router::new().route("/my/chat", post(chat)).with_state(service)
    /// # }
    /// ```
    pub async fn serve_chat(self: &Arc<Self>, account: Account, request: Request) -> Response {
        let (access, streams) = self.own_routes();
        let state = AppState {
            service: Arc::clone(self),
            access,
            streams,
        };
        let (parts, body) = request.into_parts();
        let query = Query::try_from_uri(&parts.uri);
        crate::chat::chat(State(state), Extension(account), query, parts.headers, body).await
    }
}

/// `run`'s events as an AI SDK UI message stream response (the protocol
/// `useChat` of `ai` 5, 6 and 7 reads), for a route of the caller's own
/// router. Dropping the response (the client went away) cancels the run.
///
/// This is the stream alone: no request contract, store or approvals. A
/// call that pauses for an approval shows its request with the call id as
/// its approval id, which nothing redeems; serve such agents with
/// [`ChatService::serve_chat`].
pub fn run_response(run: RunHandle) -> Response {
    let encoder = UiStreamEncoder::new(message_id(&run));
    respond(run, encoder)
}

/// [`run_response`] as AI SDK 4's data stream (`x-vercel-ai-data-stream: v1`,
/// one `CODE:JSON` line per part: what `useChat` of `ai` 4 and assistant-ui's
/// data-stream transport read), with the same limits: no request contract,
/// store or approvals.
pub fn run_data_stream_response(run: RunHandle) -> Response {
    let encoder = DataStreamEncoder::new(message_id(&run));
    respond(run, encoder)
}

/// The id of the one assistant message a bare run streams.
fn message_id(run: &RunHandle) -> String {
    format!("msg-{}", run.run_id())
}

/// `run`'s events through `encoder`, as a streamed response; dropping it
/// cancels the run.
fn respond(run: RunHandle, mut encoder: impl StreamEncoder + 'static) -> Response {
    let headers = encoder.headers();
    let sign = |binding: &ai_core::approval::ApprovalBinding| binding.tool_call_id.clone();
    let mut events = run.into_events();
    let mut done = false;
    let batches = futures::stream::poll_fn(move |cx| {
        if done {
            return std::task::Poll::Ready(None);
        }
        match events.poll_next_unpin(cx) {
            std::task::Poll::Ready(Some(event)) => {
                let issuer = ApprovalIssuer {
                    scope: "",
                    sign: &sign,
                };
                std::task::Poll::Ready(Some(encoder.frames(&event, issuer)))
            }
            std::task::Poll::Ready(None) => {
                done = true;
                std::task::Poll::Ready(Some(encoder.end()))
            }
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    });
    crate::server::streaming(headers, batches.flat_map(futures::stream::iter))
}

impl ChatService {
    /// The limits and stream slots of requests answered with
    /// [`ChatService::serve_chat`].
    fn own_routes(&self) -> (Arc<Access>, Arc<ClientSlots>) {
        let (access, slots) = self.own_routes.get_or_init(|| {
            let access = Access::tokens(Vec::new());
            let slots = ClientSlots::new(access.max_streams, access.max_streams_per_client());
            (Arc::new(access), slots)
        });
        (Arc::clone(access), Arc::clone(slots))
    }
}
