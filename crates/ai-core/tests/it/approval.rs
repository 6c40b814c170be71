//! Approvals in every form: no approver (`approval_required`), a refusal
//! (`approval_denied`), a grant for another
//! run, call or other arguments (replay), a ledger grant used twice, and an approver
//! that panics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ai_core::{
    ToolEffect, ToolRunner,
    approval::{ApprovalBinding, Approver, GrantLedger},
    runner::ToolCall,
    tool::{ToolErrorCode, canonical_json},
};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::support::{
    ApproveAll, Counted, DenyAll, Harness, NeverAnswers, Replay, allow_all, expect_failure,
    expect_ok, registered, spec,
};

const TOOL: &str = "core__write";
const ARGS: &str = r#"{"text": "hello", "path": "notes.txt"}"#;
const CANONICAL: &str = r#"{"path":"notes.txt","text":"hello"}"#;

/// A state-changing tool (approval needed under the default policy) and its call
/// counter.
fn write_runner() -> (ToolRunner, Arc<AtomicUsize>) {
    let schema = json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path"]
    });
    let counted = Counted::default();
    let calls = counted.calls.clone();
    let runner = ToolRunner::new(
        vec![registered(
            spec(TOOL, schema, ToolEffect::StateChange),
            counted,
        )],
        allow_all(),
    )
    .unwrap();
    (runner, calls)
}

fn approved_by(approver: Arc<dyn Approver>) -> (Harness, Arc<AtomicUsize>) {
    let (runner, calls) = write_runner();
    (Harness::from_runner(runner.with_approver(approver)), calls)
}

/// `sha256:<hex>` of `text`, computed independently of ai-core.
fn sha256(text: &str) -> String {
    let hex: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

#[tokio::test]
async fn approval_required_without_an_approver() {
    for effect in [ToolEffect::StateChange, ToolEffect::ExternalSideEffect] {
        let counted = Counted::default();
        let calls = counted.calls.clone();
        let h = Harness::new(vec![registered(
            spec(TOOL, json!({"type": "object"}), effect),
            counted,
        )]);
        // Approval-required tools are not offered when no one could approve them
        // (CATALOG_IS_EXPLICIT); a model that calls one anyway gets a typed refusal.
        assert!(!h.catalog.contains(TOOL));
        assert!(h.runner.specs().iter().any(|s| s.id.as_str() == TOOL));
        let exec = h.exec(ToolCall::new("call-1", TOOL, ARGS)).await;
        assert_eq!(
            expect_failure(&exec, ToolErrorCode::ApprovalRequired),
            format!(
                "{} tools need approval and no approver is configured",
                effect.as_str()
            )
        );
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }
}

#[tokio::test]
async fn approved_call_runs_and_the_request_binds_call_tool_and_canonical_args() {
    let approver = Arc::new(ApproveAll::default());
    let (h, calls) = approved_by(approver.clone());
    let exec = h.exec(ToolCall::new("call-1", TOOL, ARGS)).await;
    assert_eq!(
        expect_ok(&exec),
        json!({"path": "notes.txt", "text": "hello"})
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let requests = approver.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.run_id, "run-1");
    assert_eq!(request.tool_call_id, "call-1");
    assert_eq!(request.tool_id.as_str(), TOOL);
    assert_eq!(request.effect, ToolEffect::StateChange);
    assert_eq!(request.canonical_args, CANONICAL);
    assert_eq!(
        canonical_json(&serde_json::from_str(ARGS).unwrap()),
        CANONICAL
    );
    assert_eq!(request.args_hash, sha256(CANONICAL));
}

#[tokio::test]
async fn approval_denied_when_the_approver_refuses() {
    let (h, calls) = approved_by(Arc::new(DenyAll("the user declined")));
    let exec = h.exec(ToolCall::new("call-1", TOOL, ARGS)).await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::ApprovalDenied),
        "The user denied this call. Reason: the user declined"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn approval_invalid_when_a_grant_is_replayed_for_another_call_or_arguments() {
    // A genuine grant, issued for call-1 with ARGS.
    let grant = ApprovalBinding {
        scope: "run-1".into(),
        tool_call_id: "call-1".into(),
        tool_id: TOOL.into(),
        args_hash: sha256(CANONICAL),
    };
    let (h, calls) = approved_by(Arc::new(Replay(grant.clone())));
    let refused = "the approval does not match this run, this call and its exact arguments";

    // Another call id with the same arguments.
    let exec = h.exec(ToolCall::new("call-2", TOOL, ARGS)).await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::ApprovalInvalid),
        refused
    );
    // The same call id with other arguments.
    let exec = h
        .exec(ToolCall::new(
            "call-1",
            TOOL,
            r#"{"path": "/etc/passwd", "text": "hello"}"#,
        ))
        .await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::ApprovalInvalid),
        refused
    );
    // A grant naming another tool.
    let (other, other_calls) = approved_by(Arc::new(Replay(ApprovalBinding {
        tool_id: "core__other".into(),
        ..grant.clone()
    })));
    let exec = other.exec(ToolCall::new("call-1", TOOL, ARGS)).await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::ApprovalInvalid),
        refused
    );
    assert_eq!(
        calls.load(Ordering::SeqCst) + other_calls.load(Ordering::SeqCst),
        0
    );

    // The exact call matches, whatever the key order and whitespace of its text.
    let exec = h
        .exec(ToolCall::new(
            "call-1",
            TOOL,
            r#"{ "path":"notes.txt","text":"hello" }"#,
        ))
        .await;
    expect_ok(&exec);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn grant_ledger_grant_is_used_once() {
    let ledger = Arc::new(GrantLedger::new());
    ledger.insert(ApprovalBinding {
        scope: "run-1".into(),
        tool_call_id: "call-1".into(),
        tool_id: TOOL.into(),
        args_hash: sha256(CANONICAL),
    });
    let (h, calls) = approved_by(ledger.clone());
    expect_ok(&h.exec(ToolCall::new("call-1", TOOL, ARGS)).await);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert!(ledger.is_empty(), "the grant was consumed");

    // The identical call again: refused, not run.
    let exec = h.exec(ToolCall::new("call-1", TOOL, ARGS)).await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::ApprovalRequired),
        "no approval: no approval was given for this call"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn grant_ledger_refuses_and_consumes_a_grant_for_other_arguments() {
    let ledger = Arc::new(GrantLedger::new());
    ledger.insert(ApprovalBinding {
        scope: "run-1".into(),
        tool_call_id: "call-1".into(),
        tool_id: TOOL.into(),
        args_hash: sha256(r#"{"path":"notes.txt","text":"something else"}"#),
    });
    assert_eq!(ledger.len(), 1);
    let (h, calls) = approved_by(ledger.clone());
    let exec = h.exec(ToolCall::new("call-1", TOOL, ARGS)).await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::ApprovalInvalid),
        "the approval does not match this run, this call and its exact arguments"
    );
    assert!(ledger.is_empty(), "a grant is good for one attempt only");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn cancelling_the_run_ends_a_call_waiting_for_approval() {
    let (h, calls) = approved_by(Arc::new(NeverAnswers));
    let cancel = h.cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        cancel.cancel();
    });
    let exec = tokio::time::timeout(
        Duration::from_secs(5),
        h.exec(ToolCall::new("call-1", TOOL, ARGS)),
    )
    .await
    .expect("a cancelled run must not wait for an approval forever");
    canceller.await.unwrap();
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::Cancelled),
        "the run was cancelled while the call awaited approval"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_grant_issued_for_another_run_is_refused() {
    // A genuine grant for exactly this call, tool and arguments, but in run-0.
    let grant = ApprovalBinding {
        scope: "run-0".into(),
        tool_call_id: "call-1".into(),
        tool_id: TOOL.into(),
        args_hash: sha256(CANONICAL),
    };
    let (h, calls) = approved_by(Arc::new(Replay(grant.clone())));
    assert_eq!(h.run.run_id, "run-1");
    assert_eq!(
        expect_failure(
            &h.exec(ToolCall::new("call-1", TOOL, ARGS)).await,
            ToolErrorCode::ApprovalInvalid
        ),
        "the approval does not match this run, this call and its exact arguments"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // A ledger holding run-0's grant neither approves nor loses it for run-1's call.
    let ledger = Arc::new(GrantLedger::new());
    ledger.insert(grant.clone());
    let (h, calls) = approved_by(ledger.clone());
    assert_eq!(
        expect_failure(
            &h.exec(ToolCall::new("call-1", TOOL, ARGS)).await,
            ToolErrorCode::ApprovalRequired
        ),
        "no approval: no approval was given for this call"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(ledger.len(), 1, "run-0's grant is still there for run-0");
    // The same grant re-issued for run-1 approves the call.
    ledger.insert(ApprovalBinding {
        scope: "run-1".into(),
        ..grant
    });
    expect_ok(&h.exec(ToolCall::new("call-1", TOOL, ARGS)).await);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Panics while reviewing: before returning its future (`eager`) or while polled.
struct PanickingApprover {
    eager: bool,
}

impl Approver for PanickingApprover {
    fn review(
        &self,
        _request: ai_core::approval::ApprovalRequest,
    ) -> futures::future::BoxFuture<'static, ai_core::approval::ApprovalDecision> {
        assert!(!self.eager, "approver panicked before returning its future");
        Box::pin(async { panic!("approver panicked while reviewing") })
    }
}

#[tokio::test]
async fn an_approver_that_panics_is_a_typed_refusal_and_the_runner_keeps_working() {
    for eager in [true, false] {
        let (h, calls) = approved_by(Arc::new(PanickingApprover { eager }));
        // The harness checks the start and the result event of each call.
        let exec = h.exec(ToolCall::new("call-1", TOOL, ARGS)).await;
        assert_eq!(
            expect_failure(&exec, ToolErrorCode::ApprovalRequired),
            "the approver failed, so the call was not approved"
        );
        let again = h.exec(ToolCall::new("call-2", TOOL, ARGS)).await;
        expect_failure(&again, ToolErrorCode::ApprovalRequired);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }
}

/// Refuses with a reason far over the failure message budget.
struct Verbose;

impl Approver for Verbose {
    fn review(
        &self,
        _request: ai_core::approval::ApprovalRequest,
    ) -> futures::future::BoxFuture<'static, ai_core::approval::ApprovalDecision> {
        let reason = "é".repeat(10_000);
        Box::pin(std::future::ready(
            ai_core::approval::ApprovalDecision::Denied { reason },
        ))
    }
}

#[tokio::test]
async fn an_approvers_long_reason_is_bounded() {
    let (h, _) = approved_by(Arc::new(Verbose));
    let exec = h.exec(ToolCall::new("call-1", TOOL, ARGS)).await;
    let message = expect_failure(&exec, ToolErrorCode::ApprovalDenied);
    assert!(
        message.len() <= ai_core::text::MAX_FAILURE_MESSAGE_BYTES,
        "{}",
        message.len()
    );
    assert!(message.starts_with("The user denied this call. Reason: éé"));
    assert!(message.ends_with(ai_core::text::TRUNCATION_MARKER));
}

/// Decisions given ahead of a call (a paused run's, when it resumes) decide it
/// instead of the approver: an exact grant runs it, a grant for other arguments is
/// `approval_invalid`, a denial `approval_denied` with the user's reason, an
/// invalid approval `approval_invalid`; the approver is never asked.
#[tokio::test]
async fn prior_decisions_decide_without_asking_the_approver() {
    use ai_core::approval::ApprovalDecision;
    use ai_core::runner::CallScope;
    let asked = Arc::new(AtomicUsize::new(0));
    struct Counting(Arc<AtomicUsize>);
    impl Approver for Counting {
        fn review(
            &self,
            _request: ai_core::approval::ApprovalRequest,
        ) -> futures::future::BoxFuture<'static, ai_core::approval::ApprovalDecision> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(std::future::ready(
                ai_core::approval::ApprovalDecision::Denied {
                    reason: "asked".into(),
                },
            ))
        }
    }
    let (h, calls) = approved_by(Arc::new(Counting(asked.clone())));
    let grant = |args: &str| ApprovalBinding {
        scope: "run-1".into(),
        tool_call_id: "call-1".into(),
        tool_id: TOOL.into(),
        args_hash: sha256(args),
    };
    let cases = [
        (ApprovalDecision::Approved(grant(CANONICAL)), None, ""),
        (
            ApprovalDecision::Approved(grant("{}")),
            Some(ToolErrorCode::ApprovalInvalid),
            "the approval does not match this run, this call and its exact arguments",
        ),
        (
            ApprovalDecision::deny("not today"),
            Some(ToolErrorCode::ApprovalDenied),
            "The user denied this call. Reason: not today",
        ),
        (
            ApprovalDecision::invalid("the approval expired"),
            Some(ToolErrorCode::ApprovalInvalid),
            "the approval expired",
        ),
    ];
    for (decision, code, message) in cases {
        let scope = CallScope {
            decisions: [("call-1".to_owned(), decision)].into(),
            ..CallScope::default()
        };
        let exec = h
            .exec_scoped(ToolCall::new("call-1", TOOL, ARGS), &scope)
            .await;
        match code {
            None => {
                expect_ok(&exec);
            }
            Some(code) => assert_eq!(expect_failure(&exec, code), message),
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only the exact grant ran");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "the approver was never asked"
    );
}
