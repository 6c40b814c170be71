//! `SqliteMemory`: the real [`MemoryStore`], an embedded SQLite database.
//!
//! Entries live in a `memories` table keyed by (namespace, key); an FTS5 table
//! shares their rowids and indexes text and tags for ranked (bm25) search. The
//! database runs in WAL mode with a busy timeout, and writes use `BEGIN IMMEDIATE`,
//! so several processes or connections can write concurrently without losing
//! entries. Queries are reduced to quoted words before they reach FTS5, so model
//! input cannot inject FTS syntax.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_tools::capability::{
    DEFAULT_MAX_ENTRIES_PER_NAMESPACE, MemoryError, MemoryHit, MemoryRecord, MemoryStore,
    query_terms, validate_namespace,
};
use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// How long a writer waits for a lock before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS memories (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(text, tags);
";

/// Why the database could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("the memory database could not be opened: {0}")]
pub struct MemoryOpenError(String);

/// Long-term memory in one SQLite file. Each namespace holds at most
/// [`DEFAULT_MAX_ENTRIES_PER_NAMESPACE`] entries unless
/// [`SqliteMemory::with_max_entries`] says otherwise; a new key beyond the cap is
/// refused with [`MemoryError::Full`].
#[derive(Debug, Clone)]
pub struct SqliteMemory {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    max_entries: usize,
}

fn store_error(error: impl std::fmt::Display) -> MemoryError {
    MemoryError::Store(error.to_string())
}

impl SqliteMemory {
    /// Opens (creating if needed) the database at `path` and its parent folders
    /// (created private to the user, mode 0700).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, MemoryOpenError> {
        use std::os::unix::fs::DirBuilderExt;
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| MemoryOpenError(e.kind().to_string()))?;
        }
        let err = |e: rusqlite::Error| MemoryOpenError(e.to_string());
        let conn = Connection::open(&path).map_err(err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path,
            max_entries: DEFAULT_MAX_ENTRIES_PER_NAMESPACE,
        })
    }

    /// The same store with at most `max_entries` entries per namespace.
    pub fn with_max_entries(mut self, max_entries: usize) -> Self {
        self.max_entries = max_entries;
        self
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, MemoryError> + Send + 'static,
    ) -> Result<T, MemoryError> {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let mut conn = conn
                .lock()
                .map_err(|_| store_error("connection lock poisoned"))?;
            work(&mut conn)
        })
        .await
        .unwrap_or_else(|_| Err(store_error("the database task failed")))
    }
}

fn row_to_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<MemoryRecord> {
    let tags: String = row.get(3)?;
    Ok(MemoryRecord {
        namespace: row.get(0)?,
        key: row.get(1)?,
        text: row.get(2)?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        created_at_ms: row.get(4)?,
        updated_at_ms: row.get(5)?,
    })
}

fn put_blocking(
    conn: &mut Connection,
    record: MemoryRecord,
    max_entries: usize,
) -> Result<MemoryRecord, MemoryError> {
    let tags = serde_json::to_string(&record.tags).map_err(store_error)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(store_error)?;
    // The cap is checked inside the write transaction: concurrent writers cannot
    // both take the last place.
    let exists: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM memories WHERE namespace = ?1 AND key = ?2)",
            params![record.namespace, record.key],
            |row| row.get(0),
        )
        .map_err(store_error)?;
    if !exists {
        let used: i64 = tx
            .query_row(
                "SELECT COUNT(*) FROM memories WHERE namespace = ?1",
                params![record.namespace],
                |row| row.get(0),
            )
            .map_err(store_error)?;
        if usize::try_from(used).unwrap_or(usize::MAX) >= max_entries {
            return Err(MemoryError::Full { limit: max_entries });
        }
    }
    tx.execute(
        "INSERT INTO memories (namespace, key, text, tags, created_at_ms, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (namespace, key) DO UPDATE SET
             text = excluded.text, tags = excluded.tags, updated_at_ms = excluded.updated_at_ms",
        params![
            record.namespace,
            record.key,
            record.text,
            tags,
            record.created_at_ms,
            record.updated_at_ms
        ],
    )
    .map_err(store_error)?;
    let (rowid, stored) = tx
        .query_row(
            "SELECT namespace, key, text, tags, created_at_ms, updated_at_ms, rowid
             FROM memories WHERE namespace = ?1 AND key = ?2",
            params![record.namespace, record.key],
            |row| Ok((row.get::<_, i64>(6)?, row_to_record(row)?)),
        )
        .map_err(store_error)?;
    tx.execute("DELETE FROM memories_fts WHERE rowid = ?1", params![rowid])
        .map_err(store_error)?;
    tx.execute(
        "INSERT INTO memories_fts (rowid, text, tags) VALUES (?1, ?2, ?3)",
        params![rowid, stored.text, stored.tags.join(" ")],
    )
    .map_err(store_error)?;
    tx.commit().map_err(store_error)?;
    Ok(stored)
}

impl MemoryStore for SqliteMemory {
    fn put(&self, record: MemoryRecord) -> BoxFuture<'_, Result<MemoryRecord, MemoryError>> {
        Box::pin(async move {
            validate_namespace(&record.namespace)?;
            let max_entries = self.max_entries;
            self.blocking(move |conn| put_blocking(conn, record, max_entries))
                .await
        })
    }

    fn get(
        &self,
        namespace: String,
        key: String,
    ) -> BoxFuture<'_, Result<Option<MemoryRecord>, MemoryError>> {
        Box::pin(async move {
            validate_namespace(&namespace)?;
            self.blocking(move |conn| {
                conn.query_row(
                    "SELECT namespace, key, text, tags, created_at_ms, updated_at_ms
                     FROM memories WHERE namespace = ?1 AND key = ?2",
                    params![namespace, key],
                    row_to_record,
                )
                .optional()
                .map_err(store_error)
            })
            .await
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
            if terms.is_empty() {
                return Ok(Vec::new());
            }
            let fts_query = terms
                .iter()
                .map(|t| format!("\"{t}\""))
                .collect::<Vec<_>>()
                .join(" OR ");
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.blocking(move |conn| {
                let mut stmt = conn
                    .prepare(
                        "SELECT m.namespace, m.key, m.text, m.tags, m.created_at_ms,
                                m.updated_at_ms, bm25(memories_fts) AS rank
                         FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid
                         WHERE memories_fts MATCH ?1 AND m.namespace = ?2
                         ORDER BY rank LIMIT ?3",
                    )
                    .map_err(store_error)?;
                let rows = stmt
                    .query_map(params![fts_query, namespace, limit], |row| {
                        Ok(MemoryHit {
                            record: row_to_record(row)?,
                            score: -row.get::<_, f64>(6)?,
                        })
                    })
                    .map_err(store_error)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(store_error)
            })
            .await
        })
    }
}
