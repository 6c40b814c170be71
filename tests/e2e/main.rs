//! End-to-end tests: the built `agent` binary against a loopback OpenAI-compatible
//! server that streams tool calls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli;
mod server;
