//! The composition root: configuration, binding of tools to real adapters, and the CLI.
//!
//! bootstrap is the only crate that reads configuration or the environment, picks
//! concrete adapters and binds tool contracts to capabilities. It depends on ai-core,
//! ai-tools, ai-host, the wire crates, tools-mcp, agent-store, agent-graph,
//! agent-durable, agent-server, agent-telemetry and agent-testing. Nothing depends on it (except the
//! test-only `integration-tests` crate). agent-telemetry is behind the `telemetry`
//! cargo feature (on by default): without it no span is exported.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod approval;
mod attach;
pub mod cli;
pub mod config;
pub mod graphs;
pub mod history;
pub mod init;
pub mod interactive;
pub mod keys;
pub mod mcp;
pub mod model;
pub mod render;
pub mod serve;
pub mod session;
pub mod table;
mod telemetry;
pub mod tools;
pub mod trust;
pub mod worker;
