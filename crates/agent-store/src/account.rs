//! One account's rows: threads, messages, runs, events, usage, paused runs.

use ai_core::{AiEvent, Message};
use serde_json::Value;
use sqlx::any::AnyRow;
use sqlx::{AnyPool, Row};

use crate::error::StoreError;
use crate::sql::{Done, Job, RunSql, Value as Bound};
use crate::store::RunPath;

/// A conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// Its id (chosen by the caller: a chat id, a CLI thread name).
    pub id: String,
    /// Shown in lists.
    pub title: String,
    /// The graph its runs use.
    pub graph: String,
    /// Unix milliseconds.
    pub created_ms: i64,
    /// Unix milliseconds of the last message or rename.
    pub updated_ms: i64,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunStatus {
    /// In progress in the process that owns it.
    Running,
    /// Waiting for approvals or client tool outputs (its state in the store).
    Paused,
    /// Finished with an answer.
    Done,
    /// Ended with an error.
    Failed,
    /// Its process stopped while it ran.
    Interrupted,
}

impl RunStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
        }
    }

    fn parse(text: &str) -> Result<Self, StoreError> {
        Ok(match text {
            "running" => Self::Running,
            "paused" => Self::Paused,
            "done" => Self::Done,
            "failed" => Self::Failed,
            "interrupted" => Self::Interrupted,
            other => return Err(StoreError::Corrupt(format!("run status `{other}`"))),
        })
    }
}

/// A run as it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    /// The run id (the events' `run_id`).
    pub id: String,
    /// The thread it continues, if any.
    pub thread_id: Option<String>,
    /// The graph.
    pub graph: String,
    /// The model id.
    pub model: String,
    /// The run's prompt hash, when it has one.
    pub prompt_hash: Option<String>,
    /// Who runs it: the instance id of the process that owns it (see
    /// [`crate::Store::renew_instance`]), or a fixed name for an engine that
    /// answers for its runs itself (`restate`).
    pub owner: String,
    /// Unix milliseconds.
    pub started_ms: i64,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// What it started as.
    pub run: NewRun,
    /// Where it is.
    pub status: RunStatus,
    /// Why it failed or was interrupted.
    pub error: Option<String>,
    /// Unix milliseconds of the last status change.
    pub updated_ms: i64,
    /// Its fencing generation: 0 when it starts, raised each time another
    /// process takes it over ([`crate::Store::claim_run`]).
    pub lease_gen: i64,
    /// How many times its event log was started over
    /// ([`AccountStore::clear_events`]): 0 for a run that never went on after
    /// its process died.
    pub attempt: i64,
}

/// Who may write a run's steps: its owner and the generation under which the
/// owner holds it (see [`AccountStore::record_step`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The owning instance's id.
    pub owner: String,
    /// The run's generation when the owner took it.
    pub generation: i64,
}

impl Fence {
    /// The error of a write under this fence once it no longer holds run
    /// `run_id`.
    pub(crate) fn lost(&self, run_id: &str) -> StoreError {
        StoreError::Fenced(format!(
            "run `{run_id}` is no longer held by this process (generation {})",
            self.generation
        ))
    }
}

/// One event of a run's log.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Its position in the run (from 0, contiguous).
    pub seq: u64,
    /// Unix milliseconds when it was written.
    pub at_ms: i64,
    /// The event.
    pub event: AiEvent,
}

/// What one model call used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallUsage {
    /// The run.
    pub run_id: String,
    /// The model call's position in the run (from 0).
    pub call_seq: u64,
    /// The run's thread, if any.
    pub thread_id: Option<String>,
    /// The model the call asked for (the configured name; rows written by
    /// earlier versions hold the provider's name).
    pub model: String,
    /// The model the provider said served the call, when it is another one.
    pub response_model: Option<String>,
    /// Prompt tokens (cache reads and writes included).
    pub prompt_tokens: u64,
    /// Completion tokens (reasoning included).
    pub completion_tokens: u64,
    /// Prompt tokens read from a cache, when reported.
    pub cached_tokens: Option<u64>,
    /// Prompt tokens written to a cache, when reported.
    pub cache_creation_tokens: Option<u64>,
    /// Completion tokens spent on reasoning, when reported.
    pub reasoning_tokens: Option<u64>,
    /// Cost in millionths of the pricing currency, when known.
    pub cost_micros: Option<i64>,
    /// Unix milliseconds.
    pub at_ms: i64,
}

/// How [`AccountStore::usage`] groups the facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UsageGrouping {
    /// By model id.
    Model,
    /// By UTC day (`YYYY-MM-DD`).
    Day,
    /// By thread id (`-` for runs without one).
    Thread,
}

/// One line of a usage report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageRow {
    /// The model, day or thread.
    pub key: String,
    /// Model calls.
    pub calls: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Cost of the calls whose cost is known.
    pub cost_micros: i64,
    /// Calls whose cost is not known.
    pub calls_without_cost: u64,
}

impl UsageRow {
    /// Adds one model call's usage.
    fn add(&mut self, fact: &CallUsage) {
        self.calls += 1;
        self.prompt_tokens += fact.prompt_tokens;
        self.completion_tokens += fact.completion_tokens;
        self.cached_tokens += fact.cached_tokens.unwrap_or(0);
        match fact.cost_micros {
            Some(cost) => self.cost_micros += cost,
            None => self.calls_without_cost += 1,
        }
    }

    /// Prompt and completion tokens together.
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// The usage facts of `rows` summed in one row keyed `key`.
/// Which usage facts of an account a query reads.
enum Facts<'a> {
    /// Those of one run.
    Run(&'a str),
    /// Those of one thread's runs.
    Thread(&'a str),
    /// Those recorded since a time (Unix ms).
    Since(i64),
}

fn summed(key: &str, rows: &[AnyRow]) -> Result<UsageRow, StoreError> {
    let mut total = UsageRow {
        key: key.to_owned(),
        ..UsageRow::default()
    };
    for row in rows {
        total.add(&usage_of(row)?);
    }
    Ok(total)
}

/// [`AccountStore::record_step`] on the run path: how many rows it wrote.
struct RecordStep {
    account: String,
    run_id: String,
    step: (u32, String),
    body: String,
    now_ms: i64,
    fence: Option<Fence>,
}

impl Job for RecordStep {
    type Output = u64;
    const TRANSACTION: bool = false;

    async fn run<S: RunSql>(&self, sql: &mut S) -> Result<Done<u64>, StoreError> {
        let statement = match &self.fence {
            None => {
                "INSERT INTO run_steps (account_id, run_id, step, kind, body, at_ms) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (account_id, run_id, step, kind) DO NOTHING"
            }
            Some(_) if sql.backend() == crate::Backend::Sqlite => {
                "INSERT INTO run_steps (account_id, run_id, step, kind, body, at_ms) SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM runs WHERE account_id = $1 AND id = $2 AND owner = $7 AND lease_gen = $8 AND status = 'running') ON CONFLICT (account_id, run_id, step, kind) DO NOTHING"
            }
            Some(_) => {
                "WITH held AS (UPDATE runs SET updated_ms = $6 WHERE account_id = $1 AND id = $2 AND owner = $7 AND lease_gen = $8 AND status = 'running' RETURNING id) INSERT INTO run_steps (account_id, run_id, step, kind, body, at_ms) SELECT $1, $2, $3, $4, $5, $6 FROM held ON CONFLICT (account_id, run_id, step, kind) DO NOTHING"
            }
        };
        let mut args = vec![
            Bound::Text(&self.account),
            Bound::Text(&self.run_id),
            Bound::Int(i64::from(self.step.0)),
            Bound::Text(&self.step.1),
            Bound::Text(&self.body),
            Bound::Int(self.now_ms),
        ];
        if let Some(fence) = &self.fence {
            args.extend([Bound::Text(&fence.owner), Bound::Int(fence.generation)]);
        }
        Ok(Done::kept(sql.execute(statement, &args).await?))
    }
}

/// The rows of one account (see [`crate::Store::account`]).
#[derive(Debug)]
pub struct AccountStore<'a> {
    pool: &'a AnyPool,
    run_path: &'a RunPath,
    account: String,
}

fn int(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Conflict(format!("{what} {value} is too large")))
}

fn count(value: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("{what} {value}")))
}

fn opt_count(value: Option<i64>, what: &str) -> Result<Option<u64>, StoreError> {
    value.map(|v| count(v, what)).transpose()
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Conflict(format!("not serializable: {e}")))
}

fn parse<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn thread_of(row: &AnyRow) -> Result<Thread, StoreError> {
    Ok(Thread {
        id: row.try_get("id")?,
        title: row.try_get("title")?,
        graph: row.try_get("graph")?,
        created_ms: row.try_get("created_ms")?,
        updated_ms: row.try_get("updated_ms")?,
    })
}

fn run_of(row: &AnyRow) -> Result<RunRecord, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(RunRecord {
        run: NewRun {
            id: row.try_get("id")?,
            thread_id: row.try_get("thread_id")?,
            graph: row.try_get("graph")?,
            model: row.try_get("model")?,
            prompt_hash: row.try_get("prompt_hash")?,
            owner: row.try_get("owner")?,
            started_ms: row.try_get("started_ms")?,
        },
        status: RunStatus::parse(&status)?,
        error: row.try_get("error")?,
        updated_ms: row.try_get("updated_ms")?,
        lease_gen: row.try_get("lease_gen")?,
        attempt: row.try_get("attempt")?,
    })
}

/// How much of a thread a write keeps.
#[derive(Debug, Clone, Copy)]
enum Kept {
    /// Everything: the messages are appended.
    All,
    /// The first this many; the rest is replaced.
    First(u64),
}

const RUN_COLUMNS: &str = "id, thread_id, graph, model, prompt_hash, owner, started_ms, status, error, updated_ms, lease_gen, attempt";

impl<'a> AccountStore<'a> {
    pub(crate) fn new(pool: &'a AnyPool, run_path: &'a RunPath, account: String) -> Self {
        Self {
            pool,
            run_path,
            account,
        }
    }

    /// Where the statements a run waits for go (see [`RunPath`]).
    pub(crate) fn run_path(&self) -> &'a RunPath {
        self.run_path
    }

    /// The pool (for the modules that add queries of their own).
    pub(crate) fn pool(&self) -> &'a AnyPool {
        self.pool
    }

    /// The account.
    pub fn account_id(&self) -> &str {
        &self.account
    }

    /// Creates `thread`; `false` when a thread with its id exists (left as it is).
    pub async fn create_thread(&self, thread: &Thread) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO threads (account_id, id, title, graph, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (account_id, id) DO NOTHING",
        )
        .bind(&self.account)
        .bind(&thread.id)
        .bind(&thread.title)
        .bind(&thread.graph)
        .bind(thread.created_ms)
        .bind(thread.updated_ms)
        .execute(self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The account's threads, most recently updated first, at most `limit`.
    pub async fn threads(&self, limit: u32) -> Result<Vec<Thread>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, title, graph, created_ms, updated_ms FROM threads WHERE account_id = $1 ORDER BY updated_ms DESC, id LIMIT $2",
        )
        .bind(&self.account)
        .bind(i64::from(limit))
        .fetch_all(self.pool)
        .await?;
        rows.iter().map(thread_of).collect()
    }

    /// One thread.
    pub async fn thread(&self, id: &str) -> Result<Option<Thread>, StoreError> {
        let row = sqlx::query(
            "SELECT id, title, graph, created_ms, updated_ms FROM threads WHERE account_id = $1 AND id = $2",
        )
        .bind(&self.account)
        .bind(id)
        .fetch_optional(self.pool)
        .await?;
        row.as_ref().map(thread_of).transpose()
    }

    /// Renames a thread; `false` when it does not exist.
    pub async fn rename_thread(
        &self,
        id: &str,
        title: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE threads SET title = $1, updated_ms = $2 WHERE account_id = $3 AND id = $4",
        )
        .bind(title)
        .bind(now_ms)
        .bind(&self.account)
        .bind(id)
        .execute(self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes a thread with its messages, runs, events and paused runs (usage
    /// facts stay: they are the billing record); `false` when it does not exist.
    pub async fn delete_thread(&self, id: &str) -> Result<bool, StoreError> {
        let mut transaction = self.pool.begin().await?;
        for sql in [
            "DELETE FROM run_events WHERE account_id = $1 AND run_id IN (SELECT id FROM runs WHERE account_id = $1 AND thread_id = $2)",
            "DELETE FROM paused_runs WHERE account_id = $1 AND run_id IN (SELECT id FROM runs WHERE account_id = $1 AND thread_id = $2)",
            "DELETE FROM run_steps WHERE account_id = $1 AND run_id IN (SELECT id FROM runs WHERE account_id = $1 AND thread_id = $2)",
            "DELETE FROM run_starts WHERE account_id = $1 AND run_id IN (SELECT id FROM runs WHERE account_id = $1 AND thread_id = $2)",
            "DELETE FROM runs WHERE account_id = $1 AND thread_id = $2",
            "DELETE FROM thread_messages WHERE account_id = $1 AND thread_id = $2",
        ] {
            sqlx::query(sql)
                .bind(&self.account)
                .bind(id)
                .execute(&mut *transaction)
                .await?;
        }
        let done = sqlx::query("DELETE FROM threads WHERE account_id = $1 AND id = $2")
            .bind(&self.account)
            .bind(id)
            .execute(&mut *transaction)
            .await?;
        transaction.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// Appends `messages` to the thread (written by `run_id`, if any) and touches
    /// it; returns the number of messages the thread then holds. The thread must
    /// exist.
    pub async fn append_messages(
        &self,
        thread_id: &str,
        run_id: Option<&str>,
        messages: &[Message],
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        self.write_messages(thread_id, run_id, Kept::All, messages, now_ms)
            .await
    }

    /// Makes the thread `conversation`, given that its first `kept` messages are
    /// already stored as they are there: what the thread holds from position
    /// `kept` on (a rewound or regenerated turn) is replaced by the rest of
    /// `conversation`. A thread holding fewer than `kept` messages (a record that
    /// was lost) gets the missing ones from `conversation` too. Touches the
    /// thread; returns the number of messages it then holds. The thread must
    /// exist.
    pub async fn replace_messages(
        &self,
        thread_id: &str,
        run_id: Option<&str>,
        kept: u64,
        conversation: &[Message],
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        self.write_messages(thread_id, run_id, Kept::First(kept), conversation, now_ms)
            .await
    }

    async fn write_messages(
        &self,
        thread_id: &str,
        run_id: Option<&str>,
        kept: Kept,
        messages: &[Message],
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        let mut transaction = self.pool.begin().await?;
        let touched =
            sqlx::query("UPDATE threads SET updated_ms = $1 WHERE account_id = $2 AND id = $3")
                .bind(now_ms)
                .bind(&self.account)
                .bind(thread_id)
                .execute(&mut *transaction)
                .await?;
        if touched.rows_affected() != 1 {
            return Err(StoreError::Conflict(format!("no thread `{thread_id}`")));
        }
        let stored: i64 = sqlx::query(
            "SELECT COALESCE(MAX(seq) + 1, 0) AS next FROM thread_messages WHERE account_id = $1 AND thread_id = $2",
        )
        .bind(&self.account)
        .bind(thread_id)
        .fetch_one(&mut *transaction)
        .await?
        .try_get("next")?;
        let (next, new) = match kept {
            Kept::All => (stored, messages),
            Kept::First(kept) => {
                let next = stored.min(i64::try_from(kept).unwrap_or(i64::MAX));
                sqlx::query(
                    "DELETE FROM thread_messages WHERE account_id = $1 AND thread_id = $2 AND seq >= $3",
                )
                .bind(&self.account)
                .bind(thread_id)
                .bind(next)
                .execute(&mut *transaction)
                .await?;
                let from = usize::try_from(next).unwrap_or(usize::MAX);
                (next, messages.get(from..).unwrap_or_default())
            }
        };
        for (offset, message) in (0i64..).zip(new) {
            sqlx::query(
                "INSERT INTO thread_messages (account_id, thread_id, seq, run_id, message) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&self.account)
            .bind(thread_id)
            .bind(next + offset)
            .bind(run_id)
            .bind(json(message)?)
            .execute(&mut *transaction)
            .await?;
        }
        transaction.commit().await?;
        count(next, "message count").map(|n| n + new.len() as u64)
    }

    /// The thread's messages, in order.
    pub async fn messages(&self, thread_id: &str) -> Result<Vec<Message>, StoreError> {
        let rows = sqlx::query(
            "SELECT message FROM thread_messages WHERE account_id = $1 AND thread_id = $2 ORDER BY seq",
        )
        .bind(&self.account)
        .bind(thread_id)
        .fetch_all(self.pool)
        .await?;
        rows.iter()
            .map(|row| parse(&row.try_get::<String, _>("message")?, "message"))
            .collect()
    }

    /// Records a run as `running`; a repeat of the same start is a no-op.
    pub async fn start_run(&self, run: &NewRun) -> Result<(), StoreError> {
        let (sql, args) = insert_run(&self.account, run, true);
        let done = crate::sql::query(sql, &args).execute(self.pool).await?;
        if done.rows_affected() == 0 {
            let stored = self.run(&run.id).await?;
            if stored.as_ref().map(|r| &r.run) != Some(run) {
                return Err(StoreError::Conflict(format!("run `{}` exists", run.id)));
            }
        }
        Ok(())
    }

    /// Sets a run's status (and error); `false` when the run does not exist.
    pub async fn set_run_status(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE runs SET status = $1, error = $2, updated_ms = $3 WHERE account_id = $4 AND id = $5",
        )
        .bind(status.as_str())
        .bind(error)
        .bind(now_ms)
        .bind(&self.account)
        .bind(run_id)
        .execute(self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// One run.
    pub async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE account_id = $1 AND id = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&self.account)
            .bind(run_id)
            .fetch_optional(self.pool)
            .await?;
        row.as_ref().map(run_of).transpose()
    }

    /// The most recent runs, newest first, at most `limit`.
    pub async fn recent_runs(&self, limit: u32) -> Result<Vec<RunRecord>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE account_id = $1 ORDER BY started_ms DESC, id LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&self.account)
            .bind(i64::from(limit))
            .fetch_all(self.pool)
            .await?;
        rows.iter().map(run_of).collect()
    }

    /// The runs of a thread, oldest first.
    pub async fn runs_of_thread(&self, thread_id: &str) -> Result<Vec<RunRecord>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE account_id = $1 AND thread_id = $2 ORDER BY started_ms, id"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&self.account)
            .bind(thread_id)
            .fetch_all(self.pool)
            .await?;
        rows.iter().map(run_of).collect()
    }

    /// The thread's latest run (the last [`AccountStore::runs_of_thread`] gives).
    pub async fn latest_run(&self, thread_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE account_id = $1 AND thread_id = $2 ORDER BY started_ms DESC, id DESC LIMIT 1"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&self.account)
            .bind(thread_id)
            .fetch_optional(self.pool)
            .await?;
        row.as_ref().map(run_of).transpose()
    }

    /// Appends events `first_seq..` of a run in one transaction (one statement per
    /// 100 events). Idempotent: an event already stored at its position is skipped
    /// when it is the same, and a [`StoreError::Conflict`] when it differs.
    pub async fn append_events(
        &self,
        run_id: &str,
        first_seq: u64,
        events: &[AiEvent],
        at_ms: i64,
    ) -> Result<(), StoreError> {
        let mut transaction = self.pool.begin().await?;
        let mut seq = first_seq;
        for chunk in events.chunks(crate::batch::ROWS_PER_STATEMENT) {
            let rows: Vec<(i64, String)> = chunk
                .iter()
                .zip(seq..)
                .map(|(event, seq)| Ok((int(seq, "event seq")?, json(event)?)))
                .collect::<Result<_, StoreError>>()?;
            let marks = crate::sql::RunSql::marks(&*transaction);
            let sql = crate::batch::insert_sql(rows.len(), marks);
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (seq, text) in &rows {
                query = query
                    .bind(&self.account)
                    .bind(run_id)
                    .bind(*seq)
                    .bind(at_ms)
                    .bind(text);
            }
            let inserted = query.fetch_all(&mut *transaction).await?;
            if inserted.len() < rows.len() {
                let fresh: Vec<i64> = inserted
                    .iter()
                    .map(|row| row.try_get("seq"))
                    .collect::<Result<_, _>>()?;
                for (seq, text) in rows.iter().filter(|(seq, _)| !fresh.contains(seq)) {
                    self.same_event(&mut transaction, run_id, *seq, text)
                        .await?;
                }
            }
            seq += chunk.len() as u64;
        }
        transaction.commit().await?;
        Ok(())
    }

    /// The event stored at `seq` of a run, as stored.
    pub(crate) async fn stored_event(
        &self,
        run_id: &str,
        seq: i64,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT event FROM run_events WHERE account_id = $1 AND run_id = $2 AND seq = $3",
        )
        .bind(&self.account)
        .bind(run_id)
        .bind(seq)
        .fetch_optional(self.pool)
        .await?;
        Ok(row.map(|row| row.try_get("event")).transpose()?)
    }

    /// Checks that the event stored at `seq` is `text` (a repeated append).
    async fn same_event(
        &self,
        transaction: &mut sqlx::Transaction<'_, sqlx::Any>,
        run_id: &str,
        seq: i64,
        text: &str,
    ) -> Result<(), StoreError> {
        let stored: String = sqlx::query(
            "SELECT event FROM run_events WHERE account_id = $1 AND run_id = $2 AND seq = $3",
        )
        .bind(&self.account)
        .bind(run_id)
        .bind(seq)
        .fetch_one(&mut **transaction)
        .await?
        .try_get("event")?;
        if stored == text {
            Ok(())
        } else {
            Err(StoreError::Conflict(format!(
                "event {seq} of run `{run_id}` is stored with other content"
            )))
        }
    }

    /// A run's events after `after_seq` (all when `None`), in order.
    pub async fn events(
        &self,
        run_id: &str,
        after_seq: Option<u64>,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let after = after_seq
            .map(|s| int(s, "event seq"))
            .transpose()?
            .unwrap_or(-1);
        let rows = sqlx::query(
            "SELECT seq, at_ms, event FROM run_events WHERE account_id = $1 AND run_id = $2 AND seq > $3 ORDER BY seq",
        )
        .bind(&self.account)
        .bind(run_id)
        .bind(after)
        .fetch_all(self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(StoredEvent {
                    seq: count(row.try_get("seq")?, "event seq")?,
                    at_ms: row.try_get("at_ms")?,
                    event: parse(&row.try_get::<String, _>("event")?, "event")?,
                })
            })
            .collect()
    }

    /// Records one model call's usage. Idempotent per `(run_id, call_seq)`: a
    /// repeat is a no-op, other numbers for the same call a
    /// [`StoreError::Conflict`].
    pub async fn record_usage(&self, fact: &CallUsage) -> Result<(), StoreError> {
        let opt = |v: Option<u64>, what| v.map(|v| int(v, what)).transpose();
        let done = sqlx::query(
            "INSERT INTO usage_facts (account_id, run_id, call_seq, thread_id, model, prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens, reasoning_tokens, cost_micros, at_ms, response_model) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (account_id, run_id, call_seq) DO NOTHING",
        )
        .bind(&self.account)
        .bind(&fact.run_id)
        .bind(int(fact.call_seq, "call seq")?)
        .bind(fact.thread_id.as_deref())
        .bind(&fact.model)
        .bind(int(fact.prompt_tokens, "prompt tokens")?)
        .bind(int(fact.completion_tokens, "completion tokens")?)
        .bind(opt(fact.cached_tokens, "cached tokens")?)
        .bind(opt(fact.cache_creation_tokens, "cache creation tokens")?)
        .bind(opt(fact.reasoning_tokens, "reasoning tokens")?)
        .bind(fact.cost_micros)
        .bind(fact.at_ms)
        .bind(fact.response_model.as_deref())
        .execute(self.pool)
        .await?;
        if done.rows_affected() == 0 {
            let stored = self.usage_fact(&fact.run_id, fact.call_seq).await?;
            let same = stored.is_some_and(|s| {
                CallUsage {
                    at_ms: fact.at_ms,
                    ..s
                } == *fact
            });
            if !same {
                return Err(StoreError::Conflict(format!(
                    "usage of call {} of run `{}` is stored with other numbers",
                    fact.call_seq, fact.run_id
                )));
            }
        }
        Ok(())
    }

    /// The usage of model call `call_seq` (from 0) of run `run_id`, when it
    /// is stored for this account.
    pub async fn usage_fact(
        &self,
        run_id: &str,
        call_seq: u64,
    ) -> Result<Option<CallUsage>, StoreError> {
        let row = sqlx::query(
            "SELECT run_id, call_seq, thread_id, model, prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens, reasoning_tokens, cost_micros, at_ms, response_model FROM usage_facts WHERE account_id = $1 AND run_id = $2 AND call_seq = $3",
        )
        .bind(&self.account)
        .bind(run_id)
        .bind(int(call_seq, "call seq")?)
        .fetch_optional(self.pool)
        .await?;
        row.as_ref().map(usage_of).transpose()
    }

    /// The usage facts since `since_ms`, grouped, largest prompt first.
    pub async fn usage(
        &self,
        since_ms: i64,
        grouping: UsageGrouping,
    ) -> Result<Vec<UsageRow>, StoreError> {
        let rows = self.usage_facts(Facts::Since(since_ms)).await?;
        let mut groups: std::collections::BTreeMap<String, UsageRow> = Default::default();
        for row in &rows {
            let fact = usage_of(row)?;
            let key = match grouping {
                UsageGrouping::Model => fact.model.clone(),
                UsageGrouping::Day => utc_day(fact.at_ms),
                UsageGrouping::Thread => fact.thread_id.clone().unwrap_or_else(|| "-".into()),
            };
            let group = groups.entry(key.clone()).or_insert_with(|| UsageRow {
                key,
                ..UsageRow::default()
            });
            group.add(&fact);
        }
        let mut out: Vec<UsageRow> = groups.into_values().collect();
        out.sort_by(|a, b| {
            b.prompt_tokens
                .cmp(&a.prompt_tokens)
                .then(a.key.cmp(&b.key))
        });
        Ok(out)
    }

    /// The usage of run `run_id` (its key the run id): every model call it
    /// made, zero when it made none or is not this account's.
    pub async fn usage_of_run(&self, run_id: &str) -> Result<UsageRow, StoreError> {
        let rows = self.usage_facts(Facts::Run(run_id)).await?;
        summed(run_id, &rows)
    }

    /// The usage of thread `thread_id` (its key the thread id): every model
    /// call of its runs.
    pub async fn usage_of_thread(&self, thread_id: &str) -> Result<UsageRow, StoreError> {
        let rows = self.usage_facts(Facts::Thread(thread_id)).await?;
        summed(thread_id, &rows)
    }

    /// The account's usage since `since_ms` (0: all of it), in one row keyed
    /// by the account's name.
    pub async fn usage_total(&self, since_ms: i64) -> Result<UsageRow, StoreError> {
        let rows = self.usage_facts(Facts::Since(since_ms)).await?;
        summed(&self.account, &rows)
    }

    /// The account's usage facts that `facts` selects.
    async fn usage_facts(&self, facts: Facts<'_>) -> Result<Vec<AnyRow>, StoreError> {
        let query = match facts {
            Facts::Run(run_id) => sqlx::query("SELECT run_id, call_seq, thread_id, model, prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens, reasoning_tokens, cost_micros, at_ms, response_model FROM usage_facts WHERE account_id = $1 AND run_id = $2")
                .bind(&self.account)
                .bind(run_id),
            Facts::Thread(thread_id) => sqlx::query("SELECT run_id, call_seq, thread_id, model, prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens, reasoning_tokens, cost_micros, at_ms, response_model FROM usage_facts WHERE account_id = $1 AND thread_id = $2")
                .bind(&self.account)
                .bind(thread_id),
            Facts::Since(since_ms) => sqlx::query("SELECT run_id, call_seq, thread_id, model, prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens, reasoning_tokens, cost_micros, at_ms, response_model FROM usage_facts WHERE account_id = $1 AND at_ms >= $2")
                .bind(&self.account)
                .bind(since_ms),
        };
        Ok(query.fetch_all(self.pool).await?)
    }

    /// Stores (or replaces) the serialized state of a paused run.
    pub async fn save_paused(
        &self,
        run_id: &str,
        state: &Value,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO paused_runs (account_id, run_id, state, created_ms) VALUES ($1, $2, $3, $4) ON CONFLICT (account_id, run_id) DO UPDATE SET state = excluded.state, created_ms = excluded.created_ms",
        )
        .bind(&self.account)
        .bind(run_id)
        .bind(json(state)?)
        .bind(now_ms)
        .execute(self.pool)
        .await?;
        Ok(())
    }

    /// Records step `step` of kind `kind` of run `run_id` (`body`: its JSON),
    /// durably before it returns. A step already recorded with that number and
    /// kind is kept as it is (the first record wins; a retry is a no-op).
    ///
    /// With a `fence`, the step is recorded only while the run is `running`
    /// under that owner and generation, checked by the statement that
    /// records it (on Postgres it locks the run's row, so a takeover waits
    /// for it and then reads the step; SQLite runs one writing statement at a
    /// time): [`StoreError::Fenced`] otherwise, and nothing is written. One
    /// statement, no transaction around it: a step is on the run's way to
    /// every model call and every tool call.
    pub async fn record_step(
        &self,
        run_id: &str,
        (step, kind): (u32, &str),
        body: &str,
        (now_ms, fence): (i64, Option<&Fence>),
    ) -> Result<(), StoreError> {
        let job = RecordStep {
            account: self.account.clone(),
            run_id: run_id.to_owned(),
            step: (step, kind.to_owned()),
            body: body.to_owned(),
            now_ms,
            fence: fence.cloned(),
        };
        let written = self.run_path.run(job).await?;
        // Nothing written: the step was recorded before, or the run is no
        // longer held (told apart only then).
        if let Some(fence) = fence
            && written == 0
            && !self.holds(run_id, fence).await?
        {
            return Err(fence.lost(run_id));
        }
        Ok(())
    }

    /// Whether run `run_id` is `running` under `fence` (its owner and
    /// generation).
    pub async fn holds(&self, run_id: &str, fence: &Fence) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT 1 AS held FROM runs WHERE account_id = $1 AND id = $2 AND owner = $3 AND lease_gen = $4 AND status = 'running'",
        )
        .bind(&self.account)
        .bind(run_id)
        .bind(&fence.owner)
        .bind(fence.generation)
        .fetch_optional(self.pool)
        .await?;
        Ok(row.is_some())
    }

    /// The steps of run `run_id`: `(step, kind, body)`, in step order.
    pub async fn steps(&self, run_id: &str) -> Result<Vec<(u32, String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT step, kind, body FROM run_steps WHERE account_id = $1 AND run_id = $2 ORDER BY step, kind",
        )
        .bind(&self.account)
        .bind(run_id)
        .fetch_all(self.pool)
        .await?;
        let mut steps = Vec::with_capacity(rows.len());
        for row in &rows {
            let step: i64 = row.try_get("step")?;
            let step = u32::try_from(step)
                .map_err(|_| StoreError::Corrupt(format!("step number {step}")))?;
            steps.push((step, row.try_get("kind")?, row.try_get("body")?));
        }
        Ok(steps)
    }

    /// Saves how durable run `run_id` starts (its JSON), once: a start already
    /// saved is kept.
    pub async fn save_start(
        &self,
        run_id: &str,
        start: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let (sql, args) = insert_start(&self.account, run_id, start, now_ms);
        crate::sql::query(sql, &args).execute(self.pool).await?;
        Ok(())
    }

    /// The saved start of durable run `run_id` ([`AccountStore::save_start`]).
    pub async fn start_of(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT start FROM run_starts WHERE account_id = $1 AND run_id = $2")
            .bind(&self.account)
            .bind(run_id)
            .fetch_optional(self.pool)
            .await?;
        Ok(row.map(|row| row.try_get("start")).transpose()?)
    }

    /// Makes the interrupted run `run_id` running again, owned by `owner`
    /// under a new generation: its fence for the one caller that does (a run
    /// is resumed once), `None` for the others.
    pub async fn reopen_run(
        &self,
        run_id: &str,
        owner: &str,
        now_ms: i64,
    ) -> Result<Option<Fence>, StoreError> {
        let row = sqlx::query(
            "UPDATE runs SET status = 'running', owner = $1, lease_gen = lease_gen + 1, error = NULL, updated_ms = $2 WHERE account_id = $3 AND id = $4 AND status = 'interrupted' RETURNING lease_gen",
        )
        .bind(owner)
        .bind(now_ms)
        .bind(&self.account)
        .bind(run_id)
        .fetch_optional(self.pool)
        .await?;
        row.map(|row| {
            Ok(Fence {
                owner: owner.to_owned(),
                generation: row.try_get("lease_gen")?,
            })
        })
        .transpose()
    }

    /// Deletes the event log of run `run_id` (a durable run started again
    /// writes it anew, its recorded steps first) and, when it held rows, counts
    /// the attempt ([`RunRecord::attempt`]); returns the rows deleted.
    pub async fn clear_events(&self, run_id: &str) -> Result<u64, StoreError> {
        let mut transaction = self.pool.begin().await?;
        let done = sqlx::query("DELETE FROM run_events WHERE account_id = $1 AND run_id = $2")
            .bind(&self.account)
            .bind(run_id)
            .execute(&mut *transaction)
            .await?;
        // A log that held nothing was read by no one: no new attempt to tell.
        if done.rows_affected() > 0 {
            sqlx::query("UPDATE runs SET attempt = attempt + 1 WHERE account_id = $1 AND id = $2")
                .bind(&self.account)
                .bind(run_id)
                .execute(&mut *transaction)
                .await?;
        }
        transaction.commit().await?;
        Ok(done.rows_affected())
    }

    /// Removes and returns the state of a paused run: one caller resumes it.
    pub async fn take_paused(&self, run_id: &str) -> Result<Option<Value>, StoreError> {
        let row = sqlx::query(
            "DELETE FROM paused_runs WHERE account_id = $1 AND run_id = $2 RETURNING state",
        )
        .bind(&self.account)
        .bind(run_id)
        .fetch_optional(self.pool)
        .await?;
        row.map(|row| parse(&row.try_get::<String, _>("state")?, "paused run"))
            .transpose()
    }
}

fn usage_of(row: &AnyRow) -> Result<CallUsage, StoreError> {
    Ok(CallUsage {
        run_id: row.try_get("run_id")?,
        call_seq: count(row.try_get("call_seq")?, "call seq")?,
        thread_id: row.try_get("thread_id")?,
        model: row.try_get("model")?,
        response_model: row.try_get("response_model")?,
        prompt_tokens: count(row.try_get("prompt_tokens")?, "prompt tokens")?,
        completion_tokens: count(row.try_get("completion_tokens")?, "completion tokens")?,
        cached_tokens: opt_count(row.try_get("cached_tokens")?, "cached tokens")?,
        cache_creation_tokens: opt_count(
            row.try_get("cache_creation_tokens")?,
            "cache creation tokens",
        )?,
        reasoning_tokens: opt_count(row.try_get("reasoning_tokens")?, "reasoning tokens")?,
        cost_micros: row.try_get("cost_micros")?,
        at_ms: row.try_get("at_ms")?,
    })
}

/// `YYYY-MM-DD` of Unix milliseconds, in UTC (`-` when out of range).
fn utc_day(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| "-".into())
}

/// The insert of `run` of `account` as `running`; `once`: a run that exists
/// already is left as it is (the insert then affects no row), else it is an
/// error.
pub(crate) fn insert_run<'q>(
    account: &'q str,
    run: &'q NewRun,
    once: bool,
) -> (&'static str, [Bound<'q>; 8]) {
    let sql = if once {
        "INSERT INTO runs (account_id, id, thread_id, graph, model, prompt_hash, status, owner, error, started_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, NULL, $8, $8) ON CONFLICT (account_id, id) DO NOTHING"
    } else {
        "INSERT INTO runs (account_id, id, thread_id, graph, model, prompt_hash, status, owner, error, started_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, NULL, $8, $8)"
    };
    let args = [
        account.into(),
        (&run.id).into(),
        run.thread_id.as_deref().into(),
        (&run.graph).into(),
        (&run.model).into(),
        run.prompt_hash.as_deref().into(),
        (&run.owner).into(),
        run.started_ms.into(),
    ];
    (sql, args)
}

/// Saves how run `run_id` starts ([`AccountStore::save_start`]).
pub(crate) fn insert_start<'q>(
    account: &'q str,
    run_id: &'q str,
    start: &'q str,
    now_ms: i64,
) -> (&'static str, [Bound<'q>; 4]) {
    (
        "INSERT INTO run_starts (account_id, run_id, start, created_ms) VALUES ($1, $2, $3, $4) ON CONFLICT (account_id, run_id) DO NOTHING",
        [account.into(), run_id.into(), start.into(), now_ms.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_days() {
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(1_795_996_800_000), "2026-11-30");
        assert_eq!(utc_day(951_782_400_000), "2000-02-29");
        assert_eq!(utc_day(-1), "1969-12-31");
    }
}
