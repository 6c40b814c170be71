//! Attacks on the built-in tools that need no real IO: quadratic HTML, an edit that
//! grows a file past the cap, a memory namespace filled without end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ai_core::{CancellationToken, tool::ToolErrorCode};
use ai_tools::builtin::{EditFile, html_to_text, html_to_text_cancellable};
use ai_tools::capability::{MemoryStore, MemoryStoreDouble, MemoryWorkspace, Workspace};

use crate::run_one;
use crate::support::{memory_write, web_fetch};

const TWO_MIB: usize = 2 * 1024 * 1024;

/// Pages that made the old entity decoder quadratic (each `&` scanned to the next
/// `;`, far away or nowhere).
fn adversarial_pages(size: usize) -> Vec<(&'static str, String)> {
    let fill = |unit: &str| unit.repeat(size / unit.len());
    vec![
        ("ampersands", fill("&")),
        ("ampersand hash", fill("&#")),
        ("ampersand hash x", fill("&#x")),
        ("escaped ampersands", fill("&amp;")),
        ("ampersand amp without semicolon", fill("&amp")),
        ("ampersands then one semicolon", format!("{};", fill("&"))),
        ("open tags", fill("<a")),
        ("open comments", fill("<!--")),
        ("open scripts", fill("<script>")),
        ("tags with ampersands", fill("<b>&")),
    ]
}

#[test]
fn quadratic_html_entity_pages_of_2_mib_convert_in_linear_time() {
    for (label, page) in adversarial_pages(TWO_MIB) {
        let started = Instant::now();
        let text = html_to_text(&page);
        let took = started.elapsed();
        // A correctness bound on linearity, not a benchmark: the quadratic decoder
        // took tens of seconds on the first of these pages.
        assert!(took < Duration::from_secs(5), "{label}: {took:?}");
        assert!(text.len() <= page.len() + 1, "{label}");
    }
    // The output is still right.
    assert_eq!(html_to_text(&"&".repeat(10)), "&&&&&&&&&&\n");
    assert_eq!(html_to_text(&"&amp;".repeat(3)), "&&&\n");
}

#[tokio::test]
async fn html_conversion_yields_and_stops_when_cancelled() {
    let page = "<p>x &amp; y</p>".repeat(TWO_MIB / 16);
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert_eq!(html_to_text_cancellable(&page, &cancel).await, None);
    // A timeout around the conversion fires between chunks.
    let live = CancellationToken::new();
    let outcome = tokio::time::timeout(
        Duration::from_nanos(1),
        html_to_text_cancellable(&page, &live),
    )
    .await;
    assert!(outcome.is_err(), "the conversion never yielded");
}

#[tokio::test]
async fn web_fetch_of_a_2_mib_ampersand_page_finishes_promptly() {
    let tool = web_fetch("&#".repeat(TWO_MIB / 2), &[]);
    let started = Instant::now();
    let (exec, _) = run_one(tool, r#"{"url":"https://example.com/"}"#).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn edit_that_grows_a_file_past_the_cap_is_refused() {
    let ws = Arc::new(MemoryWorkspace::with_files([("a.txt", "x".repeat(60))]));
    let dyn_ws: Arc<dyn Workspace> = ws.clone();
    let edit = ai_tools::bind(EditFile { max_bytes: 100 }, dyn_ws).unwrap();
    let (exec, _) = run_one(
        edit.clone(),
        r#"{"path":"a.txt","old":"x","new":"yy","replace_all":true}"#,
    )
    .await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::InvalidArgs));
    assert!(
        exec.model_content.contains("limit"),
        "{}",
        exec.model_content
    );
    assert_eq!(ws.get("a.txt").unwrap(), "x".repeat(60).into_bytes());
    // Up to the cap is fine.
    let (exec, _) = run_one(
        edit,
        r#"{"path":"a.txt","old":"xxxxxxxxxx","new":"yyyyyyyyyyyyyyy","replace_all":true}"#,
    )
    .await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert_eq!(ws.get("a.txt").unwrap().len(), 90);
}

#[tokio::test]
async fn memory_namespace_flooding_is_capped() {
    let store: Arc<dyn MemoryStore> = Arc::new(MemoryStoreDouble::new().with_max_entries(3));
    let write = memory_write(&store, 1);
    for key in ["a", "b", "c"] {
        let (exec, _) = run_one(write.clone(), &format!(r#"{{"key":"{key}","text":"t"}}"#)).await;
        assert!(exec.result.ok, "{:?}", exec.result);
    }
    let (exec, _) = run_one(write.clone(), r#"{"key":"d","text":"t"}"#).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::ExecutionFailed));
    assert!(
        exec.model_content.contains("full"),
        "{}",
        exec.model_content
    );
    // Replacing a key and other namespaces still work.
    let (exec, _) = run_one(write.clone(), r#"{"key":"a","text":"new"}"#).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let (exec, _) = run_one(write, r#"{"key":"d","text":"t","namespace":"other"}"#).await;
    assert!(exec.result.ok, "{:?}", exec.result);
}
