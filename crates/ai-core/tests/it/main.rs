//! Integration tests of ai-core through its public API only: the tool pipeline
//! (`ToolRunner::exec`), approvals, the catalog and the event contract.
//!
//! They use hand-written executors and hand-written JSON schemas, no network, no
//! files and no other project crate.

// Tests and their helpers may unwrap: a panic is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approval;
mod catalog;
mod events;
mod runner;
mod support;
