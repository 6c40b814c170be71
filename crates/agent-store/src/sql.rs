//! The statements a run waits for, written once for both backends: a
//! [`Job`] (a turn opened, a step recorded, a batch of run records, a chat
//! read) sends its statements through [`RunSql`], which a connection of the
//! pool implements (Postgres, one round trip per statement) and so does the
//! SQLite thread's connection (`sqlite`: the whole job in one round trip).

use std::future::Future;

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::{Any, Row as _};

use crate::error::StoreError;
use crate::store::Backend;

/// A value bound to a statement.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    Text(&'a str),
    MaybeText(Option<&'a str>),
    Int(i64),
    MaybeInt(Option<i64>),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(value: &'a str) -> Self {
        Self::Text(value)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(value: &'a String) -> Self {
        Self::Text(value)
    }
}

impl<'a> From<Option<&'a str>> for Value<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Self::MaybeText(value)
    }
}

impl From<i64> for Value<'_> {
    fn from(value: i64) -> Self {
        Self::Int(value)
    }
}

/// How a statement marks the values it binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marks {
    /// `$1, $2, ...` (Postgres).
    Numbered,
    /// `?, ?, ...`, bound in order (SQLite). SQLite looks a named or numbered
    /// mark up by a linear scan of the statement's marks each time a value is
    /// bound, so a statement of a few hundred numbered values costs quadratic
    /// time in binding alone; anonymous marks have no name to look up.
    Anonymous,
}

/// A row a statement returned, read by column name.
pub(crate) trait SqlRow: Send {
    fn text(&self, column: &str) -> Result<Option<String>, StoreError>;
    fn int(&self, column: &str) -> Result<Option<i64>, StoreError>;

    /// A text column that is never NULL.
    fn some_text(&self, column: &str) -> Result<String, StoreError> {
        self.text(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("`{column}` is NULL")))
    }

    /// An integer column that is never NULL.
    fn some_int(&self, column: &str) -> Result<i64, StoreError> {
        self.int(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("`{column}` is NULL")))
    }
}

/// Where a job's statements go.
pub(crate) trait RunSql: Send {
    type Row: SqlRow;

    /// The database the statements go to (a few statements differ).
    fn backend(&self) -> Backend;

    /// The marks a multi-row statement should use here.
    fn marks(&self) -> Marks {
        match self.backend() {
            Backend::Sqlite => Marks::Anonymous,
            Backend::Postgres => Marks::Numbered,
        }
    }

    /// Runs `sql` with `args` bound; how many rows it changed.
    fn execute(
        &mut self,
        sql: &str,
        args: &[Value<'_>],
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Runs `sql` with `args` bound; the rows it returned.
    fn fetch(
        &mut self,
        sql: &str,
        args: &[Value<'_>],
    ) -> impl Future<Output = Result<Vec<Self::Row>, StoreError>> + Send;

    /// The first row `sql` returned, if any.
    fn fetch_optional(
        &mut self,
        sql: &str,
        args: &[Value<'_>],
    ) -> impl Future<Output = Result<Option<Self::Row>, StoreError>> + Send {
        async move { Ok(self.fetch(sql, args).await?.into_iter().next()) }
    }
}

/// What a job did: its answer, and whether its writes are kept (`false`: they
/// are rolled back, and the job answers all the same).
pub(crate) struct Done<T> {
    pub(crate) value: T,
    pub(crate) keep: bool,
}

impl<T> Done<T> {
    /// Writes kept.
    pub(crate) fn kept(value: T) -> Self {
        Self { value, keep: true }
    }

    /// Writes rolled back.
    pub(crate) fn discarded(value: T) -> Self {
        Self { value, keep: false }
    }
}

/// Statements a run waits for, run as one unit: in a transaction of its own
/// on the pool (when [`Job::TRANSACTION`]), in a savepoint of the SQLite
/// thread's transaction there. A job's statements see each other's writes
/// and nobody else's meanwhile; an error rolls them back.
pub(crate) trait Job: Send + Sync + 'static {
    type Output: Send + 'static;

    /// Whether its statements need a transaction around them on the pool (a
    /// single statement does not).
    const TRANSACTION: bool;

    /// Runs the job's statements (on SQLite, maybe twice: see `sqlite`).
    fn run<S: RunSql>(
        &self,
        sql: &mut S,
    ) -> impl Future<Output = Result<Done<Self::Output>, StoreError>> + Send;
}

/// A statement for sqlx, `args` bound.
pub(crate) fn query<'q>(
    sql: &'q str,
    args: &[Value<'q>],
) -> sqlx::query::Query<'q, Any, AnyArguments> {
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for value in args {
        query = match *value {
            Value::Text(v) => query.bind(v),
            Value::MaybeText(v) => query.bind(v),
            Value::Int(v) => query.bind(v),
            Value::MaybeInt(v) => query.bind(v),
        };
    }
    query
}

impl RunSql for sqlx::AnyConnection {
    type Row = AnyRow;

    fn backend(&self) -> Backend {
        if self.backend_name().eq_ignore_ascii_case("sqlite") {
            Backend::Sqlite
        } else {
            Backend::Postgres
        }
    }

    async fn execute(&mut self, sql: &str, args: &[Value<'_>]) -> Result<u64, StoreError> {
        Ok(query(sql, args).execute(self).await?.rows_affected())
    }

    async fn fetch(&mut self, sql: &str, args: &[Value<'_>]) -> Result<Vec<AnyRow>, StoreError> {
        Ok(query(sql, args).fetch_all(self).await?)
    }
}

impl SqlRow for AnyRow {
    fn text(&self, column: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(column)?)
    }

    fn int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(column)?)
    }
}
