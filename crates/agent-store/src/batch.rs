//! The store's one writer of run records: the event appends and the ends of
//! every run recorded in the process, written together.
//!
//! Each recorder writes its rows every merge window (250 ms), and each run
//! writes its status, usage and messages at its end;
//! a thousand streaming runs would be thousands of transactions a second, most
//! of the store's cost. The writer gathers what queued for [`GATHER`] after the
//! first request (less when the queue goes quiet) and writes it all in one
//! transaction, with multi-row statements across runs and accounts (events,
//! then ends):
//! the cost per run drops to its rows. A run's start is not
//! batched: another server deciding whether a chat's run is still going must
//! see it at once. Each request still succeeds or fails on
//! its own (a conflicting repeat fails its request only) with the semantics of
//! the [`crate::AccountStore`] method it stands for: idempotent rows at fixed
//! positions, retried by the recorder when the write fails. (Rows of a
//! conflicting request that did not conflict are kept: a retry repeats them.)

use std::collections::{HashMap, HashSet};

use ai_core::{AiEvent, Message};
use sqlx::AnyPool;
use tokio::sync::{mpsc, oneshot};

use crate::account::{AccountStore, CallUsage, Fence, RunStatus};
use crate::error::StoreError;
use crate::sql::{Done, Job, Marks, RunSql, SqlRow, Value};
use crate::store::RunPath;

/// How long the writer gathers requests after the first one before it writes
/// them, at most: fewer, larger transactions (a commit's cost is mostly the
/// pages it touches), for a little more delay in persistence.
const GATHER: std::time::Duration = std::time::Duration::from_millis(100);
/// It stops gathering sooner when no request came for this long: a quiet
/// store writes within 25 ms, a busy one in large batches. (Every transaction
/// costs a commit: at 5 ms, a hundred streams made a transaction every few
/// milliseconds, and the relay bench lost a fifth more CPU to it.)
const IDLE: std::time::Duration = std::time::Duration::from_millis(25);
/// Rows written in one transaction, at most (more waits for the next one).
const ROWS_PER_BATCH: usize = 4_000;
/// Rows per statement. SQLite finds each `$n` parameter's name by a linear
/// walk, so a statement's binding cost grows with the square of its
/// parameters: a hundred rows is the sweet spot measured by the relay bench.
pub(crate) const ROWS_PER_STATEMENT: usize = 100;

/// How a run ended, for its record (see [`StoreWriter::end_run`]).
#[derive(Debug)]
pub(crate) struct RunEndWrite {
    pub(crate) run_id: String,
    pub(crate) status: RunStatus,
    pub(crate) error: Option<String>,
    pub(crate) at_ms: i64,
    pub(crate) usage: Vec<CallUsage>,
    /// The thread becomes the conversation, keeping its first `kept`
    /// messages (see `AccountStore::replace_messages`); the first message
    /// written gets the id, when there is one (the answer the run streamed).
    pub(crate) thread: Option<(String, u64, Vec<Message>, Option<String>)>,
    /// Ends the run only while it is `running` under this fence (checked in
    /// the batch's transaction): [`StoreError::Fenced`] otherwise, and
    /// nothing of the end is written (another process took the run over;
    /// its end is that process's to write).
    pub(crate) fence: Option<Fence>,
}

enum Op {
    Events {
        run_id: String,
        first_seq: u64,
        at_ms: i64,
        /// The events as JSON text.
        rows: Vec<String>,
    },
    End(RunEndWrite),
}

impl Op {
    fn rows(&self) -> usize {
        match self {
            Self::Events { rows, .. } => rows.len(),
            Self::End(end) => 2 + end.usage.len() + end.thread.as_ref().map_or(0, |t| t.2.len()),
        }
    }
}

/// One request's write: its account and what it writes.
struct Entry {
    account: String,
    op: Op,
}

struct Request {
    entry: Entry,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// A handle to the writer (cheap to clone); the writer stops when the last
/// handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct StoreWriter {
    sender: mpsc::UnboundedSender<Request>,
}

impl StoreWriter {
    /// Starts the writer: its batches go through `run_path`, the checks
    /// after them read `pool`.
    pub(crate) fn start(pool: AnyPool, run_path: RunPath) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, run_path, receiver));
        Self { sender }
    }

    async fn request(&self, account: &str, op: Op) -> Result<(), StoreError> {
        let stopped = || StoreError::Database("the store's writer stopped".into());
        let (reply, answer) = oneshot::channel();
        let request = Request {
            entry: Entry {
                account: account.to_owned(),
                op,
            },
            reply,
        };
        self.sender.send(request).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// `AccountStore::append_events`, in the writer's next batch.
    pub(crate) async fn append(
        &self,
        account: &str,
        run_id: &str,
        first_seq: u64,
        events: &[AiEvent],
        at_ms: i64,
    ) -> Result<(), StoreError> {
        let rows = events.iter().map(json).collect::<Result<Vec<_>, _>>()?;
        let op = Op::Events {
            run_id: run_id.to_owned(),
            first_seq,
            at_ms,
            rows,
        };
        self.request(account, op).await
    }

    /// A run's usage facts (`record_usage`), status (`set_run_status`) and
    /// thread (`replace_messages`), in the writer's next batch.
    pub(crate) async fn end_run(&self, account: &str, end: RunEndWrite) -> Result<(), StoreError> {
        self.request(account, Op::End(end)).await
    }
}

fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Conflict(format!("not serializable: {e}")))
}

fn int(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Conflict(format!("{what} {value} is too large")))
}

async fn run(pool: AnyPool, run_path: RunPath, mut receiver: mpsc::UnboundedReceiver<Request>) {
    while let Some(first) = receiver.recv().await {
        let mut rows = first.entry.op.rows();
        let mut batch = vec![first];
        let gathered = tokio::time::Instant::now() + GATHER;
        while rows < ROWS_PER_BATCH {
            let until = gathered.min(tokio::time::Instant::now() + IDLE);
            match tokio::time::timeout_at(until, receiver.recv()).await {
                Ok(Some(request)) => {
                    rows += request.entry.op.rows();
                    batch.push(request);
                }
                Ok(None) | Err(_) => break,
            }
        }
        let (entries, replies): (Vec<Entry>, Vec<_>) = batch
            .into_iter()
            .map(|request| (request.entry, request.reply))
            .unzip();
        let outcomes = match write((&pool, &run_path), entries).await {
            Ok(outcomes) => outcomes,
            Err(error) => {
                let text = error.to_string();
                replies
                    .iter()
                    .map(|_| Err(StoreError::Database(text.clone())))
                    .collect()
            }
        };
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            let _ = reply.send(outcome);
        }
    }
}

/// `rows` cut into statements: [`ROWS_PER_STATEMENT`] rows each, the rest in
/// power-of-two sizes (64, 32, ..., 1), so a kind of statement has at most
/// eight shapes and each connection's prepared-statement cache keeps them (a
/// statement of every size would be parsed anew each time). Each with the
/// index of its first row.
fn statements<'r, T>(rows: &'r [T]) -> impl Iterator<Item = (usize, &'r [T])> + 'r {
    let mut first = 0;
    std::iter::from_fn(move || {
        let left = rows.len() - first;
        if left == 0 {
            return None;
        }
        let size = if left >= ROWS_PER_STATEMENT {
            ROWS_PER_STATEMENT
        } else {
            1 << left.ilog2()
        };
        let chunk = (first, &rows[first..first + size]);
        first += size;
        Some(chunk)
    })
}

/// `($1, $2), ($3, $4)` (or `(?, ?), (?, ?)`) for `rows` tuples of `columns`.
fn tuples(rows: usize, columns: usize, marks: Marks) -> String {
    let mut sql = String::new();
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..columns {
            if column > 0 {
                sql.push_str(", ");
            }
            match marks {
                Marks::Numbered => sql.push_str(&format!("${}", row * columns + column + 1)),
                Marks::Anonymous => sql.push('?'),
            }
        }
        sql.push(')');
    }
    sql
}

/// `head (tuples) tail` for `chunk`, and its values in order.
fn statement<'q>(
    head: &str,
    tail: &str,
    chunk: &[Vec<Value<'q>>],
    (columns, marks): (usize, Marks),
) -> (String, Vec<Value<'q>>) {
    let sql = format!("{head} {} {tail}", tuples(chunk.len(), columns, marks));
    (sql, chunk.iter().flatten().copied().collect())
}

/// Runs `head (tuples) tail` over `rows`, [`ROWS_PER_STATEMENT`] at a time;
/// the rows they return.
async fn multi_row<S: RunSql>(
    sql: &mut S,
    head: &str,
    tail: &str,
    rows: &[Vec<Value<'_>>],
) -> Result<Vec<S::Row>, StoreError> {
    let mut returned = Vec::new();
    let Some(columns) = rows.first().map(Vec::len) else {
        return Ok(returned);
    };
    let marks = sql.marks();
    for (_, chunk) in statements(rows) {
        let (text, values) = statement(head, tail, chunk, (columns, marks));
        returned.extend(sql.fetch(&text, &values).await?);
    }
    Ok(returned)
}

/// Inserts `rows` (`head (tuples) tail`, an `INSERT ... ON CONFLICT DO
/// NOTHING`), [`ROWS_PER_STATEMENT`] at a time; the rows of the statements
/// that did not insert all of theirs (a repeat or a conflict among them), for
/// the caller to check. Counting beats `RETURNING`: no row comes back.
async fn insert_rows(
    sql: &mut impl RunSql,
    head: &str,
    tail: &str,
    rows: &[Vec<Value<'_>>],
) -> Result<Vec<usize>, StoreError> {
    let mut unsure = Vec::new();
    let Some(columns) = rows.first().map(Vec::len) else {
        return Ok(unsure);
    };
    let marks = sql.marks();
    for (first, chunk) in statements(rows) {
        let (text, values) = statement(head, tail, chunk, (columns, marks));
        let done = sql.execute(&text, &values).await?;
        if done < chunk.len() as u64 {
            unsure.extend(first..first + chunk.len());
        }
    }
    Ok(unsure)
}

/// Checks left for after the commit: rows a request wrote that were there
/// already (a repeat, or a conflict).
enum Check {
    Event {
        index: usize,
        account: String,
        run_id: String,
        seq: i64,
        text: String,
    },
    Usage {
        index: usize,
        account: String,
        fact: CallUsage,
    },
}

/// A batch's writes in one transaction: each request's outcome so far, and
/// the checks left for after the commit.
struct WriteBatch(Vec<Entry>);

impl Job for WriteBatch {
    type Output = (Vec<Result<(), StoreError>>, Vec<Check>);
    const TRANSACTION: bool = true;

    async fn run<S: RunSql>(&self, sql: &mut S) -> Result<Done<Self::Output>, StoreError> {
        let batch = &self.0;
        let mut outcomes: Vec<Result<(), StoreError>> = batch.iter().map(|_| Ok(())).collect();
        let mut checks = Vec::new();
        events(sql, batch, &mut outcomes, &mut checks).await?;
        ends(sql, batch, &mut outcomes, &mut checks).await?;
        Ok(Done::kept((outcomes, checks)))
    }
}

/// Writes `batch` in one transaction; each request's outcome.
async fn write(
    (pool, run_path): (&AnyPool, &RunPath),
    batch: Vec<Entry>,
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let (mut outcomes, checks) = run_path.run(WriteBatch(batch)).await?;
    for check in checks {
        let (index, result) = match check {
            Check::Event {
                index,
                account,
                run_id,
                seq,
                text,
            } => {
                let same = AccountStore::new(pool, run_path, account)
                    .stored_event(&run_id, seq)
                    .await;
                (
                    index,
                    match same {
                        Ok(Some(stored)) if stored == text => Ok(()),
                        Ok(_) => Err(StoreError::Conflict(format!(
                            "event {seq} of run `{run_id}` is stored with other content"
                        ))),
                        Err(error) => Err(error),
                    },
                )
            }
            Check::Usage {
                index,
                account,
                fact,
            } => {
                let stored = AccountStore::new(pool, run_path, account)
                    .usage_fact(&fact.run_id, fact.call_seq)
                    .await;
                (
                    index,
                    match stored {
                        Ok(Some(stored)) if same_usage(&stored, &fact) => Ok(()),
                        Ok(_) => Err(StoreError::Conflict(format!(
                            "usage of call {} of run `{}` is stored with other numbers",
                            fact.call_seq, fact.run_id
                        ))),
                        Err(error) => Err(error),
                    },
                )
            }
        };
        if outcomes[index].is_ok() {
            outcomes[index] = result;
        }
    }
    Ok(outcomes)
}

/// The same fact, whenever it was written.
fn same_usage(stored: &CallUsage, fact: &CallUsage) -> bool {
    CallUsage {
        at_ms: fact.at_ms,
        ..stored.clone()
    } == *fact
}

/// The batch's event appends.
async fn events(
    sql: &mut impl RunSql,
    batch: &[Entry],
    outcomes: &mut [Result<(), StoreError>],
    checks: &mut Vec<Check>,
) -> Result<(), StoreError> {
    let mut rows = Vec::new();
    let mut keys = Vec::new();
    for (index, request) in batch.iter().enumerate() {
        let Op::Events {
            run_id,
            first_seq,
            at_ms,
            rows: texts,
        } = &request.op
        else {
            continue;
        };
        let first = match int(*first_seq, "event seq") {
            Ok(first) => first,
            Err(error) => {
                outcomes[index] = Err(error);
                continue;
            }
        };
        for (seq, text) in (first..).zip(texts) {
            let account = request.account.as_str();
            rows.push(vec![
                Value::Text(account),
                Value::Text(run_id),
                Value::Int(seq),
                Value::Int(*at_ms),
                Value::Text(text),
            ]);
            keys.push((index, account, run_id.as_str(), seq, text.as_str()));
        }
    }
    let unsure = insert_rows(
        sql,
        "INSERT INTO run_events (account_id, run_id, seq, at_ms, event) VALUES",
        "ON CONFLICT (account_id, run_id, seq) DO NOTHING",
        &rows,
    )
    .await?;
    for row in unsure {
        let (index, account, run_id, seq, text) = keys[row];
        checks.push(Check::Event {
            index,
            account: account.to_owned(),
            run_id: run_id.to_owned(),
            seq,
            text: text.to_owned(),
        });
    }
    Ok(())
}

/// The batch's run ends: usage facts, statuses, threads.
async fn ends(
    sql: &mut impl RunSql,
    batch: &[Entry],
    outcomes: &mut [Result<(), StoreError>],
    checks: &mut Vec<Check>,
) -> Result<(), StoreError> {
    let ended: Vec<(usize, &str, &RunEndWrite)> = batch
        .iter()
        .enumerate()
        .filter_map(|(index, request)| match &request.op {
            Op::End(end) => Some((index, request.account.as_str(), end)),
            _ => None,
        })
        .collect();
    if ended.is_empty() {
        return Ok(());
    }
    // The statuses first: the batch's first statement writes (a SQLite
    // transaction that read first cannot write after another connection
    // did), and it leaves out the runs whose fence no longer holds them.
    let ended = statuses(sql, ended, outcomes).await?;
    usage(sql, &ended, outcomes, checks).await?;
    threads(sql, &ended, outcomes).await
}

/// Writes the statuses of `ended`; the runs this batch ends: a run ended
/// under a fence only while that fence still holds it (checked by the same
/// statement); the others' outcomes are [`StoreError::Fenced`].
async fn statuses<'a>(
    sql: &mut impl RunSql,
    ended: Vec<(usize, &'a str, &'a RunEndWrite)>,
    outcomes: &mut [Result<(), StoreError>],
) -> Result<Vec<(usize, &'a str, &'a RunEndWrite)>, StoreError> {
    let rows: Vec<Vec<Value<'_>>> = ended
        .iter()
        .map(|(_, account, end)| {
            vec![
                Value::Text(account),
                Value::Text(&end.run_id),
                Value::Text(end.status.as_str()),
                Value::MaybeText(end.error.as_deref()),
                Value::Int(end.at_ms),
                Value::MaybeText(end.fence.as_ref().map(|f| f.owner.as_str())),
                Value::MaybeInt(end.fence.as_ref().map(|f| f.generation)),
            ]
        })
        .collect();
    let written: HashSet<(String, String)> = multi_row(
        sql,
        "UPDATE runs SET status = v.column3, error = v.column4, updated_ms = v.column5 FROM (VALUES",
        ") AS v WHERE runs.account_id = v.column1 AND runs.id = v.column2 AND (v.column6 IS NULL OR (runs.owner = v.column6 AND runs.lease_gen = v.column7 AND runs.status = 'running')) RETURNING account_id, id",
        &rows,
    )
    .await?
    .iter()
    .map(|row| Ok((row.some_text("account_id")?, row.some_text("id")?)))
    .collect::<Result<_, StoreError>>()?;
    let mut kept = Vec::with_capacity(ended.len());
    for (index, account, end) in ended {
        match &end.fence {
            Some(fence) if !written.contains(&(account.to_owned(), end.run_id.clone())) => {
                outcomes[index] = Err(fence.lost(&end.run_id));
            }
            _ => kept.push((index, account, end)),
        }
    }
    Ok(kept)
}

async fn usage<'a>(
    sql: &mut impl RunSql,
    ended: &[(usize, &'a str, &'a RunEndWrite)],
    outcomes: &mut [Result<(), StoreError>],
    checks: &mut Vec<Check>,
) -> Result<(), StoreError> {
    let mut rows = Vec::new();
    let mut facts = Vec::new();
    for &(index, account, end) in ended {
        for fact in &end.usage {
            let counts = [
                int(fact.call_seq, "call seq"),
                int(fact.prompt_tokens, "prompt tokens"),
                int(fact.completion_tokens, "completion tokens"),
            ];
            let optional = [
                fact.cached_tokens,
                fact.cache_creation_tokens,
                fact.reasoning_tokens,
            ]
            .map(|v| v.map(|v| int(v, "tokens")).transpose());
            let (Ok(seq), Ok(prompt), Ok(completion)) = (&counts[0], &counts[1], &counts[2]) else {
                outcomes[index] = Err(StoreError::Conflict("usage counts are too large".into()));
                continue;
            };
            let [Ok(cached), Ok(creation), Ok(reasoning)] = optional else {
                outcomes[index] = Err(StoreError::Conflict("usage counts are too large".into()));
                continue;
            };
            rows.push(vec![
                Value::Text(account),
                Value::Text(&fact.run_id),
                Value::Int(*seq),
                Value::MaybeText(fact.thread_id.as_deref()),
                Value::Text(&fact.model),
                Value::Int(*prompt),
                Value::Int(*completion),
                Value::MaybeInt(cached),
                Value::MaybeInt(creation),
                Value::MaybeInt(reasoning),
                Value::MaybeInt(fact.cost_micros),
                Value::Int(fact.at_ms),
                Value::MaybeText(fact.response_model.as_deref()),
            ]);
            facts.push((index, account, fact));
        }
    }
    let unsure = insert_rows(
        sql,
        "INSERT INTO usage_facts (account_id, run_id, call_seq, thread_id, model, prompt_tokens, completion_tokens, cached_tokens, cache_creation_tokens, reasoning_tokens, cost_micros, at_ms, response_model) VALUES",
        "ON CONFLICT (account_id, run_id, call_seq) DO NOTHING",
        &rows,
    )
    .await?;
    for row in unsure {
        let (index, account, fact) = facts[row];
        checks.push(Check::Usage {
            index,
            account: account.to_owned(),
            fact: fact.clone(),
        });
    }
    Ok(())
}

/// One ended run's thread write.
struct ThreadWrite<'a> {
    index: usize,
    account: &'a str,
    thread: &'a str,
    run_id: &'a str,
    kept: u64,
    conversation: &'a [Message],
    answer_id: Option<&'a str>,
    at_ms: i64,
}

/// The threads of the batch's ended runs: each becomes its run's
/// conversation, keeping its first `kept` messages (fewer when it holds fewer:
/// a lost record is filled in), and is no longer held by the run (the next
/// turn claims it without looking the run up).
async fn threads(
    sql: &mut impl RunSql,
    ended: &[(usize, &str, &RunEndWrite)],
    outcomes: &mut [Result<(), StoreError>],
) -> Result<(), StoreError> {
    let written: Vec<ThreadWrite<'_>> = ended
        .iter()
        .filter_map(|&(index, account, end)| {
            let (thread, kept, conversation, answer_id) = end.thread.as_ref()?;
            Some(ThreadWrite {
                index,
                account,
                thread,
                run_id: &end.run_id,
                kept: *kept,
                conversation,
                answer_id: answer_id.as_deref(),
                at_ms: end.at_ms,
            })
        })
        .collect();
    if written.is_empty() {
        return Ok(());
    }
    let keys: Vec<Vec<Value<'_>>> = written
        .iter()
        .map(|w| vec![Value::Text(w.account), Value::Text(w.thread)])
        .collect();
    let stored: HashMap<(String, String), i64> = multi_row(
        sql,
        "SELECT m.account_id, m.thread_id, MAX(m.seq) + 1 AS next FROM (VALUES",
        ") AS v JOIN thread_messages m ON m.account_id = v.column1 AND m.thread_id = v.column2 GROUP BY m.account_id, m.thread_id",
        &keys,
    )
    .await?
    .iter()
    .map(|row| {
        let key = (row.some_text("account_id")?, row.some_text("thread_id")?);
        Ok((key, row.some_int("next")?))
    })
    .collect::<Result<_, StoreError>>()?;
    let mut cuts = Vec::new();
    let mut texts: Vec<MessageRow<'_>> = Vec::new();
    for &ThreadWrite {
        index,
        account,
        thread,
        run_id,
        kept,
        conversation,
        answer_id,
        at_ms,
    } in &written
    {
        let held = stored
            .get(&(account.to_owned(), thread.to_owned()))
            .copied()
            .unwrap_or(0);
        let from = held.min(i64::try_from(kept).unwrap_or(i64::MAX));
        cuts.push(vec![
            Value::Text(account),
            Value::Text(thread),
            Value::Int(from),
            Value::Int(at_ms),
            Value::Text(run_id),
        ]);
        let skip = usize::try_from(from).unwrap_or(usize::MAX);
        // The answer's id goes on the first message the run added (past
        // `kept`; not on a lost record filled in before it).
        let first_new = i64::try_from(kept).unwrap_or(i64::MAX);
        for (seq, message) in (from..).zip(conversation.iter().skip(skip)) {
            let id = answer_id.filter(|_| seq == first_new);
            match json(message) {
                Ok(text) => texts.push(MessageRow {
                    index,
                    account,
                    thread,
                    run_id,
                    seq,
                    text,
                    id,
                }),
                Err(error) => outcomes[index] = Err(error),
            }
        }
    }
    multi_row(
        sql,
        "DELETE FROM thread_messages WHERE (account_id, thread_id, seq) IN (SELECT m.account_id, m.thread_id, m.seq FROM (VALUES",
        ") AS v JOIN thread_messages m ON m.account_id = v.column1 AND m.thread_id = v.column2 AND m.seq >= v.column3)",
        &cuts,
    )
    .await?;
    let rows: Vec<Vec<Value<'_>>> = texts
        .iter()
        .filter(|t| outcomes[t.index].is_ok())
        .map(|row| {
            vec![
                Value::Text(row.account),
                Value::Text(row.thread),
                Value::Int(row.seq),
                Value::Text(row.run_id),
                Value::Text(&row.text),
                Value::MaybeText(row.id),
            ]
        })
        .collect();
    multi_row(
        sql,
        "INSERT INTO thread_messages (account_id, thread_id, seq, run_id, message, message_id) VALUES",
        "",
        &rows,
    )
    .await?;
    multi_row(
        sql,
        "UPDATE threads SET updated_ms = v.column4, active_run = CASE WHEN threads.active_run = v.column5 THEN NULL ELSE threads.active_run END FROM (VALUES",
        ") AS v WHERE threads.account_id = v.column1 AND threads.id = v.column2",
        &cuts,
    )
    .await?;
    Ok(())
}

/// `INSERT ... VALUES` for `rows` events, returning the keys it inserted.
pub(crate) fn insert_sql(rows: usize, marks: Marks) -> String {
    format!(
        "INSERT INTO run_events (account_id, run_id, seq, at_ms, event) VALUES {} ON CONFLICT (account_id, run_id, seq) DO NOTHING RETURNING account_id, run_id, seq",
        tuples(rows, 5, marks)
    )
}

/// A thread message to write: its run's place in the batch, where it goes, its
/// JSON and its UI id.
struct MessageRow<'a> {
    index: usize,
    account: &'a str,
    thread: &'a str,
    run_id: &'a str,
    seq: i64,
    text: String,
    id: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_take_whole_hundreds_then_powers_of_two() {
        let rows: Vec<u32> = (0..237).collect();
        let cut: Vec<(usize, usize)> = statements(&rows).map(|(at, c)| (at, c.len())).collect();
        assert_eq!(cut, [(0, 100), (100, 100), (200, 32), (232, 4), (236, 1)]);
        assert_eq!(statements(&rows[..0]).count(), 0);
    }

    #[test]
    fn marks_are_numbered_for_postgres_and_anonymous_for_sqlite() {
        assert_eq!(tuples(2, 3, Marks::Numbered), "($1, $2, $3), ($4, $5, $6)");
        assert_eq!(tuples(2, 3, Marks::Anonymous), "(?, ?, ?), (?, ?, ?)");
    }
}
