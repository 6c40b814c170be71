//! What a tool is: its [`ToolSpec`] (namespaced [`ToolId`], description, schemas,
//! [`ToolEffect`], [`Redaction`]), the [`ToolExecutor`] that runs it with validated
//! arguments and what that returns ([`ToolOutput`], [`ToolFailure`]), the
//! [`ToolCallContext`] of one execution, and the stable [`ToolErrorCode`]s of
//! failed calls.

mod error;
mod executor;
mod id;
mod redact;
mod spec;

pub use error::ToolErrorCode;
pub use executor::{
    ClientToolExecutor, ModelView, NestedEvents, NestedPort, RegisteredTool, ToolCallContext,
    ToolExecutor, ToolFailure, ToolOutput,
};
pub use id::{
    DEFAULT_APP_NAMESPACE, MAX_NAMESPACE_LEN, MAX_TOOL_ID_LEN, RESERVED_NAMESPACES, ToolId,
    ToolIdError, ToolSource,
};
pub(crate) use redact::Allowlist;
pub use redact::{FieldPath, Redaction, RedactionError};
pub use spec::{ToolEffect, ToolSpec, args_hash, canonical_json, schema_hash};
