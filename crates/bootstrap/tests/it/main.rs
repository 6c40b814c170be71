//! Integration tests of bootstrap: real adapters on temp folders, child processes,
//! loopback HTTP servers and SQLite files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adapters;
