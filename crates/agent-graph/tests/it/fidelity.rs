//! The loop's half of two fidelity findings: a failed model call's usage is
//! reported before the run's error, and a turn the provider paused is sent
//! back to go on, a bounded number of times, then reported.

use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    Message,
    completion::{CompletionError, FinishReason},
};
use serde_json::json;

use crate::support::{Kit, labels, request, run_to_end, strs};

/// The provider's "paused" reason, read as a recorded turn carries it.
fn paused() -> FinishReason {
    serde_json::from_value(json!("paused")).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_failed_call_reports_its_usage_before_the_error() {
    let kit = Kit::new();
    let overloaded = CompletionError::Provider {
        code: Some("overloaded_error".into()),
        message: "Overloaded (overloaded_error)".into(),
    };
    let model = ScriptedModel::new([Turn::text("Par")
        .usage(12, 1)
        .error_after_deltas(overloaded)]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert!(outcome.is_err());
    assert_eq!(
        labels(&events),
        strs(&["text_delta", "usage_report", "error:provider_error", "done"])
    );
}

#[tokio::test(start_paused = true)]
async fn a_paused_turn_is_sent_back_and_goes_on() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("Searching.").finish(paused()).usage(10, 2),
        Turn::text(" Found it.")
            .finish(FinishReason::Stop)
            .usage(20, 3),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    let output = outcome.unwrap();
    assert_eq!(output.content, "Searching. Found it.");
    assert_eq!(output.usage.len(), 2);
    assert_eq!(model.calls(), 2);
    let second = &model.requests()[1];
    assert_eq!(
        second.messages.last(),
        Some(&Message::assistant("Searching."))
    );
    assert_eq!(
        labels(&events),
        strs(&[
            "text_delta",
            "usage_report",
            "text_delta",
            "usage_report",
            "assistant_final",
            "done"
        ])
    );
}

#[tokio::test(start_paused = true)]
async fn a_turn_still_paused_after_the_bound_is_reported_as_paused() {
    let kit = Kit::new();
    let model = ScriptedModel::repeating(Turn::text("More.").finish(paused()));
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    let output = outcome.unwrap();
    assert_eq!(model.calls(), 5, "the first turn and four continuations");
    assert_eq!(output.final_reason(), "paused");
    let finals: Vec<_> = events
        .iter()
        .filter_map(|event| serde_json::to_value(event).ok())
        .filter(|event| event["type"] == "assistant_final")
        .collect();
    assert_eq!(finals[0]["finish_reason"], json!("paused"));
}
