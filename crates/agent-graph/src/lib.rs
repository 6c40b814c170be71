//! The LLM -> tool -> LLM loop: runs, graphs and run handles streaming typed events.
//!
//! agent-graph talks to a model only through `ai_core`'s completion port and runs tools
//! only through `ai_core::ToolRunner`. It must not depend on `ai-tools`, any `wire-*`
//! crate, `bootstrap` or an HTTP client.
