//! The executor of one MCP tool: checks availability and the server's own schema,
//! calls `tools/call` with a timeout, cancellation and removal watch, and converts
//! the result.

use std::sync::Arc;
use std::time::Duration;

use ai_core::{ToolCallContext, ToolErrorCode, ToolExecutor, ToolFailure, ToolOutput, bound_text};
use futures::future::BoxFuture;
use rmcp::ServiceError;
use rmcp::model::CallToolRequestParams;
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
            let call =
                peer.call_tool(CallToolRequestParams::new(name.clone()).with_arguments(arguments));
            tokio::pin!(call);
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            // Leaving this loop early drops `call`, which sends
            // `notifications/cancelled` for the request.
            let result = loop {
                tokio::select! {
                    result = &mut call => break result,
                    () = &mut deadline => {
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
                        return Err(failure(ToolErrorCode::Cancelled, "the call was cancelled"));
                    }
                    Ok(()) = changes.changed() => {
                        let gone = match server.tool(&name) {
                            None => true,
                            Some(state) => !state.present || state.hash != hash,
                        };
                        if gone {
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
