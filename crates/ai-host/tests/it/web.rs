//! `core__web_fetch` against loopback servers: the SSRF corpus (refused by default,
//! without the server ever being contacted), the allowlist, redirects, caps and
//! content handling.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ai_core::runner::ToolExecution;
use ai_core::tool::{RegisteredTool, ToolErrorCode};
use ai_host::GuardedHttpFetch;
use ai_tools::bind;
use ai_tools::builtin::WebFetch;
use ai_tools::capability::{HttpFetch, NetAllowlist, classify};
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;

use crate::support::run;

const PAGE: &str = "<html><head><title>t</title><script>var key='x'</script></head>\
    <body><h1>Hello &amp; welcome</h1><p>Plain text</p></body></html>";

struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

async fn server(redirect_target: Option<String>) -> Server {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let target = redirect_target.unwrap_or_else(|| "http://10.0.0.1/".to_owned());
    let app = Router::new()
        .route(
            "/",
            get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE) }),
        )
        .route(
            "/plain",
            get(|| async { ([(header::CONTENT_TYPE, "text/plain")], "just text") }),
        )
        .route(
            "/big",
            get(|| async { ([(header::CONTENT_TYPE, "text/plain")], "y".repeat(100_000)) }),
        )
        .route(
            "/png",
            get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0_u8, 1, 2]) }),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "gone").into_response() }),
        )
        .route(
            "/self",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/plain")]).into_response() }),
        )
        .route(
            "/loop",
            get(|| async { (StatusCode::FOUND, [(header::LOCATION, "/loop")]).into_response() }),
        )
        .route(
            "/away",
            get(move || {
                let target = target.clone();
                async move { (StatusCode::FOUND, [(header::LOCATION, target)]).into_response() }
            }),
        )
        .route(
            "/amp",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "&".repeat(2 * 1024 * 1024),
                )
            }),
        )
        .route(
            "/amphash",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/html")],
                    "&#".repeat(1024 * 1024),
                )
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        )
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { next.run(req).await }
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Server { addr, hits }
}

fn tool(allowlist: &[String], max_bytes: usize, timeout: Duration) -> RegisteredTool {
    let fetch = GuardedHttpFetch::new(NetAllowlist::parse(allowlist).unwrap());
    bind(
        WebFetch { max_bytes, timeout },
        Arc::new(fetch) as Arc<dyn HttpFetch>,
    )
    .unwrap()
}

/// The machine's own host name when it resolves only to refused addresses (on most
/// machines and containers `/etc/hosts` maps it to loopback).
async fn local_hostname() -> Option<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim().to_owned();
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 80))
        .await
        .ok()?
        .collect();
    (!addrs.is_empty() && addrs.iter().all(|a| classify(a.ip()).is_some())).then_some(name)
}

#[tokio::test]
async fn ssrf_corpus_is_refused_by_default() {
    let s = server(None).await;
    let p = s.addr.port();
    let t = tool(&[], 1 << 20, Duration::from_secs(5));
    let mut cases: Vec<(String, ToolErrorCode)> = [
        format!("http://127.0.0.1:{p}/"),
        format!("http://127.0.0.2:{p}/"),
        format!("http://localhost:{p}/"),
        format!("http://LOCALHOST.:{p}/"),
        format!("http://evil.localhost:{p}/"),
        format!("http://[::1]:{p}/"),
        format!("http://0.0.0.0:{p}/"),
        format!("http://[::]:{p}/"),
        "http://10.0.0.1/".to_owned(),
        "http://172.16.0.1/".to_owned(),
        "http://172.31.255.254/".to_owned(),
        "http://192.168.1.1/".to_owned(),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://[fd00:ec2::254]/".to_owned(),
        "http://100.64.0.1/".to_owned(),
        "http://[fe80::1]/".to_owned(),
        "http://224.0.0.1/".to_owned(),
        format!("http://[::ffff:127.0.0.1]:{p}/"),
        format!("http://[::ffff:7f00:1]:{p}/"),
        format!("http://[::ffff:0:127.0.0.1]:{p}/"),
        format!("http://[::ffff:0:7f00:1]:{p}/"),
        "http://[::ffff:0:a00:1]/".to_owned(),
        "http://[::ffff:0:a9fe:a9fe]/latest/meta-data/".to_owned(),
        format!("http://2130706433:{p}/"),
        format!("http://0177.0.0.1:{p}/"),
        format!("http://017700000001:{p}/"),
        format!("http://0x7f.0.0.1:{p}/"),
        format!("http://127.1:{p}/"),
        "https://10.1.2.3/".to_owned(),
    ]
    .into_iter()
    .map(|u| (u, ToolErrorCode::PermissionDenied))
    .collect();
    cases.extend([
        (format!("ftp://127.0.0.1:{p}/"), ToolErrorCode::InvalidArgs),
        ("file:///etc/passwd".to_owned(), ToolErrorCode::InvalidArgs),
        (
            format!("http://user:pw@127.0.0.1:{p}/"),
            ToolErrorCode::InvalidArgs,
        ),
        ("not a url".to_owned(), ToolErrorCode::InvalidArgs),
    ]);
    if let Some(host) = local_hostname().await {
        cases.push((
            format!("http://{host}:{p}/"),
            ToolErrorCode::PermissionDenied,
        ));
    }
    assert!(cases.len() >= 33, "{}", cases.len());
    for (url, code) in &cases {
        let exec = run(&t, &json!({"url": url})).await;
        assert_eq!(
            exec.result.error_code,
            Some(*code),
            "{url}: {:?}",
            exec.result
        );
        assert!(!exec.model_content.contains(url.as_str()), "{url} echoed");
    }
    assert_eq!(
        s.hits.load(Ordering::SeqCst),
        0,
        "a refused URL reached the server"
    );
}

/// `web_fetch` of `/away` on an allowlisted server that redirects to `target`:
/// the server, and the call.
async fn fetch_redirected_to(target: String) -> (Server, ToolExecution) {
    let s = server(Some(target)).await;
    let t = tool(&[s.addr.to_string()], 1 << 20, Duration::from_secs(5));
    let exec = run(&t, &json!({"url": format!("http://{}/away", s.addr)})).await;
    (s, exec)
}

#[tokio::test]
async fn a_redirect_to_a_refused_address_is_refused() {
    // The allowlisted server redirects to a private address...
    let (_, exec) = fetch_redirected_to("http://10.0.0.1/".to_owned()).await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::PermissionDenied),
        "{:?}",
        exec.result
    );
    // ...or to another loopback port that is not allowlisted.
    let other = server(None).await;
    let (s, exec) = fetch_redirected_to(format!("http://127.0.0.1:{}/", other.addr.port())).await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::PermissionDenied),
        "{:?}",
        exec.result
    );
    assert_eq!(other.hits.load(Ordering::SeqCst), 0);
    assert_eq!(s.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_allowlisted_loopback_server_is_fetched_as_text() {
    let s = server(None).await;
    let t = tool(&[s.addr.to_string()], 1 << 20, Duration::from_secs(5));
    let exec = run(&t, &json!({"url": format!("http://{}/", s.addr)})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let out = exec.output.unwrap();
    assert_eq!(out["status"], 200);
    assert_eq!(out["content_type"], "text/html; charset=utf-8");
    assert_eq!(out["text"], "Hello & welcome\n\nPlain text\n");
    assert_eq!(out["redirects"], 0);
    // The page text stays out of the redacted view.
    assert!(exec.result.value.unwrap().get("text").is_none());

    let exec = run(&t, &json!({"url": format!("http://{}/self", s.addr)})).await;
    let out = exec.output.unwrap();
    assert_eq!(out["text"], "just text");
    assert_eq!(out["redirects"], 1);
    assert_eq!(out["url"], format!("http://{}/plain", s.addr));

    let exec = run(&t, &json!({"url": format!("http://{}/missing", s.addr)})).await;
    assert_eq!(exec.output.unwrap()["status"], 404);

    // A host-name allowlist entry lets `localhost` through as well.
    let t = tool(
        &[format!("localhost:{}", s.addr.port())],
        1 << 20,
        Duration::from_secs(5),
    );
    let exec = run(
        &t,
        &json!({"url": format!("http://localhost:{}/plain", s.addr.port())}),
    )
    .await;
    assert!(exec.result.ok, "{:?}", exec.result);
}

#[tokio::test]
async fn caps_redirect_limits_content_types_and_timeouts() {
    let s = server(None).await;
    let allow = [s.addr.to_string()];
    let t = tool(&allow, 1000, Duration::from_secs(5));
    let exec = run(&t, &json!({"url": format!("http://{}/big", s.addr)})).await;
    let out = exec.output.unwrap();
    assert_eq!(out["text"].as_str().unwrap().len(), 1000);
    assert_eq!(out["truncated"], true);

    let exec = run(&t, &json!({"url": format!("http://{}/loop", s.addr)})).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::ExecutionFailed));
    assert!(
        exec.model_content.contains("redirects"),
        "{}",
        exec.model_content
    );

    let exec = run(&t, &json!({"url": format!("http://{}/png", s.addr)})).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::ExecutionFailed));

    let t = tool(&allow, 1000, Duration::from_millis(300));
    let exec = run(&t, &json!({"url": format!("http://{}/slow", s.addr)})).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::Timeout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quadratic_html_entity_pages_of_2_mib_are_fetched_promptly() {
    let s = server(None).await;
    let t = tool(&[s.addr.to_string()], 4 << 20, Duration::from_secs(10));
    for path in ["/amp", "/amphash"] {
        let started = std::time::Instant::now();
        let exec = run(&t, &json!({"url": format!("http://{}{path}", s.addr)})).await;
        assert!(exec.result.ok, "{path}: {:?}", exec.result);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "{path}: {took:?}");
    }
}
