//! What the server tells an exporter about its traffic: plain `tracing` spans
//! under the target [`TARGET`], which an exporter may measure (agent-telemetry
//! turns them into `http.server.request.duration` and the open-stream count)
//! and which cost a disabled callsite's check when nothing listens.
//!
//! - `http_request`: one per routed request, with `http.request.method`,
//!   `http.route` (the route's pattern, never the path with its ids) and
//!   `http.response.status_code`; it ends when the handler answers (for a
//!   streamed chat, when the stream's headers go out).
//! - `chat_stream`: one per open response stream (a chat's, or a reattached
//!   one), from the moment its slot is taken to the moment it is freed.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::field::Empty;

/// The `tracing` target of the traffic spans.
pub const TARGET: &str = "agent_server::traffic";

/// Measures one routed request (an axum `route_layer`).
pub(crate) async fn request_span(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(String::new, |path| path.as_str().to_owned());
    let span = tracing::info_span!(
        target: TARGET,
        "http_request",
        http.request.method = %request.method(),
        http.route = %route,
        http.response.status_code = Empty,
    );
    let response = next.run(request).await;
    span.record("http.response.status_code", response.status().as_u16());
    response
}

/// The span of one open response stream.
pub(crate) fn stream_span() -> tracing::Span {
    tracing::info_span!(target: TARGET, "chat_stream")
}
