//! Long-term memory: the `MemoryStore` capability and an in-memory double.
//!
//! The trait knows no database; the real adapter (`bootstrap`) keeps entries in an
//! embedded SQLite database with full-text search.

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::future::BoxFuture;

/// Longest namespace, in bytes.
pub const MAX_NAMESPACE_LEN: usize = 256;
/// Default cap on the entries of one namespace; a store refuses a new key beyond it
/// with [`MemoryError::Full`] (replacing an existing key is always allowed).
pub const DEFAULT_MAX_ENTRIES_PER_NAMESPACE: usize = 10_000;

/// One remembered entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRecord {
    /// Namespace (validated with [`validate_namespace`]).
    pub namespace: String,
    /// Key, unique within the namespace.
    pub key: String,
    /// The remembered text.
    pub text: String,
    /// Free-form tags.
    pub tags: Vec<String>,
    /// When first written, ms since the Unix epoch.
    pub created_at_ms: i64,
    /// When last written, ms since the Unix epoch.
    pub updated_at_ms: i64,
}

/// A search result: a record and its relevance (higher is better).
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    /// The record.
    pub record: MemoryRecord,
    /// Relevance score; higher ranks first.
    pub score: f64,
}

/// Why a memory operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The namespace or key is not acceptable.
    #[error("invalid memory namespace or key: {0}")]
    Invalid(&'static str),
    /// The namespace already holds its maximum number of entries; a new key is
    /// refused (an existing key may still be replaced).
    #[error(
        "the memory namespace is full ({limit} entries); replace an existing key or use another namespace"
    )]
    Full {
        /// The cap, in entries.
        limit: usize,
    },
    /// The store failed (message safe: no entry contents).
    #[error("memory store failed: {0}")]
    Store(String),
}

/// Persistent key/text memory with ranked full-text search. Object-safe.
pub trait MemoryStore: Send + Sync {
    /// Inserts or replaces `record` (its `created_at_ms` is kept from an existing
    /// entry). Returns the stored record.
    fn put(&self, record: MemoryRecord) -> BoxFuture<'_, Result<MemoryRecord, MemoryError>>;
    /// The entry at `key`, if any.
    fn get(
        &self,
        namespace: String,
        key: String,
    ) -> BoxFuture<'_, Result<Option<MemoryRecord>, MemoryError>>;
    /// Entries matching the words of `query`, best first, at most `limit`.
    fn search(
        &self,
        namespace: String,
        query: String,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<MemoryHit>, MemoryError>>;
}

/// Checks a namespace like a session id: 1 to 256 bytes, no `..`, no `/` or `\`, no
/// NUL or control characters.
pub fn validate_namespace(namespace: &str) -> Result<(), MemoryError> {
    if namespace.is_empty() {
        return Err(MemoryError::Invalid("namespace is empty"));
    }
    if namespace.len() > MAX_NAMESPACE_LEN {
        return Err(MemoryError::Invalid("namespace is longer than 256 bytes"));
    }
    if namespace.contains("..") {
        return Err(MemoryError::Invalid("namespace contains `..`"));
    }
    if namespace.contains(['/', '\\']) {
        return Err(MemoryError::Invalid("namespace contains a path separator"));
    }
    if namespace.chars().any(char::is_control) {
        return Err(MemoryError::Invalid(
            "namespace contains NUL or control characters",
        ));
    }
    Ok(())
}

/// The lowercase alphanumeric words of a query (what full-text search matches).
pub fn query_terms(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// An in-memory store for tests; search scores by the number of matching words.
/// Namespaces are capped like the real store's (default
/// [`DEFAULT_MAX_ENTRIES_PER_NAMESPACE`]).
#[derive(Debug)]
pub struct MemoryStoreDouble {
    entries: Mutex<BTreeMap<(String, String), MemoryRecord>>,
    max_entries: usize,
}

impl Default for MemoryStoreDouble {
    fn default() -> Self {
        Self {
            entries: Mutex::new(BTreeMap::new()),
            max_entries: DEFAULT_MAX_ENTRIES_PER_NAMESPACE,
        }
    }
}

impl MemoryStoreDouble {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same store with at most `max_entries` entries per namespace.
    pub fn with_max_entries(mut self, max_entries: usize) -> Self {
        self.max_entries = max_entries;
        self
    }
}

fn poisoned<T>(_: T) -> MemoryError {
    MemoryError::Store("lock poisoned".to_owned())
}

impl MemoryStore for MemoryStoreDouble {
    fn put(&self, mut record: MemoryRecord) -> BoxFuture<'_, Result<MemoryRecord, MemoryError>> {
        Box::pin(async move {
            validate_namespace(&record.namespace)?;
            let mut entries = self.entries.lock().map_err(poisoned)?;
            let id = (record.namespace.clone(), record.key.clone());
            if let Some(old) = entries.get(&id) {
                record.created_at_ms = old.created_at_ms;
            } else {
                let used = entries
                    .keys()
                    .filter(|(ns, _)| *ns == record.namespace)
                    .count();
                if used >= self.max_entries {
                    return Err(MemoryError::Full {
                        limit: self.max_entries,
                    });
                }
            }
            entries.insert(id, record.clone());
            Ok(record)
        })
    }

    fn get(
        &self,
        namespace: String,
        key: String,
    ) -> BoxFuture<'_, Result<Option<MemoryRecord>, MemoryError>> {
        Box::pin(async move {
            validate_namespace(&namespace)?;
            let entries = self.entries.lock().map_err(poisoned)?;
            Ok(entries.get(&(namespace, key)).cloned())
        })
    }

    fn search(
        &self,
        namespace: String,
        query: String,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<MemoryHit>, MemoryError>> {
        Box::pin(async move {
            validate_namespace(&namespace)?;
            let terms = query_terms(&query);
            let entries = self.entries.lock().map_err(poisoned)?;
            let mut hits: Vec<MemoryHit> = entries
                .values()
                .filter(|r| r.namespace == namespace)
                .filter_map(|r| {
                    let words = query_terms(&format!("{} {}", r.text, r.tags.join(" ")));
                    let n = terms.iter().filter(|t| words.contains(t)).count();
                    (n > 0).then(|| MemoryHit {
                        record: r.clone(),
                        score: n as f64,
                    })
                })
                .collect();
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
            hits.truncate(limit);
            Ok(hits)
        })
    }
}
