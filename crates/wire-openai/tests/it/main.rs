//! Integration tests of wire-openai: fixture snapshots, split-invariance properties,
//! the SSE oracle, the fuzz corpus and the HTTP client against a loopback server.

// Test helpers outside `#[test]` functions may unwrap too: a failure is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod encode_fixtures;
mod fidelity;
mod fuzz_corpus;
mod http;
mod response_fixtures;
mod split_property;
mod stream_fixtures;
