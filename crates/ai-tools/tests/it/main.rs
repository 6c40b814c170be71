//! Integration tests of ai-tools: contracts through the real `ToolRunner`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod builtin;
mod contract;
mod security;
mod support;
mod time;

use ai_core::{AiEvent, CancellationToken, runner::ToolExecution, tool::RegisteredTool};

/// Runs one call through a runner holding `tool`, allowed by policy.
async fn run_one(tool: RegisteredTool, arguments: &str) -> (ToolExecution, Vec<AiEvent>) {
    agent_testing::run_one(&tool, arguments, &CancellationToken::new()).await
}
