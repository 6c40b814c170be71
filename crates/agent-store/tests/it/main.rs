//! The integration tests of agent-store, in one binary (one link, not one per file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod recorder;
mod store;
