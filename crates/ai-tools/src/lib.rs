//! Typed tool contracts, capability traits and the built-in tools.
//!
//! A tool is a [`ToolContract`]: typed `Args` and `Output` whose JSON Schemas are
//! derived with schemars (never written by hand), a name, a description, an effect,
//! a redaction allowlist and an `execute` that reaches the outside world only through
//! capability traits ([`capability`]). [`bind`] joins a contract with its
//! capabilities into the runner's executor object. [`tool_fn`] makes a tool from
//! an async closure (of the arguments, or of the arguments and the call's
//! context) with the same derived schemas and rules.
//!
//! ai-tools depends on `ai-core` only. It must not depend on any `wire-*` crate,
//! `agent-graph`, `ai-host`, `bootstrap` or an HTTP client, and it does no IO of its
//! own: the real file, process, network and database adapters of the capability
//! traits live in `ai-host` (`ai_host::bind_builtin_tools`), and an application binds
//! them where it composes its agent.
//!
//! The built-in tools ([`builtin`]) and the capability traits they run on
//! ([`capability`]) are behind the feature `builtin` (off by default): a library
//! that defines only its own tools builds neither (nor `jiff`, which the time
//! and memory tools use).

#[cfg(feature = "builtin")]
pub mod builtin;
#[cfg(feature = "builtin")]
pub mod capability;
mod contract;
mod schema;

pub use contract::{
    ContractError, MAX_DESCRIPTION_LEN, MAX_NAME_LEN, Namespace, ToolContract, ToolFn, ToolHandler,
    bind, to_tool_spec, tool_fn,
};
pub use schema::{SchemaError, args_schema, output_schema};
