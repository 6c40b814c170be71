//! The SQLite thread: the run path on SQLite (see `store::RunPath`). One
//! thread owns one connection to the store's file and runs each [`Job`]
//! whole, in one round trip, instead of one round trip to a connection's
//! thread per statement; and the jobs that queued while it worked share one
//! transaction and its commit (group commit), each in a savepoint of its own.
//!
//! Why a thread of our own beside sqlx's pool: a served run waits for about
//! nine statements (its chat read, its turn, a step per model call, the
//! writer's batches), and through sqlx each was a hop to the connection's
//! thread and back, with the wake-ups on both sides; SQLite writes one
//! transaction at a time, so one thread loses no concurrency. Every other
//! statement (reads, leases, stops) stays on sqlx's pool; this connection
//! waits for their locks as they wait for its (`busy_timeout`).
//!
//! A job's answer is sent after the commit that holds its writes: nobody
//! hears of a write that is not durable. A job's error rolls back its
//! savepoint only; a failed commit fails every job of the group.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::mpsc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, Value as SqliteValue, ValueRef};
use tokio::sync::oneshot;

use crate::error::StoreError;
use crate::sql::{Done, Job, Marks, RunSql, SqlRow, Value};

/// Jobs in one transaction, at most (a bound on how long the write lock is
/// held and on what one failed commit takes with it).
const GROUP: usize = 64;

/// A job on its way to the thread: runs on the connection (not at all when
/// given none: the group's transaction broke before it), returns whether its
/// writes are kept and what answers it once the commit is known.
type Task = Box<dyn FnOnce(Option<&mut Connection>) -> (bool, Answer) + Send>;
type Answer = Box<dyn FnOnce(Result<(), &str>) + Send>;

enum Message {
    Job(Task),
    /// Stops the thread after what queued before it; says when the
    /// connection is closed.
    Close(oneshot::Sender<()>),
}

/// A handle to the SQLite thread (cheap to clone); the thread stops when it
/// is closed or the last handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct SqliteThread {
    sender: mpsc::Sender<Message>,
}

fn closed() -> StoreError {
    StoreError::Database("the store is closed".into())
}

impl SqliteThread {
    /// Opens `path` (a file the pool has set up: WAL, schema) and starts the
    /// thread that owns the connection.
    pub(crate) fn open(path: &str) -> Result<Self, StoreError> {
        let connection = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(database)?;
        connection
            .busy_timeout(Duration::from_secs(5))
            .map_err(database)?;
        connection
            .execute_batch("PRAGMA synchronous = NORMAL;")
            .map_err(database)?;
        // The batch writer's multi-row statements come in eight sizes per
        // kind; the turn's and the step's are a dozen more.
        connection.set_prepared_statement_cache_capacity(64);
        let (sender, receiver) = mpsc::channel();
        std::thread::Builder::new()
            .name("agent-store-sqlite".into())
            .spawn(move || serve(Connection(connection), receiver))
            .map_err(|e| StoreError::Database(format!("cannot start the SQLite thread: {e}")))?;
        Ok(Self { sender })
    }

    /// Runs `job` on the thread; its answer once its writes are committed.
    pub(crate) async fn run<J: Job>(&self, job: J) -> Result<J::Output, StoreError> {
        let (reply, answer) = oneshot::channel();
        let task: Task = Box::new(move |connection: Option<&mut Connection>| {
            let result = match connection {
                Some(connection) => complete(job.run(connection)),
                None => Err(StoreError::Database(
                    "not run: the transaction failed".into(),
                )),
            };
            let keep = matches!(result, Ok(Done { keep: true, .. }));
            let answer: Answer = Box::new(move |committed: Result<(), &str>| {
                let outcome = match committed {
                    Ok(()) => result.map(|done| done.value),
                    Err(error) => Err(StoreError::Database(error.to_owned())),
                };
                let _ = reply.send(outcome);
            });
            (keep, answer)
        });
        self.sender.send(Message::Job(task)).map_err(|_| closed())?;
        answer
            .await
            .map_err(|_| StoreError::Database("the store's SQLite thread lost the job".into()))?
    }

    /// Stops the thread once what queued is done, and closes the connection.
    pub(crate) async fn close(&self) {
        let (done, closed) = oneshot::channel();
        if self.sender.send(Message::Close(done)).is_ok() {
            let _ = closed.await;
        }
    }
}

/// Drives a job's future on this thread: on this connection nothing it
/// awaits is ever pending (each statement runs where it is called).
fn complete<T>(future: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(result) => result,
        Poll::Pending => Err(StoreError::Database(
            "a job on the SQLite thread waited for something else".into(),
        )),
    }
}

/// The thread: each time, every job that queued (up to [`GROUP`]) in one
/// transaction.
fn serve(mut connection: Connection, receiver: mpsc::Receiver<Message>) {
    while let Ok(first) = receiver.recv() {
        let mut tasks = Vec::new();
        let mut close = None;
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Job(task) => tasks.push(task),
                Message::Close(done) => {
                    close = Some(done);
                    break;
                }
            }
            if tasks.len() < GROUP {
                next = receiver.try_recv().ok();
            }
        }
        if !tasks.is_empty() {
            connection.group(tasks);
        }
        if let Some(done) = close {
            // Refuses what comes next before it says it is closed.
            drop(receiver);
            drop(connection);
            let _ = done.send(());
            return;
        }
    }
}

/// The thread's connection.
pub(crate) struct Connection(rusqlite::Connection);

impl Connection {
    /// Runs `tasks` in one transaction, each in a savepoint, then answers
    /// each with the commit's outcome.
    fn group(&mut self, tasks: Vec<Task>) {
        let mut answers = Vec::with_capacity(tasks.len());
        let mut failed = self.control("BEGIN IMMEDIATE").err();
        for task in tasks {
            if failed.is_none() {
                failed = self.control("SAVEPOINT job").err();
            }
            if failed.is_some() {
                // Nothing more runs once the transaction broke.
                answers.push(task(None).1);
                continue;
            }
            // A job that panicked (a bug) is rolled back; its caller hears
            // that its job was lost, and the thread goes on.
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task(Some(self))));
            let (keep, answer) = match ran {
                Ok((keep, answer)) => (keep, Some(answer)),
                Err(_) => (false, None),
            };
            let ended = if keep {
                self.control("RELEASE job")
            } else {
                self.control("ROLLBACK TO job")
                    .and_then(|()| self.control("RELEASE job"))
            };
            failed = ended.err();
            answers.extend(answer);
        }
        let outcome = match failed {
            None => self.control("COMMIT").map_err(|e| e.to_string()),
            Some(error) => {
                tracing::warn!(%error, "the SQLite thread's transaction failed");
                Err(error.to_string())
            }
        };
        if outcome.is_err() && !self.0.is_autocommit() {
            let _ = self.control("ROLLBACK");
        }
        for answer in answers {
            answer(outcome.as_ref().map(|_| ()).map_err(String::as_str));
        }
    }

    /// Runs one of the transaction's own statements (prepared once).
    fn control(&self, sql: &str) -> rusqlite::Result<()> {
        self.0.prepare_cached(sql)?.execute([]).map(|_| ())
    }

    /// A prepared statement for `sql` (cached), `args` bound by their marks:
    /// `$n` is the n-th value, `?` the next.
    fn statement(
        &self,
        sql: &str,
        args: &[Value<'_>],
    ) -> Result<rusqlite::CachedStatement<'_>, StoreError> {
        tracing::debug!(target: "agent_store::sqlite", statement = sql);
        let mut statement = self.0.prepare_cached(sql).map_err(database)?;
        for index in 1..=statement.parameter_count() {
            let at = match statement.parameter_name(index) {
                Some(name) => name
                    .strip_prefix('$')
                    .and_then(|n| n.parse::<usize>().ok())
                    .and_then(|n| n.checked_sub(1)),
                None => Some(index - 1),
            };
            let value = at.and_then(|at| args.get(at)).ok_or_else(|| {
                StoreError::Database(format!("statement mark {index} has no value"))
            })?;
            statement
                .raw_bind_parameter(index, bound(*value))
                .map_err(database)?;
        }
        Ok(statement)
    }
}

fn bound<'a>(value: Value<'a>) -> ToSqlOutput<'a> {
    ToSqlOutput::Borrowed(match value {
        Value::Text(text) | Value::MaybeText(Some(text)) => ValueRef::Text(text.as_bytes()),
        Value::Int(int) | Value::MaybeInt(Some(int)) => ValueRef::Integer(int),
        Value::MaybeText(None) | Value::MaybeInt(None) => ValueRef::Null,
    })
}

fn database(error: rusqlite::Error) -> StoreError {
    StoreError::Database(error.to_string())
}

impl RunSql for Connection {
    type Row = Row;

    fn marks(&self) -> Marks {
        Marks::Anonymous
    }

    async fn execute(&mut self, sql: &str, args: &[Value<'_>]) -> Result<u64, StoreError> {
        let mut statement = self.statement(sql, args)?;
        let changed = statement.raw_execute().map_err(database)?;
        Ok(changed as u64)
    }

    async fn fetch(&mut self, sql: &str, args: &[Value<'_>]) -> Result<Vec<Row>, StoreError> {
        let mut statement = self.statement(sql, args)?;
        let columns: Arc<[String]> = statement
            .column_names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut rows = statement.raw_query();
        let mut fetched = Vec::new();
        while let Some(row) = rows.next().map_err(database)? {
            let values = (0..columns.len())
                .map(|index| row.get::<_, SqliteValue>(index))
                .collect::<Result<_, _>>()
                .map_err(database)?;
            fetched.push(Row {
                columns: Arc::clone(&columns),
                values,
            });
        }
        Ok(fetched)
    }
}

/// A row the thread read.
pub(crate) struct Row {
    columns: Arc<[String]>,
    values: Vec<SqliteValue>,
}

impl Row {
    fn value(&self, column: &str) -> Result<&SqliteValue, StoreError> {
        self.columns
            .iter()
            .position(|name| name == column)
            .and_then(|at| self.values.get(at))
            .ok_or_else(|| StoreError::Database(format!("no column `{column}`")))
    }
}

impl SqlRow for Row {
    fn text(&self, column: &str) -> Result<Option<String>, StoreError> {
        match self.value(column)? {
            SqliteValue::Null => Ok(None),
            SqliteValue::Text(text) => Ok(Some(text.clone())),
            other => Err(StoreError::Corrupt(format!(
                "`{column}` is {other:?}, not text"
            ))),
        }
    }

    fn int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        match self.value(column)? {
            SqliteValue::Null => Ok(None),
            SqliteValue::Integer(int) => Ok(Some(*int)),
            other => Err(StoreError::Corrupt(format!(
                "`{column}` is {other:?}, not an integer"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `sql` with `args`, returns the first column of its rows as text.
    struct Read(&'static str, Vec<(bool, i64)>);

    impl Job for Read {
        type Output = Vec<Option<String>>;
        const TRANSACTION: bool = false;

        async fn run<S: RunSql>(self, sql: &mut S) -> Result<Done<Self::Output>, StoreError> {
            let owned: Vec<String> = self.1.iter().map(|(_, v)| v.to_string()).collect();
            let args: Vec<Value<'_>> = self
                .1
                .iter()
                .zip(&owned)
                .map(|((text, v), s)| {
                    if *text {
                        Value::Text(s)
                    } else {
                        Value::Int(*v)
                    }
                })
                .collect();
            let rows = sql.fetch(self.0, &args).await?;
            let values = rows
                .iter()
                .map(|row| row.text("v"))
                .collect::<Result<_, _>>()?;
            Ok(Done::kept(values))
        }
    }

    /// Writes a row, then keeps it or not, or fails or panics after it.
    enum Write {
        Kept(i64),
        Discarded(i64),
        Failed(i64),
        Panicked(i64),
    }

    impl Job for Write {
        type Output = ();
        const TRANSACTION: bool = true;

        async fn run<S: RunSql>(self, sql: &mut S) -> Result<Done<()>, StoreError> {
            let (Self::Kept(v) | Self::Discarded(v) | Self::Failed(v) | Self::Panicked(v)) = self;
            sql.execute("INSERT INTO t (v) VALUES ($1)", &[Value::Int(v)])
                .await?;
            match self {
                Self::Kept(_) => Ok(Done::kept(())),
                Self::Discarded(_) => Ok(Done::discarded(())),
                Self::Failed(_) => Err(StoreError::Conflict("failed".into())),
                Self::Panicked(_) => panic!("a bug"),
            }
        }
    }

    fn thread() -> (tempfile::TempDir, SqliteThread) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v INTEGER NOT NULL);")
            .unwrap();
        drop(connection);
        let thread = SqliteThread::open(path.to_str().unwrap()).unwrap();
        (dir, thread)
    }

    #[tokio::test]
    async fn marks_bind_by_number_or_in_order() {
        let (_dir, thread) = thread();
        let numbered = Read("SELECT $2 || '-' || $1 AS v", vec![(true, 1), (false, 2)]);
        assert_eq!(thread.run(numbered).await.unwrap(), [Some("2-1".into())]);
        let anonymous = Read("SELECT ? || '-' || ? AS v", vec![(true, 1), (false, 2)]);
        assert_eq!(thread.run(anonymous).await.unwrap(), [Some("1-2".into())]);
        let missing = Read("SELECT $3 AS v", vec![(false, 1)]);
        assert!(matches!(
            thread.run(missing).await,
            Err(StoreError::Database(why)) if why.contains("no value")
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_of_one_transaction_keep_or_lose_their_own_writes() {
        let (_dir, thread) = thread();
        // Sent together, so they queue for one transaction.
        let (kept, discarded, failed, panicked, after) = tokio::join!(
            thread.run(Write::Kept(1)),
            thread.run(Write::Discarded(2)),
            thread.run(Write::Failed(3)),
            thread.run(Write::Panicked(4)),
            thread.run(Write::Kept(5)),
        );
        kept.unwrap();
        discarded.unwrap();
        assert!(matches!(failed, Err(StoreError::Conflict(_))));
        assert!(matches!(panicked, Err(StoreError::Database(why)) if why.contains("lost")));
        after.unwrap();
        let all = Read(
            "SELECT group_concat(v) AS v FROM (SELECT v FROM t ORDER BY v)",
            vec![],
        );
        assert_eq!(thread.run(all).await.unwrap(), [Some("1,5".into())]);
        // Closed, it refuses with a reason.
        thread.close().await;
        let late = thread.run(Write::Kept(6)).await;
        assert!(matches!(late, Err(StoreError::Database(why)) if why.contains("closed")));
    }
}
