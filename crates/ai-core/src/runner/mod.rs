//! The one tool pipeline (invariant TOOLS_VIA_TOOLRUNNER).
//!
//! Every call of every tool, whatever its source, goes through [`ToolRunner::exec`]:
//!
//! 1. tool call id: the model's, or a UUID v4 when it gave none (or one over budget);
//! 2. lookup (`unknown_tool`), `approval_required` when policy asks for an approval
//!    and no [`Approver`] is set, catalog membership and policy (`policy_denied`);
//! 3. redaction config present (`redaction_missing`, checked before anything runs);
//! 4. provider outcome (`invalid_json` for arguments the stream truncated), argument
//!    size (`invalid_args`), JSON parse (`invalid_json`; an empty string is `{}`),
//!    schema validation with a cached compiled validator (`invalid_args`, naming the
//!    failing paths, never the values);
//! 5. approval, bound to the run id, call id, tool id and hash of the canonical
//!    arguments (abandoned with `cancelled` when the run is cancelled while it is
//!    awaited; an approver that panics is a refusal, `approval_required`);
//! 6. execution under the runtime budget, the run's cancellation and panic capture
//!    (`timeout`, `cancelled`, `execution_failed`);
//! 7. output schema check when declared (`output_invalid`);
//! 8. bounding of the model-facing content and redaction of the UI/telemetry value;
//! 9. a [`ToolInvocationRecord`], and exactly one `tool_call_start` and one
//!    `tool_call_result` event.
//!
//! Every failure is a result (`ok: false`) with a stable code and a safe message of
//! at most [`crate::text::MAX_FAILURE_MESSAGE_BYTES`]; the runner never panics (a panic
//! anywhere in the pipeline becomes `execution_failed`) and never returns an error to
//! its caller.
//!
//! Each call runs in a `tool_call` span (run id, trace id, ingress request id, call
//! id, tool name; every value passed through [`crate::text::log_field`]) attached to the
//! call's future with `Instrument`, so concurrent calls of one task never see each
//! other's span.

mod record;
mod spans;

pub use record::{ToolExecResult, ToolInvocationRecord};

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use serde_json::{Value, json};

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::approval::{ApprovalDecision, ApprovalRequest, Approver, denial_message};
use crate::completion::ToolCallOutcome;
use crate::context::RunContext;
use crate::event::{AiEvent, AiEventKind, EventSink, ToolCallRef};
use crate::policy::{CatalogError, ToolCatalog, check_collisions, check_subset};
use crate::policy::{PolicyDecision, ToolPolicy};
use crate::schema::Validator;
use crate::text::{BoundedValue, MAX_FAILURE_MESSAGE_BYTES, bound_text, bound_value, log_field};
use crate::tool::ToolErrorCode;
use crate::tool::{
    Allowlist, ModelView, NestedEvents, NestedPort, RegisteredTool, ToolCallContext, ToolExecutor,
    ToolOutput,
};
use crate::tool::{ToolId, ToolSource};
use crate::tool::{ToolSpec, canonical_json};

/// What a caller of [`ToolRunner::exec`] passes to every execution it starts,
/// through [`ToolCallContext`]. The default is empty.
#[derive(Clone, Default)]
pub struct CallScope {
    /// The graph of the run.
    pub graph: Option<String>,
    /// The prompt hash of the run.
    pub prompt_hash: Option<String>,
    /// Where nested events go (untagged here; each call tags them with its id).
    pub events: Option<Arc<dyn EventSink>>,
    /// The run's completion port and runner, for nested prompts.
    pub nested: Option<NestedPort>,
    /// Decisions given ahead of the calls, by call id (a paused run's, when it
    /// is resumed): a call that needs an approval and has one is decided by it,
    /// not by the approver.
    pub decisions: BTreeMap<String, ApprovalDecision>,
    /// Calls whose outcome is unknown (a durable run's calls that were about to
    /// act when its process died, by call id): each ends `outcome_unknown`
    /// without running, its events and record as for any call.
    pub outcome_unknown: Vec<String>,
}

impl std::fmt::Debug for CallScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallScope")
            .field("graph", &self.graph)
            .field("prompt_hash", &self.prompt_hash)
            .field("events", &self.events.is_some())
            .field("nested", &self.nested)
            .field("decisions", &self.decisions)
            .field("outcome_unknown", &self.outcome_unknown)
            .finish()
    }
}

/// A tool call as the model made it (from an assembled completion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The model's call id, if any.
    pub id: Option<String>,
    /// The function name the model used.
    pub name: String,
    /// Raw argument text.
    pub arguments: String,
    /// How the argument text ended in the stream.
    pub outcome: ToolCallOutcome,
    /// Provider-native payload of the call, kept on the audit record only.
    pub raw: Option<Value>,
}

impl ToolCall {
    /// A complete call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: Some(id.into()),
            name: name.into(),
            arguments: arguments.into(),
            outcome: ToolCallOutcome::Complete,
            raw: None,
        }
    }
}

/// Everything one call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExecution {
    /// The UI/telemetry result (redacted value).
    pub result: ToolExecResult,
    /// The bounded text for the model's `tool` message.
    pub model_content: String,
    /// Whether `model_content` was truncated.
    pub truncated: bool,
    /// The full, unredacted output for the in-process caller (never put in events or
    /// logs); `None` on failure.
    pub output: Option<Value>,
    /// Audit record (redacted).
    pub record: ToolInvocationRecord,
}

struct Entry {
    spec: ToolSpec,
    executor: Arc<dyn ToolExecutor>,
    input: Validator,
    output: Option<Validator>,
    args_view: Option<Allowlist>,
    output_view: Option<Allowlist>,
}

fn compile(
    spec: &ToolSpec,
    schema: &Value,
    which: &'static str,
) -> Result<Validator, CatalogError> {
    crate::schema::compile(schema).map_err(|violation| CatalogError::InvalidSchema {
        id: spec.id.clone(),
        which,
        message: violation.to_string(),
    })
}

/// The tool pipeline over a fixed set of tools and one policy.
pub struct ToolRunner {
    entries: HashMap<String, Arc<Entry>>,
    policy: ToolPolicy,
    approver: Option<Arc<dyn Approver>>,
}

impl std::fmt::Debug for ToolRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<&String> = self.entries.keys().collect();
        ids.sort();
        f.debug_struct("ToolRunner")
            .field("tools", &ids)
            .field("policy", &self.policy)
            .field("approver", &self.approver.is_some())
            .finish()
    }
}

/// Outcome of the stages before the start event can be emitted.
struct Failure {
    code: ToolErrorCode,
    message: String,
}

impl Failure {
    fn new(code: ToolErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

struct Success {
    output: ToolOutput,
    bounded: BoundedValue,
    redacted: Value,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Describes schema validation failures by path and keyword, never by value.
fn describe_validation(validator: &Validator, args: &Value) -> Option<String> {
    crate::schema::describe_mismatch(validator, args)
        .map(|places| format!("arguments do not match the schema: {places}"))
}

fn failure_content(code: ToolErrorCode, message: &str) -> String {
    json!({"error": code.as_str(), "message": message}).to_string()
}

impl ToolRunner {
    /// Builds a runner over `tools` under `policy`.
    ///
    /// Fails on a duplicated id (naming both origins), a schema outside the P0 subset
    /// or a schema the validator cannot compile. Validators are compiled here, once
    /// per spec.
    pub fn new(tools: Vec<RegisteredTool>, policy: ToolPolicy) -> Result<Self, CatalogError> {
        check_collisions(tools.iter().map(|t| &t.spec))?;
        let mut entries = HashMap::with_capacity(tools.len());
        for tool in tools {
            let spec = tool.spec;
            check_subset(&spec)?;
            let input = compile(&spec, &spec.input_schema, "input")?;
            let output = match &spec.output_schema {
                Some(schema) => Some(compile(&spec, schema, "output")?),
                None => None,
            };
            let args_view = spec.redaction.as_ref().map(|r| Allowlist::compile(&r.args));
            let output_view = spec
                .redaction
                .as_ref()
                .map(|r| Allowlist::compile(&r.output));
            entries.insert(
                spec.id.as_str().to_owned(),
                Arc::new(Entry {
                    spec,
                    executor: tool.executor,
                    input,
                    output,
                    args_view,
                    output_view,
                }),
            );
        }
        Ok(Self {
            entries,
            policy,
            approver: None,
        })
    }

    /// Sets the approver asked about calls that policy marks as needing approval.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// A runner over the same tools (shared, not compiled again) and policy,
    /// asking `approver` instead: for a server that takes an agent's tools and
    /// asks its approvals through its clients.
    pub fn rebound(&self, approver: Arc<dyn Approver>) -> Self {
        Self {
            entries: self.entries.clone(),
            policy: self.policy.clone(),
            approver: Some(approver),
        }
    }

    /// The active policy.
    pub fn policy(&self) -> &ToolPolicy {
        &self.policy
    }

    /// Whether an approver is set, so calls that policy puts behind an approval can
    /// run.
    pub fn has_approver(&self) -> bool {
        self.approver.is_some()
    }

    /// Every registered spec (allowed or not), sorted by id.
    pub fn specs(&self) -> Vec<&ToolSpec> {
        let mut specs: Vec<&ToolSpec> = self.entries.values().map(|e| &e.spec).collect();
        specs.sort_by(|a, b| a.id.cmp(&b.id));
        specs
    }

    /// Checks `args` against the input schema of tool `id` (the runner's compiled
    /// validator), without running anything: for callers that ask for an approval
    /// before the call is made. The error names paths and keywords, never values.
    pub fn check_arguments(&self, id: &str, args: &Value) -> Result<(), String> {
        let entry = self
            .entries
            .get(id)
            .ok_or_else(|| format!("no tool `{}` is registered", log_field(id)))?;
        match describe_validation(&entry.input, args) {
            None => Ok(()),
            Some(message) => Err(message),
        }
    }

    /// Why the tool with this id cannot be offered now (`Ok` when it can; see
    /// [`ToolExecutor::availability`]); `None` for an id that is not registered.
    pub fn availability(&self, id: &str) -> Option<Result<(), String>> {
        self.entries.get(id).map(|e| e.executor.availability())
    }

    /// The tools this run's catalog would offer but for their availability, with
    /// the reason each gives, sorted by id: what a loop reports as
    /// `tool_withheld` events when a run starts.
    pub fn withheld(&self, ctx: &RunContext) -> Vec<(ToolId, String)> {
        let mut withheld: Vec<(ToolId, String)> = self
            .entries
            .values()
            .filter_map(|e| {
                let reason = e.executor.availability().err()?;
                let offered = match self.policy.decide(ctx, &e.spec.id, e.spec.effect) {
                    PolicyDecision::Allow => true,
                    PolicyDecision::RequireApproval => self.approver.is_some(),
                    PolicyDecision::Deny => false,
                };
                offered.then(|| (e.spec.id.clone(), reason))
            })
            .collect();
        withheld.sort_by(|a, b| a.0.cmp(&b.0));
        withheld
    }

    /// The catalog for one run: the registered, available tools policy allows. Tools that need
    /// an approval are offered only when the runner has an approver (invariant
    /// CATALOG_IS_EXPLICIT: the model is never shown a tool no one could approve).
    pub fn catalog(&self, ctx: &RunContext) -> ToolCatalog {
        // Specs were checked for collisions and the subset once, in `new`.
        ToolCatalog::allowed(
            self.entries
                .values()
                .filter(|e| e.executor.availability().is_ok())
                .map(|e| &e.spec),
            &self.policy,
            ctx,
            self.approver.is_some(),
        )
    }

    /// How [`ToolRunner::exec`] would name `call` in its events (call id and shown
    /// tool name), without running it: for calls a caller decides not to execute.
    pub fn call_ref(&self, call: &ToolCall) -> ToolCallRef {
        ToolCallRef {
            tool_call_id: self.settle_call_id(call.id.as_deref()),
            tool_name: display_name(&call.name),
        }
    }

    /// Whether a call of `tool_name` with the model's id `call_id` may show its
    /// argument text as it streams (`tool_input_delta`): the tool exists, its
    /// redaction shows the arguments whole, and the call keeps the model's id (so
    /// the fragments and the later `tool_call_start` name the same call).
    pub fn streams_arguments(&self, tool_name: &str, call_id: &str) -> bool {
        let shown_whole = self.entries.get(tool_name).is_some_and(|entry| {
            entry
                .args_view
                .as_ref()
                .is_some_and(Allowlist::keeps_everything)
        });
        shown_whole && self.settle_call_id(Some(call_id)) == call_id
    }

    /// The model's call id, or a UUID v4 when it gave none (or one over budget).
    fn settle_call_id(&self, id: Option<&str>) -> String {
        match id {
            Some(id) if !id.is_empty() && id.len() <= self.policy.budgets.max_tool_call_id_len => {
                id.to_owned()
            }
            Some(id) if !id.is_empty() => {
                tracing::warn!(len = id.len(), "tool call id over budget; minted a new one");
                uuid::Uuid::new_v4().to_string()
            }
            _ => uuid::Uuid::new_v4().to_string(),
        }
    }

    /// Runs one call through the whole pipeline. Never fails: every problem becomes
    /// an `ok: false` result. Emits exactly one `tool_call_start` and one
    /// `tool_call_result` event to `sink`. `scope` is what the execution's
    /// [`ToolCallContext`] carries besides the call (the graph, prompt hash,
    /// nested event sink and nested port, decisions given ahead): empty by
    /// default.
    ///
    /// The call runs in its own `tool_call` span (see the module docs), attached to
    /// the returned future: calls run concurrently by one task keep their spans apart.
    pub async fn exec(
        &self,
        run: &RunContext,
        catalog: &ToolCatalog,
        call: ToolCall,
        cancel: &CancellationToken,
        sink: &dyn EventSink,
        scope: &CallScope,
    ) -> ToolExecution {
        let started = Instant::now();
        let started_at_ms = unix_ms();
        let tool_call_id = self.settle_call_id(call.id.as_deref());
        // Left out when the run has none (`None` records nothing).
        let ingress = run.ingress_request_id.as_deref().map(log_field);
        let span = tracing::info_span!(
            "tool_call",
            run_id = %log_field(&run.run_id),
            trace_id = %log_field(&run.trace_id),
            ingress_request_id = ingress.as_deref(),
            tool_call_id = %log_field(&tool_call_id),
            tool = %log_field(&call.name),
            otel.name = %format_args!("execute_tool {}", log_field(&call.name)),
            otel.kind = "internal",
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %log_field(&call.name),
            gen_ai.tool.call.id = %log_field(&tool_call_id),
            gen_ai.tool.type = tracing::field::Empty,
            agent.tool.effect = tracing::field::Empty,
            agent.tool.policy_decision = tracing::field::Empty,
            agent.tool.outcome = tracing::field::Empty,
            agent.tool.error_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
            gen_ai.tool.call.arguments = tracing::field::Empty,
            gen_ai.tool.call.result = tracing::field::Empty,
        );
        self.exec_in_span(
            run,
            catalog,
            call,
            tool_call_id,
            (started, started_at_ms),
            cancel,
            sink,
            scope,
        )
        .instrument(span)
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn exec_in_span(
        &self,
        run: &RunContext,
        catalog: &ToolCatalog,
        call: ToolCall,
        tool_call_id: String,
        (started, started_at_ms): (Instant, u64),
        cancel: &CancellationToken,
        sink: &dyn EventSink,
        scope: &CallScope,
    ) -> ToolExecution {
        let budgets = &self.policy.budgets;
        let entry = self.entries.get(&call.name).cloned();
        let shown_name = display_name(&call.name);
        let call_raw = call.raw.clone();

        // Parse once, before the start event, so the event shows the redacted view.
        // A call of a tool that does not exist shows what the model sent (no tool's
        // redaction applies, and nothing of it runs): the user sees the mistake.
        let parsed: Result<Value, Failure> = parse_arguments(&call, budgets.max_argument_bytes);
        let args_view = match (&entry, &parsed) {
            (Some(entry), Ok(args)) => entry
                .args_view
                .as_ref()
                .map_or_else(|| json!({}), |view| view.apply(args)),
            (None, Ok(args)) if args.is_object() => args.clone(),
            _ => json!({}),
        };

        spans::record_start(run, entry.as_deref(), &self.policy, &args_view);
        sink.emit(AiEvent::new(
            run,
            AiEventKind::ToolCallStart {
                tool_call_id: tool_call_id.clone(),
                tool_name: shown_name.clone(),
                args: args_view.clone(),
            },
        ));

        // Whatever panics in the pipeline (an approver, a redaction, a bug) still ends
        // the call with its result event.
        let pipeline = self.pipeline(
            run,
            catalog,
            &call.name,
            &tool_call_id,
            entry.as_deref(),
            parsed,
            cancel,
            scope,
        );
        let outcome = AssertUnwindSafe(pipeline)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                tracing::error!("tool call pipeline panicked");
                Err(Failure::new(
                    ToolErrorCode::ExecutionFailed,
                    "the call failed unexpectedly (an internal error)",
                ))
            });

        let duration = started.elapsed();
        let ended_at_ms = unix_ms();
        let (result, model_content, truncated, output) = match outcome {
            Ok(success) => {
                tracing::debug!(truncated = success.bounded.truncated, "tool call ok");
                (
                    ToolExecResult {
                        tool_call_id: tool_call_id.clone(),
                        ok: true,
                        value: Some(success.redacted),
                        error_code: None,
                        safe_message: None,
                    },
                    success.bounded.text,
                    success.bounded.truncated,
                    Some(success.output.value),
                )
            }
            Err(failure) => {
                tracing::info!(code = failure.code.as_str(), "tool call failed");
                // Messages are bounded like results: a tool or approver may say a lot.
                let message = bound_text(&failure.message, MAX_FAILURE_MESSAGE_BYTES).text;
                (
                    ToolExecResult {
                        tool_call_id: tool_call_id.clone(),
                        ok: false,
                        value: None,
                        error_code: Some(failure.code),
                        safe_message: Some(message.clone()),
                    },
                    failure_content(failure.code, &message),
                    false,
                    None,
                )
            }
        };
        spans::record_result(&result);
        sink.emit(AiEvent::new(
            run,
            AiEventKind::ToolCallResult {
                tool_call_id: tool_call_id.clone(),
                tool_name: shown_name.clone(),
                ok: result.ok,
                result: result.value.clone(),
                error_code: result.error_code,
                message: result.safe_message.clone(),
                duration_ms: duration.as_millis() as u64,
                truncated,
            },
        ));
        let record = ToolInvocationRecord {
            tool_call_id,
            name: shown_name,
            args: args_view,
            result: result.value.clone(),
            error: result.error_code,
            started_at_ms,
            ended_at_ms,
            model_content_bytes: model_content.len(),
            truncated,
            raw: call_raw,
        };
        ToolExecution {
            result,
            model_content,
            truncated,
            output,
            record,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn pipeline(
        &self,
        run: &RunContext,
        catalog: &ToolCatalog,
        name: &str,
        tool_call_id: &str,
        entry: Option<&Entry>,
        parsed: Result<Value, Failure>,
        cancel: &CancellationToken,
        scope: &CallScope,
    ) -> Result<Success, Failure> {
        let Some(entry) = entry else {
            return Err(Failure::new(
                ToolErrorCode::UnknownTool,
                "no tool with this name exists; call only the tools you were given",
            ));
        };
        let spec = &entry.spec;
        if scope.outcome_unknown.iter().any(|id| id == tool_call_id) {
            return Err(Failure::new(
                ToolErrorCode::OutcomeUnknown,
                "the run stopped while this call was running, before its result was recorded: it may or may not have taken effect. It is not run again; check its effect (for example by reading what it would have changed) before you act again",
            ));
        }
        // Subagents nest one level deep: a subagent never runs a subagent.
        if *spec.id.source() == ToolSource::Graph
            && scope.nested.as_ref().is_some_and(|port| port.depth >= 1)
        {
            return Err(Failure::new(
                ToolErrorCode::DepthExceeded,
                "a subagent cannot call another subagent (graphs nest at most one level deep)",
            ));
        }
        let decision = self.policy.decide(run, &spec.id, spec.effect);
        // A tool that needs an approval no one can give is left out of the catalog
        // (see `catalog`); a model that calls it anyway is told why.
        let granted = scope.decisions.contains_key(tool_call_id);
        if decision == PolicyDecision::RequireApproval && self.approver.is_none() && !granted {
            return Err(Failure::new(
                ToolErrorCode::ApprovalRequired,
                format!(
                    "{} tools need approval and no approver is configured",
                    spec.effect.as_str()
                ),
            ));
        }
        if !catalog.contains(name) {
            return Err(Failure::new(
                ToolErrorCode::PolicyDenied,
                "this tool is not offered in this run",
            ));
        }
        // Defense in depth: a catalog built elsewhere (or stale) does not get past
        // the runner's own policy.
        if decision == PolicyDecision::Deny {
            return Err(Failure::new(
                ToolErrorCode::PolicyDenied,
                "policy does not allow this tool",
            ));
        }
        let (Some(output_view), Some(_)) = (&entry.output_view, &entry.args_view) else {
            return Err(Failure::new(
                ToolErrorCode::RedactionMissing,
                "this tool declares no redaction allowlist, so its result cannot be shown",
            ));
        };
        let args = parsed?;
        if let Some(message) = describe_validation(&entry.input, &args) {
            return Err(Failure::new(ToolErrorCode::InvalidArgs, message));
        }

        if decision == PolicyDecision::RequireApproval {
            tracing::info!(gen_ai.tool.call.id = %log_field(tool_call_id), "approval requested");
            // An approver may wait on a human; the run's cancellation still ends the call.
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    return Err(Failure::new(
                        ToolErrorCode::Cancelled,
                        "the run was cancelled while the call awaited approval",
                    ));
                }
                approval = self.approve(run, spec, tool_call_id, &args, &scope.decisions) => {
                    spans::approval_settled(&approval);
                    approval?
                }
            }
        }

        let cx = ToolCallContext {
            run: run.clone(),
            tool_call_id: tool_call_id.to_owned(),
            tool_id: spec.id.clone(),
            cancel: cancel.child_token(),
            graph: scope.graph.clone(),
            prompt_hash: scope.prompt_hash.clone(),
            events: NestedEvents {
                sink: scope.events.clone(),
                parent_tool_call_id: tool_call_id.into(),
            },
            nested: scope.nested.clone(),
        };
        let call_cancel = cx.cancel.clone();
        // `execute` is called inside `catch_unwind` and only when first polled: a tool
        // that panics before returning its future is caught too.
        let executor = &entry.executor;
        let future =
            AssertUnwindSafe(async move { executor.execute(cx, args).await }).catch_unwind();
        let mut future = std::pin::pin!(future);
        // A stopped call is not dropped mid-flight: its token fires and it gets the
        // policy's grace to finish (a subagent twice that, so its own calls end with
        // their result events first).
        let grace = match spec.id.source() {
            ToolSource::Graph => self.policy.budgets.stop_grace() * 2,
            _ => self.policy.budgets.stop_grace(),
        };
        let budget = self.policy.budgets.max_runtime();
        // A run cancelled before the call never starts the tool (and gets no grace).
        if cancel.is_cancelled() {
            return Err(Failure::new(
                ToolErrorCode::Cancelled,
                "the run was cancelled before the tool ran",
            ));
        }
        let outcome = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            outcome = tokio::time::timeout(budget, future.as_mut()) => Some(outcome),
        };
        let Some(outcome) = outcome else {
            call_cancel.cancel();
            let _ = tokio::time::timeout(grace, future.as_mut()).await;
            return Err(Failure::new(
                ToolErrorCode::Cancelled,
                "the run was cancelled while the tool ran",
            ));
        };
        let output = match outcome {
            Err(_elapsed) => {
                call_cancel.cancel();
                let _ = tokio::time::timeout(grace, future.as_mut()).await;
                return Err(Failure::new(
                    ToolErrorCode::Timeout,
                    format!(
                        "the tool ran longer than its {} ms budget",
                        budget.as_millis()
                    ),
                ));
            }
            Ok(Err(_panic)) => {
                tracing::error!("tool panicked");
                return Err(Failure::new(
                    ToolErrorCode::ExecutionFailed,
                    "the tool failed unexpectedly (it panicked)",
                ));
            }
            Ok(Ok(Err(failure))) => return Err(Failure::new(failure.code, failure.message)),
            Ok(Ok(Ok(output))) => output,
        };

        if let Some(validator) = &entry.output
            && !validator.is_valid(&output.value)
        {
            return Err(Failure::new(
                ToolErrorCode::OutputInvalid,
                "the tool produced output that does not match its declared schema",
            ));
        }

        let max = self.policy.budgets.max_result_bytes;
        let bounded = match &output.model_view {
            ModelView::Json => bound_value(&output.value, max),
            ModelView::Text(text) => bound_text(text, max),
            ModelView::Withheld { note } => bound_text(note, max),
        };
        let redacted = output_view.apply(&output.value);
        Ok(Success {
            output,
            bounded,
            redacted,
        })
    }

    async fn approve(
        &self,
        run: &RunContext,
        spec: &ToolSpec,
        tool_call_id: &str,
        args: &Value,
        decisions: &BTreeMap<String, ApprovalDecision>,
    ) -> Result<(), Failure> {
        let canonical_args = canonical_json(args);
        let args_hash = crate::tool::args_hash(args);
        let request = ApprovalRequest {
            run_id: run.run_id.to_string(),
            tool_call_id: tool_call_id.to_owned(),
            tool_id: spec.id.clone(),
            effect: spec.effect,
            canonical_args,
            args_hash,
        };
        // A decision given ahead for this call decides it.
        if let Some(decision) = decisions.get(tool_call_id) {
            return settle(decision.clone(), &request);
        }
        let Some(approver) = &self.approver else {
            return Err(Failure::new(ToolErrorCode::ApprovalRequired, "no approver"));
        };
        // `review` is called inside the caught future: an approver that panics, before
        // or after returning its future, refuses the call instead of ending the run.
        let review = AssertUnwindSafe(async { approver.review(request.clone()).await })
            .catch_unwind()
            .await;
        let Ok(decision) = review else {
            tracing::error!("approver panicked");
            return Err(Failure::new(
                ToolErrorCode::ApprovalRequired,
                "the approver failed, so the call was not approved",
            ));
        };
        settle(decision, &request)
    }
}

/// What `decision` makes of the call `request` describes: it runs only when the
/// decision approves exactly this run, call, tool and argument hash.
fn settle(decision: ApprovalDecision, request: &ApprovalRequest) -> Result<(), Failure> {
    match decision {
        ApprovalDecision::Approved(binding) if binding.matches(request) => Ok(()),
        ApprovalDecision::Approved(_) => Err(Failure::new(
            ToolErrorCode::ApprovalInvalid,
            "the approval does not match this run, this call and its exact arguments",
        )),
        ApprovalDecision::Denied { reason } => Err(Failure::new(
            ToolErrorCode::ApprovalDenied,
            denial_message(Some(&reason)),
        )),
        ApprovalDecision::Invalid { reason } => {
            Err(Failure::new(ToolErrorCode::ApprovalInvalid, reason))
        }
        ApprovalDecision::Unavailable { reason } => Err(Failure::new(
            ToolErrorCode::ApprovalRequired,
            format!("no approval: {reason}"),
        )),
    }
}

fn parse_arguments(call: &ToolCall, max_bytes: usize) -> Result<Value, Failure> {
    if call.outcome == ToolCallOutcome::Truncated {
        return Err(Failure::new(
            ToolErrorCode::InvalidJson,
            "the arguments were cut off because the response hit its length limit; call the tool again with shorter arguments",
        ));
    }
    if call.arguments.len() > max_bytes {
        return Err(Failure::new(
            ToolErrorCode::InvalidArgs,
            format!(
                "arguments are {} bytes; the limit is {max_bytes}",
                call.arguments.len()
            ),
        ));
    }
    if call.arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(&call.arguments).map_err(|e| {
        Failure::new(
            ToolErrorCode::InvalidJson,
            format!(
                "arguments are not valid JSON ({} at line {} column {})",
                match e.classify() {
                    serde_json::error::Category::Eof => "unexpected end",
                    serde_json::error::Category::Syntax => "syntax error",
                    serde_json::error::Category::Data => "wrong data",
                    serde_json::error::Category::Io => "read error",
                },
                e.line(),
                e.column()
            ),
        )
    })
}

/// The tool name as events and records show it: the id itself when it is a valid
/// tool id, otherwise a bounded copy with every character outside `[a-zA-Z0-9_-]`
/// replaced by `?` (a model-supplied name never carries control characters or
/// unbounded text into UIs and logs).
fn display_name(name: &str) -> String {
    const MAX: usize = crate::tool::MAX_TOOL_ID_LEN;
    if ToolId::parse(name).is_ok() {
        return name.to_owned();
    }
    let mut shown: String = name
        .chars()
        .take(MAX)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if name.chars().count() > MAX {
        shown.push('…');
    }
    shown
}
