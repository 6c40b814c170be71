//! The integration tests of wire-anthropic, in one binary (one link, not one per file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod encode;
mod encode_fixtures;
mod fidelity;
mod stream_fixtures;
