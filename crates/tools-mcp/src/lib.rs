//! MCP tool sources: the tools of Model Context Protocol servers, reached over
//! stdio (a child process) or streamable HTTP with the official Rust SDK (rmcp),
//! registered as ordinary [`ai_core::tool::RegisteredTool`]s so every call goes through
//! `ToolRunner::exec` (policy, validation, bounding, redaction, events).
//!
//! What this crate guarantees:
//! - **Untrusted by default.** A server's tools get ids `mcp__<server>__<tool>` and
//!   are offered only when policy allows those ids. Their effect comes from config
//!   (default `external_side_effect`); the server's annotations never lower it
//!   unless the config trusts them. Events show no arguments or output fields
//!   unless the config lists them.
//! - **Pinned definitions.** Each definition's sha256 ([`definition_hash`]: name,
//!   title, description, schemas and annotations) is recorded in a lock file the
//!   caller keeps ([`Pins`]), at first sight only for a server the lock does not
//!   know; a definition that changes is withheld until accepted, and so is a tool
//!   a known server starts listing (in any later process) or that appears while
//!   running; a removed tool disappears (a call in flight ends with a typed
//!   failure).
//! - **Faults are results.** Startup and call timeouts, cancellation (sent to the
//!   server as `notifications/cancelled`), a dead server (reconnected with backoff
//!   on the next use) all end a call with a typed failure, never a crashed run. No
//!   server process outlives [`McpSources::shutdown`].
//! - **Credentials by connection id only** ([`ConnectionBroker`]): the secret is
//!   resolved when connecting and never reaches tool context, events, logs, errors
//!   or `Debug` output.
//! - **Schemas** in JSON Schema 2020-12 or draft-07 are translated losslessly into
//!   the catalog's draft-07 subset ([`translate_schema`]), or the tool is kept out
//!   with a warning naming the keyword; arguments are validated against the
//!   server's original schema, in its own draft, before they are sent. Remote
//!   `$ref`s are never resolved.
//!
//! This crate depends on ai-core, process-scope and client-tls only: not on ai-tools,
//! the loop or a wire crate.
//! Composition roots (the CLI) bind it.

mod config;
mod connection;
mod content;
mod ids;
mod pin;
mod schema;
mod server;
mod source;
mod tool;

pub use config::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, INHERITED_ENV, MAX_SERVER_ID_LEN,
    McpConfigError, ServerConfig, ToolConfig, Transport, inherited_env, validate_server_id,
};
pub use connection::{ConnectionBroker, ConnectionError, Credential, Secret, ServerHost};
pub use content::MAX_ERROR_TEXT_BYTES;
pub use ids::{IdCollision, NameTable, id_name};
pub use pin::{Definition, PinState, Pins, PinsError, definition_hash, legacy_definition_hash};
pub use schema::{Dialect, SchemaTranslation, Untranslatable, translate_schema};
pub use server::{SERVER_MARKER_VAR, ServerStatus};
pub use source::{McpSources, McpWarning, ServerReport, ToolReport};
pub use tool::IDEMPOTENCY_META_KEY;
