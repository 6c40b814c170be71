//! `agent serve`: the chat endpoint with the CLI's config, tools and model.

use std::time::Duration;

use agent_testing::server::{OpenAiServer, Reply};
use serde_json::{Value, json};

use crate::served::{Served, http};
use crate::support::{Home, curl_as_nobody, first_message, signal};

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
    let mut served = serve(&home, &model.base_url(), &[]).await;
    let (client, url) = (http(), &served.base);
    // Without the printed token: refused, loopback or not.
    let anonymous = client.get(format!("{url}/api/tools")).send().await.unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    let tools = served.json("/api/tools").await;
    let time = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "core__get_current_time")
        .unwrap()
        .clone();
    assert_eq!(time["decision"], "allow");
    let body = crate::served::chat_body("chat-e2e", "What time is it?");
    let response = served.post_chat(&body).send().await.unwrap();
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
    let refused = served.get("/api/tools").header("host", "rebind.example:80");
    assert_eq!(refused.send().await.unwrap().status().as_u16(), 403);

    signal(&served.child, "INT");
    let status = tokio::time::timeout(Duration::from_secs(30), served.child.wait())
        .await
        .expect("agent serve stops on ctrl-c")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// Starts `agent serve --port 0 <extra>` against `model`.
async fn serve(home: &Home, model: &str, extra: &[&str]) -> Served {
    let mut args = vec!["serve", "--port", "0"];
    args.extend_from_slice(extra);
    Served::spawn(home.command(Some(model), &args)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_auth_is_refused_off_loopback() {
    let home = Home::new(KEY);
    let (code, _, stderr) = home
        .run(
            None,
            &["serve", "--host", "0.0.0.0", "--port", "0", "--no-auth"],
        )
        .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("only for loopback"), "{stderr}");
}

/// What another account on the host gets when it asks the server (run by this
/// test's user) for a shell command: `curl` as uid 65534 through `setpriv`. With
/// the per-process secret it gets a 401 and the model is never asked. Against
/// `--no-auth` (the old behaviour, kept as the control that shows the test can
/// fail) the same request starts a run whose `exec_shell` call waits for an
/// approval the other account could give itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_local_account_cannot_use_the_loopback_server() {
    let Some(reason) = second_uid_unavailable() else {
        return second_uid_test().await;
    };
    eprintln!("SKIPPED another_local_account_cannot_use_the_loopback_server: {reason}");
}

/// Why the second-uid test cannot run here, if it cannot.
pub(crate) fn second_uid_unavailable() -> Option<String> {
    let uid = std::process::Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("switching to another uid needs root".into());
    }
    for tool in ["setpriv", "curl"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    None
}

/// `curl` run as uid 65534: the HTTP status and body of a chat request to `url`.
async fn as_nobody(url: &str) -> (String, String) {
    let body = json!({"id": "chat-other-uid", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "run id -u"}]}
    ]})
    .to_string();
    let url = format!("{url}/api/chat");
    curl_as_nobody(&[
        "-H",
        "content-type: application/json",
        "--data-raw",
        &body,
        &url,
    ])
    .await
}

async fn second_uid_test() {
    let shell_turn =
        || Reply::tool_calls(&[("call_sh", "core__exec_shell", json!({"command": "id -u"}))]);
    let model = OpenAiServer::start([shell_turn(), shell_turn()])
        .await
        .unwrap();
    let home = Home::new(KEY);
    let served = serve(&home, &model.base_url(), &[]).await;
    let (status, body) = as_nobody(&served.base).await;
    assert_eq!(status, "401", "{body}");
    assert!(model.requests().is_empty(), "the model was never asked");

    let open = serve(&home, &model.base_url(), &["--no-auth"]).await;
    let (status, body) = as_nobody(&open.base).await;
    assert_eq!(status, "200", "{body}");
    assert!(
        body.contains("tool-approval-request") && body.contains("core__exec_shell"),
        "{body}"
    );
}

/// A stock `useChat` (ai 7's `AbstractChat` + `DefaultChatTransport`, driven by
/// `tests/js/chat-driver.mjs`) sends an image with `sendMessage({text, files})`:
/// `agent serve` passes it on, and the model's request carries it as an
/// `image_url` part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_from_a_stock_client_reaches_the_model() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    let js = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/js");
    assert!(
        js.join("node_modules").exists(),
        "needs `npm ci --prefix tests/js` (run `cargo xtask test-env`)"
    );
    let model = OpenAiServer::start([Reply::text("A single red dot.")])
        .await
        .unwrap();
    let home = Home::new(KEY);
    let served = serve(&home, &model.base_url(), &[]).await;
    let (url, token) = (&served.base, &served.token);
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==";
    let script = json!({"chatId": "image", "steps": [
        {"do": "send", "text": "What is in this picture?", "files": [
            {"mediaType": "image/png", "filename": "dot.png", "url": format!("data:image/png;base64,{png}")}
        ]}
    ]});
    let file = home.workspace.join("script.json");
    std::fs::write(&file, script.to_string()).unwrap();
    let output = tokio::process::Command::new("node")
        .arg(js.join("chat-driver.mjs"))
        .args(["--client", "ai7", "--api", &format!("{url}/api/chat")])
        .arg("--header")
        .arg(format!("authorization: Bearer {token}"))
        .arg("--script")
        .arg(&file)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout} {}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["status"], "ready", "{result}");
    let user = first_message(&model.requests()[0], "user");
    let parts = user["content"].as_array().expect("content parts");
    assert_eq!(parts[0]["text"], "What is in this picture?");
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(
        parts[1]["image_url"]["url"],
        format!("data:image/png;base64,{png}")
    );
}
