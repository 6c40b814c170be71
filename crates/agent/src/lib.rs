//! One dependency for an agent that calls typed tools safely: the common path of
//! this project's crates, re-exported.
//!
//! ```no_run
//! use agent::prelude::*;
//! use agent::openai::{ClientConfig, OpenAiClient};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct AddArgs { a: i64, b: i64 }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let add = tool_fn("add", "Add two integers.", ToolEffect::ReadOnly,
//!     |args: AddArgs| async move { Ok(args.a + args.b) })?
//!     .show_args(["a", "b"])?;
//! let model = OpenAiClient::new(ClientConfig::new("http://127.0.0.1:8000/v1"))?;
//! let agent = Agent::builder(model).system("Use the tools.").tool(add).build()?;
//! println!("{}", agent.prompt("What is 2 + 40?").await?);
//! # Ok(()) }
//! ```
//!
//! What is here:
//! - the [`prelude`]: [`Agent`], [`Conversation`], [`tool_fn`] (a closure of the
//!   arguments, or of the arguments and the [`ToolCallContext`]), [`ToolEffect`], [`ToolFailure`], [`ToolCallContext`],
//!   [`Message`], [`AiEvent`], approvals ([`approver_fn`], [`ApprovalDecision`]),
//!   `StreamExt` for the events, and the derives (`Deserialize`, `Serialize`,
//!   `JsonSchema`);
//! - the parts by concept: [`run`] (outputs, errors, limits, paused runs),
//!   [`settings`] (model settings), [`tools`] (contracts, redaction, the built-in
//!   tools' contracts), [`approval`], [`event`];
//! - behind features: `openai` (default; `agent::openai`, the OpenAI-compatible
//!   client), `anthropic` (`agent::anthropic`, the Messages API client),
//!   `responses` (`agent::responses`, OpenAI's Responses API client), `gemini`
//!   (`agent::gemini`, Gemini's own API client), `host` (`agent::host`, the sandboxed built-in tools' adapters),
//!   `testing` (`agent::testing`, test models and a loopback OpenAI-compatible
//!   server), `mcp` (`agent::mcp`, MCP servers' tools, [`mcp::stdio`] in one
//!   call), `store` (`agent::store`, recorded runs and usage), `server`
//!   (`agent::server`, the chat endpoint for web UIs in your own router).
//!
//! The derive macros of serde and schemars refer to their own crates, so a crate
//! that derives `Deserialize` or `JsonSchema` also lists `serde` (with `derive`) and
//! `schemars` among its dependencies (or points the derives at
//! `agent::serde`/`agent::schemars` with `#[serde(crate = ..)]` and
//! `#[schemars(crate = ..)]`).
//!
//! Every crate re-exported here stays usable on its own; this crate adds no
//! behaviour beyond [`mcp::stdio`]'s defaults (the environment a child
//! inherits, the pins file). It depends on `agent-graph`, `ai-core`,
//! `ai-tools`, the wire crates (`wire-openai`, `wire-anthropic`,
//! `wire-responses`, `wire-gemini`), `ai-host`, `agent-testing`, `tools-mcp`,
//! `agent-store`, `agent-durable` and `agent-server` only: the crates it
//! re-exports.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use agent_graph::{Agent, Conversation};
pub use ai_core::approval::{ApprovalDecision, ApprovalRequest, approver_fn, approver_fn_async};
pub use ai_core::tool::{ToolCallContext, ToolFailure};
pub use ai_core::{AiEvent, Message, ToolEffect};
pub use ai_tools::tool_fn;

pub use futures;
pub use schemars;
pub use serde;
pub use serde_json;

/// The names almost every agent uses: `use agent::prelude::*;`.
pub mod prelude {
    pub use crate::{
        Agent, AiEvent, ApprovalDecision, ApprovalRequest, Conversation, Message, ToolCallContext,
        ToolEffect, ToolFailure, approver_fn, approver_fn_async, tool_fn,
    };
    pub use ai_core::event::AiEventKind;
    pub use futures::StreamExt;
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}

/// Runs: the handle, the output, errors, limits, paused runs and decisions.
pub mod run {
    pub use agent_graph::agent::{AgentBuilder, Typed};
    pub use agent_graph::run::{
        Decision, EventStream, OutputFuture, PausedRun, RunError, RunHandle, RunLimits, RunOutput,
    };
    pub use ai_core::RunContext;
}

/// Model settings: sampling, token limits, response formats.
pub mod settings {
    pub use ai_core::completion::{ModelSettings, ResponseFormat, ToolChoice};
}

/// Tools: typed contracts, closure tools, redaction, policy, and (feature
/// `host`) the built-in tools' contracts, bound to real adapters by
/// `agent::host`.
pub mod tools {
    pub use ai_core::ToolPolicy;
    pub use ai_core::tool::{Redaction, RegisteredTool, ToolErrorCode};
    #[cfg(feature = "host")]
    pub use ai_tools::builtin;
    pub use ai_tools::{ContractError, ToolContract, ToolFn, bind};
}

/// Approvals: the approver trait, its requests and decisions.
pub mod approval {
    pub use ai_core::approval::*;
}

/// Events of a run.
pub mod event {
    pub use ai_core::event::{AiEvent, AiEventKind};
}

/// The OpenAI-compatible chat-completions client (feature `openai`).
#[cfg(feature = "openai")]
pub mod openai {
    pub use wire_openai::client::{ClientConfig, OpenAiClient};
}

/// The Anthropic Messages API client (feature `anthropic`).
#[cfg(feature = "anthropic")]
pub mod anthropic {
    pub use wire_anthropic::client::{AnthropicClient, AnthropicConfig};
}

/// OpenAI's Responses API client (feature `responses`).
#[cfg(feature = "responses")]
pub mod responses {
    pub use wire_responses::client::{ResponsesClient, ResponsesConfig};
}

/// Gemini's own API client (feature `gemini`).
#[cfg(feature = "gemini")]
pub mod gemini {
    pub use wire_gemini::client::{GeminiClient, GeminiConfig};
    pub use wire_gemini::encode::{GeminiOptions, Thinking};
}

/// The sandboxed built-in tools' adapters (feature `host`): bind them all with
/// [`host::bind_builtin_tools`], or one file tool to a folder with
/// [`host::bind_in_dir`].
#[cfg(feature = "host")]
pub mod host {
    pub use ai_host::{BindError, BuiltinConfig, bind_builtin_tools, bind_in_dir};
}

/// Test models and a loopback OpenAI-compatible server (feature `testing`).
#[cfg(feature = "testing")]
pub mod testing {
    pub use agent_testing::server::{OpenAiServer, Recorded, Reply};
    pub use agent_testing::{ScriptedModel, TestModel, Turn};
}

#[cfg(feature = "mcp")]
pub mod mcp;

/// The run store and recorded runs (feature `store`): open a store
/// ([`store::Store::open_sqlite`], or [`store::Store::open`] with a Postgres
/// URL), the run owner on it ([`store::Runs::open`]), then
/// [`store::Runs::run_agent`] for each run: the run, its thread, its events
/// and its usage recorded by the same lifecycle `agent serve` and `agent chat`
/// use. Usage per run, thread and account: [`store::AccountStore::usage_of_run`],
/// [`store::AccountStore::usage_of_thread`], [`store::AccountStore::usage_total`].
#[cfg(feature = "store")]
pub mod store {
    pub use agent_durable::{AgentRun, DEFAULT_ACCOUNT, RecordedRun, Runs, RunsError};
    pub use agent_store::{AccountStore, RunStatus, Store, StoreError, UsageGrouping, UsageRow};
}

/// The chat endpoint for web UIs (feature `server`): [`server::ChatService::from_agent`]
/// serves an agent as it is configured, [`server::ChatService::router_with_auth`] with
/// your own [`server::Authenticate`] hook, [`server::ChatService::serve_chat`] on a
/// route of your own router, [`server::run_response`] (or
/// [`server::run_data_stream_response`]) for a bare run.
#[cfg(feature = "server")]
pub mod server {
    pub use agent_server::access::{Account, AuthError, AuthFn, Authenticate, auth_fn};
    pub use agent_server::{
        Access, ChatService, ConnectionLimits, run_data_stream_response, run_response, serve,
    };
}
