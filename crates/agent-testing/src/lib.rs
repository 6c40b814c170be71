//! Test doubles for the loop: models, an echo tool, and a loopback OpenAI-compatible
//! server, for this project's tests and for applications' own tests.
//!
//! - [`ScriptedModel`] plays [`Turn`]s written by the test, one per model call, and
//!   records every request it received.
//! - [`TestModel`] calls the catalog's tools once with arguments generated from their
//!   input schemas (completed by per-tool argument hints, fixed or computed from
//!   earlier results), then summarizes the results (like pydantic-ai's `TestModel`).
//!   The `agent` CLI uses it as its embedded offline model.
//! - [`echo_tool`] and [`run_one`]: a read-only tool and one call through a real
//!   `ToolRunner`; [`ToolFuture`], what a tool executor returns;
//!   [`echo_loop_script`], the run of the loop benchmarks.
//! - [`process`]: whether a process is still alive, waiting for it to be gone or for
//!   a file it writes (Linux).
//! - [`mcp_servers`]: the MCP test servers of `tools-mcp` (Python scripts) and the
//!   Python that runs them.
//! - [`refuse_snapshot_updates_on_ci`]: the golden-file rule of the project's insta
//!   tests (compared on CI, never written there).
//! - `server::OpenAiServer` (feature `server`): a loopback chat-completions server
//!   playing scripted SSE replies and recording requests. It writes OpenAI's wire
//!   format by hand, on purpose: sharing code with `wire-openai` would hide the
//!   client's mistakes from the tests that use it.
//!
//! - `postgres::TestPostgres` (feature `postgres`): a throwaway Postgres server
//!   (Debian's binaries, loopback, a non-root user) for the run store's tests.
//! - `restate::TestRestate` (feature `restate`): a throwaway Restate server (the npm
//!   package pinned in `tests/restate`, loopback ports) that tests kill and restart.
//! - `wire_fixtures` (feature `wire-fixtures`) and `decode_bench` (feature
//!   `decode-bench`): the wire crates' fixture snapshots and decode benches, generic
//!   over the decoder or encoder a wire's test hands in.
//!
//! The models speak only `ai_core`'s completion port. Both stream their turns as
//! deltas and end with exactly one assembled [`ai_core::completion::CompletionItem::Final`],
//! honour the cancellation token passed to [`ai_core::CompletionPort::complete`]
//! (ending with [`ai_core::completion::CompletionError::Cancelled`]) and stop all work when the
//! stream is dropped. Delays use `tokio::time`, so tests with paused time run
//! instantly.
//!
//! agent-testing depends on `ai-core` only among project crates (so any crate above
//! ai-core can use it in its tests); it must not depend on `agent-graph`, a `wire-*`
//! crate, `ai-tools`, `ai-host` or `bootstrap`.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod args_gen;
#[cfg(feature = "browser")]
pub mod browser;
#[cfg(feature = "decode-bench")]
pub mod decode_bench;
pub mod mcp_servers;
pub mod peers;
mod playback;
pub mod process;
mod scripted;
mod snapshots;
mod test_model;
mod tools;

#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "restate")]
pub mod restate;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "wire-fixtures")]
pub mod wire_fixtures;
#[cfg(feature = "server")]
mod wire_replies;

pub use scripted::{ScriptedModel, Turn};
pub use snapshots::refuse_snapshot_updates_on_ci;
pub use test_model::{PriorResult, TestModel, ToolSelection};
pub use tools::{
    Echo, ToolFuture, echo_loop_script, echo_schema, echo_tool, echo_tool_with_id, run_one,
};
