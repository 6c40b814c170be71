//! `agent chat --json` end to end.

use serde_json::{Value, json};

use agent_testing::server::{OpenAiServer, Reply, data};

use crate::support::{Home, json_lines, result_event, tool_message, turn_end};

const SECRET_KEY: &str = "sk-e2e-secret-key-0123456789";

/// First turn: an OpenAI-style stream with a tool call whose arguments arrive in
/// fragments, then the usage chunk and `[DONE]`.
fn tool_call_turn() -> Vec<String> {
    let mut chunks = vec![
        data(
            r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_e2e_1","type":"function","function":{"name":"core__get_current_time","arguments":""}}]},"finish_reason":null}]}"#,
        ),
        data(
            r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"time"}}]},"finish_reason":null}]}"#,
        ),
        data(
            r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"zone\":\"Asia/Tok"}}]},"finish_reason":null}]}"#,
        ),
        data(
            r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"yo\"}"}}]},"finish_reason":null}]}"#,
        ),
    ];
    chunks.extend(turn_end("c1", "tool_calls", (50, 12)));
    chunks
}

/// Second turn: text in pieces, a stop, usage, `[DONE]`.
fn answer_turn() -> Vec<String> {
    let mut chunks = vec![
        data(
            r#"{"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"It is "},"finish_reason":null}]}"#,
        ),
        data(
            r#"{"id":"c2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"evening in Tokyo."},"finish_reason":null}]}"#,
        ),
    ];
    chunks.extend(turn_end("c2", "stop", (80, 6)));
    chunks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_json_streams_events_and_sends_tool_results_back() {
    let server = OpenAiServer::start([Reply::sse(tool_call_turn()), Reply::sse(answer_turn())])
        .await
        .unwrap();
    let base_url = server.base_url();
    let (code, stdout, stderr) = Home::new(SECRET_KEY)
        .run(
            Some(&base_url),
            &["chat", "--json", "What time is it in Tokyo?"],
        )
        .await;
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");

    let events = json_lines(&stdout);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "usage_report",
            "tool_call_start",
            "tool_call_result",
            "text_delta",
            "text_delta",
            "usage_report",
            "assistant_final",
            "done"
        ]
    );
    let run_id = events[0]["run_id"].as_str().unwrap();
    assert!(
        events
            .iter()
            .all(|e| e["run_id"] == run_id && e["trace_id"].is_string())
    );

    // The public event shape (ARCHITECTURE.md, "Events").
    let start = &events[1];
    assert_eq!(start["tool_call_id"], "call_e2e_1");
    assert_eq!(start["tool_name"], "core__get_current_time");
    assert_eq!(start["args"], serde_json::json!({"timezone": "Asia/Tokyo"}));
    let result = &events[2];
    assert_eq!(result["tool_call_id"], "call_e2e_1");
    assert_eq!(result["ok"], true);
    assert_eq!(result["truncated"], false);
    assert!(result["duration_ms"].is_u64());
    assert_eq!(result["result"]["timezone"], "Asia/Tokyo");
    assert!(
        result["result"]["now"]
            .as_str()
            .unwrap()
            .ends_with("+09:00")
    );
    assert_eq!(events[0]["model"], "e2e-model");
    assert_eq!(events[0]["total_tokens"], 62);
    assert_eq!(events[5]["total_tokens"], 86);
    assert_eq!(events[6]["content"], "It is evening in Tokyo.");

    // The second request carried the assistant tool call and its result.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {SECRET_KEY}").as_str())
        );
        assert_eq!(r.body["model"], "e2e-model");
        assert_eq!(r.body["stream"], true);
        let tools = r.body["tools"].as_array().unwrap();
        assert!(
            tools
                .iter()
                .any(|t| t["function"]["name"] == "core__get_current_time")
        );
    }
    let messages = requests[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["tool_calls"][0]["id"], "call_e2e_1");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["name"],
        "core__get_current_time"
    );
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_e2e_1");
    let content: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["timezone"], "Asia/Tokyo");

    // The key never leaks into output.
    assert!(!stdout.contains(SECRET_KEY) && !stderr.contains(SECRET_KEY));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_error_exits_1_with_an_error_event() {
    let server = OpenAiServer::start([Reply::sse([
        data(
            r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}"#,
        ),
        data(r#"{"error":{"message":"upstream overloaded","type":"server_error"}}"#),
    ])])
    .await
    .unwrap();
    let base_url = server.base_url();
    let (code, stdout, stderr) = Home::new(SECRET_KEY)
        .run(Some(&base_url), &["chat", "--json", "hi"])
        .await;
    assert_eq!(code, 1, "stderr: {stderr}");
    let events = json_lines(&stdout);
    let last_two: Vec<&str> = events[events.len() - 2..]
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(last_two, ["error", "done"]);
    assert_eq!(events[events.len() - 2]["code"], "provider_error");
    assert!(
        events[events.len() - 2]["message"]
            .as_str()
            .unwrap()
            .contains("upstream overloaded")
    );
    assert!(!events.iter().any(|e| e["type"] == "assistant_final"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_config_exits_2_naming_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[model]\nmodle = \"x\"\n").unwrap();
    let (code, _, stderr) = Home::new(SECRET_KEY)
        .run(
            Some("http://127.0.0.1:9/v1"),
            &["--config", path.to_str().unwrap(), "tools"],
        )
        .await;
    assert_eq!(code, 2);
    assert!(stderr.contains("line 2, column 1"), "{stderr}");
}

/// A turn in which the model asks to write `notes/hello.txt`.
fn write_file_turn() -> Vec<String> {
    vec![
        data(
            r#"{"id":"w1","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_w","type":"function","function":{"name":"core__write_file","arguments":"{\"path\":\"notes/hello.txt\",\"content\":\"hi\\n\"}"}}]},"finish_reason":null}]}"#,
        ),
        data(r#"{"id":"w1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#),
        "data: [DONE]\n\n".into(),
    ]
}

fn done_turn() -> Vec<String> {
    vec![
        data(
            r#"{"id":"w2","choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":"stop"}]}"#,
        ),
        "data: [DONE]\n\n".into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changes_are_denied_off_a_terminal_unless_approved() {
    let home = Home::new(SECRET_KEY);
    let target = home.workspace.join("notes/hello.txt");

    // No terminal and no --approve: the call is refused and nothing is written.
    let server = OpenAiServer::start([Reply::sse(write_file_turn()), Reply::sse(done_turn())])
        .await
        .unwrap();
    let base_url = server.base_url();
    let (code, stdout, stderr) = home.run(Some(&base_url), &["chat", "--json", "note"]).await;
    assert_eq!(code, 0, "{stderr}");
    let result = result_event(&stdout);
    assert_eq!(result["ok"], false);
    assert_eq!(result["error_code"], "approval_required");
    assert!(
        result["message"].as_str().unwrap().contains("--approve"),
        "{result}"
    );
    assert!(!target.exists());
    // The model was told, in a tool message for the same call id.
    let tool = tool_message(&server.requests()[1]);
    assert_eq!(tool["tool_call_id"], "call_w");
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("approval_required")
    );

    // With --approve the same call runs inside the workspace.
    let server = OpenAiServer::start([Reply::sse(write_file_turn()), Reply::sse(done_turn())])
        .await
        .unwrap();
    let base_url = server.base_url();
    let (code, stdout, stderr) = home
        .run(Some(&base_url), &["chat", "--json", "--approve", "note"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let result = result_event(&stdout);
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "hi\n");
    // The redacted result shows the path but the content never reaches events.
    assert!(!stdout.contains("hi\\n"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_lists_every_builtin_with_effect_and_default_decision() {
    let (code, stdout, stderr) = Home::new(SECRET_KEY)
        .run(Some("http://127.0.0.1:9/v1"), &["tools", "--json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let rows = json_lines(&stdout);
    let table: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["effect"].as_str().unwrap().to_owned(),
                r["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("core__edit_file", "state_change", "approval"),
        ("core__exec_shell", "external_side_effect", "approval"),
        ("core__get_current_time", "read_only", "allow"),
        ("core__list_directory", "read_only", "allow"),
        ("core__memory_read", "read_only", "allow"),
        ("core__memory_write", "state_change", "approval"),
        ("core__read_file", "read_only", "allow"),
        ("core__web_fetch", "external_side_effect", "approval"),
        ("core__write_file", "state_change", "approval"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(table, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_files_reach_the_model_as_content_parts() {
    let server = OpenAiServer::start([Reply::text("A dot, and a note about milk.")])
        .await
        .unwrap();
    let home = Home::new(SECRET_KEY);
    let png: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01";
    std::fs::write(home.workspace.join("dot.png"), png).unwrap();
    std::fs::write(home.workspace.join("note.txt"), "Buy milk.").unwrap();
    let (code, stdout, stderr) = home
        .run(
            Some(&server.base_url()),
            &[
                "chat",
                "--attach",
                "dot.png",
                "--attach",
                "note.txt",
                "What is this?",
            ],
        )
        .await;
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    let requests = server.requests();
    let user = requests[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    let parts = user["content"].as_array().expect("content parts");
    assert_eq!(parts[0], json!({"type": "text", "text": "What is this?"}));
    assert_eq!(parts[1]["type"], "image_url");
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{url}"
    );
    assert_eq!(
        parts[2]["text"],
        "<file name=\"note.txt\">\nBuy milk.\n</file>"
    );

    // A file that is neither an image nor text is refused before any request.
    std::fs::write(home.workspace.join("blob.bin"), [0xff, 0xfe, 0x00, 0x01]).unwrap();
    let (code, _, stderr) = home
        .run(
            Some(&server.base_url()),
            &["chat", "--attach", "blob.bin", "x"],
        )
        .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot attach blob.bin"), "{stderr}");
    assert_eq!(server.requests().len(), 1);
}
