//! One suite, two backends: every scenario runs against a SQLite file and against
//! a real Postgres (Debian's server, started on loopback by
//! `agent_testing::postgres::TestPostgres`). Migrations apply from empty on both.

use agent_store::{
    Backend, CallUsage, Fence, NewRun, RunStatus, Store, StoreError, Thread, UsageGrouping,
};
use agent_testing::peers::{Peer, peer};
use agent_testing::postgres::TestPostgres;
use ai_core::event::AiEventKind;
use ai_core::message::AssistantBlock;
use ai_core::{AiEvent, Message, RunContext};
use serde_json::json;

const DAY: i64 = 86_400_000;
/// 2026-11-24T00:00:00Z.
const T0: i64 = 1_795_478_400_000;

fn thread(id: &str, at: i64) -> Thread {
    Thread {
        id: id.into(),
        title: format!("about {id}"),
        graph: "chat".into(),
        created_ms: at,
        updated_ms: at,
    }
}

fn new_run(id: &str, thread: Option<&str>, owner: &str) -> NewRun {
    NewRun {
        id: id.into(),
        thread_id: thread.map(str::to_owned),
        graph: "chat".into(),
        model: "claude-test".into(),
        prompt_hash: Some("ph-1".into()),
        owner: owner.into(),
        started_ms: T0,
    }
}

fn text(run: &str, delta: &str) -> AiEvent {
    AiEvent::new(
        &RunContext::new(run, "trace"),
        AiEventKind::TextDelta {
            delta: delta.into(),
        },
    )
}

fn usage(run: &str, call: u64, model: &str, prompt: u64, cost: Option<i64>, at: i64) -> CallUsage {
    CallUsage {
        run_id: run.into(),
        call_seq: call,
        thread_id: Some("t1".into()),
        model: model.into(),
        response_model: None,
        prompt_tokens: prompt,
        completion_tokens: 10,
        cached_tokens: Some(4),
        cache_creation_tokens: None,
        reasoning_tokens: None,
        cost_micros: cost,
        at_ms: at,
    }
}

async fn threads_and_messages(store: &Store) {
    let a = store.account("acme");
    assert!(a.create_thread(&thread("t1", T0)).await.unwrap());
    assert!(
        !a.create_thread(&thread("t1", T0 + 5)).await.unwrap(),
        "a repeat"
    );
    assert!(a.create_thread(&thread("t2", T0 + 1)).await.unwrap());
    let listed: Vec<String> = a
        .threads(10)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(listed, ["t2", "t1"]);
    let messages = vec![
        Message::system("be brief"),
        Message::user("time?"),
        Message::Assistant {
            content: None,
            reasoning: Some("call the clock".into()),
            tool_calls: vec![ai_core::message::MessageToolCall {
                id: "toolu_1".into(),
                name: "core__get_current_time".into(),
                arguments: "{}".into(),
                raw: None,
            }],
            blocks: vec![
                AssistantBlock::Reasoning {
                    text: "call the clock".into(),
                    signature: Some("sig==".into()),
                    item_id: None,
                },
                AssistantBlock::ToolCall {
                    id: "toolu_1".into(),
                },
            ],
        },
        Message::tool_error("toolu_1", "clock broke"),
    ];
    assert_eq!(
        a.append_messages("t1", Some("r1"), &messages[..2], T0 + 10)
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        a.append_messages("t1", Some("r1"), &messages[2..], T0 + 11)
            .await
            .unwrap(),
        4
    );
    assert_eq!(a.messages("t1").await.unwrap(), messages);
    assert!(matches!(
        a.append_messages("nope", None, &messages, T0).await,
        Err(StoreError::Conflict(_))
    ));
    // A rewound turn: the first 2 are kept, the rest replaced.
    let mut rewound = messages[..2].to_vec();
    rewound.push(Message::user("something else"));
    assert_eq!(
        a.replace_messages("t1", Some("r2"), 2, &rewound, T0 + 11)
            .await
            .unwrap(),
        3
    );
    assert_eq!(a.messages("t1").await.unwrap(), rewound);
    // A thread shorter than what the writer kept (a lost record) gets the
    // missing messages too; nothing is duplicated.
    assert_eq!(
        a.replace_messages("t1", Some("r3"), 4, &messages, T0 + 11)
            .await
            .unwrap(),
        4
    );
    let mut now = rewound.clone();
    now.push(messages[3].clone());
    assert_eq!(a.messages("t1").await.unwrap(), now);
    assert_eq!(
        a.replace_messages("t1", Some("r4"), 0, &messages, T0 + 11)
            .await
            .unwrap(),
        4
    );
    assert_eq!(a.messages("t1").await.unwrap(), messages);
    // Appending touched t1: it lists first now.
    assert_eq!(a.threads(1).await.unwrap()[0].id, "t1");
    assert!(a.rename_thread("t1", "Clock", T0 + 12).await.unwrap());
    assert_eq!(a.thread("t1").await.unwrap().unwrap().title, "Clock");
    assert!(!a.rename_thread("missing", "x", T0).await.unwrap());
}

async fn runs_and_events(store: &Store) {
    let a = store.account("acme");
    let run = new_run("r1", Some("t1"), "server-a");
    a.start_run(&run).await.unwrap();
    a.start_run(&run).await.unwrap();
    let other = NewRun {
        model: "other".into(),
        ..run.clone()
    };
    assert!(matches!(
        a.start_run(&other).await,
        Err(StoreError::Conflict(_))
    ));
    let events: Vec<AiEvent> = (0..5).map(|i| text("r1", &format!("piece {i}"))).collect();
    a.append_events("r1", 0, &events[..3], T0).await.unwrap();
    // A retry of the same batch, and the next batch overlapping it: no duplicates.
    a.append_events("r1", 0, &events[..3], T0).await.unwrap();
    a.append_events("r1", 2, &events[2..], T0 + 1)
        .await
        .unwrap();
    let stored = a.events("r1", None).await.unwrap();
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4]);
    assert_eq!(
        stored.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
        events
    );
    assert_eq!(a.events("r1", Some(2)).await.unwrap().len(), 2);
    let changed = [text("r1", "something else")];
    assert!(matches!(
        a.append_events("r1", 1, &changed, T0).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(
        a.set_run_status("r1", RunStatus::Paused, None, T0 + 2)
            .await
            .unwrap()
    );
    let record = a.run("r1").await.unwrap().unwrap();
    assert_eq!(
        (record.status, record.updated_ms),
        (RunStatus::Paused, T0 + 2)
    );
    assert_eq!(record.run, run);
    // A run left running by a process that died is interrupted at its restart.
    a.start_run(&new_run("r2", Some("t1"), "server:a"))
        .await
        .unwrap();
    a.start_run(&new_run("r3", Some("t1"), "server:b"))
        .await
        .unwrap();
    assert_eq!(
        store.interrupt_runs_of("server:a", T0 + 3).await.unwrap(),
        1
    );
    let recent: Vec<String> = a
        .recent_runs(2)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.run.id)
        .collect();
    assert_eq!(recent.len(), 2);
    assert!(
        store
            .account("other")
            .recent_runs(9)
            .await
            .unwrap()
            .is_empty()
    );
    let statuses: Vec<(String, RunStatus)> = a
        .runs_of_thread("t1")
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.run.id, r.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("r1".into(), RunStatus::Paused),
            ("r2".into(), RunStatus::Interrupted),
            ("r3".into(), RunStatus::Running),
        ]
    );
    let latest = a.latest_run("t1").await.unwrap().unwrap();
    assert_eq!(latest.run.id, "r3");
}

async fn usage_and_paused(store: &Store) {
    let a = store.account("acme");
    a.record_usage(&usage("r1", 0, "claude-test", 100, Some(1500), T0))
        .await
        .unwrap();
    a.record_usage(&usage("r1", 0, "claude-test", 100, Some(1500), T0 + 9))
        .await
        .unwrap();
    assert!(matches!(
        a.record_usage(&usage("r1", 0, "claude-test", 999, Some(1500), T0))
            .await,
        Err(StoreError::Conflict(_))
    ));
    a.record_usage(&usage("r1", 1, "claude-test", 50, None, T0 + DAY))
        .await
        .unwrap();
    a.record_usage(&usage("r2", 0, "gpt-test", 20, Some(7), T0 + DAY))
        .await
        .unwrap();
    let by_model = a.usage(T0, UsageGrouping::Model).await.unwrap();
    assert_eq!(by_model.len(), 2);
    assert_eq!(by_model[0].key, "claude-test");
    assert_eq!((by_model[0].calls, by_model[0].prompt_tokens), (2, 150));
    assert_eq!(
        (by_model[0].cost_micros, by_model[0].calls_without_cost),
        (1500, 1)
    );
    assert_eq!(by_model[0].cached_tokens, 8);
    let by_day: Vec<(String, u64)> = a
        .usage(T0, UsageGrouping::Day)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.key, r.calls))
        .collect();
    assert_eq!(by_day, [("2026-11-24".into(), 1), ("2026-11-25".into(), 2)]);
    assert_eq!(
        a.usage(T0 + DAY, UsageGrouping::Thread).await.unwrap()[0].calls,
        2
    );
    let run = a.usage_of_run("r1").await.unwrap();
    assert_eq!(
        (run.key.as_str(), run.calls, run.prompt_tokens),
        ("r1", 2, 150)
    );
    assert_eq!(a.usage_of_run("r-none").await.unwrap().calls, 0);
    let thread = a.usage_of_thread("t1").await.unwrap();
    assert_eq!((thread.calls, thread.prompt_tokens), (3, 170));
    let total = a.usage_total(0).await.unwrap();
    assert_eq!((total.key.as_str(), total.calls), ("acme", 3));
    assert_eq!(
        total.total_tokens(),
        total.prompt_tokens + total.completion_tokens
    );
    assert_eq!(
        store.account("other").usage_total(0).await.unwrap().calls,
        0
    );

    let state = json!({"run_id": "r1", "pending": [{"call": "toolu_1"}]});
    a.save_paused("r1", &json!({"old": true}), T0)
        .await
        .unwrap();
    a.save_paused("r1", &state, T0 + 1).await.unwrap();
    assert_eq!(a.take_paused("r1").await.unwrap(), Some(state));
    assert_eq!(a.take_paused("r1").await.unwrap(), None, "resumed once");
}

/// Account `other` sees none of `acme`'s rows and cannot change them.
async fn tenant_isolation(store: &Store) {
    let other = store.account("other");
    assert!(other.threads(100).await.unwrap().is_empty());
    assert_eq!(other.thread("t1").await.unwrap(), None);
    assert!(other.messages("t1").await.unwrap().is_empty());
    assert_eq!(other.run("r1").await.unwrap(), None);
    assert!(other.events("r1", None).await.unwrap().is_empty());
    assert!(
        other
            .usage(0, UsageGrouping::Model)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!other.rename_thread("t1", "mine", T0).await.unwrap());
    assert!(!other.delete_thread("t1").await.unwrap());
    assert!(
        !other
            .set_run_status("r1", RunStatus::Done, None, T0)
            .await
            .unwrap()
    );
    other.save_paused("r9", &json!({}), T0).await.unwrap();
    assert_eq!(store.account("acme").take_paused("r9").await.unwrap(), None);
    // The same ids in another account are other rows.
    assert!(other.create_thread(&thread("t1", T0)).await.unwrap());
    let acme = store.account("acme");
    assert_eq!(acme.messages("t1").await.unwrap().len(), 4);
    assert_eq!(acme.thread("t1").await.unwrap().unwrap().title, "Clock");
}

async fn delete_and_purge(store: &Store) {
    let a = store.account("acme");
    assert!(a.delete_thread("t1").await.unwrap());
    assert_eq!(a.thread("t1").await.unwrap(), None);
    assert!(a.messages("t1").await.unwrap().is_empty());
    assert!(a.runs_of_thread("t1").await.unwrap().is_empty());
    assert!(a.latest_run("t1").await.unwrap().is_none());
    assert!(a.events("r1", None).await.unwrap().is_empty());
    // Usage stays: it is the billing record.
    assert_eq!(a.usage(0, UsageGrouping::Model).await.unwrap().len(), 2);
    // Retention: t2 (updated at T0 + 1) goes, the usage before T0 + DAY goes.
    let deleted = store.purge(T0 + 100, T0 + DAY).await.unwrap();
    assert!(deleted >= 2, "{deleted}");
    assert_eq!(a.thread("t2").await.unwrap(), None);
    let left: u64 = a
        .usage(0, UsageGrouping::Model)
        .await
        .unwrap()
        .iter()
        .map(|r| r.calls)
        .sum();
    assert_eq!(left, 2);
}

/// Writers on many connections at once: every append lands, none twice.
async fn concurrent_appends(store: &Store) {
    let mut tasks = Vec::new();
    for writer in 0..6 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let a = store.account("load");
            let run = format!("run-{writer}");
            for seq in 0..40u64 {
                a.append_events(&run, seq, &[text(&run, &seq.to_string())], T0)
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for writer in 0..6 {
        let events = store
            .account("load")
            .events(&format!("run-{writer}"), None)
            .await
            .unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..40).collect::<Vec<_>>());
    }
}

/// Many recorders at once through the store's one event writer (their appends
/// batched into shared transactions): every run's log whole and contiguous, in
/// its own account; a repeat with other content fails only its own append.
async fn batched_recorders(store: &Store) {
    use agent_store::{EventLog, RecorderOptions, RunRecorder, StoreLog};
    let mut recorders = Vec::new();
    for writer in 0..30 {
        let account = format!("batch-{}", writer % 3);
        let log: std::sync::Arc<dyn EventLog> =
            std::sync::Arc::new(StoreLog::new(store.clone(), account));
        let run = format!("rec-{writer}");
        let recorder = RunRecorder::start(log, run.clone(), 0, RecorderOptions::default());
        recorders.push((run, recorder));
    }
    // Interleaved: each round gives every recorder one row (a status event
    // between deltas keeps the deltas from merging).
    for round in 0..20 {
        for (run, recorder) in &recorders {
            recorder.record(&text(run, &format!("{round} "))).unwrap();
            recorder
                .record(&AiEvent::new(
                    &RunContext::new(run.as_str(), "trace"),
                    AiEventKind::ToolInputDelta {
                        tool_call_id: format!("c{round}"),
                        tool_name: "app__echo".into(),
                        delta: "{}".into(),
                    },
                ))
                .unwrap();
        }
    }
    for (_, recorder) in recorders {
        let summary = recorder.finish().await;
        assert_eq!(summary.unwritten, None);
        assert_eq!(summary.rows, 40);
    }
    for writer in 0..30 {
        let rows = store.account(format!("batch-{}", writer % 3));
        let events = rows.events(&format!("rec-{writer}"), None).await.unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..40).collect::<Vec<_>>(), "rec-{writer}");
        // Another account has no such run.
        let other = store.account(format!("batch-{}", (writer + 1) % 3));
        assert!(
            other
                .events(&format!("rec-{writer}"), None)
                .await
                .unwrap()
                .is_empty()
        );
    }
    let log = StoreLog::new(store.clone(), "batch-0");
    let (other, more) = ([text("rec-0", "other")], [text("rec-0", "more")]);
    let (conflict, fine) = tokio::join!(
        log.append("rec-0", 0, &other),
        log.append("rec-0", 40, &more),
    );
    assert!(
        matches!(conflict, Err(StoreError::Conflict(_))),
        "{conflict:?}"
    );
    fine.unwrap();
}

/// A model call's `usage_report` of 7 prompt and 3 completion tokens.
fn usage_report(model: &str, served: Option<&str>, cost_micros: Option<i64>) -> AiEventKind {
    AiEventKind::UsageReport {
        model: model.into(),
        response_model: served.map(str::to_owned),
        prompt_tokens: 7,
        completion_tokens: 3,
        total_tokens: 10,
        cached_tokens: None,
        reasoning_tokens: None,
        cache_creation_tokens: None,
        cost_micros,
        prompt_hash: None,
    }
}

/// Runs recorded at once through the store's one writer (their starts, events
/// and ends share transactions): each run's row, status, usage and thread come
/// out as if written alone, in its own account; a later run of a thread that
/// rewinds it replaces the turns after what it kept.
async fn recordings_together(store: &Store) {
    use agent_store::{RunEnd, RunRecording};
    let mut recordings = Vec::new();
    for (account, chat) in [("rec-a", "one"), ("rec-a", "two"), ("rec-b", "one")] {
        let mut run = new_run(&format!("{account}-{chat}"), Some(chat), "serve:h:9");
        run.started_ms = T0;
        let recording =
            RunRecording::begin(store.clone(), account, &run, Some(thread(chat, T0)), None);
        recordings.push((account, chat, recording));
    }
    for (account, chat, recording) in &mut recordings {
        let ctx = RunContext::new(format!("{account}-{chat}"), "trace");
        recording.record(&text(&ctx.run_id, "hello")).unwrap();
        recording
            .record(&AiEvent::new(&ctx, usage_report("m", None, Some(42))))
            .unwrap();
    }
    let conversation = |account: &str, chat: &str| {
        vec![
            Message::user(format!("{account} asks in {chat}")),
            Message::assistant(format!("{account} answered in {chat}")),
        ]
    };
    let ends = recordings.into_iter().map(|(account, chat, recording)| {
        let messages = conversation(account, chat);
        async move {
            let failures = recording
                .finish(RunEnd {
                    status: RunStatus::Done,
                    error: None,
                    conversation: &messages,
                    kept: 0,
                    answer_id: None,
                })
                .await;
            assert!(failures.is_empty(), "{failures:?}");
        }
    });
    futures::future::join_all(ends).await;
    for (account, chat) in [("rec-a", "one"), ("rec-a", "two"), ("rec-b", "one")] {
        let rows = store.account(account);
        assert_eq!(
            rows.messages(chat).await.unwrap(),
            conversation(account, chat)
        );
        let run = rows
            .run(&format!("{account}-{chat}"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(run.status, RunStatus::Done);
        let events = rows.events(&run.run.id, None).await.unwrap();
        assert_eq!(events.len(), 2);
    }
    let usage = store
        .account("rec-a")
        .usage(0, UsageGrouping::Model)
        .await
        .unwrap();
    assert_eq!((usage[0].calls, usage[0].cost_micros), (2, 84));
    // The next run of rec-a's "one" keeps its first message and rewrites the rest.
    let run = new_run("rec-a-one-2", Some("one"), "serve:h:9");
    let recording =
        RunRecording::begin(store.clone(), "rec-a", &run, Some(thread("one", T0)), None);
    let rewound = vec![
        Message::user("rec-a asks in one"),
        Message::assistant("a second answer"),
        Message::user("and more"),
        Message::assistant("more"),
    ];
    let failures = recording
        .finish(RunEnd {
            status: RunStatus::Done,
            error: None,
            conversation: &rewound,
            kept: 1,
            answer_id: None,
        })
        .await;
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(
        store.account("rec-a").messages("one").await.unwrap(),
        rewound
    );
    assert_eq!(
        store.account("rec-b").messages("one").await.unwrap(),
        conversation("rec-b", "one")
    );
}

/// Secrets and used approvals shared by the servers on one store.
async fn server_keys_and_approvals(store: &Store) {
    let first = store.server_key("approvals", "key-one").await.unwrap();
    let again = store.server_key("approvals", "key-two").await.unwrap();
    assert_eq!((first.as_str(), again.as_str()), ("key-one", "key-one"));
    assert!(store.use_approval("tag-a", 2_000, 1_000).await.unwrap());
    assert!(
        !store.use_approval("tag-a", 2_000, 1_000).await.unwrap(),
        "once"
    );
    assert!(store.use_approval("tag-b", 1_500, 1_000).await.unwrap());
    // After tag-b expired it is forgotten (an expired id is refused before this).
    assert!(store.use_approval("tag-c", 9_000, 1_600).await.unwrap());
    assert!(store.use_approval("tag-b", 1_500, 1_600).await.unwrap());
    assert!(!store.use_approval("tag-a", 2_000, 1_600).await.unwrap());
}

/// Durable runs: steps (the first record of a step wins), the saved start, a
/// dead server's runs found, claimed by one server only, a log started over.
async fn durable_journal(store: &Store) {
    let rows = store.account("dur");
    rows.start_run(&new_run("d1", None, "serve:h1"))
        .await
        .unwrap();
    rows.start_run(&new_run("d2", None, "serve:h1"))
        .await
        .unwrap();
    rows.save_start("d1", r#"{"start":1}"#, T0).await.unwrap();
    rows.save_start("d1", r#"{"start":2}"#, T0).await.unwrap();
    assert_eq!(
        rows.start_of("d1").await.unwrap().as_deref(),
        Some(r#"{"start":1}"#)
    );
    assert_eq!(rows.start_of("d2").await.unwrap(), None);
    rows.record_step("d1", (1, "intent"), "i1", (T0, None))
        .await
        .unwrap();
    rows.record_step("d1", (0, "model"), "m0", (T0, None))
        .await
        .unwrap();
    rows.record_step("d1", (1, "tool"), "t1", (T0, None))
        .await
        .unwrap();
    rows.record_step("d1", (1, "tool"), "t1-again", (T0, None))
        .await
        .unwrap();
    let steps = rows.steps("d1").await.unwrap();
    let steps: Vec<(u32, &str, &str)> = steps
        .iter()
        .map(|(n, k, b)| (*n, k.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        steps,
        [(0, "model", "m0"), (1, "intent", "i1"), (1, "tool", "t1")]
    );
    // Another account sees none of it.
    assert!(store.account("other").steps("d1").await.unwrap().is_empty());
    // The runs of an owner whose lease ran out are orphans: d2 has no start
    // (it is interrupted), d1 is for a server to go on with, and only one
    // server claims it, under the next generation.
    store
        .renew_instance("serve:h1", "serve", T0 + 10_000, T0)
        .await
        .unwrap();
    assert!(store.owner_alive("serve:h1", T0 + 5_000).await.unwrap());
    let of_dur = |orphans: Vec<agent_store::Orphan>| -> Vec<agent_store::Orphan> {
        orphans
            .into_iter()
            .filter(|o| o.account_id == "dur")
            .collect()
    };
    assert!(of_dur(store.orphaned_runs(T0 + 5_000).await.unwrap()).is_empty());
    let orphans = of_dur(store.orphaned_runs(T0 + 20_000).await.unwrap());
    let mut found: Vec<(&str, bool)> = orphans
        .iter()
        .map(|o| (o.run_id.as_str(), o.start.is_some()))
        .collect();
    found.sort_unstable();
    assert_eq!(found, [("d1", true), ("d2", false)]);
    let d2 = orphans.iter().find(|o| o.run_id == "d2").unwrap();
    assert!(store.interrupt_orphan(d2, "gone", T0).await.unwrap());
    let d1 = orphans.iter().find(|o| o.run_id == "d1").unwrap();
    assert_eq!(
        (d1.owner.as_str(), d1.kind.as_deref()),
        ("serve:h1", Some("serve"))
    );
    let taken = store
        .claim_run(("dur", "d1"), &d1.fence(), "serve:h2", T0)
        .await
        .unwrap()
        .expect("the first claim takes the run");
    assert_eq!(
        taken,
        Fence {
            owner: "serve:h2".into(),
            generation: 1
        }
    );
    assert!(
        store
            .claim_run(("dur", "d1"), &d1.fence(), "serve:h3", T0)
            .await
            .unwrap()
            .is_none()
    );
    // The old owner is fenced: its steps are refused, the new owner's taken.
    assert!(matches!(
        rows.record_step("d1", (2, "intent"), "late", (T0, Some(&d1.fence())))
            .await,
        Err(StoreError::Fenced(_))
    ));
    rows.record_step("d1", (2, "intent"), "i2", (T0, Some(&taken)))
        .await
        .unwrap();
    // A step recorded again under the fence that holds the run is kept as it
    // was, and is no error.
    rows.record_step("d1", (2, "intent"), "i2-again", (T0, Some(&taken)))
        .await
        .unwrap();
    assert!(rows.holds("d1", &taken).await.unwrap());
    assert!(!rows.holds("d1", &d1.fence()).await.unwrap());
    let steps = rows.steps("d1").await.unwrap();
    assert_eq!(steps.len(), 4);
    assert_eq!(steps[3], (2, "intent".to_owned(), "i2".to_owned()));
    let record = rows.run("d1").await.unwrap().unwrap();
    assert_eq!(
        (record.run.owner.as_str(), record.lease_gen),
        ("serve:h2", 1)
    );
    // An engine's runs are never orphans.
    rows.start_run(&new_run("d3", None, "restate"))
        .await
        .unwrap();
    assert!(store.owner_alive("restate", T0).await.unwrap());
    assert!(
        !store
            .orphaned_runs(T0 + 20_000)
            .await
            .unwrap()
            .iter()
            .any(|o| o.run_id == "d3")
    );
    // A log started over counts an attempt only when it held rows.
    assert_eq!(rows.clear_events("d1").await.unwrap(), 0);
    assert_eq!(rows.run("d1").await.unwrap().unwrap().attempt, 0);
    rows.append_events("d1", 0, &[text("d1", "a")], T0)
        .await
        .unwrap();
    assert_eq!(rows.clear_events("d1").await.unwrap(), 1);
    assert_eq!(rows.run("d1").await.unwrap().unwrap().attempt, 1);
    // An interrupted run is reopened once, under a new generation.
    let reopened = rows.reopen_run("d2", "cli:h9", T0).await.unwrap();
    assert_eq!(
        reopened,
        Some(Fence {
            owner: "cli:h9".into(),
            generation: 1
        })
    );
    assert!(
        rows.reopen_run("d2", "cli:h10", T0)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        rows.run("d2").await.unwrap().unwrap().status,
        RunStatus::Running
    );
    // A run's end is written only under the fence that holds it: the old
    // owner's end is refused (and said so), the new owner's written.
    let end_under = |fence: Fence| {
        agent_store::RunRecording::resumed(
            store.clone(),
            "dur",
            &new_run("d2", None, "serve:h1"),
            None,
        )
        .with_fence(fence)
        .finish(agent_store::RunEnd {
            status: RunStatus::Failed,
            error: Some("ended".into()),
            conversation: &[],
            kept: 0,
            answer_id: None,
        })
    };
    let stale = end_under(Fence {
        owner: "serve:h1".into(),
        generation: 0,
    })
    .await;
    assert!(
        stale.len() == 1 && stale[0].contains("taken over by another process"),
        "{stale:?}"
    );
    assert_eq!(
        rows.run("d2").await.unwrap().unwrap().status,
        RunStatus::Running
    );
    let held = end_under(reopened.clone().unwrap()).await;
    assert!(held.is_empty(), "{held:?}");
    assert_eq!(
        rows.run("d2").await.unwrap().unwrap().status,
        RunStatus::Failed
    );
    // Sealed things are redeemed once: by their first holder, again by it.
    assert!(store.redeem("run:dur:d1", "inv-1", T0).await.unwrap());
    assert!(store.redeem("run:dur:d1", "inv-1", T0).await.unwrap());
    assert!(!store.redeem("run:dur:d1", "inv-2", T0).await.unwrap());
    for run in ["d1", "d2", "d3"] {
        rows.set_run_status(run, RunStatus::Done, None, T0)
            .await
            .unwrap();
    }
}

/// A turn's messages, with the user's id.
fn turn_of(thread_id: &str, run: &str, text: &str, kept: u64) -> agent_store::NewTurn {
    agent_store::NewTurn {
        thread: thread(thread_id, T0),
        kept,
        seen: None,
        messages: vec![agent_store::TurnMessage {
            id: Some(format!("client-{run}")),
            message: Message::user(text),
        }],
        run: new_run(run, Some(thread_id), "serve:h:1"),
        decisions: Vec::new(),
        start: None,
    }
}

/// A decision about `call`, carried by approval `tag` when given.
fn decision(call: &str, what: &str, tag: Option<&str>) -> agent_store::CallDecision {
    agent_store::CallDecision {
        call_id: call.into(),
        decision: what.into(),
        approval: tag.map(|t| (t.to_owned(), u64::MAX / 4)),
    }
}

/// Ends run `run` so that its thread takes another turn.
async fn end(rows: &agent_store::AccountStore<'_>, run: &str) {
    rows.set_run_status(run, RunStatus::Done, None, T0)
        .await
        .unwrap();
}

/// A turn is stored whole before its run answers, one running run per thread;
/// a call is decided once, with the turn that carries it out (its approval id
/// used up then, and not by a later decision of the same call); a Stop and an
/// engine's acknowledgement are rows any process reads.
async fn turns_and_decisions(store: &Store) {
    use agent_store::Opened;
    let rows = store.account("turns");
    let first = agent_store::NewTurn {
        start: Some(r#"{"saved":1}"#.into()),
        ..turn_of("t", "t-r1", "first", 0)
    };
    assert_eq!(rows.open_turn(&first, T0).await.unwrap(), Opened::Open);
    // The run's start is saved with its turn.
    let saved = rows.start_of("t-r1").await.unwrap();
    assert_eq!(saved.as_deref(), Some(r#"{"saved":1}"#));
    // A chat's graph and messages in one read: none for no thread, the graph
    // alone for a thread with no message.
    let (graph, read) = rows.graph_and_messages("t").await.unwrap().unwrap();
    assert_eq!((graph.as_str(), read.len()), ("chat", 1));
    assert_eq!(read, rows.stored_messages("t").await.unwrap());
    assert!(rows.graph_and_messages("none").await.unwrap().is_none());
    assert!(rows.create_thread(&thread("empty", T0)).await.unwrap());
    let empty = rows.graph_and_messages("empty").await.unwrap();
    assert_eq!(empty, Some(("chat".to_owned(), Vec::new())));
    let stored = rows.stored_messages("t").await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].id.as_deref(), Some("client-t-r1"));
    assert_eq!(stored[0].run_id.as_deref(), Some("t-r1"));
    // A second turn while the first runs: busy, and nothing of it is stored.
    let second = agent_store::NewTurn {
        start: Some("{}".into()),
        ..turn_of("t", "t-r2", "second", 1)
    };
    match rows.open_turn(&second, T0).await {
        Err(StoreError::Busy(run)) => assert_eq!(run, "t-r1"),
        other => panic!("{other:?}"),
    }
    assert!(rows.start_of("t-r2").await.unwrap().is_none());
    assert_eq!(rows.stored_messages("t").await.unwrap().len(), 1);
    assert!(rows.run("t-r2").await.unwrap().is_none());
    assert_eq!(rows.running_run("t").await.unwrap().unwrap().run.id, "t-r1");
    // A turn planned on an older thread (it saw no message; the thread holds
    // one now) is refused once the first run ended, and drops nothing.
    end(&rows, "t-r1").await;
    let stale = agent_store::NewTurn {
        seen: Some(0),
        ..turn_of("t", "t-stale", "late", 0)
    };
    assert_eq!(rows.open_turn(&stale, T0).await.unwrap(), Opened::Moved);
    assert_eq!(rows.stored_messages("t").await.unwrap().len(), 1);
    assert!(rows.run("t-stale").await.unwrap().is_none());
    rows.set_run_status("t-r1", RunStatus::Running, None, T0)
        .await
        .unwrap();
    // A Stop reaches whoever looks for it.
    assert!(rows.request_stop("t-r1").await.unwrap());
    let asked = store
        .stops_requested(&[
            ("turns".into(), "t-r1".into()),
            ("turns".into(), "t-x".into()),
        ])
        .await
        .unwrap();
    assert_eq!(asked, vec![("turns".to_owned(), "t-r1".to_owned())]);
    end(&rows, "t-r1").await;
    // A turn with a decision: recorded with it, its approval id used up.
    let mut approved = turn_of("t", "t-r2", "second", 1);
    approved.decisions = vec![decision("call-1", "approve", Some("tag-1"))];
    assert_eq!(rows.open_turn(&approved, T0).await.unwrap(), Opened::Open);
    assert_eq!(rows.stored_messages("t").await.unwrap().len(), 2);
    // The same call decided again (another approval id, even while its run
    // runs): answered from the record, nothing written, that id not used up.
    let mut again = turn_of("t", "t-r3", "second", 1);
    again.decisions = vec![decision("call-1", "deny", Some("tag-2"))];
    assert_eq!(
        rows.open_turn(&again, T0).await.unwrap(),
        Opened::DecidedBefore {
            call_id: "call-1".into(),
            run_id: "t-r2".into()
        }
    );
    assert!(rows.run("t-r3").await.unwrap().is_none());
    end(&rows, "t-r2").await;
    // A used approval id for another call: a replay, nothing written.
    let mut replay = turn_of("t", "t-r4", "third", 2);
    replay.decisions = vec![decision("call-2", "approve", Some("tag-1"))];
    assert_eq!(
        rows.open_turn(&replay, T0).await.unwrap(),
        Opened::Replayed {
            call_id: "call-2".into()
        }
    );
    assert!(rows.run("t-r4").await.unwrap().is_none());
    replay.decisions = vec![decision("call-2", "approve", Some("tag-2"))];
    assert_eq!(rows.open_turn(&replay, T0).await.unwrap(), Opened::Open);
    end(&rows, "t-r4").await;
    // Many turns deciding one call at once: exactly one opens.
    let racers = (0..8).map(|i| {
        let rows = store.account("turns");
        async move {
            let mut turn = turn_of("t", &format!("race-{i}"), "race", 3);
            turn.decisions = vec![decision(
                "call-race",
                "approve",
                Some(&format!("race-tag-{i}")),
            )];
            (i, rows.open_turn(&turn, T0).await)
        }
    });
    let outcomes = futures::future::join_all(racers).await;
    let opened: Vec<usize> = outcomes
        .iter()
        .filter(|(_, o)| matches!(o, Ok(Opened::Open)))
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(opened.len(), 1, "{outcomes:?}");
    // An engine's acknowledgement (of the winner, running).
    let winner = format!("race-{}", opened[0]);
    let key = ("turns".to_owned(), winner.clone());
    let unacked = store.unsubmitted_runs("serve:h:1", i64::MAX).await.unwrap();
    assert!(unacked.contains(&key), "{unacked:?}");
    rows.set_submitted(&winner, T0).await.unwrap();
    let unacked = store.unsubmitted_runs("serve:h:1", i64::MAX).await.unwrap();
    assert!(!unacked.contains(&key), "{unacked:?}");
}

/// A call is grouped and priced by the model it asked for; the model the
/// provider said served it is kept beside it, and prices it when the asked-for
/// name has no price.
async fn usage_by_asked_and_served_model(store: &Store) {
    use agent_store::{CallUsage, Pricing, RunEnd, RunRecording};
    let pricing: Pricing = std::sync::Arc::new(|model: &str, fact: &CallUsage| {
        (model == "snapshot-2026").then_some(fact.prompt_tokens as i64 * 2)
    });
    let run = new_run("served-1", None, "serve:h:9");
    let mut recording = RunRecording::begin(store.clone(), "served", &run, None, Some(pricing));
    let ctx = RunContext::new("served-1", "trace");
    for (model, served) in [("alias", Some("snapshot-2026")), ("other", None)] {
        let report = usage_report(model, served, None);
        recording.record(&AiEvent::new(&ctx, report)).unwrap();
    }
    let failures = recording
        .finish(RunEnd {
            status: RunStatus::Done,
            error: None,
            conversation: &[],
            kept: 0,
            answer_id: None,
        })
        .await;
    assert!(failures.is_empty(), "{failures:?}");
    let rows = store.account("served");
    let by_model = rows.usage(0, UsageGrouping::Model).await.unwrap();
    let keyed: Vec<(&str, i64)> = by_model
        .iter()
        .map(|row| (row.key.as_str(), row.cost_micros))
        .collect();
    assert_eq!(keyed, vec![("alias", 14), ("other", 0)]);
    let first = rows.usage_fact("served-1", 0).await.unwrap().unwrap();
    assert_eq!(first.response_model.as_deref(), Some("snapshot-2026"));
}

/// Polls `future` until it is done or has been pending `polls` times, then
/// drops it (a client gone mid-request): `None` when it was dropped.
async fn cut_after<F: std::future::Future>(future: F, polls: usize) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    let mut left = polls;
    std::future::poll_fn(|cx| match future.as_mut().poll(cx) {
        std::task::Poll::Ready(output) => std::task::Poll::Ready(Some(output)),
        std::task::Poll::Pending if left == 0 => std::task::Poll::Ready(None),
        std::task::Poll::Pending => {
            left -= 1;
            std::task::Poll::Pending
        }
    })
    .await
}

/// A turn dropped at any point of its transaction (its request cancelled)
/// is stored whole or not at all, and leaves the store's connection to the
/// next turn: on SQLite every turn of the process shares one connection, so
/// a half-done transaction left on it would reach the next one.
async fn cancelled_turns_are_whole_or_absent(store: &Store) {
    let rows = store.account("cut");
    let mut dropped = 0;
    for attempt in 0..80 {
        // Each number of pending polls once, then a cut at the first poll
        // until one was cut: on SQLite a turn's only await is the store
        // thread's answer, which a busy machine can deliver before the first
        // poll (the turn is then whole, as it should be, but nothing was cut).
        let polls = match attempt {
            0..40 => attempt,
            _ if dropped > 0 => break,
            _ => 0,
        };
        let (chat, run) = (format!("cut-{attempt}"), format!("cut-r{attempt}"));
        let turn = agent_store::NewTurn {
            start: Some(r#"{"saved":1}"#.into()),
            ..turn_of(&chat, &run, "question", 0)
        };
        let outcome = cut_after(rows.open_turn(&turn, T0), polls).await;
        dropped += usize::from(outcome.is_none());
        // A turn cut after it sent its commit is committed a moment later:
        // read until the three reads agree (a turn stored in part never
        // would).
        let mut tries = 0;
        let stored = loop {
            let stored = (
                rows.run(&run).await.unwrap().is_some(),
                rows.stored_messages(&chat).await.unwrap().len() == 1,
                rows.start_of(&run).await.unwrap().is_some(),
            );
            tries += 1;
            if (stored.0 == stored.1 && stored.1 == stored.2) || tries == 200 {
                break stored;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        assert!(
            stored == (true, true, true) || stored == (false, false, false),
            "turn cut after {polls} polls stored in part: {stored:?}"
        );
        if let Some(opened) = outcome {
            assert_eq!(opened.unwrap(), agent_store::Opened::Open);
            assert_eq!(stored, (true, true, true));
        }
    }
    assert!(dropped > 0, "no turn was cut");
    // The next turn opens and the chat's read sees it.
    let next = turn_of("cut-next", "cut-next-r", "question", 0);
    assert_eq!(
        rows.open_turn(&next, T0).await.unwrap(),
        agent_store::Opened::Open
    );
    let (_, read) = rows.graph_and_messages("cut-next").await.unwrap().unwrap();
    assert_eq!(read.len(), 1);
}

/// Turns opened at once (on SQLite, run together in one transaction) each
/// succeed or fail alone: a turn that fails at its last statement (its run id
/// is taken) leaves nothing behind, not its thread nor its message, and the
/// turns beside it, before and after it, are stored whole.
async fn turns_together_fail_alone(store: &Store) {
    let rows = store.account("together");
    rows.start_run(&new_run("together-taken", None, "serve:h:1"))
        .await
        .unwrap();
    let turns: Vec<_> = (0..24)
        .map(|i| {
            let run = if i % 3 == 1 {
                "together-taken".to_owned()
            } else {
                format!("together-r{i}")
            };
            turn_of(&format!("together-{i}"), &run, "question", 0)
        })
        .collect();
    let opened = futures::future::join_all(turns.iter().map(|turn| rows.open_turn(turn, T0))).await;
    for (i, outcome) in opened.into_iter().enumerate() {
        let chat = format!("together-{i}");
        let read = rows.graph_and_messages(&chat).await.unwrap();
        if i % 3 == 1 {
            assert!(
                matches!(outcome, Err(StoreError::Database(_))),
                "turn {i}: {outcome:?}"
            );
            assert_eq!(read, None, "turn {i} left its chat behind");
        } else {
            assert_eq!(outcome.unwrap(), agent_store::Opened::Open, "turn {i}");
            let (_, messages) = read.unwrap();
            assert_eq!(messages.len(), 1, "turn {i}");
            let run = rows.run(&format!("together-r{i}")).await.unwrap().unwrap();
            assert_eq!(run.status, RunStatus::Running);
        }
    }
}

async fn suite(store: &Store) {
    cancelled_turns_are_whole_or_absent(store).await;
    turns_together_fail_alone(store).await;
    turns_and_decisions(store).await;
    durable_journal(store).await;
    server_keys_and_approvals(store).await;
    threads_and_messages(store).await;
    runs_and_events(store).await;
    usage_and_paused(store).await;
    tenant_isolation(store).await;
    delete_and_purge(store).await;
    concurrent_appends(store).await;
    batched_recorders(store).await;
    recordings_together(store).await;
    usage_by_asked_and_served_model(store).await;
}

/// A reopened store applied no migration again and kept the suite's rows.
async fn assert_rows_kept(store: &Store) {
    let events = store.account("load").events("run-0", None).await.unwrap();
    assert_eq!(events.len(), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/store.db");
    let store = Store::open_sqlite(&path).await.unwrap();
    assert_eq!(store.backend(), Backend::Sqlite);
    suite(&store).await;
    store.close().await;
    // A closed store writes nothing more, and says why.
    let late = turn_of("late", "late-r", "question", 0);
    match store.account("cut").open_turn(&late, T0).await {
        Err(StoreError::Database(why)) => assert!(why.contains("closed"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Reopening applies nothing again and keeps the rows; the journal is WAL.
    let store = Store::open_sqlite(&path).await.unwrap();
    assert_rows_kept(&store).await;
    assert!(dir.path().join("nested/store.db-wal").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_on_postgres() {
    let Some(_) = peer(Peer::Postgres) else {
        return;
    };
    let postgres = TestPostgres::start().unwrap();
    postgres.create_database("suite").unwrap();
    let url = postgres.url("suite");
    let store = Store::open(&url).await.unwrap();
    assert_eq!(store.backend(), Backend::Postgres);
    suite(&store).await;
    store.close().await;
    let store = Store::open(&url).await.unwrap();
    assert_rows_kept(&store).await;
    store.close().await;
}

#[tokio::test]
async fn bad_urls_are_typed_errors_without_secrets() {
    assert!(matches!(
        Store::open("mysql://x").await,
        Err(StoreError::InvalidUrl(_))
    ));
    let error = Store::open("postgres://agent:hunter2-pw@127.0.0.1:99999/none")
        .await
        .unwrap_err()
        .to_string();
    assert!(!error.contains("hunter2-pw"), "{error}");
}
