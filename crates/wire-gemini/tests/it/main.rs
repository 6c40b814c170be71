//! The integration tests of wire-gemini, in one binary (one link, not one per file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod encode;
mod stream_fixtures;
