//! `core__memory_write` and `core__memory_read`: persistent long-term memory.
//!
//! Entries (namespace, key, text, tags, timestamps) live behind [`MemoryStore`];
//! the adapter in `bootstrap` keeps them in SQLite with full-text search. Namespaces
//! are validated like session ids ([`validate_namespace`]).

use std::sync::Arc;

use ai_core::{
    ToolEffect,
    tool::{Redaction, ToolCallContext, ToolErrorCode, ToolFailure},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Namespace;
use crate::capability::{Clock, MemoryError, MemoryRecord, MemoryStore, validate_namespace};
use crate::contract::ToolContract;

/// The namespace used when the model gives none.
pub const DEFAULT_NAMESPACE: &str = "default";
/// Longest key, in bytes.
pub const MAX_KEY_LEN: usize = 256;
/// Most tags per entry.
pub const MAX_TAGS: usize = 32;
/// Most search results.
pub const MAX_RESULTS: u32 = 50;

fn memory_failure(error: MemoryError) -> ToolFailure {
    let code = match error {
        MemoryError::Invalid(_) => ToolErrorCode::InvalidArgs,
        MemoryError::Full { .. } | MemoryError::Store(_) => ToolErrorCode::ExecutionFailed,
    };
    ToolFailure::new(code, error.to_string())
}

fn namespace(ns: Option<String>) -> Result<String, ToolFailure> {
    let ns = ns.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    validate_namespace(&ns).map_err(memory_failure)?;
    Ok(ns)
}

fn check_key(key: &str) -> Result<(), ToolFailure> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || key.chars().any(char::is_control) {
        return Err(ToolFailure::new(
            ToolErrorCode::InvalidArgs,
            "the key must be 1 to 256 bytes without control characters",
        ));
    }
    Ok(())
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

/// Arguments of `core__memory_write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryWriteArgs {
    /// Key, unique within the namespace; writing it again replaces the entry.
    pub key: String,
    /// The text to remember.
    pub text: String,
    /// Tags, searchable like the text.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Output of `core__memory_write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct MemoryWritten {
    /// Namespace.
    pub namespace: String,
    /// Key.
    pub key: String,
    /// When the entry was first written (RFC 3339).
    pub created_at: String,
    /// When it was last written (RFC 3339).
    pub updated_at: String,
}

/// What `core__memory_write` needs: a store and a clock.
#[derive(Clone)]
pub struct MemoryWriteCapabilities {
    /// The store.
    pub store: Arc<dyn MemoryStore>,
    /// The clock that stamps entries.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemoryWriteCapabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryWriteCapabilities")
            .finish_non_exhaustive()
    }
}

/// Remembers a text under a key.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryWrite;

impl ToolContract for MemoryWrite {
    type Args = MemoryWriteArgs;
    type Output = MemoryWritten;
    type Capabilities = MemoryWriteCapabilities;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "memory_write"
    }

    fn description(&self) -> &str {
        "Store a text with optional tags under a key in long-term memory (persists across sessions). Writing an existing key replaces it."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::StateChange
    }

    fn redaction(&self) -> Redaction {
        Redaction::new(
            ["key", "tags", "namespace"],
            ["namespace", "key", "created_at", "updated_at"],
        )
        .unwrap_or_default()
    }

    async fn execute(
        &self,
        caps: &MemoryWriteCapabilities,
        _cx: &ToolCallContext,
        args: MemoryWriteArgs,
    ) -> Result<MemoryWritten, ToolFailure> {
        let namespace = namespace(args.namespace)?;
        check_key(&args.key)?;
        if args.tags.len() > MAX_TAGS {
            return Err(ToolFailure::new(
                ToolErrorCode::InvalidArgs,
                "at most 32 tags",
            ));
        }
        let now = caps.clock.now().as_millisecond();
        let stored = caps
            .store
            .put(MemoryRecord {
                namespace,
                key: args.key,
                text: args.text,
                tags: args.tags,
                created_at_ms: now,
                updated_at_ms: now,
            })
            .await
            .map_err(memory_failure)?;
        Ok(MemoryWritten {
            namespace: stored.namespace,
            key: stored.key,
            created_at: rfc3339(stored.created_at_ms),
            updated_at: rfc3339(stored.updated_at_ms),
        })
    }
}

/// Arguments of `core__memory_read`: exactly one of `key` and `query`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryReadArgs {
    /// Exact key to read.
    #[serde(default)]
    pub key: Option<String>,
    /// Words to search for in texts and tags (ranked full-text search).
    #[serde(default)]
    pub query: Option<String>,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Most results for a query, 1 to 50 (default 10).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// One remembered entry.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct MemoryEntry {
    /// Key.
    pub key: String,
    /// Text.
    pub text: String,
    /// Tags.
    pub tags: Vec<String>,
    /// First written (RFC 3339).
    pub created_at: String,
    /// Last written (RFC 3339).
    pub updated_at: String,
    /// Relevance for a query (higher is better); null for a key lookup.
    pub score: Option<f64>,
}

/// Output of `core__memory_read`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct MemoryEntries {
    /// Namespace.
    pub namespace: String,
    /// Entries, best first.
    pub entries: Vec<MemoryEntry>,
}

fn entry(record: MemoryRecord, score: Option<f64>) -> MemoryEntry {
    MemoryEntry {
        key: record.key,
        text: record.text,
        tags: record.tags,
        created_at: rfc3339(record.created_at_ms),
        updated_at: rfc3339(record.updated_at_ms),
        score,
    }
}

/// Reads long-term memory by key or by full-text query.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryRead;

impl ToolContract for MemoryRead {
    type Args = MemoryReadArgs;
    type Output = MemoryEntries;
    type Capabilities = Arc<dyn MemoryStore>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "memory_read"
    }

    fn description(&self) -> &str {
        "Read long-term memory: give `key` for one entry, or `query` for a ranked full-text search over texts and tags."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn redaction(&self) -> Redaction {
        Redaction::new(
            ["key", "namespace", "limit"],
            [
                "namespace",
                "entries.key",
                "entries.tags",
                "entries.updated_at",
                "entries.score",
            ],
        )
        .unwrap_or_default()
    }

    async fn execute(
        &self,
        store: &Arc<dyn MemoryStore>,
        _cx: &ToolCallContext,
        args: MemoryReadArgs,
    ) -> Result<MemoryEntries, ToolFailure> {
        let namespace = namespace(args.namespace)?;
        let entries = match (args.key, args.query) {
            (Some(key), None) => {
                check_key(&key)?;
                let record = store
                    .get(namespace.clone(), key)
                    .await
                    .map_err(memory_failure)?
                    .ok_or_else(|| {
                        ToolFailure::new(ToolErrorCode::NotFound, "no memory entry has this key")
                    })?;
                vec![entry(record, None)]
            }
            (None, Some(query)) => {
                if crate::capability::query_terms(&query).is_empty() {
                    return Err(ToolFailure::new(
                        ToolErrorCode::InvalidArgs,
                        "the query has no words to search for",
                    ));
                }
                let limit = args.limit.unwrap_or(10).clamp(1, MAX_RESULTS) as usize;
                store
                    .search(namespace.clone(), query, limit)
                    .await
                    .map_err(memory_failure)?
                    .into_iter()
                    .map(|hit| entry(hit.record, Some(hit.score)))
                    .collect()
            }
            _ => {
                return Err(ToolFailure::new(
                    ToolErrorCode::InvalidArgs,
                    "give exactly one of `key` and `query`",
                ));
            }
        };
        Ok(MemoryEntries { namespace, entries })
    }
}
