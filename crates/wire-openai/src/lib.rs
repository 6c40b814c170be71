//! OpenAI chat-completions wire adapter: encoder, streaming decoder and HTTP client.
//!
//! This crate owns every OpenAI DTO. It maps `ai_core` semantic types to the wire and
//! the wire (including streams) back to semantic records. It must not depend on
//! `ai-tools`, `agent-graph` or `bootstrap`.
