//! The SQLite thread: the run path on SQLite (see `store::RunPath`). One
//! thread owns one connection to the store's file and runs each [`Job`]
//! whole, in one round trip, instead of one round trip to a connection's
//! thread per statement; and the jobs that queued while it worked share one
//! transaction and its commit (group commit).
//!
//! Why a thread of our own beside sqlx's pool: a served run waits for about
//! nine statements (its chat read, its turn, a step per model call, the
//! writer's batches), and through sqlx each was a hop to the connection's
//! thread and back, with the wake-ups on both sides; SQLite writes one
//! transaction at a time, so one thread loses no concurrency. Every other
//! statement (reads, leases, stops) stays on sqlx's pool; this connection
//! waits for their locks as they wait for its (`busy_timeout`). The turn
//! bench (64 runs at once) measured a served run's store work at 0.29-0.31
//! ms of CPU on this thread against 0.74-0.79 ms through one sqlx
//! connection, and a turn of a few bytes at 0.10-0.13 ms against 0.52-0.57
//! ms.
//!
//! Each job keeps or loses only its own writes: when one of a group does
//! not keep them (an error, a busy chat), the group runs again with each job
//! in a savepoint (see [`Connection::group`]). A job's answer is sent after
//! the commit that holds its writes, so nobody hears of a write that is not
//! durable; a failed commit fails every job of the group.
//!
//! The thread runs at a lower scheduling priority than the threads that
//! serve (a nice value [`NICE`] above the process's, on Linux): when the
//! cores are all busy, a stream's next delta goes before the store's next
//! commit, and the store catches up in the gaps (its jobs wait, the streams
//! do not). The relay bench with the server pinned to one core and 5,000
//! streams with the store on (more work than the core has time for) measured
//! a p99 delta latency of 810-1,370 ms in eight runs at the same priority and
//! 2.4-19 ms in ten runs with the thread at nice 10 (nice 5: 948-1,059 ms in
//! two), for the same CPU. With a core to spare, nothing changes.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::mpsc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, Value as SqliteValue, ValueRef};
use tokio::sync::oneshot;

use crate::error::StoreError;
use crate::sql::{Done, Job, RunSql, SqlRow, Value};
use crate::store::Backend;

/// How much lower the thread's priority is than the process's (see the
/// module docs): at 10, a busy serving thread gets about nine times its CPU
/// time when both want the same core (the kernel's weights 1,024 and 110).
const NICE: i32 = 10;

/// Jobs in one transaction, at most (a bound on how long the write lock is
/// held and on what one failed commit takes with it).
const GROUP: usize = 64;

/// A job on its way to the thread, with its answer once it ran.
trait Task: Send {
    /// Runs the job (again, when its group is run a second time); whether
    /// its writes are kept. A job that panicked keeps nothing.
    fn run(&mut self, connection: &mut Connection) -> bool;
    /// Answers the job's caller: its outcome, or the commit's error.
    fn answer(self: Box<Self>, committed: Result<(), &str>);
}

/// A [`Job`] as a [`Task`].
struct Queued<J: Job> {
    job: J,
    outcome: Option<Result<Done<J::Output>, StoreError>>,
    reply: oneshot::Sender<Result<J::Output, StoreError>>,
}

impl<J: Job> Task for Queued<J> {
    fn run(&mut self, connection: &mut Connection) -> bool {
        let job = &self.job;
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            complete(job.run(connection))
        }));
        self.outcome = ran.ok();
        matches!(self.outcome, Some(Ok(Done { keep: true, .. })))
    }

    fn answer(self: Box<Self>, committed: Result<(), &str>) {
        let outcome = match (committed, self.outcome) {
            (Ok(()), Some(outcome)) => outcome.map(|done| done.value),
            (Ok(()), None) => Err(StoreError::Database(
                "the store's SQLite thread lost the job".into(),
            )),
            (Err(error), _) => Err(StoreError::Database(error.to_owned())),
        };
        let _ = self.reply.send(outcome);
    }
}

enum Message {
    Job(Box<dyn Task>),
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
        let task = Box::new(Queued {
            job,
            outcome: None,
            reply,
        });
        self.sender.send(Message::Job(task)).map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
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
    yield_to_serving();
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

/// Lowers the calling thread's priority by [`NICE`] (Linux: a thread's
/// nice value is its own). Raising one's own nice value needs no privilege;
/// if it fails anyway, the thread runs as it would have.
fn yield_to_serving() {
    #[cfg(target_os = "linux")]
    {
        let me = Some(rustix::thread::gettid());
        let lowered = own_nice().and_then(|now| {
            rustix::process::setpriority_process(me, now.saturating_add(NICE).min(19))
        });
        if let Err(error) = lowered {
            tracing::debug!(%error, "the SQLite thread keeps its priority");
        }
    }
}

/// The calling thread's nice value.
#[cfg(target_os = "linux")]
fn own_nice() -> rustix::io::Result<i32> {
    rustix::process::getpriority_process(Some(rustix::thread::gettid()))
}

/// The thread's connection.
pub(crate) struct Connection(rusqlite::Connection);

impl Connection {
    /// Runs `tasks` in one transaction, then answers each with the commit's
    /// outcome. First as they come: when every job keeps its writes (nearly
    /// always) that is all. When one does not (an error, a busy chat, a
    /// decision made before), the transaction is rolled back and the jobs run
    /// again, each in a savepoint of its own, so each keeps or loses only its
    /// own writes. (A savepoint on every job would cost each page a job
    /// writes a copy into the savepoint's journal.)
    fn group(&mut self, mut tasks: Vec<Box<dyn Task>>) {
        let outcome = match self.each_kept(&mut tasks) {
            Ok(true) => self.control("COMMIT"),
            Ok(false) => {
                let _ = self.control("ROLLBACK");
                self.in_savepoints(&mut tasks)
            }
            Err(error) => Err(error),
        }
        .map_err(|error| error.to_string());
        if let Err(error) = &outcome {
            tracing::warn!(%error, "the SQLite thread's transaction failed");
            if !self.0.is_autocommit() {
                let _ = self.control("ROLLBACK");
            }
        }
        for task in tasks {
            task.answer(outcome.as_ref().map(|_| ()).map_err(String::as_str));
        }
    }

    /// Begins the group's transaction and runs `tasks` in it until one does
    /// not keep its writes; whether all did.
    fn each_kept(&mut self, tasks: &mut [Box<dyn Task>]) -> rusqlite::Result<bool> {
        self.control("BEGIN IMMEDIATE")?;
        for task in tasks.iter_mut() {
            if !task.run(self) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Runs `tasks` in one transaction, each in a savepoint; the commit's
    /// outcome.
    fn in_savepoints(&mut self, tasks: &mut [Box<dyn Task>]) -> rusqlite::Result<()> {
        self.control("BEGIN IMMEDIATE")?;
        for task in tasks.iter_mut() {
            self.control("SAVEPOINT job")?;
            if !task.run(self) {
                self.control("ROLLBACK TO job")?;
            }
            self.control("RELEASE job")?;
        }
        self.control("COMMIT")
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

    fn backend(&self) -> Backend {
        Backend::Sqlite
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

        async fn run<S: RunSql>(&self, sql: &mut S) -> Result<Done<Self::Output>, StoreError> {
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

        async fn run<S: RunSql>(&self, sql: &mut S) -> Result<Done<()>, StoreError> {
            let (Self::Kept(v) | Self::Discarded(v) | Self::Failed(v) | Self::Panicked(v)) = *self;
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

    /// Says the priority and the name of the thread it runs on.
    #[cfg(target_os = "linux")]
    struct Priority;

    #[cfg(target_os = "linux")]
    impl Job for Priority {
        type Output = (i32, String);
        const TRANSACTION: bool = false;

        async fn run<S: RunSql>(&self, _sql: &mut S) -> Result<Done<Self::Output>, StoreError> {
            let nice = own_nice().map_err(|e| StoreError::Database(e.to_string()))?;
            let name = std::thread::current().name().unwrap_or_default().to_owned();
            Ok(Done::kept((nice, name)))
        }
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_thread_yields_to_the_serving_threads() {
        let (_dir, thread) = thread();
        let serving = own_nice().unwrap();
        let (nice, name) = thread.run(Priority).await.unwrap();
        assert_eq!(name, "agent-store-sqlite");
        assert_eq!(nice, (serving + NICE).min(19));
    }
}
