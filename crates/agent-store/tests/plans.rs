//! Every statement a served run sends the store finds its rows by key: no
//! statement reads a whole table (or a whole index) on SQLite, whose planner
//! has no statistics to fall back on. A statement that did would cost every
//! run more as the store grows.
//!
//! The statements are the ones the store really sends (sqlx logs each under
//! `sqlx::query`, the store's SQLite thread under `agent_store::sqlite`; a
//! layer here keeps their text), each then explained with `EXPLAIN QUERY
//! PLAN` on the same file. A test binary of its own: SQLite's statements are
//! logged on threads of their own, so the layer is the process's global
//! subscriber, and no other test may send statements beside this one's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use agent_store::{
    Fence, NewRun, NewTurn, RunEnd, RunRecording, RunStatus, Store, Thread, TurnMessage,
};
use ai_core::Message;
use sqlx::Row as _;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

/// The text of every statement sqlx or the store's SQLite thread logged.
#[derive(Clone, Default)]
struct Statements(Arc<Mutex<Vec<String>>>);

struct StatementField(Option<String>);

impl Visit for StatementField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if matches!(field.name(), "db.statement" | "statement") {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if matches!(field.name(), "db.statement" | "statement") {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Statements {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if !matches!(
            event.metadata().target(),
            "sqlx::query" | "agent_store::sqlite"
        ) {
            return;
        }
        let mut field = StatementField(None);
        event.record(&mut field);
        if let Some(text) = field.0 {
            self.0.lock().unwrap().push(text);
        }
    }
}

fn thread(id: &str) -> Thread {
    Thread {
        id: id.into(),
        title: id.into(),
        graph: "chat".into(),
        created_ms: 0,
        updated_ms: 0,
    }
}

fn run(id: &str, chat: &str) -> NewRun {
    NewRun {
        id: id.into(),
        thread_id: Some(chat.into()),
        graph: "chat".into(),
        model: "model".into(),
        prompt_hash: None,
        owner: "serve:plans".into(),
        started_ms: 0,
    }
}

/// A served run's store work: the chat read, its turn opened, a step, its
/// end (with a few events) under its fence.
async fn served_run(store: &Store, (chat, run_id): (&str, &str), kept: u64) {
    let rows = store.account("plans");
    let stored = rows
        .graph_and_messages(chat)
        .await
        .unwrap()
        .map(|(_, messages)| messages)
        .unwrap_or_default();
    let run = run(run_id, chat);
    let question = Message::user("a question");
    let turn = NewTurn {
        thread: thread(chat),
        kept,
        seen: Some(stored.len() as u64),
        messages: vec![TurnMessage {
            id: Some(format!("client-{run_id}")),
            message: question.clone(),
        }],
        run: run.clone(),
        decisions: Vec::new(),
        start: Some("{}".into()),
    };
    rows.open_turn(&turn, 0).await.unwrap();
    let fence = Fence {
        owner: run.owner.clone(),
        generation: 0,
    };
    rows.record_step(run_id, (0, "model"), "{}", (0, Some(&fence)))
        .await
        .unwrap();
    let mut recording = RunRecording::resumed(store.clone(), "plans", &run, None).with_fence(fence);
    let context = ai_core::RunContext::new(run_id, "trace");
    for delta in ["an ", "answer"] {
        let delta = ai_core::event::AiEventKind::TextDelta {
            delta: delta.into(),
        };
        recording
            .record(&ai_core::AiEvent::new(&context, delta))
            .unwrap();
    }
    let mut conversation: Vec<Message> = stored.into_iter().map(|m| m.message).collect();
    conversation.push(question);
    conversation.push(Message::assistant("an answer"));
    let failures = recording
        .finish(RunEnd {
            status: RunStatus::Done,
            error: None,
            conversation: &conversation,
            kept,
            answer_id: Some(format!("answer-{run_id}")),
        })
        .await;
    assert!(failures.is_empty(), "{failures:?}");
}

/// How many values `statement` binds (`$n` marks, or `?` marks).
fn marks(statement: &str) -> usize {
    let numbered = statement
        .split('$')
        .skip(1)
        .filter_map(|after| {
            let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<usize>().ok()
        })
        .max();
    numbered.unwrap_or_else(|| statement.matches('?').count())
}

/// The plan's lines that read a whole table or index.
fn scans(plan: &[String]) -> Vec<String> {
    plan.iter()
        .filter(|line| line.starts_with("SCAN "))
        // A list of values in the statement; the running runs' partial
        // index (it holds nothing else); the table of processes, which the
        // statement that reads it keeps to the live ones and those whose
        // runs are still to be taken over.
        .filter(|line| {
            !(line.starts_with("SCAN v")
                || line.contains("VALUES CLAUSE")
                || line.contains("CONSTANT ROW")
                || line.contains("USING INDEX runs_running")
                || *line == "SCAN instances")
        })
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_statement_of_a_served_run_finds_its_rows_by_key() {
    let statements = Statements::default();
    let subscriber = tracing_subscriber::registry().with(statements.clone());
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plans.db");
    let store = Store::open_sqlite(&path).await.unwrap();
    statements.0.lock().unwrap().clear();
    // A new chat, then its next turn (the thread held, its last run ended),
    // then the reads every lease renewal makes.
    served_run(&store, ("chat", "run-1"), 0).await;
    served_run(&store, ("chat", "run-2"), 2).await;
    let mine = [("plans".to_owned(), "run-2".to_owned())];
    store.stops_requested(&mine).await.unwrap();
    store.orphaned_runs(0).await.unwrap();
    store.account("plans").running_run("chat").await.unwrap();
    let mut sent: Vec<String> = statements.0.lock().unwrap().clone();
    // The second turn found the thread freed by the first run's end: claimed
    // by the upsert that touches it, with no look at the run before.
    let claims = sent
        .iter()
        .filter(|s| s.trim().starts_with("UPDATE threads SET active_run"))
        .count();
    assert_eq!(claims, 0, "{sent:#?}");
    sent.sort();
    sent.dedup();
    sqlx::any::install_default_drivers();
    let explainer = sqlx::AnyPool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let mut explained = 0;
    let mut failures = Vec::new();
    for statement in &sent {
        let text = statement.trim();
        let verb = text.split_whitespace().next().unwrap_or("").to_uppercase();
        if !["SELECT", "INSERT", "UPDATE", "DELETE", "WITH"].contains(&verb.as_str()) {
            continue;
        }
        let mut query = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {text}")));
        for _ in 0..marks(text) {
            query = query.bind(Option::<String>::None);
        }
        let plan: Vec<String> = query
            .fetch_all(&explainer)
            .await
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .iter()
            .map(|row| row.try_get::<String, _>("detail").unwrap())
            .collect();
        explained += 1;
        let scans = scans(&plan);
        if !scans.is_empty() {
            failures.push(format!("{text}\n  {}", scans.join("\n  ")));
        }
    }
    assert!(
        explained >= 15,
        "only {explained} statements were seen: {sent:#?}"
    );
    assert!(
        failures.is_empty(),
        "statements that read a whole table:\n{}",
        failures.join("\n")
    );
}
