//! Integration tests of ai-host: real adapters on temp folders, child processes,
//! loopback HTTP servers and SQLite files, each driven through the real `ToolRunner`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bind;
mod files;
mod memory;
mod sandbox;
mod search;
mod shell;
mod support;
mod web;
