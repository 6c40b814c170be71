//! Fan-out to slow and fast subscribers; the graph registry.

use agent_graph::{
    Graph,
    fanout::{Fanout, SubscriberItem},
    graph::{GraphRegistry, ToolFilter},
    run,
};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{AiEvent, Message, ToolEffect};
use serde_json::json;

use crate::support::{Kit, assert_consistent, check_invariants, ctx, label, request};

#[tokio::test(start_paused = true)]
async fn a_slow_subscriber_is_told_it_lagged_while_a_fast_one_gets_everything() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("one two three").tool_call("e1", "core__echo", json!({"text": "a"})),
        Turn::text("four").tool_call("e2", "core__echo", json!({"text": "b"})),
        Turn::text("five six seven eight"),
    ]);
    let (events, outcome) = run(request(), kit.deps(&model)).into_parts();
    let mut fanout = Fanout::new();
    let mut slow = fanout.subscribe(2);
    let mut fast = fanout.subscribe(1024);
    let fast_reader = tokio::spawn(async move {
        let mut got: Vec<AiEvent> = Vec::new();
        while let Some(item) = fast.recv().await {
            match item {
                SubscriberItem::Event(event) => got.push(event),
                SubscriberItem::Lagged(n) => panic!("fast subscriber lagged by {n}"),
            }
        }
        got
    });
    // The pump finishes although the slow subscriber never reads.
    fanout.pump(events).await;
    let outcome = outcome.await;
    let fast_events = fast_reader.await.unwrap();
    check_invariants(&fast_events, &outcome);
    outcome.unwrap();
    let total = fast_events.len() as u64;
    assert!(total > 4, "enough events to overflow: {total}");

    let mut slow_items = Vec::new();
    while let Some(item) = slow.recv().await {
        slow_items.push(item);
    }
    // The queue filled with the first two text deltas; the third merged into the
    // second instead of being dropped; everything after was dropped except how the
    // run ended (`assistant_final`, `done`), and the gap is marked where it happened.
    let kinds: Vec<String> = slow_items
        .iter()
        .map(|item| match item {
            SubscriberItem::Event(e) => label(e),
            SubscriberItem::Lagged(n) => format!("lagged:{n}"),
        })
        .collect();
    let dropped = total - 3 - 2;
    assert_eq!(
        kinds,
        vec![
            "text_delta".to_owned(),
            "text_delta".to_owned(),
            format!("lagged:{dropped}"),
            "assistant_final".to_owned(),
            "done".to_owned(),
        ],
        "{slow_items:?}"
    );
    assert_consistent(&slow_items, &fast_events);
    assert_eq!(label(&fast_events[fast_events.len() - 1]), "done");
}

#[tokio::test]
async fn a_dropped_subscriber_is_forgotten_and_others_keep_receiving() {
    let mut fanout = Fanout::new();
    let gone = fanout.subscribe(1);
    let mut kept = fanout.subscribe(4);
    drop(gone);
    let event = AiEvent::new(&ctx(), ai_core::event::AiEventKind::Done);
    fanout.publish(&event);
    drop(fanout);
    assert_eq!(kept.recv().await, Some(SubscriberItem::Event(event)));
    assert_eq!(kept.recv().await, None);
}

#[test]
fn the_registry_lists_chat_and_graphs_select_their_tools() {
    let registry = GraphRegistry::default();
    let names: Vec<&str> = registry.list().map(|g| g.name.as_str()).collect();
    assert_eq!(names, vec!["chat"]);
    let chat = registry.get("chat").unwrap();
    assert_eq!(chat.tools, ToolFilter::All);
    assert!(!chat.system_prompt.is_empty());
    assert!(registry.get("missing").is_none());

    let kit = Kit::new();
    let model = ScriptedModel::new([]);
    // A run of the graph: its system prompt, then the conversation (a system
    // message at its head is the graph's to give, so it is dropped).
    let runner = kit.deps(&model).runner;
    let prepared = chat
        .prepare(
            ai_core::RunContext::new("r", "t"),
            &runner,
            "m",
            vec![Message::system("stale"), Message::user("hello")],
            &agent_graph::prompt::Params::new(),
        )
        .unwrap();
    assert_eq!(
        prepared.request.messages,
        vec![
            Message::system(chat.system_prompt.clone()),
            Message::user("hello")
        ]
    );
    assert_eq!(prepared.request.graph.as_deref(), Some("chat"));
    assert!(
        prepared
            .request
            .prompt_hash
            .as_deref()
            .is_some_and(|h| h.starts_with("sha256:"))
    );
    let catalog = (*kit.deps(&model).catalog).clone();
    let ids = |graph: &Graph| -> Vec<String> {
        graph
            .select_tools(catalog.clone())
            .specs()
            .iter()
            .map(|s| s.id.as_str().to_owned())
            .collect()
    };
    assert_eq!(
        ids(chat),
        vec![
            "core__echo",
            "core__fail",
            "core__slow",
            "core__wait",
            "core__write"
        ]
    );
    let with = |tools: ToolFilter| Graph::new("g", "d", "p").with_tools(tools);
    assert_eq!(
        ids(&with(ToolFilter::Effects(vec![ToolEffect::StateChange]))),
        vec!["core__write"]
    );
    assert_eq!(
        ids(&with(ToolFilter::Ids(vec![
            "core__slow".into(),
            "core__echo".into(),
            "core__unknown".into()
        ]))),
        vec!["core__echo", "core__slow"]
    );
    assert!(ids(&with(ToolFilter::None)).is_empty());

    let mut registry = registry;
    registry.insert(Graph::new("analyst", "d", "p").with_tools(ToolFilter::None));
    let names: Vec<&str> = registry.list().map(|g| g.name.as_str()).collect();
    assert_eq!(names, vec!["analyst", "chat"]);
}
