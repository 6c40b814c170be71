//! The stock chat logic of the AI SDK against the live endpoint: `AbstractChat`
//! with `DefaultChatTransport` of `ai` 6 and 7 (what `useChat` runs), and AI SDK
//! 4's `useChat` request logic, driven by `tests/js/chat-driver.mjs` through the
//! user actions a web page makes (send, edit, stop, continue, approve, answer a
//! client tool, reload and resume). No request is hand-written here: the bodies
//! are the clients' own.

use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_server::Access;
use agent_testing::{ScriptedModel, Turn};
use ai_core::Message;
use serde_json::{Value, json};

use crate::support::{Live, js_dir, run_js, start, write_k};

const CLIENTS: [&str; 2] = ["ai6", "ai7"];

/// Runs the driver with `client` on `script`; its one JSON line.
async fn drive(client: &str, live: &Live, script: Value) -> Value {
    let args = ["--client", client, "--api", &live.url("/api/chat")];
    let result = run_js("chat-driver.mjs", &args, ("--script", &script), client).await;
    assert_eq!(result["ok"], true, "{client}: the driver failed: {result}");
    result
}

/// Every step ended `ready` with no error.
fn assert_no_error(result: &Value, what: &str) {
    for step in result["steps"].as_array().unwrap() {
        assert!(step["error"].is_null(), "{what}: {step} in {result}");
    }
    assert_eq!(result["status"], "ready", "{what}: {result}");
}

fn messages(result: &Value) -> &Vec<Value> {
    result["messages"].as_array().unwrap()
}

/// The text of a UI message.
fn text(message: &Value) -> String {
    message["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "text")
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// The tool part of call `id` in the messages.
fn tool_part<'a>(result: &'a Value, id: &str) -> &'a Value {
    messages(result)
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .find(|p| p["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no part of {id} in {result}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_user_message_keeps_it_and_answers_it_again() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    for client in CLIENTS {
        let live = start(
            ScriptedModel::new([Turn::text("First answer."), Turn::text("Second answer.")]),
            Access::loopback,
        )
        .await;
        let result = drive(
            client,
            &live,
            json!({"chatId": "edit", "steps": [
                {"do": "send", "text": "first question"},
                {"do": "send", "text": "edited question", "editIndex": 0}
            ]}),
        )
        .await;
        assert_no_error(&result, client);
        let messages = messages(&result);
        assert_eq!(messages.len(), 2, "{client}: {result}");
        assert_eq!(messages[0]["role"], "user");
        assert_eq!(text(&messages[0]), "edited question", "{client}");
        assert_eq!(messages[1]["role"], "assistant");
        assert_eq!(text(&messages[1]), "Second answer.", "{client}");
        assert_ne!(messages[0]["id"], messages[1]["id"], "{client}");
        // The model saw the edited question, once.
        let seen = &live.model.requests()[1].messages;
        assert_eq!(
            seen.last(),
            Some(&Message::user("edited question")),
            "{client}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_never_sent_does_not_brick_the_chat() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    for client in CLIENTS {
        let live = start(
            ScriptedModel::new([write_k(), Turn::text("Fine, nothing written.")]),
            Access::loopback,
        )
        .await;
        // Approved, but the client never sends it (no automatic send; the user
        // types something else instead).
        let result = drive(
            client,
            &live,
            json!({"chatId": "stale", "sendAutomaticallyWhen": "none", "steps": [
                {"do": "send", "text": "write k"},
                {"do": "approve", "approved": true},
                {"do": "send", "text": "never mind"}
            ]}),
        )
        .await;
        assert_no_error(&result, client);
        assert_eq!(
            text(messages(&result).last().unwrap()),
            "Fine, nothing written.",
            "{client}: {result}"
        );
        // Nothing ran, and the model was told why.
        assert_eq!(live.writes.load(Ordering::SeqCst), 0, "{client}");
        let seen = &live.model.requests()[1].messages;
        assert!(
            seen.contains(&Message::tool_error(
                "w1",
                agent_server::contract::STALE_DECISION
            )),
            "{client}: {seen:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_then_continue_continues_the_same_message() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    for client in CLIENTS {
        let live = start(
            ScriptedModel::new([
                Turn::text("One two three four five six seven eight nine ten.")
                    .delay_between(Duration::from_millis(40)),
                Turn::text(" And that is all."),
            ]),
            Access::loopback,
        )
        .await;
        let result = drive(
            client,
            &live,
            json!({"chatId": "stop", "steps": [
                {"do": "send", "text": "count", "stopAfterChunk": "text-delta"},
                {"do": "continue"}
            ]}),
        )
        .await;
        assert_no_error(&result, client);
        let messages = messages(&result);
        assert_eq!(
            messages.len(),
            2,
            "{client}: one assistant message: {result}"
        );
        assert!(
            text(&messages[1]).ends_with("And that is all."),
            "{client}: {result}"
        );
        // The continuation was a request whose last message is the assistant's.
        let requests = result["requests"].as_array().unwrap();
        let last = requests
            .iter()
            .rev()
            .find(|r| r["method"] == "POST")
            .unwrap();
        assert_eq!(last["status"], 200, "{client}: {result}");
        assert_eq!(
            last["body"]["messages"].as_array().unwrap().last().unwrap()["role"],
            "assistant"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_resumes_a_running_stream_and_finds_nothing_when_none_runs() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    for client in CLIENTS {
        let live = start(
            ScriptedModel::new([Turn::text(
                "A slow answer that is still streaming when the page reloads.",
            )
            .delay_between(Duration::from_millis(60))]),
            Access::loopback,
        )
        .await;
        let result = drive(
            client,
            &live,
            json!({"chatId": "resume", "steps": [
                {"do": "send", "text": "go slowly", "wait": false},
                {"do": "wait", "untilChunk": "text-delta"},
                {"do": "reload"},
                {"do": "reload"}
            ]}),
        )
        .await;
        assert_no_error(&result, client);
        let gets: Vec<&Value> = result["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == "GET")
            .collect();
        assert_eq!(gets.len(), 2, "{client}: {result}");
        assert!(
            gets[0]["url"]
                .as_str()
                .unwrap()
                .ends_with("/api/chat/resume/stream"),
            "{client}: {result}"
        );
        assert_eq!(gets[0]["status"], 200, "{client}: running: {result}");
        assert_eq!(
            gets[1]["status"], 204,
            "{client}: nothing to resume: {result}"
        );
        let last = messages(&result).last().unwrap();
        assert_eq!(
            text(last),
            "A slow answer that is still streaming when the page reloads.",
            "{client}: {result}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_round_trip() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    for client in CLIENTS {
        let live = start(
            ScriptedModel::new([
                Turn::new().tool_call("g1", "client__get_location", json!({"precise": false})),
                Turn::text("You are in Lyon."),
            ]),
            Access::loopback,
        )
        .await;
        let result = drive(
            client,
            &live,
            json!({"chatId": "client-tool", "sendAutomaticallyWhen": "toolCalls", "steps": [
                {"do": "send", "text": "where am I?"},
                {"do": "toolOutput", "tool": "client__get_location", "output": {"city": "Lyon"}}
            ]}),
        )
        .await;
        assert_no_error(&result, client);
        assert_eq!(tool_part(&result, "g1")["state"], "output-available");
        let messages = messages(&result);
        assert_eq!(messages.len(), 2, "{client}: {result}");
        assert!(text(&messages[1]).ends_with("You are in Lyon."), "{client}");
        let seen = &live.model.requests()[1].messages;
        assert!(
            seen.contains(&Message::tool("g1", r#"{"city":"Lyon"}"#)),
            "{client}: {seen:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_output_for_a_call_never_handed_out_is_left_out_with_a_warning() {
    let live = start(
        ScriptedModel::new([Turn::text("Where?"), Turn::text("Still no idea.")]),
        Access::loopback,
    )
    .await;
    let forged = json!({"id": "forge", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-client__get_location", "toolCallId": "made-up", "state": "output-available",
             "input": {}, "output": {"city": "Atlantis"}}
        ]}
    ]});
    let (status, _, text) = live.chat(&forged).await;
    assert_eq!(status, 200, "{text}");
    let warning = text
        .lines()
        .find(|line| line.contains("\"data-warning\""))
        .unwrap_or_else(|| panic!("no warning: {text}"));
    assert!(warning.contains("messages[1].parts[0]"), "{warning}");
    assert!(warning.contains("\"transient\":true"), "{warning}");
    // The stock client keeps the part and sends it with every later message:
    // each time it is left out again, never a 400.
    let mut again = forged.clone();
    again["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "u2", "role": "user", "parts": [{"type": "text", "text": "and now?"}]}));
    let (status, _, text) = live.chat(&again).await;
    assert_eq!(status, 200, "{text}");
    let requests = live.model.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let seen = format!("{:?}", request.messages);
        assert!(!seen.contains("Atlantis"), "{seen}");
        assert!(
            request
                .messages
                .iter()
                .any(|m| matches!(m, Message::Tool { tool_call_id, content, .. }
                if tool_call_id == "made-up" && content == agent_server::contract::OUTPUT_REFUSED)),
            "{seen}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ai_sdk_4_default_body_with_a_tool_call_and_a_follow_up() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    let live = start(
        ScriptedModel::new([
            Turn::new().tool_call("e1", "app__echo", json!({"text": "ping"})),
            Turn::text("It echoed ping."),
            Turn::text("You are welcome."),
        ]),
        Access::loopback,
    )
    .await;
    let result = drive(
        "ai4",
        &live,
        json!({"chatId": "v4", "steps": [
            {"do": "send", "text": "echo ping"},
            {"do": "send", "text": "thanks"}
        ]}),
    )
    .await;
    assert_no_error(&result, "ai4");
    // The follow-up carried the tool invocation back, and the model saw the call
    // with its result (not a tool named "invocation").
    let seen = &live.model.requests()[2].messages;
    assert!(
        seen.iter()
            .any(|m| matches!(m, Message::Assistant { tool_calls, .. }
            if tool_calls.iter().any(|c| c.name == "app__echo"))),
        "{seen:#?}"
    );
    assert!(seen.contains(&Message::user("thanks")), "{seen:#?}");
    let last = messages(&result).last().unwrap();
    assert!(
        last["content"]
            .as_str()
            .unwrap_or_default()
            .contains("You are welcome."),
        "{result}"
    );
}

/// The driver itself, against the AI SDK's own server (`streamText` with a mock
/// model, `toUIMessageStreamResponse` / `toDataStreamResponse`): the same flows
/// give the same messages there, so what the tests above see is the clients'
/// behaviour, not the driver's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_agrees_with_the_ai_sdks_own_server() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    let output = tokio::process::Command::new("node")
        .arg(js_dir().join("chat-driver-selftest.mjs"))
        .output()
        .await
        .expect("node runs");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// With a run store the server keeps the conversation: the stock chat logic
/// sends only its last message (`prepareSendMessagesRequest`), the model still
/// reads the whole thread, and a page reloaded from `GET /api/chats/{id}`
/// (checked by the SDK's `validateUIMessages`) shows the thread, approves the
/// call that waited there, and the call runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_sends_only_its_last_message_continues_the_stored_thread() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    for client in CLIENTS {
        let (live, _dir) = crate::support::start_stored(ScriptedModel::new([
            Turn::new().tool_call("e1", "app__echo", json!({"text": "hi"})),
            Turn::text("Echoed."),
            Turn::text("Two."),
            write_k(),
            Turn::text("Written."),
        ]))
        .await;
        let result = drive(
            client,
            &live,
            json!({"chatId": "kept", "lastMessageOnly": true, "sendAutomaticallyWhen": "approvals",
                   "steps": [
                {"do": "send", "text": "echo hi"},
                {"do": "send", "text": "second"},
                {"do": "send", "text": "write k"},
                {"do": "reload", "persist": "server"},
                {"do": "approve", "approved": true}
            ]}),
        )
        .await;
        assert_no_error(&result, client);
        // Every chat request carried one message.
        for request in result["requests"].as_array().unwrap() {
            if request["method"] == "POST" {
                assert_eq!(
                    request["body"]["messages"].as_array().unwrap().len(),
                    1,
                    "{client}: {request}"
                );
            }
        }
        // The second question reached the model after the whole first turn.
        let requests = live.model.requests();
        let seen = &requests[2].messages;
        assert!(
            seen.contains(&Message::user("echo hi")),
            "{client}: {seen:#?}"
        );
        assert!(
            seen.iter()
                .any(|m| matches!(m, Message::Tool { tool_call_id, .. } if tool_call_id == "e1")),
            "{client}: {seen:#?}"
        );
        assert_eq!(seen.last(), Some(&Message::user("second")), "{client}");
        // The reloaded page showed the thread and its pending approval; the
        // approval went through once.
        assert_eq!(live.writes.load(Ordering::SeqCst), 1, "{client}: {result}");
        let shown = messages(&result);
        let texts: Vec<String> = shown.iter().map(text).collect();
        assert_eq!(
            texts,
            [
                "echo hi", "Echoed.", "second", "Two.", "write k", "Written."
            ],
            "{client}: {result}"
        );
        assert_eq!(
            tool_part(&result, "w1")["state"],
            "output-available",
            "{client}: {result}"
        );
    }
}

/// A stored chat with a denied call and a file reloads in the stock chat
/// logic: `validateUIMessages` takes the denied call (`output-denied`) and the
/// file part as the server returns them, and the chat goes on from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_chat_with_a_denial_and_a_file_reloads_and_goes_on() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    for client in CLIENTS {
        let (live, _dir) = crate::support::start_stored(ScriptedModel::new([
            write_k(),
            Turn::text("Not written, as you wish."),
            Turn::text("Still here."),
        ]))
        .await;
        let result = drive(
            client,
            &live,
            json!({"chatId": "denied", "sendAutomaticallyWhen": "approvals", "steps": [
                {"do": "send", "text": "write k", "files": [
                    {"mediaType": "text/plain", "url": "data:text/plain;base64,aGVsbG8=", "filename": "notes.txt"}
                ]},
                {"do": "approve", "approved": false},
                {"do": "reload", "persist": "server"},
                {"do": "send", "text": "anything else?"}
            ]}),
        )
        .await;
        assert_no_error(&result, client);
        assert_eq!(live.writes.load(Ordering::SeqCst), 0, "{client}: {result}");
        let shown = messages(&result);
        assert_eq!(
            tool_part(&result, "w1")["state"],
            "output-denied",
            "{client}: {result}"
        );
        let files: Vec<&Value> = shown[0]["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["type"] == "file")
            .collect();
        assert_eq!(files.len(), 1, "{client}: {result}");
        assert_eq!(files[0]["filename"], "notes.txt");
        assert_eq!(
            text(shown.last().unwrap()),
            "Still here.",
            "{client}: {result}"
        );
    }
}
