//! The store's errors.

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store URL is not one this crate opens.
    #[error("invalid store URL: {0}")]
    InvalidUrl(String),
    /// The database refused or failed the operation (the connection included).
    #[error("store database error: {0}")]
    Database(String),
    /// The schema could not be brought up to date.
    #[error("store migration failed: {0}")]
    Migration(String),
    /// A row with this key exists with other content (an idempotent write that is
    /// not a repeat).
    #[error("conflicting write: {0}")]
    Conflict(String),
    /// A stored value could not be read back.
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
    /// The thread's turn is taken: another run of it is running (its id).
    #[error("the chat is busy with run {0}")]
    Busy(String),
    /// The writer no longer holds the run (another process took it over, or its
    /// lease ran out): nothing was written.
    #[error("fenced: {0}")]
    Fenced(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        Self::Database(error.to_string())
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(error: sqlx::migrate::MigrateError) -> Self {
        Self::Migration(error.to_string())
    }
}
