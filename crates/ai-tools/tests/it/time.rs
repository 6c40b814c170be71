//! `core__get_current_time` against a fixed clock.

use std::sync::Arc;

use ai_core::{event::AiEventKind, tool::ToolErrorCode};
use ai_tools::builtin::GetCurrentTime;
use ai_tools::capability::{Clock, FixedClock};
use serde_json::{Value, json};

use crate::run_one;

fn clock() -> Arc<dyn Clock> {
    // 2026-03-01T12:34:56Z
    Arc::new(FixedClock(
        jiff::Timestamp::from_second(1_772_368_496).unwrap(),
    ))
}

#[tokio::test]
async fn reports_utc_by_default() {
    let tool = ai_tools::bind(GetCurrentTime, clock()).unwrap();
    assert_eq!(tool.spec.id.as_str(), "core__get_current_time");
    let (exec, events) = run_one(tool, "").await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let content: Value = serde_json::from_str(&exec.model_content).unwrap();
    assert_eq!(
        content,
        json!({"now": "2026-03-01T12:34:56+00:00", "timezone": "UTC", "unix_ms": 1_772_368_496_000_i64})
    );
    assert_eq!(events.len(), 2);
}

#[tokio::test]
async fn converts_to_an_iana_zone_in_rfc3339() {
    let tool = ai_tools::bind(GetCurrentTime, clock()).unwrap();
    let (exec, events) = run_one(tool, r#"{"timezone":"Asia/Kolkata"}"#).await;
    assert_eq!(
        exec.output.as_ref().unwrap()["now"],
        json!("2026-03-01T18:04:56+05:30")
    );
    match &events[0].kind {
        AiEventKind::ToolCallStart { args, .. } => {
            assert_eq!(args, &json!({"timezone": "Asia/Kolkata"}))
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn unknown_zone_is_a_typed_error() {
    let tool = ai_tools::bind(GetCurrentTime, clock()).unwrap();
    let (exec, _) = run_one(tool, r#"{"timezone":"Mars/Olympus"}"#).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::InvalidArgs));
    assert!(
        !exec.model_content.contains("Mars"),
        "{}",
        exec.model_content
    );
}

#[tokio::test]
async fn unknown_fields_are_rejected_by_the_schema() {
    let tool = ai_tools::bind(GetCurrentTime, clock()).unwrap();
    let (exec, _) = run_one(tool, r#"{"tz":"UTC"}"#).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::InvalidArgs));
}
