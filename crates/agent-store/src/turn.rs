//! A chat's turn in the store from its first moment: the run and the user's
//! messages are written before the run calls the model, under the thread's
//! one active run; message ids kept; decisions about calls recorded once; a
//! Stop asked through the store.

use ai_core::Message;
use sqlx::Row;

use crate::account::{AccountStore, NewRun, RunRecord, Thread, insert_run, insert_start};
use crate::error::StoreError;
use crate::sql::{Done, Job, RunSql, SqlRow, Value};

/// A message with the id a UI knows it by, when it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnMessage {
    /// Its UI id (a user message's client id, an answer's streamed id).
    pub id: Option<String>,
    /// The message as the model sees it.
    pub message: Message,
}

/// A turn to open: the thread (created when new), how many of its stored
/// messages the turn continues (the rest, a rewound turn, is dropped), the
/// messages the turn adds before its run answers (the user's), and the run.
#[derive(Debug, Clone)]
pub struct NewTurn {
    /// The thread.
    pub thread: Thread,
    /// How many of the thread's stored messages the turn keeps.
    pub kept: u64,
    /// How many messages the thread held when the turn was planned: when it
    /// holds another number at open (a run that ended in between stored its
    /// answer), nothing is written and the turn is [`Opened::Moved`], so a
    /// turn planned on an older thread never drops what came since. `None`:
    /// no check.
    pub seen: Option<u64>,
    /// What the turn adds (the user's messages), in order.
    pub messages: Vec<TurnMessage>,
    /// The run that answers.
    pub run: NewRun,
    /// The decisions about calls the run carries out, recorded with it.
    pub decisions: Vec<CallDecision>,
    /// How the run starts (a durable run's saved start, JSON), saved with it
    /// ([`AccountStore::save_start`]).
    pub start: Option<String>,
}

/// A decision about a call (an approval, a denial, a client tool's output),
/// recorded once per (account, thread, call id) with the turn whose run
/// carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallDecision {
    /// The call.
    pub call_id: String,
    /// What was decided (JSON).
    pub decision: String,
    /// The approval id that carries it, as its tag and its expiry (Unix
    /// seconds): used up with the decision.
    pub approval: Option<(String, u64)>,
}

/// A stored message of a thread.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Its position (from 0).
    pub seq: u64,
    /// Its UI id, when it has one.
    pub id: Option<String>,
    /// The run that wrote it, if any.
    pub run_id: Option<String>,
    /// The message.
    pub message: Message,
}

/// What [`AccountStore::open_turn`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Opened {
    /// The turn is open: its run may start.
    Open,
    /// A call the turn decides was decided before: nothing was written, and
    /// `run_id` is the run that carried that decision out.
    DecidedBefore {
        /// The call.
        call_id: String,
        /// The run that carried out its decision.
        run_id: String,
    },
    /// The approval id of a decision was used before (the call was never
    /// decided): nothing was written.
    Replayed {
        /// The call.
        call_id: String,
    },
    /// The thread holds another number of messages than the turn saw when it
    /// was planned ([`NewTurn::seen`]): nothing was written (the caller plans
    /// again from the thread as it is).
    Moved,
}

impl AccountStore<'_> {
    /// Opens `turn` in one transaction: the thread created when new; the
    /// turn's decisions checked (a call decided before is
    /// [`Opened::DecidedBefore`], whatever run is running) and recorded with
    /// their approval ids used up ([`Opened::Replayed`] for an id used
    /// before); the thread claimed for the run (refused with
    /// [`StoreError::Busy`], naming the running run, while another run of the
    /// thread runs); the messages past `kept` dropped, the turn's messages
    /// added (with the run as their writer), the run recorded as `running`
    /// and its start saved ([`NewTurn::start`]). Each check is a statement
    /// of its own only where it must be: a new thread is created and claimed
    /// by one. Concurrent turns of one thread are ordered: the second
    /// waits for the first's transaction, then finds its decisions made or
    /// the thread busy. Nothing is written unless the turn opens.
    pub async fn open_turn(&self, turn: &NewTurn, now_ms: i64) -> Result<Opened, StoreError> {
        let job = OpenTurn {
            account: self.account_id().to_owned(),
            turn: turn.clone(),
            now_ms,
        };
        self.run_path().run(job).await
    }

    /// The graph thread `thread_id` runs and its messages, in one read
    /// (`None`: no such thread).
    pub async fn graph_and_messages(
        &self,
        thread_id: &str,
    ) -> Result<Option<(String, Vec<StoredMessage>)>, StoreError> {
        let job = ReadChat {
            account: self.account_id().to_owned(),
            thread: thread_id.to_owned(),
        };
        self.run_path().run(job).await
    }

    /// The messages of thread `thread_id` with their ids, in order.
    pub async fn stored_messages(&self, thread_id: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let rows = sqlx::query(
            "SELECT seq, message_id, run_id, message FROM thread_messages WHERE account_id = $1 AND thread_id = $2 ORDER BY seq",
        )
        .bind(self.account_id())
        .bind(thread_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let seq: i64 = row.try_get("seq")?;
                stored_message(seq, row)
            })
            .collect()
    }

    /// The thread's running run, if one runs.
    pub async fn running_run(&self, thread_id: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self
            .latest_run(thread_id)
            .await?
            .filter(|run| run.status == crate::RunStatus::Running))
    }

    /// Asks run `run_id` to stop, wherever it runs (its process looks at each
    /// lease renewal); `false` when it is not running.
    pub async fn request_stop(&self, run_id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE runs SET stop_requested = 1 WHERE account_id = $1 AND id = $2 AND status = 'running'",
        )
        .bind(self.account_id())
        .bind(run_id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Says a durable engine acknowledged run `run_id`'s submission.
    pub async fn set_submitted(&self, run_id: &str, now_ms: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET submitted_ms = $1 WHERE account_id = $2 AND id = $3")
            .bind(now_ms)
            .bind(self.account_id())
            .bind(run_id)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}

/// [`AccountStore::open_turn`] on the run path.
struct OpenTurn {
    account: String,
    turn: NewTurn,
    now_ms: i64,
}

impl Job for OpenTurn {
    type Output = Opened;
    const TRANSACTION: bool = true;

    async fn run<S: RunSql>(&self, sql: &mut S) -> Result<Done<Opened>, StoreError> {
        let Self {
            account,
            turn,
            now_ms,
        } = self;
        let (account, now_ms) = (account.as_str(), *now_ms);
        let thread = turn.thread.id.as_str();
        let busy = claim_thread(sql, account, turn, now_ms).await?;
        if let Some(before) = decided_before(sql, account, thread, &turn.decisions).await? {
            return Ok(Done::discarded(before));
        }
        if let Some(active) = busy {
            return Err(StoreError::Busy(active));
        }
        if let Some(replayed) = record_decisions(sql, (account, thread), turn, now_ms).await? {
            return Ok(Done::discarded(replayed));
        }
        let held = held_messages(sql, account, thread).await?;
        if turn.seen.is_some_and(|seen| seen != held.count) {
            return Ok(Done::discarded(Opened::Moved));
        }
        let next = held.next.min(i64::try_from(turn.kept).unwrap_or(i64::MAX));
        if next < held.next {
            drop_from(sql, account, thread, next).await?;
        }
        for (seq, message) in (next..).zip(&turn.messages) {
            insert_message(sql, account, thread, seq, (&turn.run.id, message)).await?;
        }
        let (statement, args) = insert_run(account, &turn.run, false);
        sql.execute(statement, &args).await?;
        if let Some(start) = &turn.start {
            let (statement, args) = insert_start(account, &turn.run.id, start, now_ms);
            sql.execute(statement, &args).await?;
        }
        Ok(Done::kept(Opened::Open))
    }
}

/// [`AccountStore::graph_and_messages`] on the run path.
struct ReadChat {
    account: String,
    thread: String,
}

impl Job for ReadChat {
    type Output = Option<(String, Vec<StoredMessage>)>;
    const TRANSACTION: bool = false;

    async fn run<S: RunSql>(&self, sql: &mut S) -> Result<Done<Self::Output>, StoreError> {
        let rows = sql
            .fetch(
                "SELECT t.graph, m.seq, m.message_id, m.run_id, m.message FROM threads t LEFT JOIN thread_messages m ON m.account_id = t.account_id AND m.thread_id = t.id WHERE t.account_id = $1 AND t.id = $2 ORDER BY m.seq",
                &[Value::Text(&self.account), Value::Text(&self.thread)],
            )
            .await?;
        let Some(first) = rows.first() else {
            return Ok(Done::kept(None));
        };
        let graph = first.some_text("graph")?;
        let mut messages = Vec::with_capacity(rows.len());
        for row in &rows {
            // A thread with no message is one row with none.
            if let Some(seq) = row.int("seq")? {
                messages.push(stored_message(seq, row)?);
            }
        }
        Ok(Done::kept(Some((graph, messages))))
    }
}

impl crate::Store {
    /// Of `runs` (account, run id), those a Stop was asked of.
    pub async fn stops_requested(
        &self,
        runs: &[(String, String)],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut stopped = Vec::new();
        for chunk in runs.chunks(crate::batch::ROWS_PER_STATEMENT) {
            let mut sql = String::from("SELECT runs.account_id, runs.id FROM (VALUES ");
            for i in 0..chunk.len() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("(${}, ${})", 2 * i + 1, 2 * i + 2));
            }
            // Each run looked up by its key (`IN (VALUES ...)` read every
            // run on SQLite).
            sql.push_str(") AS v JOIN runs ON runs.account_id = v.column1 AND runs.id = v.column2 WHERE runs.stop_requested = 1");
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (account, run) in chunk {
                query = query.bind(account).bind(run);
            }
            for row in query.fetch_all(self.pool()).await? {
                stopped.push((row.try_get("account_id")?, row.try_get("id")?));
            }
        }
        Ok(stopped)
    }

    /// The runs `owner` (an engine) holds as `running` whose submission was
    /// never acknowledged, started before `before_ms`: (account, run id).
    pub async fn unsubmitted_runs(
        &self,
        owner: &str,
        before_ms: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query(
            "SELECT account_id, id FROM runs WHERE owner = $1 AND status = 'running' AND submitted_ms IS NULL AND started_ms < $2 ORDER BY started_ms",
        )
        .bind(owner)
        .bind(before_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("account_id")?, row.try_get("id")?)))
            .collect()
    }
}

/// The first of `decisions` whose call thread `thread_id` decided before.
async fn decided_before(
    sql: &mut impl RunSql,
    account: &str,
    thread_id: &str,
    decisions: &[CallDecision],
) -> Result<Option<Opened>, StoreError> {
    for decision in decisions {
        let row = sql
            .fetch_optional(
                "SELECT run_id FROM call_decisions WHERE account_id = $1 AND thread_id = $2 AND tool_call_id = $3",
                &[account.into(), thread_id.into(), (&decision.call_id).into()],
            )
            .await?;
        if let Some(row) = row {
            return Ok(Some(Opened::DecidedBefore {
                call_id: decision.call_id.clone(),
                run_id: row.some_text("run_id")?,
            }));
        }
    }
    Ok(None)
}

/// Records `turn`'s decisions and uses up their approval ids; the first
/// decision whose id was used before, if any (the caller rolls back).
async fn record_decisions(
    sql: &mut impl RunSql,
    (account, thread_id): (&str, &str),
    turn: &NewTurn,
    now_ms: i64,
) -> Result<Option<Opened>, StoreError> {
    if turn.decisions.iter().any(|d| d.approval.is_some()) {
        // Used approvals are kept until they expire (an expired one never
        // verifies again).
        sql.execute(
            "DELETE FROM used_approvals WHERE expires_s < $1",
            &[Value::Int(now_ms / 1000)],
        )
        .await?;
    }
    for decision in &turn.decisions {
        if let Some((tag, expires_s)) = &decision.approval {
            let expires = i64::try_from(*expires_s).unwrap_or(i64::MAX);
            let used = sql
                .execute(
                    "INSERT INTO used_approvals (tag, expires_s) VALUES ($1, $2) ON CONFLICT (tag) DO NOTHING",
                    &[tag.into(), expires.into()],
                )
                .await?;
            if used == 0 {
                return Ok(Some(Opened::Replayed {
                    call_id: decision.call_id.clone(),
                }));
            }
        }
        sql.execute(
            "INSERT INTO call_decisions (account_id, thread_id, tool_call_id, decision, run_id, created_ms) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                account.into(),
                thread_id.into(),
                (&decision.call_id).into(),
                (&decision.decision).into(),
                (&turn.run.id).into(),
                now_ms.into(),
            ],
        )
        .await?;
    }
    Ok(None)
}

/// Message `seq` of a thread, from its row.
fn stored_message(seq: i64, row: &impl SqlRow) -> Result<StoredMessage, StoreError> {
    let text = row.some_text("message")?;
    Ok(StoredMessage {
        seq: u64::try_from(seq).map_err(|_| StoreError::Corrupt(format!("message seq {seq}")))?,
        id: row.text("message_id")?,
        run_id: row.text("run_id")?,
        message: serde_json::from_str(&text)
            .map_err(|e| StoreError::Corrupt(format!("message: {e}")))?,
    })
}

/// Creates the thread of `turn` when new and claims it for the turn's run;
/// the run that holds it, when another run is running on it (nothing
/// claimed). The first statement takes the thread's row lock (a concurrent
/// turn of the thread waits for this transaction), so the second, which
/// looks at the run holding the thread, reads what that turn committed.
async fn claim_thread(
    sql: &mut impl RunSql,
    account: &str,
    turn: &NewTurn,
    now_ms: i64,
) -> Result<Option<String>, StoreError> {
    let (thread, run) = (&turn.thread, &turn.run.id);
    // A thread no run holds (a new one, or one its last run's end freed) is
    // claimed here at once.
    let active = sql
        .fetch_optional(
            "INSERT INTO threads (account_id, id, title, graph, created_ms, updated_ms, active_run) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (account_id, id) DO UPDATE SET updated_ms = excluded.updated_ms, active_run = COALESCE(threads.active_run, excluded.active_run) RETURNING active_run",
            &[
                account.into(),
                (&thread.id).into(),
                (&thread.title).into(),
                (&thread.graph).into(),
                thread.created_ms.into(),
                now_ms.into(),
                run.into(),
            ],
        )
        .await?
        .ok_or_else(|| StoreError::Database("the thread's row was not returned".into()))?
        .text("active_run")?;
    let Some(active) = active.filter(|active| active != run) else {
        return Ok(None);
    };
    let claimed = sql
        .execute(
            "UPDATE threads SET active_run = $1 WHERE account_id = $2 AND id = $3 AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.account_id = $2 AND runs.id = threads.active_run AND runs.status = 'running')",
            &[run.into(), account.into(), (&thread.id).into()],
        )
        .await?;
    Ok((claimed == 0).then_some(active))
}

/// What a thread holds: how many messages, and the position after its last.
struct Held {
    count: u64,
    next: i64,
}

/// What thread `thread_id` holds.
async fn held_messages(
    sql: &mut impl RunSql,
    account: &str,
    thread_id: &str,
) -> Result<Held, StoreError> {
    let row = sql
        .fetch_optional(
            "SELECT COUNT(*) AS stored, COALESCE(MAX(seq) + 1, 0) AS next FROM thread_messages WHERE account_id = $1 AND thread_id = $2",
            &[account.into(), thread_id.into()],
        )
        .await?
        .ok_or_else(|| StoreError::Database("a count returned no row".into()))?;
    Ok(Held {
        count: u64::try_from(row.some_int("stored")?).unwrap_or(0),
        next: row.some_int("next")?,
    })
}

/// Drops what thread `thread_id` holds from position `from` on.
async fn drop_from(
    sql: &mut impl RunSql,
    account: &str,
    thread_id: &str,
    from: i64,
) -> Result<(), StoreError> {
    sql.execute(
        "DELETE FROM thread_messages WHERE account_id = $1 AND thread_id = $2 AND seq >= $3",
        &[account.into(), thread_id.into(), from.into()],
    )
    .await?;
    Ok(())
}

async fn insert_message(
    sql: &mut impl RunSql,
    account: &str,
    thread_id: &str,
    seq: i64,
    (run_id, message): (&str, &TurnMessage),
) -> Result<(), StoreError> {
    let text = serde_json::to_string(&message.message)
        .map_err(|e| StoreError::Conflict(format!("not serializable: {e}")))?;
    sql.execute(
        "INSERT INTO thread_messages (account_id, thread_id, seq, run_id, message, message_id) VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            account.into(),
            thread_id.into(),
            seq.into(),
            run_id.into(),
            Value::Text(&text),
            message.id.as_deref().into(),
        ],
    )
    .await?;
    Ok(())
}
