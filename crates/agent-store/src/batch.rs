//! The store's one event writer: the appends of every run recorder in the
//! process, written together.
//!
//! Each recorder writes its rows every merge window (250 ms); a thousand
//! streaming runs would be four thousand transactions a second, one per run
//! and window, most of the store's cost. The writer takes the appends that
//! queued while it wrote the last batch and writes them all in one
//! transaction, with multi-row statements across runs and accounts: the cost
//! per run drops to its rows. Each append still succeeds or fails on its own
//! (a conflicting repeat fails its append only), and keeps the recorder's
//! semantics: idempotent rows at fixed positions, retried by the recorder
//! when the write fails. (Rows of a conflicting append that did not conflict
//! are kept: the recorder repeats the same rows, so they are repeats then.)

use std::collections::HashSet;

use ai_core::AiEvent;
use sqlx::{AnyPool, Row};
use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;

/// Rows written in one transaction, at most (more waits for the next one).
const ROWS_PER_BATCH: usize = 4_000;
/// Rows per statement (5 parameters each: under both backends' limits).
pub(crate) const ROWS_PER_STATEMENT: usize = 500;

/// One recorder's append: rows `first_seq..` of `run_id` of `account`.
struct Append {
    account: String,
    run_id: String,
    first_seq: u64,
    at_ms: i64,
    /// The events as JSON text.
    rows: Vec<String>,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// A handle to the writer (cheap to clone); the writer stops when the last
/// handle is dropped.
#[derive(Debug, Clone)]
pub(crate) struct EventWriter {
    sender: mpsc::UnboundedSender<Append>,
}

impl EventWriter {
    /// Starts the writer on `pool`.
    pub(crate) fn start(pool: AnyPool) -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, receiver));
        Self { sender }
    }

    /// Appends `events` at positions `first_seq..` of `run_id` (see
    /// `AccountStore::append_events`), in the writer's next batch.
    pub(crate) async fn append(
        &self,
        account: &str,
        run_id: &str,
        first_seq: u64,
        events: &[AiEvent],
        at_ms: i64,
    ) -> Result<(), StoreError> {
        let rows = events
            .iter()
            .map(|event| {
                serde_json::to_string(event)
                    .map_err(|e| StoreError::Conflict(format!("not serializable: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (reply, answer) = oneshot::channel();
        let append = Append {
            account: account.to_owned(),
            run_id: run_id.to_owned(),
            first_seq,
            at_ms,
            rows,
            reply,
        };
        self.sender
            .send(append)
            .map_err(|_| StoreError::Database("the store's event writer stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Database("the store's event writer stopped".into()))?
    }
}

async fn run(pool: AnyPool, mut receiver: mpsc::UnboundedReceiver<Append>) {
    while let Some(first) = receiver.recv().await {
        let mut batch = vec![first];
        let mut rows = batch[0].rows.len();
        while rows < ROWS_PER_BATCH {
            match receiver.try_recv() {
                Ok(append) => {
                    rows += append.rows.len();
                    batch.push(append);
                }
                Err(_) => break,
            }
        }
        let outcomes = match write(&pool, &batch).await {
            Ok(outcomes) => outcomes,
            Err(error) => {
                let text = error.to_string();
                batch
                    .iter()
                    .map(|_| Err(StoreError::Database(text.clone())))
                    .collect()
            }
        };
        for (append, outcome) in batch.into_iter().zip(outcomes) {
            let _ = append.reply.send(outcome);
        }
    }
}

/// One row: (append index, account, run, seq, at, text).
type EventRow<'a> = (usize, &'a str, &'a str, i64, i64, &'a str);

/// Writes `batch` in one transaction; each append's outcome (a repeat with
/// other content fails its own append).
async fn write(
    pool: &AnyPool,
    batch: &[Append],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let mut rows: Vec<EventRow<'_>> = Vec::new();
    for (index, append) in batch.iter().enumerate() {
        let first = i64::try_from(append.first_seq)
            .map_err(|_| StoreError::Conflict(format!("event seq {}", append.first_seq)))?;
        for (seq, text) in (first..).zip(&append.rows) {
            rows.push((
                index,
                &append.account,
                &append.run_id,
                seq,
                append.at_ms,
                text,
            ));
        }
    }
    let mut outcomes: Vec<Result<(), StoreError>> = batch.iter().map(|_| Ok(())).collect();
    let mut transaction = pool.begin().await?;
    for chunk in rows.chunks(ROWS_PER_STATEMENT) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(insert_sql(chunk.len())));
        for (_, account, run_id, seq, at_ms, text) in chunk {
            query = query
                .bind(*account)
                .bind(*run_id)
                .bind(*seq)
                .bind(*at_ms)
                .bind(*text);
        }
        let inserted = query.fetch_all(&mut *transaction).await?;
        if inserted.len() == chunk.len() {
            continue;
        }
        let fresh: HashSet<(String, String, i64)> = inserted
            .iter()
            .map(|row| {
                Ok((
                    row.try_get("account_id")?,
                    row.try_get("run_id")?,
                    row.try_get("seq")?,
                ))
            })
            .collect::<Result<_, sqlx::Error>>()?;
        for (index, account, run_id, seq, _, text) in chunk {
            let key = ((*account).to_owned(), (*run_id).to_owned(), *seq);
            if fresh.contains(&key) || outcomes[*index].is_err() {
                continue;
            }
            let stored: String = sqlx::query(
                "SELECT event FROM run_events WHERE account_id = $1 AND run_id = $2 AND seq = $3",
            )
            .bind(*account)
            .bind(*run_id)
            .bind(*seq)
            .fetch_one(&mut *transaction)
            .await?
            .try_get("event")?;
            if stored != *text {
                outcomes[*index] = Err(StoreError::Conflict(format!(
                    "event {seq} of run `{run_id}` is stored with other content"
                )));
            }
        }
    }
    transaction.commit().await?;
    Ok(outcomes)
}

/// `INSERT ... VALUES` for `rows` events, returning the keys it inserted.
pub(crate) fn insert_sql(rows: usize) -> String {
    let mut sql =
        String::from("INSERT INTO run_events (account_id, run_id, seq, at_ms, event) VALUES ");
    for row in 0..rows {
        let p = row * 5;
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&format!(
            "(${}, ${}, ${}, ${}, ${})",
            p + 1,
            p + 2,
            p + 3,
            p + 4,
            p + 5
        ));
    }
    sql.push_str(
        " ON CONFLICT (account_id, run_id, seq) DO NOTHING RETURNING account_id, run_id, seq",
    );
    sql
}
