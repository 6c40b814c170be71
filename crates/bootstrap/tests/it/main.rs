//! End-to-end tests of the `agent` binary (built by cargo for this test, found
//! through `CARGO_BIN_EXE_agent`) against a loopback OpenAI-compatible server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli;
mod cli_ux;
mod durable;
mod gemini;
mod graphs;
mod litellm;
mod local_attacker;
mod mcp;
mod ownership;
mod process_death;
mod providers;
mod restate;
mod security;
mod serve;
mod served;
mod support;
mod tabs;
mod telemetry;
mod threads;
mod web_search;
