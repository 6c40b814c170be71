//! [`ScriptedModel`]: a completion port that plays turns written by the test.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ai_core::{
    CompletionPort,
    completion::{
        CompletionError, CompletionRequest, CompletionStream, FinishReason, ToolCallOutcome,
    },
    event::UsageFact,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::playback::{DEFAULT_ARG_CHUNK, Ending, Plan, TurnBuilder, play};

/// One piece of scripted content, in stream order.
#[derive(Debug, Clone)]
enum Part {
    Text(String),
    Reasoning(String),
    Refusal(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
        outcome: ToolCallOutcome,
    },
}

/// How a scripted turn ends after its content.
#[derive(Debug, Clone)]
enum ScriptEnding {
    Final,
    Error(CompletionError),
    Pending,
}

/// One scripted model turn: what a [`ScriptedModel`] streams for one `complete` call.
///
/// Content (text, reasoning, refusals and tool calls) is streamed in the order it was
/// added: text as word-sized [`ai_core::completion::CompletionDelta::Text`] deltas (reasoning and
/// refusals likewise, as [`ai_core::completion::CompletionDelta::Reasoning`] and
/// [`ai_core::completion::CompletionDelta::Refusal`] deltas), each tool call as a
/// `ToolCallStart` followed by `ToolCallArgs` fragments of [`Turn::arg_chunk_size`]
/// bytes (7 by default, never splitting a UTF-8 character), then the usage delta
/// when [`Turn::usage`] was set, then the [`ai_core::completion::CompletionFinal`] assembled from
/// exactly what was streamed.
///
/// ```
/// use agent_testing::Turn;
/// use serde_json::json;
///
/// let first = Turn::text("Let me check.")
///     .tool_call("call_1", "core__get_current_time", json!({"timezone": "UTC"}))
///     .usage(12, 8);
/// let second = Turn::text("It is noon.");
/// # let _ = (first, second);
/// ```
#[derive(Debug, Clone)]
pub struct Turn {
    parts: Vec<Part>,
    usage: Option<(u64, u64)>,
    served_by: Option<String>,
    finish: Option<FinishReason>,
    delay: Duration,
    delay_between: Duration,
    arg_chunk: usize,
    ending: ScriptEnding,
}

impl Default for Turn {
    fn default() -> Self {
        Self::new()
    }
}

impl Turn {
    /// An empty turn: no content, ends with a final (finish reason `Stop`).
    pub fn new() -> Self {
        Self {
            parts: Vec::new(),
            usage: None,
            served_by: None,
            finish: None,
            delay: Duration::ZERO,
            delay_between: Duration::ZERO,
            arg_chunk: DEFAULT_ARG_CHUNK,
            ending: ScriptEnding::Final,
        }
    }

    /// A turn that answers with `text`, streamed as a few word-sized deltas.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().and_text(text)
    }

    /// A turn that refuses with `text`: streamed as word-sized refusal deltas and
    /// assembled into the final's `refusal` (finish reason `Stop` unless set).
    pub fn refusal(text: impl Into<String>) -> Self {
        Self::new().and_refusal(text)
    }

    /// A turn that reasons with `text` (streamed as word-sized reasoning deltas and
    /// assembled into the final's `reasoning`); add an answer or calls after it.
    pub fn reasoning(text: impl Into<String>) -> Self {
        Self::new().and_reasoning(text)
    }

    /// A turn that fails with `error` before streaming anything.
    pub fn error(error: CompletionError) -> Self {
        Self {
            ending: ScriptEnding::Error(error),
            ..Self::new()
        }
    }

    /// A turn that never yields anything until its call is cancelled, then ends with
    /// [`CompletionError::Cancelled`]. Use it to park runs (e.g. in a memory benchmark
    /// or a cancellation test).
    pub fn pending() -> Self {
        Self {
            ending: ScriptEnding::Pending,
            ..Self::new()
        }
    }

    /// Appends more assistant text (after what was added so far).
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Text(text.into()));
        self
    }

    /// Appends reasoning text (after what was added so far).
    pub fn and_reasoning(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Reasoning(text.into()));
        self
    }

    /// Appends refusal text (after what was added so far).
    pub fn and_refusal(mut self, text: impl Into<String>) -> Self {
        self.parts.push(Part::Refusal(text.into()));
        self
    }

    /// Appends a tool call whose arguments are `arguments` serialized as JSON
    /// (outcome [`ToolCallOutcome::Complete`]). Calls get indexes 0, 1, ... in the
    /// order they are added.
    pub fn tool_call(
        self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        let raw = arguments.to_string();
        self.tool_call_with_outcome(id, name, raw, ToolCallOutcome::Complete)
    }

    /// Appends a tool call with verbatim argument text and the outcome the decoder
    /// would have assigned (e.g. [`ToolCallOutcome::Truncated`] with cut-off JSON, or
    /// [`ToolCallOutcome::InvalidJson`]). The text is streamed and assembled as is.
    pub fn tool_call_with_outcome(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        raw_arguments: impl Into<String>,
        outcome: ToolCallOutcome,
    ) -> Self {
        self.parts.push(Part::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: raw_arguments.into(),
            outcome,
        });
        self
    }

    /// Reports token usage: streamed as the last delta and set on the final, with
    /// `model` = the request's model and `total_tokens` = the sum. Without it the
    /// turn reports no usage.
    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.usage = Some((prompt_tokens, completion_tokens));
        self
    }

    /// Reports `model` as the model that served the turn in its usage (as a
    /// provider names the dated snapshot behind an alias) instead of the
    /// request's model.
    pub fn served_by(mut self, model: impl Into<String>) -> Self {
        self.served_by = Some(model.into());
        self
    }

    /// Sets the finish reason (default: `ToolCalls` when the turn has tool calls,
    /// else `Stop`).
    pub fn finish(mut self, reason: FinishReason) -> Self {
        self.finish = Some(reason);
        self
    }

    /// Waits this long (on `tokio::time`) before the first item of the stream.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Waits this long (on `tokio::time`) before each delta after the first item.
    pub fn delay_between(mut self, delay: Duration) -> Self {
        self.delay_between = delay;
        self
    }

    /// Sets the size, in bytes, of streamed argument fragments (default 7, at least
    /// 1). A fragment is extended to the end of a UTF-8 character rather than split.
    pub fn arg_chunk_size(mut self, bytes: usize) -> Self {
        self.arg_chunk = bytes.max(1);
        self
    }

    /// Streams the turn's deltas, then fails with `error` instead of a final (a
    /// provider error mid-stream).
    pub fn error_after_deltas(mut self, error: CompletionError) -> Self {
        self.ending = ScriptEnding::Error(error);
        self
    }

    /// Plans the stream for a request to `model`.
    fn plan(&self, model: &str) -> Plan {
        let mut builder = TurnBuilder::default();
        for part in &self.parts {
            match part {
                Part::Text(text) => builder.text(text),
                Part::Reasoning(text) => builder.reasoning(text),
                Part::Refusal(text) => builder.refusal(text),
                Part::ToolCall {
                    id,
                    name,
                    arguments,
                    outcome,
                } => builder.tool_call(id, name, arguments, *outcome, self.arg_chunk),
            }
        }
        let usage = self
            .usage
            .map(|(prompt_tokens, completion_tokens)| UsageFact {
                model: self.served_by.as_deref().unwrap_or(model).to_owned(),
                prompt_tokens,
                completion_tokens,
                total_tokens: prompt_tokens.saturating_add(completion_tokens),
                ..UsageFact::default()
            });
        let (deltas, last) = builder.finish(self.finish.clone(), usage);
        let ending = match &self.ending {
            ScriptEnding::Final => Ending::Final(Box::new(last)),
            ScriptEnding::Error(error) => Ending::Error(error.clone()),
            ScriptEnding::Pending => Ending::Pending,
        };
        Plan {
            deltas,
            ending,
            first_delay: self.delay,
            between: self.delay_between,
        }
    }
}

/// What the model plays.
#[derive(Debug)]
enum Script {
    /// Each call takes the next turn.
    Queue(VecDeque<Turn>),
    /// Every call plays this turn.
    Repeat(Turn),
}

#[derive(Debug)]
struct Inner {
    script: Mutex<Script>,
    requests: Mutex<Vec<CompletionRequest>>,
    record: AtomicBool,
    calls: AtomicUsize,
}

/// A [`CompletionPort`] that plays scripted [`Turn`]s, one per `complete` call, and
/// records every request it receives.
///
/// A call past the end of the script fails with
/// [`CompletionError::Protocol`] (`"script exhausted"`). Clones share the script and
/// the request log, so a test can keep one clone to inspect after handing another to
/// the code under test.
///
/// ```
/// use agent_testing::{ScriptedModel, Turn};
/// use serde_json::json;
///
/// let model = ScriptedModel::new([
///     Turn::new().tool_call("call_1", "core__get_current_time", json!({})),
///     Turn::text("It is noon."),
/// ]);
/// let observer = model.clone();
/// // ... run the loop with `model`, then:
/// assert!(observer.requests().is_empty());
/// assert_eq!(observer.remaining(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    inner: Arc<Inner>,
}

impl ScriptedModel {
    /// A model that plays `turns` in order, one per call.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Self::with_script(Script::Queue(turns.into_iter().collect()))
    }

    /// A model that plays `turn` for every call, without end (e.g.
    /// `ScriptedModel::repeating(Turn::pending())` to park any number of runs).
    pub fn repeating(turn: Turn) -> Self {
        Self::with_script(Script::Repeat(turn))
    }

    fn with_script(script: Script) -> Self {
        Self {
            inner: Arc::new(Inner {
                script: Mutex::new(script),
                requests: Mutex::new(Vec::new()),
                record: AtomicBool::new(true),
                calls: AtomicUsize::new(0),
            }),
        }
    }

    /// Stops recording requests (for benchmarks, where the log would dominate
    /// memory); [`ScriptedModel::requests`] then stays empty. Affects all clones.
    pub fn without_request_log(self) -> Self {
        self.inner.record.store(false, Ordering::Relaxed);
        self
    }

    /// Every request received so far, in call order.
    pub fn requests(&self) -> Vec<CompletionRequest> {
        self.inner
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many times `complete` was called (recorded or not).
    pub fn calls(&self) -> usize {
        self.inner.calls.load(Ordering::Relaxed)
    }

    /// Turns not played yet (`usize::MAX` for a repeating model).
    pub fn remaining(&self) -> usize {
        match &*self
            .inner
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Script::Queue(turns) => turns.len(),
            Script::Repeat(_) => usize::MAX,
        }
    }

    fn next_turn(&self) -> Option<Turn> {
        match &mut *self
            .inner
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Script::Queue(turns) => turns.pop_front(),
            Script::Repeat(turn) => Some(turn.clone()),
        }
    }
}

impl CompletionPort for ScriptedModel {
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        self.inner.calls.fetch_add(1, Ordering::Relaxed);
        let plan = match self.next_turn() {
            Some(turn) => turn.plan(&request.model),
            None => Plan {
                deltas: Vec::new(),
                ending: Ending::Error(CompletionError::Protocol {
                    message: "script exhausted".to_owned(),
                }),
                first_delay: Duration::ZERO,
                between: Duration::ZERO,
            },
        };
        if self.inner.record.load(Ordering::Relaxed) {
            self.inner
                .requests
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(request);
        }
        play(plan, cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ai_core::{
        Message, RunContext,
        completion::{
            AssembledToolCall, CompletionDelta, CompletionFinal, CompletionItem, ToolChoice,
        },
    };
    use futures::StreamExt;
    use serde_json::json;

    fn request(model: &str, messages: Vec<Message>) -> CompletionRequest {
        CompletionRequest {
            model: model.to_owned(),
            messages,
            tools: Vec::new().into(),
            tool_choice: ToolChoice::Auto,
            context: RunContext::new("run-1", "trace-1"),
            settings: ai_core::completion::ModelSettings::default(),
        }
    }

    type Items = Vec<Result<CompletionItem, CompletionError>>;

    async fn collect(model: &ScriptedModel, messages: Vec<Message>) -> Items {
        model
            .complete(request("m1", messages), CancellationToken::new())
            .collect()
            .await
    }

    fn deltas(items: &Items) -> Vec<CompletionDelta> {
        items
            .iter()
            .filter_map(|item| match item {
                Ok(CompletionItem::Delta(delta)) => Some(delta.clone()),
                _ => None,
            })
            .collect()
    }

    fn final_of(items: &Items) -> CompletionFinal {
        match items.last() {
            Some(Ok(CompletionItem::Final(last))) => last.clone(),
            other => panic!("expected a final, got {other:?}"),
        }
    }

    /// Re-assembles deltas the way a decoder would, to check the final matches.
    fn reassemble(deltas: &[CompletionDelta]) -> (String, Vec<(u32, String, String, String)>) {
        let mut text = String::new();
        let mut calls: Vec<(u32, String, String, String)> = Vec::new();
        for delta in deltas {
            match delta {
                CompletionDelta::Text(t) => text.push_str(t),
                CompletionDelta::ToolCallStart { index, id, name } => {
                    calls.push((*index, id.clone(), name.clone(), String::new()));
                }
                CompletionDelta::ToolCallArgs { index, fragment } => {
                    let call = calls.iter_mut().find(|c| c.0 == *index).unwrap();
                    call.3.push_str(fragment);
                }
                CompletionDelta::Reasoning(_) | CompletionDelta::Refusal(_) => {}
                CompletionDelta::Usage(_) => {}
                other => panic!("unexpected delta {other:?}"),
            }
        }
        (text, calls)
    }

    #[tokio::test]
    async fn text_turn_streams_deltas_then_final() {
        let model = ScriptedModel::new([Turn::text("Hello there, world!")]);
        let items = collect(&model, vec![Message::user("hi")]).await;
        assert_eq!(
            deltas(&items),
            vec![
                CompletionDelta::Text("Hello ".into()),
                CompletionDelta::Text("there, ".into()),
                CompletionDelta::Text("world!".into()),
            ]
        );
        let last = final_of(&items);
        assert_eq!(last.text, "Hello there, world!");
        assert!(last.tool_calls.is_empty());
        assert_eq!(last.finish_reason, FinishReason::Stop);
        assert_eq!(last.usage, None);
        assert_eq!(
            items
                .iter()
                .filter(|i| matches!(i, Ok(CompletionItem::Final(_))))
                .count(),
            1
        );
    }

    #[tokio::test]
    async fn tool_calls_stream_in_fragments_and_assemble_in_index_order() {
        let args = json!({"query": "日本語 ✓ and more text", "n": 3});
        let model = ScriptedModel::new([Turn::text("Checking.")
            .tool_call("call_a", "core__search", args.clone())
            .tool_call_with_outcome("call_b", "core__x", "{\"a\": 1", ToolCallOutcome::Truncated)
            .usage(10, 5)]);
        let items = collect(&model, vec![Message::user("hi")]).await;
        let ds = deltas(&items);
        for d in &ds {
            if let CompletionDelta::ToolCallArgs { fragment, .. } = d {
                // 7 bytes, extended only to finish a multi-byte character.
                assert!(fragment.len() <= 7 + 3, "{fragment:?}");
            }
        }
        let usage = UsageFact {
            model: "m1".into(),
            prompt_tokens: 10,
            completion_tokens: 5,
            total_tokens: 15,
            ..UsageFact::default()
        };
        assert_eq!(ds.last(), Some(&CompletionDelta::Usage(usage.clone())));
        let last = final_of(&items);
        let (text, calls) = reassemble(&ds);
        assert_eq!(text, last.text);
        assert_eq!(last.text, "Checking.");
        assert_eq!(
            last.tool_calls,
            vec![
                AssembledToolCall {
                    index: 0,
                    id: "call_a".into(),
                    name: "core__search".into(),
                    arguments: args.to_string(),
                    outcome: ToolCallOutcome::Complete,
                    raw: None,
                },
                AssembledToolCall {
                    index: 1,
                    id: "call_b".into(),
                    name: "core__x".into(),
                    arguments: "{\"a\": 1".into(),
                    outcome: ToolCallOutcome::Truncated,
                    raw: None,
                },
            ]
        );
        let expected: Vec<_> = last
            .tool_calls
            .iter()
            .map(|c| (c.index, c.id.clone(), c.name.clone(), c.arguments.clone()))
            .collect();
        assert_eq!(calls, expected);
        assert_eq!(last.finish_reason, FinishReason::ToolCalls);
        assert_eq!(last.usage, Some(usage));
    }

    #[tokio::test]
    async fn arg_chunk_size_and_finish_are_configurable() {
        let model = ScriptedModel::new([Turn::new()
            .tool_call("c", "core__x", json!({"k": "abcdef"}))
            .arg_chunk_size(3)
            .finish(FinishReason::Length)]);
        let items = collect(&model, vec![]).await;
        let fragments: Vec<String> = deltas(&items)
            .into_iter()
            .filter_map(|d| match d {
                CompletionDelta::ToolCallArgs { fragment, .. } => Some(fragment),
                _ => None,
            })
            .collect();
        assert_eq!(fragments, vec!["{\"k", "\":\"", "abc", "def", "\"}"]);
        assert_eq!(final_of(&items).finish_reason, FinishReason::Length);
    }

    #[tokio::test]
    async fn reasoning_and_refusals_stream_as_their_own_deltas_and_assemble() {
        let model = ScriptedModel::new([
            Turn::reasoning("Think first.").and_text("Answer."),
            Turn::refusal("I can't help with that.").finish(FinishReason::ContentFilter),
        ]);
        let items = collect(&model, vec![]).await;
        assert_eq!(
            deltas(&items),
            vec![
                CompletionDelta::Reasoning("Think ".into()),
                CompletionDelta::Reasoning("first.".into()),
                CompletionDelta::Text("Answer.".into()),
            ]
        );
        let last = final_of(&items);
        assert_eq!(last.reasoning.as_deref(), Some("Think first."));
        assert_eq!(last.refusal, None);
        assert_eq!(last.text, "Answer.");

        let items = collect(&model, vec![]).await;
        let refusal: String = deltas(&items)
            .into_iter()
            .map(|d| match d {
                CompletionDelta::Refusal(t) => t,
                other => panic!("only refusal deltas: {other:?}"),
            })
            .collect();
        let last = final_of(&items);
        assert_eq!(refusal, "I can't help with that.");
        assert_eq!(last.refusal.as_deref(), Some("I can't help with that."));
        assert_eq!(last.reasoning, None);
        assert_eq!(last.text, "");
        assert_eq!(last.finish_reason, FinishReason::ContentFilter);
    }

    #[tokio::test]
    async fn records_requests_and_fails_when_exhausted() {
        let model = ScriptedModel::new([Turn::text("one")]);
        let observer = model.clone();
        let first = collect(&model, vec![Message::user("q")]).await;
        assert_eq!(final_of(&first).text, "one");
        let second = collect(&model, vec![Message::user("q"), Message::tool("c", "{}")]).await;
        assert_eq!(
            second,
            vec![Err(CompletionError::Protocol {
                message: "script exhausted".into()
            })]
        );
        let requests = observer.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[1].messages[1], Message::tool("c", "{}"));
        assert_eq!(observer.calls(), 2);
        assert_eq!(observer.remaining(), 0);
    }

    #[tokio::test]
    async fn errors_immediately_or_after_deltas() {
        let boom = CompletionError::Provider {
            code: Some("overloaded".into()),
            message: "try later".into(),
        };
        let model = ScriptedModel::new([
            Turn::error(boom.clone()),
            Turn::text("partial answer").error_after_deltas(boom.clone()),
        ]);
        assert_eq!(collect(&model, vec![]).await, vec![Err(boom.clone())]);
        let items = collect(&model, vec![]).await;
        assert_eq!(
            items,
            vec![
                Ok(CompletionItem::Delta(CompletionDelta::Text(
                    "partial ".into()
                ))),
                Ok(CompletionItem::Delta(CompletionDelta::Text(
                    "answer".into()
                ))),
                Err(boom),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn delays_use_tokio_time() {
        let model = ScriptedModel::new([Turn::text("a b c")
            .delay(Duration::from_secs(5))
            .delay_between(Duration::from_secs(1))]);
        let start = tokio::time::Instant::now();
        let items = collect(&model, vec![]).await;
        assert_eq!(final_of(&items).text, "a b c");
        // 5s before the first delta, 1s before each of the two others.
        assert_eq!(start.elapsed(), Duration::from_secs(7));
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_ends_a_delayed_stream_promptly() {
        let model = ScriptedModel::new([Turn::text("a b").delay(Duration::from_secs(3600))]);
        let cancel = CancellationToken::new();
        let mut stream = model.complete(request("m", vec![]), cancel.clone());
        let start = tokio::time::Instant::now();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            canceller.cancel();
        });
        assert_eq!(stream.next().await, Some(Err(CompletionError::Cancelled)));
        assert_eq!(stream.next().await, None);
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test]
    async fn cancellation_before_polling_and_between_items() {
        let model = ScriptedModel::new([Turn::text("a b c"), Turn::text("x y z")]);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let items: Items = model.complete(request("m", vec![]), cancel).collect().await;
        assert_eq!(items, vec![Err(CompletionError::Cancelled)]);

        let cancel = CancellationToken::new();
        let mut stream = model.complete(request("m", vec![]), cancel.clone());
        assert!(matches!(
            stream.next().await,
            Some(Ok(CompletionItem::Delta(_)))
        ));
        cancel.cancel();
        assert_eq!(stream.next().await, Some(Err(CompletionError::Cancelled)));
        assert_eq!(stream.next().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn pending_turn_waits_for_cancellation() {
        let model = ScriptedModel::repeating(Turn::pending()).without_request_log();
        let cancel = CancellationToken::new();
        let mut stream = model.complete(request("m", vec![]), cancel.clone());
        let waited = tokio::time::timeout(Duration::from_secs(60), stream.next()).await;
        assert!(waited.is_err(), "a pending turn must yield nothing");
        cancel.cancel();
        assert_eq!(stream.next().await, Some(Err(CompletionError::Cancelled)));
        assert_eq!(stream.next().await, None);
        // Repeating: any number of calls, none recorded.
        let _more = model.complete(request("m", vec![]), CancellationToken::new());
        assert_eq!(model.calls(), 2);
        assert!(model.requests().is_empty());
        assert_eq!(model.remaining(), usize::MAX);
    }

    #[tokio::test]
    async fn parks_ten_thousand_calls_until_cancelled() {
        let model = ScriptedModel::repeating(Turn::pending()).without_request_log();
        let cancel = CancellationToken::new();
        let mut tasks = Vec::new();
        for _ in 0..10_000 {
            let mut stream = model.complete(request("m", vec![]), cancel.child_token());
            tasks.push(tokio::spawn(async move { stream.next().await }));
        }
        tokio::task::yield_now().await;
        assert!(tasks.iter().all(|t| !t.is_finished()));
        cancel.cancel();
        for task in tasks {
            assert_eq!(task.await.unwrap(), Some(Err(CompletionError::Cancelled)));
        }
        assert_eq!(model.calls(), 10_000);
    }

    #[test]
    fn model_is_send_sync_and_streams_are_send() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<ScriptedModel>();
        assert_send_sync::<Turn>();
        let model: Arc<dyn CompletionPort> = Arc::new(ScriptedModel::new([]));
        drop(model);
    }
}
