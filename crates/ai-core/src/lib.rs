//! Semantic tool types, the one tool runner pipeline, deny-by-default policy, the
//! catalog, run events and the completion port.
//!
//! ai-core does no IO and knows no wire format: it reads no files, environment or
//! network, starts no process, and has no OpenAI/Anthropic DTO and no schema
//! generator (schemas arrive as JSON values in [`ToolSpec`]). It depends on no other
//! project crate. Everything above it (tool contracts, wire adapters, the loop and the
//! composition root) speaks to the outside world through the types defined here.
//!
//! The entry points are:
//! - [`ToolSpec`], [`ToolId`], [`ToolEffect`], [`Redaction`]: what a tool is.
//! - [`ToolPolicy`] and [`ToolCatalog`]: which tools a run may see and call.
//! - [`ToolRunner`]: the only way a tool is executed (validate, authorize, execute,
//!   bound, redact, record).
//! - [`CompletionPort`]: how the loop calls a model, implemented by wire crates.
//! - [`AiEvent`]: the public event contract of a run.

mod approval;
mod bound;
mod catalog;
mod completion;
mod context;
mod display;
mod error;
mod event;
mod id;
mod message;
mod policy;
mod record;
mod redact;
mod runner;
mod schema;
mod spec;

pub use approval::{ApprovalDecision, ApprovalGrant, ApprovalRequest, Approver, GrantLedger};
pub use bound::{
    BoundedValue, MAX_FAILURE_MESSAGE_BYTES, MAX_LOG_FIELD_CHARS, MIN_RESULT_BUDGET,
    TRUNCATION_MARKER, bound_text, bound_value, log_field,
};
pub use catalog::{CatalogError, ToolCatalog};
pub use completion::{
    AssembledToolCall, CompletionDelta, CompletionError, CompletionFinal, CompletionItem,
    CompletionPort, CompletionRequest, CompletionStream, FinishReason, ModelSettings,
    ResponseFormat, TimeoutPhase, ToolCallOutcome, ToolChoice,
};
pub use context::RunContext;
pub use display::{has_hidden, is_hidden, printable};
pub use error::ToolErrorCode;
pub use event::{AiEvent, AiEventKind, EventSink, ToolCallRef, UsageFact};
pub use id::{
    DEFAULT_APP_NAMESPACE, MAX_NAMESPACE_LEN, MAX_TOOL_ID_LEN, RESERVED_NAMESPACES, ToolId,
    ToolIdError, ToolSource,
};
pub use message::{Message, MessageToolCall};
pub use policy::{Budgets, PolicyDecision, ToolPolicy};
pub use record::{ToolExecResult, ToolInvocationRecord};
pub use redact::{FieldPath, Redaction, RedactionError};
pub use runner::{
    CallScope, ModelView, NestedEvents, NestedPort, RegisteredTool, SUBAGENT_STOP_GRACE, ToolCall,
    ToolCallContext, ToolExecution, ToolExecutor, ToolFailure, ToolOutput, ToolRunner,
};
pub use schema::{
    SchemaViolation, check_schema_refs, check_schema_subset, resolve_local_ref, visit_subschemas,
};
pub use spec::{ToolEffect, ToolSpec, args_hash, canonical_json, schema_hash};

/// Re-exported so executors and callers share one cancellation type.
pub use tokio_util::sync::CancellationToken;
