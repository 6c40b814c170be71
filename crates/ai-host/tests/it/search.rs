//! `core__web_search` against loopback servers shaped like SearXNG, Brave and
//! Tavily: results mapped and bounded, the endpoint refused (without being
//! contacted) unless allowlisted, the key sent from its variable and never shown,
//! and each failure typed and readable.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_core::tool::{RegisteredTool, ToolErrorCode};
use ai_host::{GuardedWebSearch, SearchKey, SearchProvider};
use ai_tools::bind;
use ai_tools::builtin::{MAX_SNIPPET_CHARS, MAX_TITLE_CHARS, WebSearch};
use ai_tools::capability::{NetAllowlist, SearchEngine};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::support::run;

const BRAVE_KEY: &str = "brave-test-key-0123456789";
const TAVILY_KEY: &str = "tvly-test-key-0123456789";

/// One request a fake provider received.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    query: Vec<(String, String)>,
    headers: HeaderMap,
    body: Value,
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Seen>>>);

impl Log {
    fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }
}

struct Server {
    addr: SocketAddr,
    log: Log,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn allowlisted(&self) -> NetAllowlist {
        NetAllowlist::parse([self.addr.to_string()]).unwrap()
    }
}

/// A SearXNG answer: 30 results, every fifth with a URL that is not a web URL, the
/// second with a long title, the third with a long snippet spread over lines.
fn searxng_answer(query: &str) -> Value {
    let results: Vec<Value> = (0..30)
        .map(|i| {
            let url = match i % 5 {
                4 if i % 10 == 4 => format!("javascript:alert({i})"),
                4 => format!("ftp://files{i}.test/x"),
                _ => format!("https://site{i}.test/page"),
            };
            let title = if i == 1 {
                "T".repeat(MAX_TITLE_CHARS + 50)
            } else {
                format!("Result {i}")
            };
            let content = if i == 2 {
                "long\n\n  snippet ".repeat(200)
            } else {
                format!("About {query}, part {i}.")
            };
            json!({"url": url, "title": title, "content": content, "engine": "fake",
                   "parsed_url": ["https", "x"], "score": 1.0, "category": "general"})
        })
        .collect();
    json!({"query": query, "number_of_results": 30, "results": results,
           "answers": [], "suggestions": [], "unresponsive_engines": []})
}

/// A JSON answer (axum's `Json` needs a feature the workspace leaves off).
fn json_reply(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn params(uri: &Uri) -> Vec<(String, String)> {
    uri.query().map(url_pairs).unwrap_or_default()
}

async fn searxng(uri: Uri) -> Response {
    let params = params(&uri);
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    if get("format").as_deref() != Some("json") {
        return (StatusCode::FORBIDDEN, "format not allowed").into_response();
    }
    let query = get("q").unwrap_or_default();
    json_reply(&searxng_answer(&query))
}

async fn brave(headers: HeaderMap, uri: Uri) -> Response {
    let params = params(&uri);
    let token = headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if token != BRAVE_KEY {
        // Echoes the token it got, as some APIs do: the excerpt must not show it.
        return (
            StatusCode::UNAUTHORIZED,
            format!("{{\"error\":\"invalid token {token}\"}}"),
        )
            .into_response();
    }
    let count: usize = params
        .iter()
        .find(|(k, _)| k == "count")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(20);
    let results: Vec<Value> = (0..count)
        .map(|i| {
            json!({"title": format!("<strong>Brave</strong> {i}"),
                   "url": format!("https://brave{i}.test/"),
                   "description": "Fast &amp; <strong>private</strong>",
                   "type": "search_result"})
        })
        .collect();
    json_reply(&json!({"type": "search", "query": {"original": "x"},
                       "web": {"type": "search", "results": results}}))
}

async fn tavily(headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if auth != Some(format!("Bearer {TAVILY_KEY}").as_str()) {
        return (StatusCode::UNAUTHORIZED, "{\"detail\":\"unauthorized\"}").into_response();
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let n = body["max_results"].as_u64().unwrap_or(0);
    let results: Vec<Value> = (0..n)
        .map(|i| {
            json!({"title": format!("Tavily {i}"), "url": format!("https://t{i}.test/"),
                        "content": "tavily content", "score": 0.5})
        })
        .collect();
    json_reply(&json!({"query": body["query"], "results": results, "response_time": 0.1}))
}

async fn server() -> Server {
    let log = Log::default();
    let app = Router::new()
        .route("/search", get(searxng))
        .route("/sub/dir/search", get(searxng))
        .route("/res/v1/web/search", get(brave))
        .route("/tavily/search", post(tavily))
        .route(
            "/broken/search",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "<html>maintenance</html>",
                )
            }),
        )
        .route(
            "/down/search",
            get(|| async {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "upstream\n\n   engines all down",
                )
            }),
        )
        .route(
            "/moved/search",
            get(|| async {
                (
                    StatusCode::FOUND,
                    [(header::LOCATION, "http://10.0.0.1/search")],
                )
            }),
        )
        .route(
            "/huge/search",
            get(|| async {
                format!(
                    "{{\"results\":[{{\"content\":\"{}\"}}]}}",
                    "x".repeat(3 << 20)
                )
            }),
        )
        .route(
            "/slow/search",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "{}"
            }),
        )
        .layer(axum::middleware::from_fn_with_state(
            log.clone(),
            |State(log): State<Log>, req: Request, next: axum::middleware::Next| async move {
                let (parts, body) = req.into_parts();
                let bytes = axum::body::to_bytes(body, 1 << 20)
                    .await
                    .unwrap_or_default();
                let query = params(&parts.uri);
                log.0.lock().unwrap().push(Seen {
                    path: parts.uri.path().to_owned(),
                    query,
                    headers: parts.headers.clone(),
                    body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
                });
                next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                    .await
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Server { addr, log }
}

/// The decoded `name=value` pairs of a query string.
fn url_pairs(query: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && let Some(hex) = s.get(i + 1..i + 3)
                && let Ok(b) = u8::from_str_radix(hex, 16)
            {
                out.push(b);
                i += 3;
                continue;
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn tool_with(
    provider: SearchProvider,
    endpoint: &str,
    key: Option<SearchKey>,
    allowlist: NetAllowlist,
    contract: WebSearch,
) -> RegisteredTool {
    let engine = GuardedWebSearch::new(provider, Some(endpoint), key, allowlist).unwrap();
    bind(contract, Arc::new(engine) as Arc<dyn SearchEngine>).unwrap()
}

fn searxng_tool(endpoint: &str, allowlist: NetAllowlist) -> RegisteredTool {
    tool_with(
        SearchProvider::Searxng,
        endpoint,
        None,
        allowlist,
        WebSearch {
            timeout: Duration::from_secs(5),
            ..WebSearch::default()
        },
    )
}

#[tokio::test]
async fn an_allowlisted_searxng_instance_is_searched_and_its_results_bounded() {
    let s = server().await;
    let t = searxng_tool(&s.url(""), s.allowlisted());
    let exec = run(&t, &json!({"query": "rust async & more", "count": 8})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let out = exec.output.unwrap();
    let results = out["results"].as_array().unwrap();
    // Count bounded, the `javascript:` and `ftp:` results dropped before counting.
    assert_eq!(results.len(), 8);
    let urls: Vec<&str> = results.iter().map(|r| r["url"].as_str().unwrap()).collect();
    assert!(urls.iter().all(|u| u.starts_with("https://")), "{urls:?}");
    assert_eq!(urls[4], "https://site5.test/page", "{urls:?}");
    assert_eq!(urls[7], "https://site8.test/page", "{urls:?}");
    assert_eq!(results[0]["title"], "Result 0");
    assert_eq!(results[0]["snippet"], "About rust async & more, part 0.");
    // Long texts cut, on one line.
    assert_eq!(
        results[1]["title"].as_str().unwrap().chars().count(),
        MAX_TITLE_CHARS
    );
    let snippet = results[2]["snippet"].as_str().unwrap();
    assert!(snippet.chars().count() <= MAX_SNIPPET_CHARS);
    assert!(snippet.chars().count() > MAX_SNIPPET_CHARS - 10);
    assert!(
        snippet.starts_with("long snippet long snippet"),
        "{snippet}"
    );
    assert!(!snippet.contains('\n'));
    assert_eq!(out["truncated"], true);
    // The request: `/search` with the query and `format=json`.
    let seen = s.log.all();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/search");
    assert!(
        seen[0]
            .query
            .contains(&("q".to_owned(), "rust async & more".to_owned())),
        "{:?}",
        seen[0].query
    );
    assert!(
        seen[0]
            .query
            .contains(&("format".to_owned(), "json".to_owned()))
    );
    assert_eq!(
        seen[0].headers.get(header::ACCEPT).unwrap(),
        "application/json"
    );

    // The default count is 5; an instance under a path prefix works as well.
    let t = searxng_tool(&s.url("/sub/dir/"), s.allowlisted());
    let exec = run(&t, &json!({"query": "x"})).await;
    assert_eq!(exec.output.unwrap()["results"].as_array().unwrap().len(), 5);
    assert_eq!(s.log.all()[1].path, "/sub/dir/search");
}

#[tokio::test]
async fn an_endpoint_on_a_private_address_is_refused_unless_allowlisted() {
    let s = server().await;
    let port = s.addr.port();
    for endpoint in [
        s.url(""),
        format!("http://localhost:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://2130706433:{port}/"),
    ] {
        // Nothing allowlisted; then another port of the same address.
        for allowlist in [
            NetAllowlist::none(),
            NetAllowlist::parse([format!("127.0.0.1:{}", port.wrapping_add(1))]).unwrap(),
        ] {
            let t = searxng_tool(&endpoint, allowlist);
            let exec = run(&t, &json!({"query": "x"})).await;
            assert_eq!(
                exec.result.error_code,
                Some(ToolErrorCode::PermissionDenied),
                "{endpoint}: {:?}",
                exec.result
            );
            assert!(
                exec.model_content.contains("loopback address"),
                "{}",
                exec.model_content
            );
            assert!(!exec.model_content.contains(&endpoint));
        }
    }
    assert!(s.log.all().is_empty(), "a refused endpoint was contacted");
}

#[tokio::test]
async fn brave_gets_the_key_from_its_variable_and_never_shows_it() {
    let s = server().await;
    let endpoint = s.url("/res/v1/web/search");
    let brave = |key: Option<&str>| {
        tool_with(
            SearchProvider::Brave,
            &endpoint,
            Some(SearchKey::from_env("BRAVE_API_KEY", key.map(str::to_owned))),
            s.allowlisted(),
            WebSearch::default(),
        )
    };
    let exec = run(
        &brave(Some(BRAVE_KEY)),
        &json!({"query": "privacy", "count": 3}),
    )
    .await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let out = exec.output.unwrap();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["title"], "Brave 0");
    assert_eq!(results[0]["snippet"], "Fast & private");
    assert_eq!(out["truncated"], false);
    let seen = s.log.all();
    assert_eq!(
        seen[0].headers.get("x-subscription-token").unwrap(),
        BRAVE_KEY
    );
    assert!(
        seen[0]
            .query
            .contains(&("count".to_owned(), "3".to_owned()))
    );
    assert!(
        seen[0]
            .query
            .contains(&("q".to_owned(), "privacy".to_owned()))
    );

    // A wrong key: the provider's status and an excerpt, without the key it echoed.
    let wrong = "wrong-key-abcdef";
    let exec = run(&brave(Some(wrong)), &json!({"query": "x"})).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::ExecutionFailed));
    assert!(
        exec.model_content.contains("HTTP 401") && exec.model_content.contains("invalid token"),
        "{}",
        exec.model_content
    );
    assert!(
        !exec.model_content.contains(wrong),
        "{}",
        exec.model_content
    );

    // An unset variable: a readable error naming it, and no request.
    let before = s.log.all().len();
    let exec = run(&brave(None), &json!({"query": "x"})).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::ExecutionFailed));
    assert!(
        exec.model_content.contains("`BRAVE_API_KEY`") && exec.model_content.contains("not set"),
        "{}",
        exec.model_content
    );
    assert_eq!(s.log.all().len(), before);
}

#[tokio::test]
async fn tavily_is_asked_by_post_with_a_bearer_key() {
    let s = server().await;
    let t = tool_with(
        SearchProvider::Tavily,
        &s.url("/tavily/search"),
        Some(SearchKey::from_env(
            "TAVILY_API_KEY",
            Some(TAVILY_KEY.into()),
        )),
        s.allowlisted(),
        WebSearch::default(),
    );
    let exec = run(&t, &json!({"query": "who won", "count": 4})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let out = exec.output.unwrap();
    assert_eq!(out["results"].as_array().unwrap().len(), 4);
    assert_eq!(out["results"][3]["url"], "https://t3.test/");
    let seen = s.log.all();
    assert_eq!(seen[0].body, json!({"query": "who won", "max_results": 4}));
    assert_eq!(
        seen[0].headers.get(header::CONTENT_TYPE).unwrap(),
        "application/json"
    );
}

#[tokio::test]
async fn provider_failures_are_typed_and_readable() {
    let s = server().await;
    let run_at = |path: &str, timeout: Duration, max_bytes: usize| {
        let t = tool_with(
            SearchProvider::Searxng,
            &s.url(path),
            None,
            s.allowlisted(),
            WebSearch {
                timeout,
                max_bytes,
                ..WebSearch::default()
            },
        );
        async move { run(&t, &json!({"query": "x"})).await }
    };
    let second = Duration::from_secs(5);
    let cases = [
        (
            "/broken/",
            second,
            1 << 20,
            ToolErrorCode::ExecutionFailed,
            "could not be read: not JSON",
        ),
        (
            "/down/",
            second,
            1 << 20,
            ToolErrorCode::ExecutionFailed,
            "HTTP 503: upstream engines all down",
        ),
        (
            "/moved/",
            second,
            1 << 20,
            ToolErrorCode::ExecutionFailed,
            "redirect (HTTP 302), which is not followed",
        ),
        (
            "/huge/",
            second,
            1 << 20,
            ToolErrorCode::ExecutionFailed,
            "larger than 1048576 bytes",
        ),
        (
            "/slow/",
            Duration::from_millis(300),
            1 << 20,
            ToolErrorCode::Timeout,
            "timed out",
        ),
    ];
    for (path, timeout, max_bytes, code, needle) in cases {
        let exec = run_at(path, timeout, max_bytes).await;
        assert_eq!(
            exec.result.error_code,
            Some(code),
            "{path}: {:?}",
            exec.result
        );
        assert!(
            exec.model_content.contains(needle),
            "{path}: {}",
            exec.model_content
        );
    }
    // The redirect's target was never contacted (nothing listens there anyway, and
    // only the five requests above arrived).
    assert_eq!(s.log.all().len(), 5);
}
