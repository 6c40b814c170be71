//! `core__web_search` through the `agent` binary: listed only when
//! `[tools.web_search]` is configured (and a project file setting it needs `agent
//! trust`), the key read from the variable the file names and sent to a
//! Brave-shaped provider on loopback, and the endpoint refused unless allowlisted.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use agent_testing::server::{OpenAiServer, Reply};

use crate::support::{Home, json_lines, result_event};

const SECRET_KEY: &str = "sk-e2e-secret-key-0123456789";
const SEARCH_KEY: &str = "brave-e2e-search-key-9876543210";
const KEY_ENV: &str = "E2E_SEARCH_KEY";

/// A loopback server that answers every request with a Brave-shaped result list and
/// keeps each request's head (request line and headers, lowercase).
struct FakeBrave {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl FakeBrave {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&heads);
        let body = json!({"type": "search", "web": {"type": "search", "results": [
            {"title": "The <strong>Rust</strong> Book", "url": "https://doc.rust-lang.example/book/",
             "description": "Learn &amp; build."},
            {"title": "Not a page", "url": "javascript:alert(1)", "description": "x"},
            {"title": "Rust by Example", "url": "https://rbe.example/", "description": "Examples."}
        ]}})
        .to_string();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let seen = Arc::clone(&seen);
                let body = body.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0_u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65_536 {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    seen.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&buf).to_ascii_lowercase());
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        Self { addr, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }

    /// The user's own config (trusted as theirs) pointing web_search at this
    /// server, allowlisted or not; its path.
    fn config(&self, home: &Home, allowlisted: bool) -> String {
        let allow = if allowlisted {
            format!("allow_private = [\"{}\"]\n", self.addr)
        } else {
            String::new()
        };
        let path = home.write_user_config(&format!(
            "[tools.web_search]\nprovider = \"brave\"\nurl = \"http://{}/res/v1/web/search\"\napi_key_env = \"{KEY_ENV}\"\n{allow}",
            self.addr
        ));
        path.display().to_string()
    }
}

/// `agent tools --json` rows as (id, effect, decision).
fn rows(stdout: &str) -> Vec<(String, String, String)> {
    json_lines(stdout)
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["effect"].as_str().unwrap().to_owned(),
                r["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Runs `agent --config CONFIG chat --json --approve "find rust"` against a model
/// that calls `core__web_search` once, with the key variable set or not: the
/// `tool_call_result` event, what the model was told, stdout and stderr.
async fn search_chat(
    home: &Home,
    config: &str,
    key: Option<&str>,
) -> (Value, String, String, String) {
    let model = OpenAiServer::start([
        Reply::tool_calls(&[(
            "call_search",
            "core__web_search",
            json!({"query": "rust book", "count": 2}),
        )]),
        Reply::text("done"),
    ])
    .await
    .unwrap();
    let base_url = model.base_url();
    let mut command = home.command(
        Some(&base_url),
        &[
            "--config",
            config,
            "chat",
            "--json",
            "--approve",
            "find rust",
        ],
    );
    match key {
        Some(key) => command.env(KEY_ENV, key),
        None => command.env_remove(KEY_ENV),
    };
    let (stdout, stderr) = crate::support::succeeded(crate::support::finish(&mut command).await);
    let told = crate::support::tool_text(&model.requests()[1]);
    (result_event(&stdout), told, stdout, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_search_is_listed_only_when_configured_and_a_project_file_needs_trust() {
    let home = Home::new(SECRET_KEY);
    let (code, stdout, stderr) = home
        .run(Some("http://127.0.0.1:9/v1"), &["tools", "--json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let ids: Vec<String> = rows(&stdout).into_iter().map(|r| r.0).collect();
    assert!(ids.contains(&"core__web_fetch".to_owned()), "{ids:?}");
    assert!(!ids.contains(&"core__web_search".to_owned()), "{ids:?}");

    // A project file that configures a search provider is refused until trusted.
    home.write_config(
        "[tools.web_search]\nprovider = \"searxng\"\nurl = \"http://127.0.0.1:8888\"\nallow_private = [\"127.0.0.1:8888\"]\n",
    );
    let (code, _, stderr) = home
        .run(Some("http://127.0.0.1:9/v1"), &["tools", "--json"])
        .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("tools.web_search") && stderr.contains("agent trust"),
        "{stderr}"
    );
    let (code, stdout, stderr) = home.run(None, &["trust"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("tools.web_search"), "{stdout}");

    let (code, stdout, stderr) = home
        .run(Some("http://127.0.0.1:9/v1"), &["tools", "--json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let listed = rows(&stdout);
    let search = listed.iter().find(|r| r.0 == "core__web_search");
    assert_eq!(
        search,
        Some(&(
            "core__web_search".to_owned(),
            "external_side_effect".to_owned(),
            "approval".to_owned()
        )),
        "{listed:?}"
    );
    assert_eq!(listed.len(), 10, "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_searches_with_the_key_from_the_variable_the_config_names() {
    let home = Home::new(SECRET_KEY);
    let brave = FakeBrave::start().await;
    let config = brave.config(&home, true);

    let (result, told, stdout, stderr) = search_chat(&home, &config, Some(SEARCH_KEY)).await;
    assert_eq!(result["ok"], true, "{result}");
    // The model read the mapped results: markup reduced, the non-web URL dropped.
    let content: Value = serde_json::from_str(&told).unwrap();
    assert_eq!(
        content["results"],
        json!([
            {"title": "The Rust Book", "url": "https://doc.rust-lang.example/book/", "snippet": "Learn & build."},
            {"title": "Rust by Example", "url": "https://rbe.example/", "snippet": "Examples."}
        ]),
        "{told}"
    );
    let heads = brave.heads();
    assert_eq!(heads.len(), 1);
    assert!(
        heads[0].starts_with("get /res/v1/web/search?q=rust+book&count=2 "),
        "{}",
        heads[0]
    );
    assert!(
        heads[0].contains(&format!("x-subscription-token: {SEARCH_KEY}")),
        "{}",
        heads[0]
    );
    // The key never reaches the output.
    assert!(!stdout.contains(SEARCH_KEY) && !stderr.contains(SEARCH_KEY));

    // Without the variable: a warning at start, a call that names the variable, and
    // no request.
    let (result, told, _, stderr) = search_chat(&home, &config, None).await;
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error_code"], "execution_failed", "{result}");
    assert!(told.contains(KEY_ENV) && told.contains("not set"), "{told}");
    assert!(
        stderr.contains(KEY_ENV) && stderr.contains("warning"),
        "{stderr}"
    );
    assert_eq!(brave.heads().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_endpoint_is_refused_unless_allowlisted() {
    let home = Home::new(SECRET_KEY);
    let brave = FakeBrave::start().await;
    let config = brave.config(&home, false);
    let (result, told, _, _) = search_chat(&home, &config, Some(SEARCH_KEY)).await;
    assert_eq!(result["ok"], false, "{result}");
    assert_eq!(result["error_code"], "permission_denied", "{result}");
    assert!(told.contains("loopback address"), "{told}");
    assert!(
        brave.heads().is_empty(),
        "the refused endpoint was contacted"
    );
}
