//! Test models: completion ports that script or synthesize model turns without HTTP.
//!
//! This module knows no wire format and makes no network call: its models speak only
//! `ai_core`'s completion port, so a library user can drive the whole
//! LLM -> tool -> LLM loop in their own tests, deterministically.
//!
//! - [`ScriptedModel`] plays [`Turn`]s written by the test, one per model call, and
//!   records every request it received.
//! - [`TestModel`] calls the catalog's tools once with arguments generated from their
//!   input schemas, then summarizes the results (like pydantic-ai's `TestModel`).
//!
//! Both stream their turns as deltas and end with exactly one assembled
//! [`ai_core::CompletionItem::Final`], honour the cancellation token passed to
//! [`ai_core::CompletionPort::complete`] (ending with
//! [`ai_core::CompletionError::Cancelled`]) and stop all work when the stream is
//! dropped. Delays use `tokio::time`, so tests with paused time run instantly.

mod args_gen;
mod playback;
mod scripted;
mod test_model;

pub use scripted::{ScriptedModel, Turn};
pub use test_model::{TestModel, ToolSelection};
