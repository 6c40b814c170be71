//! Hand-written executors, approvers, an event log and a harness that runs one call
//! through `ToolRunner::exec` and checks the event contract on every call.
//!
//! Knows nothing beyond ai-core's public API: schemas are hand-written JSON (ai-core
//! has no schema generator).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_core::{
    AiEvent, CancellationToken, RunContext, ToolCatalog, ToolEffect, ToolId, ToolPolicy,
    ToolRunner, ToolSpec,
    approval::{ApprovalBinding, ApprovalDecision, ApprovalRequest, Approver},
    event::{AiEventKind, EventSink},
    runner::{ToolCall, ToolExecution},
    tool::{
        Redaction, RegisteredTool, ToolCallContext, ToolErrorCode, ToolExecutor, ToolFailure,
        ToolOutput,
    },
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------
// Specs and schemas
// ---------------------------------------------------------------------------------

/// A spec with no redaction config (its calls must end in `redaction_missing`).
pub(crate) fn bare_spec(id: &str, input_schema: Value, effect: ToolEffect) -> ToolSpec {
    ToolSpec::new(
        ToolId::parse(id).unwrap(),
        format!("test tool {id}"),
        input_schema,
        effect,
    )
    .with_origin("test")
}

/// A spec whose redaction lets every argument and output field through.
pub(crate) fn spec(id: &str, input_schema: Value, effect: ToolEffect) -> ToolSpec {
    bare_spec(id, input_schema, effect).with_redaction(Redaction::new(["$"], ["$"]).unwrap())
}

/// An object schema with no required properties (anything object-shaped validates).
pub(crate) fn any_object() -> Value {
    json!({"type": "object"})
}

/// The two-property schema of `{"a": 1, "b": "x"}`.
pub(crate) fn ab_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
        "additionalProperties": false
    })
}

pub(crate) fn registered(spec: ToolSpec, executor: impl ToolExecutor + 'static) -> RegisteredTool {
    RegisteredTool {
        spec,
        executor: Arc::new(executor),
    }
}

// ---------------------------------------------------------------------------------
// Executors
// ---------------------------------------------------------------------------------

/// Returns its arguments as its output.
pub(crate) struct Echo;

impl ToolExecutor for Echo {
    fn execute(
        &self,
        _cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move { Ok(ToolOutput::json(args)) })
    }
}

/// Returns a fixed output whatever the arguments (huge values, secrets, bad shapes,
/// text and withheld model views).
pub(crate) struct Fixed(pub(crate) ToolOutput);

impl ToolExecutor for Fixed {
    fn execute(
        &self,
        _cx: ToolCallContext,
        _args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        let output = self.0.clone();
        Box::pin(async move { Ok(output) })
    }
}

/// Fails with a fixed [`ToolFailure`].
pub(crate) struct Fail(pub(crate) ToolFailure);

impl ToolExecutor for Fail {
    fn execute(
        &self,
        _cx: ToolCallContext,
        _args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        let failure = self.0.clone();
        Box::pin(async move { Err(failure) })
    }
}

pub(crate) fn fail(code: ToolErrorCode, message: &str) -> Fail {
    Fail(ToolFailure::new(code, message))
}

/// Panics, either while polled (`eager: false`) or in `execute` itself, before it
/// returns a future (`eager: true`).
pub(crate) struct Panic {
    pub(crate) eager: bool,
}

impl ToolExecutor for Panic {
    fn execute(
        &self,
        _cx: ToolCallContext,
        _args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        assert!(!self.eager, "tool panicked before returning its future");
        Box::pin(async move { panic!("tool panicked while running") })
    }
}

/// Sleeps ten seconds (far beyond any test budget), keeping the context it was given
/// so a test can check the call's cancellation token and ids.
#[derive(Default)]
pub(crate) struct Sleep {
    pub(crate) seen: Arc<Mutex<Option<ToolCallContext>>>,
}

impl ToolExecutor for Sleep {
    fn execute(
        &self,
        cx: ToolCallContext,
        _args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        *self.seen.lock().unwrap() = Some(cx);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(ToolOutput::json(json!({"slept": true})))
        })
    }
}

/// Echoes, setting a flag when it is called at all.
#[derive(Default)]
pub(crate) struct Flagged {
    pub(crate) called: Arc<AtomicBool>,
}

impl ToolExecutor for Flagged {
    fn execute(
        &self,
        cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        self.called.store(true, Ordering::SeqCst);
        Echo.execute(cx, args)
    }
}

/// Echoes, counting its calls.
#[derive(Default)]
pub(crate) struct Counted {
    pub(crate) calls: Arc<AtomicUsize>,
}

impl ToolExecutor for Counted {
    fn execute(
        &self,
        cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Echo.execute(cx, args)
    }
}

// ---------------------------------------------------------------------------------
// Approvers
// ---------------------------------------------------------------------------------

/// Approves exactly what it is asked, recording each request.
#[derive(Default)]
pub(crate) struct ApproveAll {
    pub(crate) requests: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for ApproveAll {
    fn review(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        let grant = ApprovalBinding::for_request(&request);
        self.requests.lock().unwrap().push(request);
        Box::pin(std::future::ready(ApprovalDecision::Approved(grant)))
    }
}

/// Refuses every call with a fixed reason.
pub(crate) struct DenyAll(pub(crate) &'static str);

impl Approver for DenyAll {
    fn review(&self, _request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        let reason = self.0.to_owned();
        Box::pin(std::future::ready(ApprovalDecision::Denied { reason }))
    }
}

/// Answers every request with the same grant (a replayed or forged approval).
pub(crate) struct Replay(pub(crate) ApprovalBinding);

impl Approver for Replay {
    fn review(&self, _request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        let grant = self.0.clone();
        Box::pin(std::future::ready(ApprovalDecision::Approved(grant)))
    }
}

/// Never answers (a human who walked away).
pub(crate) struct NeverAnswers;

impl Approver for NeverAnswers {
    fn review(&self, _request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        Box::pin(futures::future::pending())
    }
}

// ---------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------

/// An event sink that keeps every event.
#[derive(Default)]
pub(crate) struct EventLog {
    events: Mutex<Vec<AiEvent>>,
}

impl EventSink for EventLog {
    fn emit(&self, event: AiEvent) {
        self.events.lock().unwrap().push(event);
    }
}

impl EventLog {
    pub(crate) fn all(&self) -> Vec<AiEvent> {
        self.events.lock().unwrap().clone()
    }

    fn since(&self, start: usize) -> Vec<AiEvent> {
        self.events.lock().unwrap()[start..].to_vec()
    }

    fn len(&self) -> usize {
        self.events.lock().unwrap().len()
    }
}

/// The call's two events: its start and its result.
pub(crate) struct CallEvents {
    pub(crate) start: AiEvent,
    pub(crate) result: AiEvent,
}

impl CallEvents {
    /// The `args` of the start event.
    pub(crate) fn start_args(&self) -> &Value {
        match &self.start.kind {
            AiEventKind::ToolCallStart { args, .. } => args,
            other => panic!("not a start event: {other:?}"),
        }
    }

    /// The `result` of the result event.
    pub(crate) fn result_value(&self) -> Option<&Value> {
        match &self.result.kind {
            AiEventKind::ToolCallResult { result, .. } => result.as_ref(),
            other => panic!("not a result event: {other:?}"),
        }
    }
}

/// Checks that `events` are exactly one `tool_call_start` then one `tool_call_result`
/// of `exec`'s call, and that the result event agrees with `exec`.
pub(crate) fn check_call_events(
    events: &[AiEvent],
    run: &RunContext,
    name: &str,
    exec: &ToolExecution,
) -> CallEvents {
    assert_eq!(
        events.len(),
        2,
        "one start and one result per call: {events:#?}"
    );
    let id = &exec.result.tool_call_id;
    assert_eq!(&exec.record.tool_call_id, id);
    // Valid ids are shown as they are; anything else only sanitized and bounded.
    let shown = if ai_core::ToolId::parse(name).is_ok() {
        name.to_owned()
    } else {
        let mut s: String = name
            .chars()
            .take(64)
            .map(|c| {
                if c.is_ascii_alphanumeric() || "_-".contains(c) {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if name.chars().count() > 64 {
            s.push('…');
        }
        s
    };
    let name = shown.as_str();
    assert_eq!(exec.record.name, name);
    for event in events {
        assert_eq!(event.run_id, run.run_id);
        assert_eq!(event.trace_id, run.trace_id);
        assert_eq!(event.ingress_request_id, run.ingress_request_id);
    }
    match &events[0].kind {
        AiEventKind::ToolCallStart {
            tool_call_id,
            tool_name,
            args,
        } => {
            assert_eq!(tool_call_id, id);
            assert_eq!(tool_name, name);
            assert_eq!(
                args, &exec.record.args,
                "start event shows the recorded (redacted) args"
            );
        }
        other => panic!("first event is not tool_call_start: {other:?}"),
    }
    let AiEventKind::ToolCallResult { duration_ms, .. } = &events[1].kind else {
        panic!("second event is not tool_call_result: {:?}", events[1].kind);
    };
    // The result event is the runner's result, field by field.
    let shown_result = AiEventKind::ToolCallResult {
        duration_ms: *duration_ms,
        truncated: exec.truncated,
        ok: exec.result.ok,
        error_code: exec.result.error_code,
        message: exec.result.safe_message.clone(),
        result: exec.result.value.clone(),
        tool_name: name.to_owned(),
        tool_call_id: id.to_owned(),
    };
    assert_eq!(events[1].kind, shown_result);
    // ... and what the record keeps of it.
    assert_eq!(exec.result.value, exec.record.result);
    assert_eq!(exec.result.error_code, exec.record.error);
    assert_eq!(exec.truncated, exec.record.truncated);
    let (result, error_code, message) = (
        &exec.result.value,
        &exec.result.error_code,
        &exec.result.safe_message,
    );
    if exec.result.ok {
        assert!(result.is_some() && error_code.is_none() && message.is_none());
    } else {
        assert!(result.is_none() && error_code.is_some() && message.is_some());
    }
    assert_eq!(exec.record.model_content_bytes, exec.model_content.len());
    assert!(exec.record.started_at_ms <= exec.record.ended_at_ms);
    assert_eq!(exec.record.raw, None);
    CallEvents {
        start: events[0].clone(),
        result: events[1].clone(),
    }
}

/// Asserts `exec` failed with `code` and returns its safe message. The model sees
/// `{"error": code, "message": message}` and the caller gets no output.
pub(crate) fn expect_failure(exec: &ToolExecution, code: ToolErrorCode) -> String {
    assert!(!exec.result.ok, "expected {code}, got success: {exec:#?}");
    assert_eq!(exec.result.error_code, Some(code), "{exec:#?}");
    assert_eq!(exec.result.value, None);
    assert_eq!(exec.output, None);
    assert!(!exec.truncated);
    let message = exec.result.safe_message.clone().unwrap();
    let content: Value = serde_json::from_str(&exec.model_content).unwrap();
    assert_eq!(content, json!({"error": code.as_str(), "message": message}));
    message
}

/// Asserts `exec` succeeded and returns the full output.
pub(crate) fn expect_ok(exec: &ToolExecution) -> Value {
    assert!(exec.result.ok, "expected success: {exec:#?}");
    assert_eq!(exec.result.error_code, None);
    assert_eq!(exec.result.safe_message, None);
    exec.output.clone().unwrap()
}

// ---------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------

/// A runner, the catalog it offers, a run and its event log.
pub(crate) struct Harness {
    pub(crate) runner: ToolRunner,
    pub(crate) catalog: ToolCatalog,
    pub(crate) run: RunContext,
    pub(crate) cancel: CancellationToken,
    pub(crate) events: EventLog,
}

/// Allows every `core__` and `mcp__` tool; state changes and external side effects
/// need approval (the default).
pub(crate) fn allow_all() -> ToolPolicy {
    ToolPolicy::allowing(["core__*", "mcp__*"])
}

impl Harness {
    /// A harness over `tools` under [`allow_all`].
    pub(crate) fn new(tools: Vec<RegisteredTool>) -> Self {
        Self::with_policy(tools, allow_all())
    }

    pub(crate) fn with_policy(tools: Vec<RegisteredTool>, policy: ToolPolicy) -> Self {
        Self::from_runner(ToolRunner::new(tools, policy).unwrap())
    }

    /// A harness over `runner`, offering the runner's own catalog for the run.
    pub(crate) fn from_runner(runner: ToolRunner) -> Self {
        let run = RunContext::new("run-1", "trace-1").with_ingress_request_id("req-1");
        let catalog = runner.catalog(&run);
        Self {
            runner,
            catalog,
            run,
            cancel: CancellationToken::new(),
            events: EventLog::default(),
        }
    }

    /// Runs `call` with the harness's catalog and checks its two events.
    pub(crate) async fn exec(&self, call: ToolCall) -> ToolExecution {
        self.exec_in(&self.catalog, call).await
    }

    /// Runs `call` with the harness's catalog; returns the result and its events.
    pub(crate) async fn exec_events(&self, call: ToolCall) -> (ToolExecution, CallEvents) {
        self.exec_in_events(&self.catalog, call).await
    }

    /// Runs `call` against `catalog` and checks its two events.
    pub(crate) async fn exec_in(&self, catalog: &ToolCatalog, call: ToolCall) -> ToolExecution {
        self.exec_in_events(catalog, call).await.0
    }

    /// Runs `call` under `scope` and checks its two events.
    pub(crate) async fn exec_scoped(
        &self,
        call: ToolCall,
        scope: &ai_core::runner::CallScope,
    ) -> ToolExecution {
        self.exec_scoped_events(&self.catalog, call, scope).await.0
    }

    async fn exec_in_events(
        &self,
        catalog: &ToolCatalog,
        call: ToolCall,
    ) -> (ToolExecution, CallEvents) {
        self.exec_scoped_events(catalog, call, &ai_core::runner::CallScope::default())
            .await
    }

    async fn exec_scoped_events(
        &self,
        catalog: &ToolCatalog,
        call: ToolCall,
        scope: &ai_core::runner::CallScope,
    ) -> (ToolExecution, CallEvents) {
        let name = call.name.clone();
        let before = self.events.len();
        let exec = self
            .runner
            .exec(&self.run, catalog, call, &self.cancel, &self.events, scope)
            .await;
        let events = check_call_events(&self.events.since(before), &self.run, &name, &exec);
        (exec, events)
    }
}
