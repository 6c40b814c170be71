//! Shared fixtures: hand-written tools, a run helper and the structural checker that
//! every conformance test applies to its events.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_graph::{
    RunOutput,
    fanout::SubscriberItem,
    run,
    run::{RunDeps, RunError, RunRequest},
};
use agent_testing::{Echo, ScriptedModel, ToolFuture};
use ai_core::{
    AiEvent, Message, RunContext, ToolEffect, ToolId, ToolPolicy, ToolRunner, ToolSpec,
    approval::{ApprovalRequest, Approver},
    event::AiEventKind,
    tool::{
        Redaction, RegisteredTool, ToolCallContext, ToolErrorCode, ToolExecutor, ToolFailure,
        ToolOutput,
    },
};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

pub(crate) const RUN_ID: &str = "run-1";
pub(crate) const TRACE_ID: &str = "trace-1";
pub(crate) const INGRESS_ID: &str = "ingress-1";

/// The correlation ids every test run carries.
pub(crate) fn ctx() -> RunContext {
    RunContext::new(RUN_ID, TRACE_ID).with_ingress_request_id(INGRESS_ID)
}

pub(crate) fn request() -> RunRequest {
    RunRequest::new(ctx(), "test-model", vec![Message::user("hi")])
}

/// `sha256:<hex>` of the canonical JSON of `args`, as the runner computes it.
pub(crate) fn args_hash(args: &Value) -> String {
    let digest = Sha256::digest(ai_core::tool::canonical_json(args).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `core__<name>`, described as "<name> tool", every argument and output
/// field of which may reach events.
pub(crate) fn spec(name: &str, effect: ToolEffect, schema: Value) -> ToolSpec {
    let id = ToolId::core(name).unwrap();
    let shown = Redaction::new(["$"], ["$"]).unwrap();
    ToolSpec::new(id, format!("{name} tool"), schema, effect).with_redaction(shown)
}

/// Counts calls in flight and remembers the highest count and every call's span.
#[derive(Default)]
pub(crate) struct Probe {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    calls: AtomicUsize,
    spans: Mutex<Vec<(Instant, Instant)>>,
}

impl Probe {
    pub(crate) fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub(crate) fn spans(&self) -> Vec<(Instant, Instant)> {
        self.spans.lock().unwrap().clone()
    }

    async fn measure(&self, sleep: Duration) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let start = Instant::now();
        tokio::time::sleep(sleep).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.spans.lock().unwrap().push((start, Instant::now()));
    }
}

/// What the waiting tool observed.
#[derive(Default)]
pub(crate) struct WaitProbe {
    pub(crate) started: tokio::sync::Notify,
    pub(crate) has_started: AtomicBool,
    /// A watcher holding a clone of `cx.cancel` (as a tool handing the token to a
    /// child process would) saw it fire.
    pub(crate) watcher_saw_cancel: AtomicBool,
    /// The tool's future was dropped with its token already cancelled.
    pub(crate) dropped_cancelled: AtomicBool,
}

/// `core__slow` (read_only): sleeps `ms` milliseconds under a probe.
struct Slow(Arc<Probe>);

impl ToolExecutor for Slow {
    fn execute(&self, _cx: ToolCallContext, args: Value) -> ToolFuture {
        let probe = Arc::clone(&self.0);
        Box::pin(async move {
            let ms = args["ms"].as_u64().unwrap_or(0);
            probe.measure(Duration::from_millis(ms)).await;
            Ok(ToolOutput::json(json!({"slept_ms": ms})))
        })
    }
}

/// `core__write` (state_change): takes 20 ms under a probe.
struct Write(Arc<Probe>);

impl ToolExecutor for Write {
    fn execute(&self, _cx: ToolCallContext, args: Value) -> ToolFuture {
        let probe = Arc::clone(&self.0);
        Box::pin(async move {
            probe.measure(Duration::from_millis(20)).await;
            Ok(ToolOutput::json(json!({"written": args["key"]})))
        })
    }
}

/// `core__fail` (read_only): always fails.
struct Fail;

impl ToolExecutor for Fail {
    fn execute(&self, _cx: ToolCallContext, _args: Value) -> ToolFuture {
        Box::pin(async {
            Err(ToolFailure::new(
                ToolErrorCode::ExecutionFailed,
                "the disk is on fire",
            ))
        })
    }
}

/// Sets its flag when dropped if the token was cancelled by then.
struct DropWitness {
    token: ai_core::CancellationToken,
    probe: Arc<WaitProbe>,
}

impl Drop for DropWitness {
    fn drop(&mut self) {
        if self.token.is_cancelled() {
            self.probe.dropped_cancelled.store(true, Ordering::SeqCst);
        }
    }
}

/// `core__wait` (read_only): waits until its call is cancelled.
struct Wait(Arc<WaitProbe>);

impl ToolExecutor for Wait {
    fn execute(&self, cx: ToolCallContext, _args: Value) -> ToolFuture {
        let probe = Arc::clone(&self.0);
        Box::pin(async move {
            let _witness = DropWitness {
                token: cx.cancel.clone(),
                probe: Arc::clone(&probe),
            };
            let watcher_token = cx.cancel.clone();
            let watcher_probe = Arc::clone(&probe);
            tokio::spawn(async move {
                watcher_token.cancelled().await;
                watcher_probe
                    .watcher_saw_cancel
                    .store(true, Ordering::SeqCst);
            });
            probe.has_started.store(true, Ordering::SeqCst);
            probe.started.notify_one();
            cx.cancel.cancelled().await;
            Err(ToolFailure::new(ToolErrorCode::Cancelled, "stopped"))
        })
    }
}

/// An approver that records what it was asked and answers with a fixed verdict.
pub(crate) struct RecordingApprover {
    pub(crate) approve: bool,
    pub(crate) seen: Mutex<Vec<ApprovalRequest>>,
}

impl RecordingApprover {
    pub(crate) fn new(approve: bool) -> Arc<Self> {
        Arc::new(Self {
            approve,
            seen: Mutex::new(Vec::new()),
        })
    }
}

impl Approver for RecordingApprover {
    fn review(
        &self,
        request: ApprovalRequest,
    ) -> BoxFuture<'static, ai_core::approval::ApprovalDecision> {
        self.seen.lock().unwrap().push(request.clone());
        let decision = if self.approve {
            ai_core::approval::ApprovalDecision::Approved(
                ai_core::approval::ApprovalBinding::for_request(&request),
            )
        } else {
            ai_core::approval::ApprovalDecision::Denied {
                reason: "the user said no".into(),
            }
        };
        Box::pin(std::future::ready(decision))
    }
}

/// The test tools and their probes.
#[derive(Default)]
pub(crate) struct Kit {
    pub(crate) slow: Arc<Probe>,
    pub(crate) write: Arc<Probe>,
    pub(crate) wait: Arc<WaitProbe>,
}

/// Every `core__` tool allowed, none needing approval.
pub(crate) fn open_policy() -> ToolPolicy {
    ToolPolicy::allowing(["core__*"]).with_approval_for([])
}

impl Kit {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn tools(&self) -> Vec<RegisteredTool> {
        let object = |props: Value, required: &[&str]| {
            json!({"type": "object", "properties": props, "required": required,
                   "additionalProperties": false})
        };
        vec![
            RegisteredTool {
                spec: spec(
                    "echo",
                    ToolEffect::ReadOnly,
                    object(json!({"text": {"type": "string"}}), &["text"]),
                ),
                executor: Arc::new(Echo),
            },
            RegisteredTool {
                spec: spec(
                    "slow",
                    ToolEffect::ReadOnly,
                    object(json!({"ms": {"type": "integer", "minimum": 0}}), &["ms"]),
                ),
                executor: Arc::new(Slow(Arc::clone(&self.slow))),
            },
            RegisteredTool {
                spec: spec(
                    "write",
                    ToolEffect::StateChange,
                    object(
                        json!({"key": {"type": "string"}, "value": {"type": "integer"}}),
                        &["key"],
                    ),
                ),
                executor: Arc::new(Write(Arc::clone(&self.write))),
            },
            RegisteredTool {
                spec: spec("fail", ToolEffect::ReadOnly, object(json!({}), &[])),
                executor: Arc::new(Fail),
            },
            RegisteredTool {
                spec: spec("wait", ToolEffect::ReadOnly, object(json!({}), &[])),
                executor: Arc::new(Wait(Arc::clone(&self.wait))),
            },
        ]
    }

    /// Deps over `model` with every test tool registered under `policy`.
    pub(crate) fn deps_with(
        &self,
        model: &ScriptedModel,
        policy: ToolPolicy,
        approver: Option<Arc<dyn Approver>>,
    ) -> RunDeps {
        self.deps_with_extra(model, policy, approver, Vec::new())
    }

    /// [`Kit::deps_with`], with `extra` tools registered beside the kit's.
    pub(crate) fn deps_with_extra(
        &self,
        model: &ScriptedModel,
        policy: ToolPolicy,
        approver: Option<Arc<dyn Approver>>,
        extra: Vec<RegisteredTool>,
    ) -> RunDeps {
        let mut tools = self.tools();
        tools.extend(extra);
        let mut runner = ToolRunner::new(tools, policy).unwrap();
        if let Some(approver) = approver {
            runner = runner.with_approver(approver);
        }
        let catalog = runner.catalog(&ctx());
        RunDeps {
            model: Arc::new(model.clone()),
            runner: Arc::new(runner),
            catalog: Arc::new(catalog),
        }
    }

    pub(crate) fn deps(&self, model: &ScriptedModel) -> RunDeps {
        self.deps_with(model, open_policy(), None)
    }
}

pub(crate) type Outcome = Result<RunOutput, RunError>;

/// Runs to the end: every event until the stream ends, then the outcome. Applies the
/// structural checker.
pub(crate) async fn run_to_end(request: RunRequest, deps: RunDeps) -> (Vec<AiEvent>, Outcome) {
    let (events, outcome) = run(request, deps).into_parts();
    let events: Vec<AiEvent> = events.collect().await;
    let outcome = outcome.await;
    check_invariants(&events, &outcome);
    (events, outcome)
}

/// Short label of an event: `text_delta`, `tool_call_start:<tool>`,
/// `tool_call_result:<tool>:ok|<code>`, `usage_report`, `assistant_final`,
/// `error:<code>`, `done`.
pub(crate) fn label(event: &AiEvent) -> String {
    match &event.kind {
        AiEventKind::TextDelta { .. } => "text_delta".into(),
        AiEventKind::ToolCallStart { tool_name, .. } => format!("tool_call_start:{tool_name}"),
        AiEventKind::ToolCallResult {
            tool_name,
            ok,
            error_code,
            ..
        } => {
            let status = if *ok {
                "ok"
            } else {
                error_code.map_or("?", |c| c.as_str())
            };
            format!("tool_call_result:{tool_name}:{status}")
        }
        AiEventKind::UsageReport { .. } => "usage_report".into(),
        AiEventKind::AssistantFinal { .. } => "assistant_final".into(),
        AiEventKind::Error { code, .. } => format!("error:{code}"),
        AiEventKind::Done => "done".into(),
        AiEventKind::ReasoningDelta { .. } => "reasoning_delta".into(),
        AiEventKind::ToolCallsNotExecuted { calls, .. } => {
            format!("tool_calls_not_executed:{}", calls.len())
        }
        AiEventKind::ToolApprovalRequested { tool_name, .. } => {
            format!("tool_approval_requested:{tool_name}")
        }
        other => format!("{other:?}"),
    }
}

/// Labels with runs of consecutive `text_delta` collapsed into one (how text is cut
/// into deltas is the model's business), without `tool_input_delta`s (how
/// arguments stream is checked by `arguments_stream_as_tool_input_deltas`).
pub(crate) fn labels(events: &[AiEvent]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for event in events {
        if matches!(event.kind, AiEventKind::ToolInputDelta { .. }) {
            continue;
        }
        let l = label(event);
        if l == "text_delta" && out.last().is_some_and(|last| last == "text_delta") {
            continue;
        }
        out.push(l);
    }
    out
}

/// All streamed text, concatenated.
pub(crate) fn streamed_text(events: &[AiEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            AiEventKind::TextDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

/// The `tool_call_result` events, as (id, ok, code, message).
pub(crate) fn results(events: &[AiEvent]) -> Vec<(String, bool, Option<ToolErrorCode>, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            AiEventKind::ToolCallResult {
                tool_call_id,
                ok,
                error_code,
                message,
                ..
            } => Some((
                tool_call_id.clone(),
                *ok,
                *error_code,
                message.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

pub(crate) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// The [`labels`] of a run whose model says something and calls `core__echo`
/// in its first turn, then answers, each turn reporting its usage.
pub(crate) fn echo_round_trip() -> Vec<String> {
    strs(&[
        "text_delta",
        "usage_report",
        "tool_call_start:core__echo",
        "tool_call_result:core__echo:ok",
        "text_delta",
        "usage_report",
        "assistant_final",
        "done",
    ])
}

/// The [`labels`] of a run whose model made `calls`, `(tool, result)` with
/// `result` `ok` or an error code, one after the other, then answered: a
/// start and a result per call, then the text, the final and `done`.
pub(crate) fn calls_then_answer(calls: &[(&str, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    for (tool, result) in calls {
        out.push(format!("tool_call_start:{tool}"));
        out.push(format!("tool_call_result:{tool}:{result}"));
    }
    out.extend(strs(&["text_delta", "assistant_final", "done"]));
    out
}

/// The invariants every run must keep, whatever happened in it.
pub(crate) fn check_invariants(events: &[AiEvent], outcome: &Outcome) {
    let labels: Vec<String> = events.iter().map(label).collect();
    // Correlation ids on every event.
    for event in events {
        assert_eq!(event.run_id, RUN_ID, "run_id on {event:?}");
        assert_eq!(event.trace_id, TRACE_ID, "trace_id on {event:?}");
        assert_eq!(
            event.ingress_request_id.as_deref(),
            Some(INGRESS_ID),
            "ingress id on {event:?}"
        );
    }
    // A subagent's events (tagged with the parent's call id) never end the run.
    for event in events.iter().filter(|e| e.parent_tool_call_id.is_some()) {
        assert!(
            !matches!(
                event.kind,
                AiEventKind::Done | AiEventKind::AssistantFinal { .. } | AiEventKind::Error { .. }
            ),
            "nested terminal event: {event:?}"
        );
    }
    // Exactly one done, and it is last.
    let dones = events
        .iter()
        .filter(|e| matches!(e.kind, AiEventKind::Done))
        .count();
    assert_eq!(dones, 1, "exactly one done: {labels:?}");
    assert!(
        matches!(events.last().map(|e| &e.kind), Some(AiEventKind::Done)),
        "done is last: {labels:?}"
    );
    let (mut finals, mut errors) = (Vec::new(), Vec::new());
    for event in events {
        match &event.kind {
            AiEventKind::AssistantFinal { content, .. } => finals.push(content.as_str()),
            AiEventKind::Error { code, .. } => errors.push(code.as_str()),
            _ => {}
        }
    }
    let before_done = &events[events.len().saturating_sub(2)].kind;
    match outcome {
        // A paused run (deferred approvals) has no final; its last turn's pending
        // calls are its last events before `done`.
        Ok(output) if output.paused.is_some() => {
            assert!(finals.is_empty(), "no final while paused: {labels:?}");
            assert!(errors.is_empty(), "no error while paused: {labels:?}");
            assert!(matches!(
                before_done,
                AiEventKind::ToolApprovalRequested { .. } | AiEventKind::ClientToolCall { .. }
            ));
        }
        Ok(output) => {
            assert_eq!(
                finals,
                vec![output.content.as_str()],
                "one final: {labels:?}"
            );
            assert!(errors.is_empty(), "no error on success: {labels:?}");
            assert!(matches!(before_done, AiEventKind::AssistantFinal { .. }));
            // A subagent's usage is reported by tagged events of its own.
            let usage_events = events
                .iter()
                .filter(|e| {
                    e.parent_tool_call_id.is_none()
                        && matches!(e.kind, AiEventKind::UsageReport { .. })
                })
                .count();
            assert_eq!(
                usage_events,
                output.usage.len(),
                "one usage_report per fact"
            );
            assert_balanced(&output.messages);
        }
        Err(error) => {
            assert!(finals.is_empty(), "no assistant_final on error: {labels:?}");
            assert_eq!(errors, vec![error.code()], "one error event: {labels:?}");
            assert!(matches!(before_done, AiEventKind::Error { .. }));
        }
    }
    // Every start has exactly one result with the same id, after it; no stray result.
    let mut open: HashMap<String, usize> = HashMap::new();
    let mut seen_starts = HashSet::new();
    for (i, event) in events.iter().enumerate() {
        match &event.kind {
            AiEventKind::ToolCallStart { tool_call_id, .. } => {
                assert!(
                    open.insert(tool_call_id.clone(), i).is_none(),
                    "{tool_call_id} started twice while open"
                );
                seen_starts.insert(tool_call_id.clone());
            }
            AiEventKind::ToolCallResult { tool_call_id, .. } => {
                assert!(
                    open.remove(tool_call_id).is_some(),
                    "result for {tool_call_id} without an open start: {labels:?}"
                );
            }
            _ => {}
        }
    }
    assert!(open.is_empty(), "starts without results: {open:?}");
}

/// Every assistant message with tool calls is followed by exactly one tool message
/// per call, same ids, same order.
pub(crate) fn assert_balanced(messages: &[Message]) {
    let mut i = 0;
    while i < messages.len() {
        if let Message::Assistant { tool_calls, .. } = &messages[i]
            && !tool_calls.is_empty()
        {
            for (k, call) in tool_calls.iter().enumerate() {
                match messages.get(i + 1 + k) {
                    Some(Message::Tool { tool_call_id, .. }) => {
                        assert_eq!(
                            tool_call_id,
                            &call.id,
                            "tool message order at {}",
                            i + 1 + k
                        )
                    }
                    other => panic!("expected tool message for {}, got {other:?}", call.id),
                }
            }
            i += 1 + tool_calls.len();
            continue;
        }
        assert!(
            !matches!(messages[i], Message::Tool { .. }),
            "stray tool message at {i}"
        );
        i += 1;
    }
}

/// The `tool` messages of a conversation, as (id, content).
pub(crate) fn tool_messages(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(Message::tool_result)
        .map(|(tool_call_id, content, _)| (tool_call_id.to_owned(), content.to_owned()))
        .collect()
}

/// The content of the `tool` message answering call `call_id` in `messages`.
pub(crate) fn tool_message_for(messages: &[Message], call_id: &str) -> String {
    let found = tool_messages(messages)
        .into_iter()
        .find(|(id, _)| id == call_id);
    found
        .unwrap_or_else(|| panic!("no tool message for {call_id}"))
        .1
}

/// insta settings for the event snapshots of the conformance cases
/// (`tests/it/snapshots/it__conformance__<test>.snap`): every event as its serde JSON,
/// in emission order, with the run-dependent values redacted:
/// - `duration_ms` of `tool_call_result` (wall time of the call) becomes `"[ms]"`;
/// - a `tool_call_id` the runner minted (a UUID, when the model gave no usable id)
///   becomes `"[minted-N]"`, numbered in order of first appearance (so a start and
///   its result still visibly share one id); ids the script chose (`call_1`, `c1`,
///   ...) stay.
///
/// The run, trace and ingress ids are fixed by [`ctx`] and stay. Refuses to run when
/// the environment asks insta to write or accept snapshots on CI.
pub(crate) fn event_snapshot_settings() -> insta::Settings {
    agent_testing::refuse_snapshot_updates_on_ci();
    let mut settings = insta::Settings::clone_current();
    settings.set_description(
        "Events of the run in emission order; duration_ms and minted call ids redacted.",
    );
    settings.set_omit_expression(true);
    settings.add_redaction("[].duration_ms", "[ms]");
    let minted: Mutex<Vec<String>> = Mutex::default();
    settings.add_dynamic_redaction("[].tool_call_id", move |value, _path| {
        let Some(id) = value.as_str().filter(|id| is_uuid(id)) else {
            return value;
        };
        let mut minted = minted.lock().unwrap();
        let n = match minted.iter().position(|seen| seen == id) {
            Some(n) => n,
            None => {
                minted.push(id.to_owned());
                minted.len() - 1
            }
        };
        insta::internals::Content::from(format!("[minted-{}]", n + 1))
    });
    settings
}

/// `8-4-4-4-12` hex digits, as `uuid::Uuid::to_string` writes them.
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Checks a subscriber's items against every published event: each item is the next
/// published event (a text delta may be several consecutive ones merged) and each
/// `Lagged(n)` stands for exactly the next `n` published events, at its place.
pub(crate) fn assert_consistent(items: &[SubscriberItem], published: &[AiEvent]) {
    let mut next = 0;
    for item in items {
        match item {
            SubscriberItem::Lagged(n) => next += usize::try_from(*n).unwrap(),
            SubscriberItem::Event(event) => match &event.kind {
                AiEventKind::TextDelta { delta } => {
                    let mut merged = String::new();
                    while merged.len() < delta.len() {
                        match &published[next].kind {
                            AiEventKind::TextDelta { delta: part } => merged.push_str(part),
                            other => panic!("expected text at {next}, got {other:?}"),
                        }
                        next += 1;
                    }
                    assert_eq!(&merged, delta);
                }
                _ => {
                    assert_eq!(event, &published[next], "event at {next}");
                    next += 1;
                }
            },
        }
    }
    assert_eq!(
        next,
        published.len(),
        "every published event is accounted for"
    );
}
