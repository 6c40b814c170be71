//! Graphs picked per chat, accounts limited to some graphs, what a client may
//! attach, and renaming a stored chat: over real HTTP.

use agent_testing::{ScriptedModel, Turn};
use ai_core::Message;
use serde_json::{Value, json};

use crate::support::{
    GUEST_TOKEN, Live, RESEARCHER, RESEARCHER_PROMPT, anonymous_client, body, client, start,
    start_stored, types, user,
};

async fn get(live: &Live, path: &str, token: &str) -> (u16, Value) {
    let response = anonymous_client()
        .get(live.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn post(live: &Live, body: &Value, token: &str) -> (u16, String) {
    let response = anonymous_client()
        .post(live.url("/api/chat"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn with_graph(mut body: Value, graph: &str) -> Value {
    body["graph"] = json!(graph);
    body
}

/// The system prompt and tool ids of the model's `n`th request.
fn seen(live: &Live, n: usize) -> (String, Vec<String>) {
    let request = &live.model.requests()[n];
    let system = request
        .messages
        .iter()
        .find_map(|m| match m {
            Message::System { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let tools = request.tools.iter().map(|t| t.id.to_string()).collect();
    (system, tools)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graphs_are_listed_per_account_with_their_tools() {
    let live = start(ScriptedModel::new([]), agent_server::Access::loopback).await;
    let (status, local) = get(&live, "/api/graphs", crate::support::TOKEN).await;
    assert_eq!(status, 200);
    assert_eq!(local["default"], "test");
    let names: Vec<&str> = local["graphs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [RESEARCHER, "test"]);
    assert_eq!(local["graphs"][0]["tools"], json!(["app__echo"]));
    assert_eq!(local["graphs"][0]["description"], "Finds things out.");
    let all = local["graphs"][1]["tools"].as_array().unwrap();
    assert!(
        all.len() > 1 && all.contains(&json!("app__write")),
        "{all:?}"
    );

    let (status, guest) = get(&live, "/api/graphs", GUEST_TOKEN).await;
    assert_eq!(status, 200);
    assert_eq!(guest["default"], RESEARCHER);
    assert_eq!(guest["graphs"].as_array().unwrap().len(), 1, "{guest}");
    assert_eq!(guest["graphs"][0]["name"], RESEARCHER);

    let (status, _) = get(&live, "/api/graphs", "not-a-token").await;
    assert_eq!(status, 401);
}

/// Finding of the local-attacker review: `GET /api/tools` listed every tool
/// of every graph to an account limited to one graph. Now an account sees
/// only the tools of the graphs it may use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_listing_holds_only_the_tools_of_the_accounts_graphs() {
    let live = start(ScriptedModel::new([]), agent_server::Access::loopback).await;
    let ids = |listing: &Value| -> Vec<String> {
        listing["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, local) = get(&live, "/api/tools", crate::support::TOKEN).await;
    assert_eq!(status, 200);
    assert!(ids(&local).contains(&"app__write".to_owned()), "{local}");
    let (status, guest) = get(&live, "/api/tools", GUEST_TOKEN).await;
    assert_eq!(status, 200);
    assert_eq!(ids(&guest), ["app__echo"], "{guest}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_runs_the_graph_its_request_names() {
    let live = start(
        ScriptedModel::new([Turn::text("Found."), Turn::text("Hello.")]),
        agent_server::Access::loopback,
    )
    .await;
    let (status, chunks, text) = live
        .chat(&with_graph(body(vec![user("find it")]), RESEARCHER))
        .await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(types(&chunks).last(), Some(&"finish"), "{text}");
    assert_eq!(
        seen(&live, 0),
        (RESEARCHER_PROMPT.into(), vec!["app__echo".into()])
    );

    let mut other = body(vec![user("hi")]);
    other["id"] = json!("chat-2");
    let (status, _, text) = live.chat(&other).await;
    assert_eq!(status, 200, "{text}");
    let (system, tools) = seen(&live, 1);
    assert_eq!(system, "You are a test.", "no graph named: the default");
    assert!(tools.len() > 1, "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_forbidden_graphs_are_refused_before_the_model() {
    let live = start(ScriptedModel::new([]), agent_server::Access::loopback).await;
    let token = crate::support::TOKEN;
    let (status, text) = post(&live, &with_graph(body(vec![user("x")]), "nope"), token).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("unknown_graph"), "{text}");

    let (status, text) = post(
        &live,
        &with_graph(body(vec![user("x")]), "test"),
        GUEST_TOKEN,
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("graph_forbidden"), "{text}");

    let (status, text) = post(
        &live,
        &with_graph(body(vec![user("x")]), "no spaces"),
        token,
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("\"path\":\"graph\""), "{text}");
    assert_eq!(live.model.calls(), 0, "nothing reached the model");
}

/// A stored chat keeps its graph: a follow-up naming none runs it again, one
/// naming another is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_chat_keeps_its_graph() {
    let (live, _dir) = start_stored(ScriptedModel::new([
        Turn::text("First."),
        Turn::text("Second."),
    ]))
    .await;
    let (status, _, text) = live
        .chat(&with_graph(body(vec![user("find it")]), RESEARCHER))
        .await;
    assert_eq!(status, 200, "{text}");
    let (_, thread) = get(&live, "/api/chats/chat-1", crate::support::TOKEN).await;
    assert_eq!(thread["graph"], RESEARCHER, "{thread}");
    let history = thread["messages"].as_array().unwrap().clone();
    let mut next = history.clone();
    next.push(json!({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "more"}]}));

    let (status, text) = post(
        &live,
        &with_graph(body(next.clone()), "test"),
        crate::support::TOKEN,
    )
    .await;
    assert_eq!(status, 409, "{text}");
    assert!(
        text.contains("graph_mismatch") && text.contains(RESEARCHER),
        "{text}"
    );

    let (status, _, text) = live.chat(&body(next)).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(seen(&live, 1).0, RESEARCHER_PROMPT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attachment_limits_are_listed() {
    let live = start(ScriptedModel::new([]), agent_server::Access::loopback).await;
    let (status, limits) = get(&live, "/api/limits", crate::support::TOKEN).await;
    assert_eq!(status, 200);
    let attachments = &limits["attachments"];
    assert_eq!(
        attachments["maxFileBytes"],
        agent_server::contract::DEFAULT_MAX_FILE_BYTES
    );
    assert_eq!(
        attachments["maxRequestFileBytes"],
        agent_server::contract::DEFAULT_MAX_REQUEST_FILE_BYTES
    );
    assert!(
        attachments["imageTypes"]
            .as_array()
            .unwrap()
            .contains(&json!("image/png"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_chat_is_renamed_within_limits() {
    let (live, _dir) = start_stored(ScriptedModel::new([Turn::text("Hi.")])).await;
    let (status, _, _) = live.chat(&body(vec![user("hello there")])).await;
    assert_eq!(status, 200);
    let rename = |title: Value, id: &'static str| {
        let live = &live;
        async move {
            let response = client()
                .patch(live.url(&format!("/api/chats/{id}")))
                .json(&json!({ "title": title }))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (status, renamed) = rename(json!("  Trip plans  "), "chat-1").await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(renamed["title"], "Trip plans");
    let (_, list) = get(&live, "/api/chats", crate::support::TOKEN).await;
    assert_eq!(list["chats"][0]["title"], "Trip plans");

    for bad in [json!(""), json!("   "), json!("x".repeat(201)), json!(7)] {
        let (status, refused) = rename(bad.clone(), "chat-1").await;
        assert_eq!(status, 400, "{bad}: {refused}");
        assert_eq!(refused["error"], "invalid_request");
    }
    assert_eq!(rename(json!("ok"), "chat-404").await.0, 404);
    let (_, list) = get(&live, "/api/chats", GUEST_TOKEN).await;
    assert_eq!(list["chats"], json!([]), "another account sees none");
    let response = anonymous_client()
        .patch(live.url("/api/chats/chat-1"))
        .bearer_auth(GUEST_TOKEN)
        .json(&json!({"title": "mine"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404, "nor renames it");
}
