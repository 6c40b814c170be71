//! `agent serve`: the chat endpoint with the CLI's config, tools and model.

use std::time::Duration;

use agent_testing::server::{OpenAiServer, Reply};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::Home;

const KEY: &str = "sk-e2e-serve";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_streams_a_tool_run_to_a_web_client_and_stops_on_ctrl_c() {
    let model = OpenAiServer::start([
        Reply::tool_calls(&[(
            "call_t",
            "core__get_current_time",
            json!({"timezone": "UTC"}),
        )]),
        Reply::text("It is now."),
    ])
    .await
    .unwrap();
    let home = Home::new(KEY);
    let mut child = home
        .command(Some(&model.base_url()), &["serve", "--port", "0"])
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the server announces its address")
        .unwrap()
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    ai_host::install_crypto_provider();
    let client = reqwest::Client::new();
    let tools: Value = client
        .get(format!("{url}/api/tools"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let time = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "core__get_current_time")
        .unwrap()
        .clone();
    assert_eq!(time["decision"], "allow");
    let response = client
        .post(format!("{url}/api/chat"))
        .json(&json!({"id": "chat-e2e", "trigger": "submit-message", "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "What time is it?"}]}
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["x-vercel-ai-ui-message-stream"], "v1");
    let text = response.text().await.unwrap();
    let kinds: Vec<String> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| {
            serde_json::from_str::<Value>(d).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    for expected in [
        "start",
        "tool-input-available",
        "tool-output-available",
        "text-delta",
        "finish",
    ] {
        assert!(
            kinds.iter().any(|k| k == expected),
            "{expected} in {kinds:?}"
        );
    }
    assert!(text.ends_with("data: [DONE]\n\n"));
    // A request naming another host is refused (DNS rebinding).
    let refused = client
        .get(format!("{url}/api/tools"))
        .header("host", "rebind.example:80")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 403);

    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("agent serve stops on ctrl-c")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_beyond_loopback_needs_a_token() {
    let home = Home::new(KEY);
    let (code, _, stderr) = home
        .run(None, &["serve", "--host", "0.0.0.0", "--port", "0"])
        .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("tokens"), "{stderr}");
}
