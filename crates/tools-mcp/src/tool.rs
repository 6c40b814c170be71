//! The executor of one MCP tool: checks availability and the server's own schema,
//! calls `tools/call` with a timeout, cancellation and removal watch, and converts
//! the result.

use std::sync::Arc;
use std::time::Duration;

use ai_core::{
    text::bound_text,
    tool::{ToolCallContext, ToolErrorCode, ToolExecutor, ToolFailure, ToolOutput},
};
use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use serde_json::Value;

use crate::content;
use crate::server::Server;

/// Runs one tool of one server.
pub(crate) struct McpTool {
    pub(crate) server: Arc<Server>,
    /// The tool's name on the server.
    pub(crate) name: String,
    /// The definition hash the tool was registered with.
    pub(crate) hash: String,
    /// Validator of the server's original input schema, in its own draft.
    pub(crate) input: Arc<jsonschema::Validator>,
    /// Validator of the server's original output schema, when declared.
    pub(crate) output: Option<Arc<jsonschema::Validator>>,
    pub(crate) call_timeout: Duration,
}

impl McpTool {
    fn check(&self) -> Result<(), String> {
        let server = self.server.id();
        match self.server.tool(&self.name) {
            None => Err(format!("the MCP server `{server}` does not list this tool")),
            Some(state) => match state.unavailable(server) {
                Some(reason) => Err(reason),
                None if state.hash != self.hash => Err(format!(
                    "its definition on MCP server `{server}` changed while running; \
                     accept it with `agent mcp pin {server}`"
                )),
                None => Ok(()),
            },
        }
    }
}

fn failure(code: ToolErrorCode, message: impl Into<String>) -> ToolFailure {
    ToolFailure::new(code, message)
}

/// How long telling a server that a call is cancelled may take.
const CANCEL_SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Sends `notifications/cancelled` for a request in flight: awaited where the call
/// ends (cancel, timeout, removal), so it is written before anything closes the
/// connection; from `Drop` (a future dropped mid-call) on a task of its own.
struct InFlight {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    tracker: tokio_util::task::TaskTracker,
}

impl InFlight {
    async fn cancel(mut self, reason: &str) {
        if let Some(id) = self.id.take() {
            let notice = CancelledNotificationParam::new(Some(id), Some(reason.to_owned()));
            let _ =
                tokio::time::timeout(CANCEL_SEND_TIMEOUT, self.peer.notify_cancelled(notice)).await;
        }
    }

    fn answered(mut self) {
        self.id = None;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(id) = self.id.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let peer = self.peer.clone();
            let notice =
                CancelledNotificationParam::new(Some(id), Some("request abandoned".into()));
            self.tracker.spawn(async move {
                let _ =
                    tokio::time::timeout(CANCEL_SEND_TIMEOUT, peer.notify_cancelled(notice)).await;
            });
        }
    }
}

/// The `_meta` key that carries a call's idempotency key to the server.
pub const IDEMPOTENCY_META_KEY: &str = "agent/idempotency-key";

/// The `_meta` of a `tools/call`: the call's idempotency key (the same when a
/// durable run runs the call again), for servers that dedupe on it, and, when
/// the run has a W3C trace, `traceparent` and `tracestate` (how the
/// OpenTelemetry conventions for MCP carry trace context: in the request's
/// `_meta`, whatever the transport).
fn call_meta(key: &str, run: &ai_core::RunContext) -> rmcp::model::RequestMetaObject {
    let mut meta = serde_json::Map::new();
    meta.insert(IDEMPOTENCY_META_KEY.into(), Value::String(key.to_owned()));
    if let Some((parent, state)) = ai_core::trace::outgoing_headers(run) {
        meta.insert("traceparent".into(), Value::String(parent));
        if let Some(state) = state {
            meta.insert("tracestate".into(), Value::String(state));
        }
    }
    rmcp::model::RequestMetaObject(rmcp::model::MetaObject(meta))
}

impl ToolExecutor for McpTool {
    fn availability(&self) -> Result<(), String> {
        self.check()
    }

    fn execute(
        &self,
        cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        let server = Arc::clone(&self.server);
        let name = self.name.clone();
        let input = Arc::clone(&self.input);
        let output = self.output.clone();
        let timeout = self.call_timeout;
        let available = self.check();
        let hash = self.hash.clone();
        let key = cx.idempotency_key();
        // Read here, inside the tool call's span, not in the spawned send.
        let meta = call_meta(&key, &cx.run);
        Box::pin(async move {
            available.map_err(|reason| failure(ToolErrorCode::ExecutionFailed, reason))?;
            if !input.is_valid(&args) {
                return Err(failure(
                    ToolErrorCode::InvalidArgs,
                    "the arguments do not match the MCP server's input schema",
                ));
            }
            let Value::Object(arguments) = args else {
                return Err(failure(
                    ToolErrorCode::InvalidArgs,
                    "the arguments must be a JSON object",
                ));
            };
            let peer = server.peer().await?;
            let mut changes = server.watch();
            let mut params = CallToolRequestParams::new(name.clone()).with_arguments(arguments);
            params.meta = Some(meta);
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let handle = match peer
                .send_request_with_option(request, PeerRequestOptions::no_options())
                .await
            {
                Ok(handle) => handle,
                Err(error) => {
                    server.lost(&error.to_string()).await;
                    return Err(failure(
                        ToolErrorCode::ExecutionFailed,
                        format!(
                            "the call to MCP server `{}` could not be sent: {error}",
                            server.id()
                        ),
                    ));
                }
            };
            let in_flight = InFlight {
                peer: peer.clone(),
                id: Some(handle.id.clone()),
                tracker: server.cancels().clone(),
            };
            let call = handle.await_response();
            tokio::pin!(call);
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            // Every early exit tells the server the request is cancelled.
            let result = loop {
                tokio::select! {
                    result = &mut call => break result,
                    () = &mut deadline => {
                        in_flight.cancel("timed out").await;
                        return Err(failure(
                            ToolErrorCode::Timeout,
                            format!(
                                "the MCP server `{}` did not answer within {} s; the call was cancelled",
                                server.id(),
                                timeout.as_secs()
                            ),
                        ));
                    }
                    () = cx.cancel.cancelled() => {
                        in_flight.cancel("cancelled by the caller").await;
                        return Err(failure(ToolErrorCode::Cancelled, "the call was cancelled"));
                    }
                    Ok(()) = changes.changed() => {
                        let gone = match server.tool(&name) {
                            None => true,
                            Some(state) => !state.present || state.hash != hash,
                        };
                        if gone {
                            in_flight.cancel("the tool was removed").await;
                            return Err(failure(
                                ToolErrorCode::ExecutionFailed,
                                format!(
                                    "the MCP server `{}` removed or changed this tool during the call",
                                    server.id()
                                ),
                            ));
                        }
                    }
                }
            };
            in_flight.answered();
            let result = match result {
                Ok(ServerResult::CallToolResult(result)) => Ok(result),
                Ok(_) => Err(ServiceError::UnexpectedResponse),
                Err(error) => Err(error),
            };
            match result {
                Ok(result) => content::convert(result, output.as_deref()),
                Err(ServiceError::McpError(error)) => Err(failure(
                    ToolErrorCode::ExecutionFailed,
                    bound_text(
                        &format!(
                            "the MCP server `{}` answered with error {}: {}",
                            server.id(),
                            error.code.0,
                            error.message
                        ),
                        content::MAX_ERROR_TEXT_BYTES,
                    )
                    .text,
                )),
                Err(error @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                    server.lost(&error.to_string()).await;
                    Err(failure(
                        ToolErrorCode::ExecutionFailed,
                        format!(
                            "the MCP server `{}` closed the connection during the call (it may have exited); \
                             it is started again on the next use",
                            server.id()
                        ),
                    ))
                }
                Err(error) => Err(failure(
                    ToolErrorCode::ExecutionFailed,
                    format!("the call to MCP server `{}` failed: {error}", server.id()),
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_carries_its_key_and_the_trace_it_continues() {
        let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let run =
            ai_core::RunContext::from_traceparent(Some(caller)).with_trace_state(Some("ro=1"));
        let meta = call_meta("k-1", &run).0.0;
        assert_eq!(meta[IDEMPOTENCY_META_KEY], "k-1");
        // No exporter in this process: the caller's span is the parent named.
        assert_eq!(meta["traceparent"], caller);
        assert_eq!(meta["tracestate"], "ro=1");
        let fresh = call_meta("k-2", &ai_core::RunContext::new("r", "not-a-w3c-id"))
            .0
            .0;
        assert_eq!(fresh.get("traceparent"), None);
    }
}
