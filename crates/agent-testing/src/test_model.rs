//! [`TestModel`]: a completion port that calls the offered tools with arguments
//! generated from their schemas, then summarizes the results.

use std::sync::Arc;

use ai_core::{
    CompletionPort, Message, ToolEffect, ToolSpec,
    completion::{CompletionRequest, CompletionStream, ToolCallOutcome, ToolChoice},
    event::UsageFact,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::args_gen::{fnv1a, generate};
use crate::playback::{DEFAULT_ARG_CHUNK, Ending, Plan, TurnBuilder, play};

/// Longest excerpt, in characters, of one tool result in a [`TestModel`] summary.
const RESULT_EXCERPT_CHARS: usize = 200;

/// Which of the offered tools a [`TestModel`] calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolSelection {
    /// Only tools whose effect is [`ToolEffect::ReadOnly`] (the default).
    #[default]
    ReadOnly,
    /// Every offered tool.
    All,
    /// The offered tools with these names: full ids (`core__get_current_time`) or
    /// bare names (`get_current_time`).
    Named(Vec<String>),
}

impl ToolSelection {
    fn selects(&self, spec: &ToolSpec) -> bool {
        match self {
            Self::ReadOnly => spec.effect == ToolEffect::ReadOnly,
            Self::All => true,
            Self::Named(names) => names
                .iter()
                .any(|name| name == spec.id.as_str() || name == spec.id.name()),
        }
    }
}

/// One earlier tool result of the current round (since the last user message), as an
/// argument hint given to [`TestModel::with_args_from_results`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorResult<'a> {
    /// The tool that produced it (the name its assistant tool call used).
    pub tool: &'a str,
    /// What the model was shown: the content of the `tool` message.
    pub content: &'a str,
}

type DeriveArgs = dyn Fn(&[PriorResult<'_>]) -> Option<Value> + Send + Sync;

/// How a [`TestModel`] completes the generated arguments of one tool.
#[derive(Clone)]
enum Hint {
    /// Merged over the generated arguments.
    Fixed(Value),
    /// Computed from the round's earlier results; the tool is called after them.
    FromResults(Arc<DeriveArgs>),
}

impl std::fmt::Debug for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fixed(value) => f.debug_tuple("Fixed").field(value).finish(),
            Self::FromResults(_) => f.write_str("FromResults(..)"),
        }
    }
}

/// Whether `name` (a full id or a bare name) names `spec`'s tool.
fn names(name: &str, spec: &ToolSpec) -> bool {
    name == spec.id.as_str() || name == spec.id.name()
}

/// `hint`'s keys over `args`: a key set to `null` is removed; a hint that is not an
/// object replaces the arguments.
fn merge(mut args: Value, hint: &Value) -> Value {
    let (Some(target), Some(over)) = (args.as_object_mut(), hint.as_object()) else {
        return hint.clone();
    };
    for (key, value) in over {
        if value.is_null() {
            target.remove(key);
        } else {
            target.insert(key.clone(), value.clone());
        }
    }
    args
}

/// A [`CompletionPort`] that exercises tools without a real model (like pydantic-ai's
/// `TestModel`).
///
/// - On a request with no tool result since the last user message, it calls the
///   selected tools from `request.tools` once each, all in one assistant turn
///   (ids `call_0`, `call_1`, ... in catalog order), with arguments generated from
///   their input schemas: valid and deterministic for the seed. The tool choice of the
///   request is honoured: `None` calls nothing, `Tool(id)` calls exactly that tool, and
///   `Required` falls back to every offered tool when the selection is empty.
/// - Argument hints complete what a schema cannot say: [`TestModel::with_arg_hint`]
///   merges fixed values over the generated arguments (for a tool whose schema leaves
///   two optional fields of which one is needed, say), and
///   [`TestModel::with_args_from_results`] computes a tool's arguments from the
///   results of the round's other calls (e.g. read a file that a listing returned):
///   such a tool is called in a second assistant turn, after the first turn's results
///   arrived, or not at all when its hint finds nothing to use.
/// - On a request with tool results (and no hinted call left to make), it answers
///   with a summary such as
///   `Called 1 tool(s):` followed by one line per call,
///   `- core__get_current_time -> {"now":"..."}` (whitespace collapsed, each result
///   cut to 200 characters).
/// - With nothing to call, it answers `No tools to call. You said: <last user message>`.
///
/// Turns are streamed as deltas like [`crate::ScriptedModel`]'s and report usage
/// (tokens counted as whitespace-separated words).
///
/// ```
/// use agent_testing::{TestModel, ToolSelection};
///
/// let model = TestModel::new().with_tools(ToolSelection::All).with_seed(7);
/// # let _ = model;
/// ```
#[derive(Debug, Clone)]
pub struct TestModel {
    selection: ToolSelection,
    seed: u64,
    include_optional: bool,
    arg_chunk: usize,
    hints: Vec<(String, Hint)>,
    model_name: Option<String>,
}

impl Default for TestModel {
    fn default() -> Self {
        Self::new()
    }
}

impl TestModel {
    /// Calls read-only tools, seed 0, required arguments only.
    pub fn new() -> Self {
        Self {
            selection: ToolSelection::ReadOnly,
            seed: 0,
            include_optional: false,
            arg_chunk: DEFAULT_ARG_CHUNK,
            hints: Vec::new(),
            model_name: None,
        }
    }

    /// Chooses which offered tools are called.
    pub fn with_tools(mut self, selection: ToolSelection) -> Self {
        self.selection = selection;
        self
    }

    /// Seeds argument generation (same seed, same arguments).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Also fills optional object properties (default: only required ones).
    pub fn with_optional(mut self, include: bool) -> Self {
        self.include_optional = include;
        self
    }

    /// Merges `args` (an object) over the arguments generated for `tool` (a full id
    /// such as `core__memory_read`, or a bare name): its keys replace generated
    /// values, and a key set to `null` is left out. A later hint for the same tool
    /// replaces an earlier one.
    ///
    /// ```
    /// use agent_testing::TestModel;
    /// use serde_json::json;
    ///
    /// // `memory_read` needs one of two optional fields; the schema cannot say which.
    /// let model = TestModel::new().with_arg_hint("core__memory_read", json!({"query": "notes"}));
    /// # let _ = model;
    /// ```
    pub fn with_arg_hint(self, tool: impl Into<String>, args: Value) -> Self {
        self.with_hint(tool.into(), Hint::Fixed(args))
    }

    /// Calls `tool` (a full id or a bare name) only once the round's other calls
    /// answered, with arguments computed by `derive` from their results (merged over
    /// the generated arguments like [`TestModel::with_arg_hint`]). When `derive`
    /// returns `None` the tool is not called. When no other tool is called in the
    /// round, `derive` is asked with no results.
    ///
    /// ```
    /// use agent_testing::{PriorResult, TestModel};
    /// use serde_json::json;
    ///
    /// // Read the first file a listing showed (one `name  (N bytes)` line per file).
    /// let model = TestModel::new().with_args_from_results("core__read_file", |results: &[PriorResult<'_>]| {
    ///     results
    ///         .iter()
    ///         .filter(|r| r.tool == "core__list_directory")
    ///         .flat_map(|r| r.content.lines())
    ///         .find_map(|line| line.split_once("  (").map(|(path, _)| json!({"path": path})))
    /// });
    /// # let _ = model;
    /// ```
    pub fn with_args_from_results<F>(self, tool: impl Into<String>, derive: F) -> Self
    where
        F: Fn(&[PriorResult<'_>]) -> Option<Value> + Send + Sync + 'static,
    {
        self.with_hint(tool.into(), Hint::FromResults(Arc::new(derive)))
    }

    /// A `TestModel` set up for the project's read-only built-in tools, as the `agent`
    /// CLI embeds it: `core__memory_read` gets a query, and `core__read_file` reads the
    /// first file a `core__list_directory` result showed (skipped when there is none),
    /// so no call fails for its own arguments.
    pub fn builtin_demo() -> Self {
        Self::new()
            .with_model_name(Self::OFFLINE_NAME)
            .with_arg_hint("core__memory_read", serde_json::json!({"query": "notes"}))
            .with_args_from_results("core__read_file", first_listed_file)
    }

    /// The model name [`TestModel::builtin_demo`] reports in its usage: what a
    /// UI labels the answers of the offline model with.
    pub const OFFLINE_NAME: &'static str = "TestModel (offline)";

    /// Reports `name` as the model of its usage instead of the request's model
    /// id (which names the endpoint's model this one stands in for).
    pub fn with_model_name(mut self, name: impl Into<String>) -> Self {
        self.model_name = Some(name.into());
        self
    }

    fn with_hint(mut self, tool: String, hint: Hint) -> Self {
        self.hints.retain(|(name, _)| *name != tool);
        self.hints.push((tool, hint));
        self
    }

    fn hint(&self, spec: &ToolSpec) -> Option<&Hint> {
        // The latest hint naming the tool wins (by full id or bare name alike).
        self.hints
            .iter()
            .rfind(|(name, _)| names(name, spec))
            .map(|(_, hint)| hint)
    }

    /// Generated arguments, without any hint.
    fn generated(&self, spec: &ToolSpec) -> Value {
        let seed = self.seed ^ fnv1a(spec.id.as_str());
        generate(&spec.input_schema, seed, self.include_optional)
    }

    /// The arguments this model would send to `spec`'s tool (with its fixed hint
    /// merged in, when it has one).
    ///
    /// Supports the P0 draft-07 subset: types (and `["T", "null"]`), `const`,
    /// `default`, `enum`, object properties and `required`, arrays and their bounds,
    /// string lengths and common formats (`date-time` gives an RFC 3339 timestamp),
    /// numeric bounds and `multipleOf`, and local `$ref`s. A string with a `pattern`
    /// gets its first `examples` value when there is one, else `"a"` repeated
    /// `max(minLength, 1)` times, which may not match the pattern. String properties
    /// named `timezone`, `path` and `url` get `"UTC"`, `"."` and
    /// `"https://example.com"`.
    pub fn generate_args(&self, spec: &ToolSpec) -> Value {
        match self.hint(spec) {
            Some(Hint::Fixed(hint)) => merge(self.generated(spec), hint),
            _ => self.generated(spec),
        }
    }

    /// Arguments for a tool with a results hint, or `None` when it finds nothing.
    fn derived_args(&self, spec: &ToolSpec, results: &[PriorResult<'_>]) -> Option<Value> {
        match self.hint(spec) {
            Some(Hint::FromResults(derive)) => {
                derive(results).map(|hint| merge(self.generated(spec), &hint))
            }
            _ => None,
        }
    }

    fn deferred(&self, spec: &ToolSpec) -> bool {
        matches!(self.hint(spec), Some(Hint::FromResults(_)))
    }

    fn tools_to_call<'a>(&self, request: &'a CompletionRequest) -> Vec<&'a ToolSpec> {
        match &request.tool_choice {
            ToolChoice::None => Vec::new(),
            ToolChoice::Tool(id) => request.tools.iter().filter(|t| &t.id == id).collect(),
            choice => {
                let selected: Vec<&ToolSpec> = request
                    .tools
                    .iter()
                    .filter(|t| self.selection.selects(t))
                    .collect();
                if selected.is_empty() && *choice == ToolChoice::Required {
                    request.tools.iter().collect()
                } else {
                    selected
                }
            }
        }
    }

    fn plan(&self, request: &CompletionRequest) -> Plan {
        let since_user = match request
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::User { .. }))
        {
            Some(i) => request.messages.get(i + 1..).unwrap_or_default(),
            None => &request.messages[..],
        };
        let results: Vec<(&str, &str)> = since_user
            .iter()
            .filter_map(|m| match m {
                Message::Tool {
                    tool_call_id,
                    content,
                    ..
                } => Some((tool_call_id.as_str(), content.as_str())),
                _ => None,
            })
            .collect();

        // The calls already made this round: (id, tool name).
        let made: Vec<(&str, &str)> = since_user
            .iter()
            .flat_map(|m| match m {
                Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
                _ => &[],
            })
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect();
        let offered = self.tools_to_call(request);
        let calls: Vec<(&ToolSpec, Value)> = if results.is_empty() {
            // First turn of the round: every tool whose arguments do not wait for
            // results; the others too, when nothing else is called.
            let now: Vec<(&ToolSpec, Value)> = offered
                .iter()
                .filter(|spec| !self.deferred(spec))
                .map(|spec| (*spec, self.generate_args(spec)))
                .collect();
            if now.is_empty() {
                offered
                    .iter()
                    .filter_map(|spec| self.derived_args(spec, &[]).map(|args| (*spec, args)))
                    .collect()
            } else {
                now
            }
        } else {
            // Later turns: the tools that waited for results and were not called yet.
            let prior: Vec<PriorResult<'_>> = results
                .iter()
                .map(|(id, content)| PriorResult {
                    tool: made
                        .iter()
                        .find(|(made_id, _)| made_id == id)
                        .map_or(*id, |(_, name)| name),
                    content,
                })
                .collect();
            offered
                .iter()
                .filter(|spec| self.deferred(spec))
                .filter(|spec| !made.iter().any(|(_, name)| *name == spec.id.as_str()))
                .filter_map(|spec| self.derived_args(spec, &prior).map(|args| (*spec, args)))
                .collect()
        };

        let mut builder = TurnBuilder::default();
        let mut completion_words = 0;
        if !calls.is_empty() {
            for (i, (spec, args)) in calls.into_iter().enumerate() {
                let arguments = args.to_string();
                completion_words += 1 + words(&arguments);
                builder.tool_call(
                    &format!("call_{}", made.len() + i),
                    spec.id.as_str(),
                    &arguments,
                    ToolCallOutcome::Complete,
                    self.arg_chunk,
                );
            }
        } else if !results.is_empty() {
            let answer = summarize(&request.messages, &results);
            completion_words += words(&answer);
            builder.text(&answer);
        } else {
            let said = request
                .messages
                .iter()
                .rev()
                .find_map(|m| match m {
                    Message::User { content, .. } => Some(content.as_str()),
                    _ => None,
                })
                .unwrap_or_default();
            let answer = format!("No tools to call. You said: {said}");
            completion_words += words(&answer);
            builder.text(&answer);
        }
        let prompt_tokens = request.messages.iter().map(message_words).sum::<u64>();
        let completion_tokens = completion_words.max(1);
        let usage = UsageFact {
            model: self
                .model_name
                .clone()
                .unwrap_or_else(|| request.model.clone()),
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            ..UsageFact::default()
        };
        let (deltas, last) = builder.finish(None, Some(usage));
        Plan {
            deltas,
            ending: Ending::Final(Box::new(last)),
            first_delay: std::time::Duration::ZERO,
            between: std::time::Duration::ZERO,
        }
    }
}

impl CompletionPort for TestModel {
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        play(self.plan(&request), cancel)
    }
}

/// Whitespace-separated words: the test models' token count.
fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

fn message_words(message: &Message) -> u64 {
    match message {
        Message::System { content } | Message::User { content, .. } => words(content),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => {
            let text = content.as_deref().map_or(0, words);
            let calls: u64 = tool_calls.iter().map(|c| 1 + words(&c.arguments)).sum();
            text + calls
        }
        Message::Tool { content, .. } => words(content),
        _ => 0,
    }
}

/// `text` cut to at most `max` characters (with `…` when cut).
fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// `Called N tool(s):` and one `- name -> result` line per result, naming each result by the assistant tool
/// call it answers (or by its id when no call matches).
fn summarize(messages: &[Message], results: &[(&str, &str)]) -> String {
    let name_of = |id: &str| {
        messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant { tool_calls, .. } => tool_calls
                    .iter()
                    .find(|c| c.id == id)
                    .map(|c| c.name.clone()),
                _ => None,
            })
            .unwrap_or_else(|| id.to_owned())
    };
    let mut answer = format!("Called {} tool(s):", results.len());
    for (id, content) in results {
        // One line per tool: whitespace runs (newlines included) become one space.
        let flat = content.split_whitespace().collect::<Vec<_>>().join(" ");
        answer.push_str(&format!(
            "\n- {} -> {}",
            name_of(id),
            excerpt(&flat, RESULT_EXCERPT_CHARS)
        ));
    }
    answer
}

/// The first file a `core__list_directory` result shows (one `path  (N bytes)` line
/// per file; folders end in `/` and have no size).
fn first_listed_file(results: &[PriorResult<'_>]) -> Option<Value> {
    results
        .iter()
        .filter(|r| r.tool == "core__list_directory")
        .flat_map(|r| r.content.lines())
        .find_map(|line| {
            let (path, size) = line.split_once("  (")?;
            size.ends_with(" bytes)")
                .then(|| serde_json::json!({"path": path}))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ai_core::{
        RunContext, ToolId,
        completion::{
            CompletionDelta, CompletionError, CompletionFinal, CompletionItem, FinishReason,
        },
        message::MessageToolCall,
    };
    use futures::StreamExt;
    use serde_json::json;

    fn spec(name: &str, effect: ToolEffect, schema: Value) -> ToolSpec {
        ToolSpec::new(
            ToolId::core(name).unwrap(),
            format!("{name} tool"),
            schema,
            effect,
        )
    }

    fn catalog() -> Vec<ToolSpec> {
        vec![
            spec(
                "get_current_time",
                ToolEffect::ReadOnly,
                json!({"type": "object", "required": ["timezone"], "additionalProperties": false,
                       "properties": {"timezone": {"type": "string"}}}),
            ),
            spec(
                "write_file",
                ToolEffect::StateChange,
                json!({"type": "object", "required": ["path", "content"],
                       "additionalProperties": false,
                       "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
            ),
            spec(
                "search",
                ToolEffect::ReadOnly,
                json!({"type": "object", "required": ["query", "limit"],
                       "additionalProperties": false,
                       "properties": {"query": {"type": "string", "minLength": 1},
                                      "limit": {"type": "integer", "minimum": 1, "maximum": 10},
                                      "since": {"type": "string", "format": "date-time"}}}),
            ),
        ]
    }

    fn request(messages: Vec<Message>, tools: Vec<ToolSpec>) -> CompletionRequest {
        CompletionRequest {
            model: "test-model".into(),
            messages,
            tools: tools.into(),
            tool_choice: ToolChoice::Auto,
            context: RunContext::new("run-1", "trace-1"),
            settings: ai_core::completion::ModelSettings::default(),
        }
    }

    async fn run(
        model: &TestModel,
        request: CompletionRequest,
    ) -> (Vec<CompletionDelta>, CompletionFinal) {
        let items: Vec<_> = model
            .complete(request, CancellationToken::new())
            .collect()
            .await;
        let mut deltas = Vec::new();
        let mut last = None;
        for item in items {
            match item.unwrap() {
                CompletionItem::Delta(delta) => deltas.push(delta),
                CompletionItem::Final(f) => {
                    assert!(last.is_none(), "exactly one final");
                    last = Some(f);
                }
                other => panic!("unexpected item {other:?}"),
            }
        }
        (deltas, last.unwrap())
    }

    #[tokio::test]
    async fn first_call_calls_read_only_tools_in_one_turn() {
        let model = TestModel::new();
        let (deltas, last) = run(
            &model,
            request(vec![Message::user("what time is it?")], catalog()),
        )
        .await;
        assert_eq!(last.finish_reason, FinishReason::ToolCalls);
        let names: Vec<(&str, &str)> = last
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("call_0", "core__get_current_time"),
                ("call_1", "core__search")
            ]
        );
        assert_eq!(last.tool_calls[0].arguments, r#"{"timezone":"UTC"}"#);
        assert!(
            last.tool_calls
                .iter()
                .all(|c| c.outcome == ToolCallOutcome::Complete)
        );
        // The deltas carry exactly the assembled arguments.
        let mut args = vec![String::new(); 2];
        for delta in &deltas {
            if let CompletionDelta::ToolCallArgs { index, fragment } = delta {
                args[*index as usize].push_str(fragment);
            }
        }
        let assembled: Vec<String> = last
            .tool_calls
            .iter()
            .map(|c| c.arguments.clone())
            .collect();
        assert_eq!(args, assembled);
        let usage = last.usage.unwrap();
        assert_eq!(usage.model, "test-model");
        assert_eq!(usage.prompt_tokens, 4);
        assert_eq!(
            usage.total_tokens,
            usage.prompt_tokens + usage.completion_tokens
        );
        assert!(matches!(deltas.last(), Some(CompletionDelta::Usage(_))));
    }

    #[tokio::test]
    async fn generated_arguments_validate_and_depend_on_the_seed() {
        let tools = catalog();
        for seed in 0..16 {
            let model = TestModel::new()
                .with_tools(ToolSelection::All)
                .with_seed(seed)
                .with_optional(true);
            let (_, last) = run(&model, request(vec![Message::user("go")], tools.clone())).await;
            assert_eq!(last.tool_calls.len(), 3);
            for (call, spec) in last.tool_calls.iter().zip(&tools) {
                let validator = ai_core::schema::ValueSchema::compile(&spec.input_schema).unwrap();
                let args: Value = serde_json::from_str(&call.arguments).unwrap();
                let checked = validator.check(&args);
                assert!(checked.is_ok(), "{}: {args}: {checked:?}", spec.id);
                assert_eq!(args, model.generate_args(spec));
            }
        }
        let search = &tools[2];
        let distinct: std::collections::HashSet<String> = (0..16)
            .map(|seed| {
                TestModel::new()
                    .with_seed(seed)
                    .generate_args(search)
                    .to_string()
            })
            .collect();
        assert!(distinct.len() > 1);
    }

    #[tokio::test]
    async fn selection_and_tool_choice_pick_the_tools() {
        let named = TestModel::new().with_tools(ToolSelection::Named(vec![
            "write_file".into(),
            "core__search".into(),
        ]));
        let (_, last) = run(&named, request(vec![Message::user("x")], catalog())).await;
        let names: Vec<&str> = last.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["core__write_file", "core__search"]);

        let mut forced = request(vec![Message::user("x")], catalog());
        forced.tool_choice = ToolChoice::Tool(ToolId::core("write_file").unwrap());
        let (_, last) = run(&TestModel::new(), forced).await;
        assert_eq!(last.tool_calls.len(), 1);
        let args: Value = serde_json::from_str(&last.tool_calls[0].arguments).unwrap();
        assert_eq!(args["path"], json!("."));
        assert!(args["content"].is_string());

        let mut none = request(vec![Message::user("hello there")], catalog());
        none.tool_choice = ToolChoice::None;
        let (_, last) = run(&TestModel::new(), none).await;
        assert!(last.tool_calls.is_empty());
        assert_eq!(last.text, "No tools to call. You said: hello there");

        let writes_only = vec![catalog().remove(1)];
        let mut required = request(vec![Message::user("x")], writes_only);
        required.tool_choice = ToolChoice::Required;
        let (_, last) = run(&TestModel::new(), required).await;
        assert_eq!(last.tool_calls.len(), 1);
    }

    #[tokio::test]
    async fn without_selectable_tools_it_echoes_the_user() {
        let writes_only = vec![catalog().remove(1)];
        let (deltas, last) = run(
            &TestModel::new(),
            request(
                vec![Message::system("be brief"), Message::user("hi  you")],
                writes_only,
            ),
        )
        .await;
        assert_eq!(last.text, "No tools to call. You said: hi  you");
        assert_eq!(last.finish_reason, FinishReason::Stop);
        let streamed: String = deltas
            .iter()
            .filter_map(|d| match d {
                CompletionDelta::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(streamed, last.text);
        let usage = last.usage.unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (4, 8));
    }

    #[tokio::test]
    async fn second_call_summarizes_tool_results() {
        let long = format!("\"{}\"", "é".repeat(300));
        let messages = vec![
            Message::user("what time is it?"),
            Message::Assistant {
                blocks: Vec::new(),
                content: None,
                reasoning: None,
                tool_calls: vec![
                    MessageToolCall {
                        id: "call_0".into(),
                        name: "core__get_current_time".into(),
                        arguments: r#"{"timezone":"UTC"}"#.into(),
                        raw: None,
                    },
                    MessageToolCall {
                        id: "call_1".into(),
                        name: "core__search".into(),
                        arguments: "{}".into(),
                        raw: None,
                    },
                ],
            },
            Message::tool("call_0", r#"{"now":"2024-01-01T00:00:00Z"}"#),
            Message::tool("call_1", long.clone()),
        ];
        let (_, last) = run(&TestModel::new(), request(messages, catalog())).await;
        assert!(last.tool_calls.is_empty());
        assert_eq!(last.finish_reason, FinishReason::Stop);
        let expected = format!(
            "Called 2 tool(s):\n- core__get_current_time -> {{\"now\":\"2024-01-01T00:00:00Z\"}}\n- core__search -> {}…",
            long.chars().take(200).collect::<String>()
        );
        assert_eq!(last.text, expected);
    }

    #[tokio::test]
    async fn a_new_user_message_starts_a_new_round() {
        let messages = vec![
            Message::user("first"),
            Message::tool("call_0", "{}"),
            Message::assistant("done"),
            Message::user("again"),
        ];
        let (_, last) = run(&TestModel::new(), request(messages, catalog())).await;
        assert_eq!(last.tool_calls.len(), 2);
    }

    fn memory_and_files() -> Vec<ToolSpec> {
        vec![
            spec(
                "list_directory",
                ToolEffect::ReadOnly,
                json!({"type": "object", "additionalProperties": false,
                       "properties": {"path": {"type": ["string", "null"]}}}),
            ),
            spec(
                "memory_read",
                ToolEffect::ReadOnly,
                json!({"type": "object", "additionalProperties": false,
                       "properties": {"key": {"type": ["string", "null"]},
                                      "query": {"type": ["string", "null"]},
                                      "limit": {"type": ["integer", "null"]}}}),
            ),
            spec(
                "read_file",
                ToolEffect::ReadOnly,
                json!({"type": "object", "required": ["path"], "additionalProperties": false,
                       "properties": {"path": {"type": "string"},
                                      "limit": {"type": ["integer", "null"], "minimum": 1}}}),
            ),
        ]
    }

    fn first_file(results: &[PriorResult<'_>]) -> Option<Value> {
        results
            .iter()
            .filter(|r| r.tool == "core__list_directory")
            .flat_map(|r| r.content.lines())
            .find_map(|line| {
                line.split_once("  (")
                    .map(|(path, _)| json!({"path": path}))
            })
    }

    fn calls(last: &CompletionFinal) -> Vec<(String, String, Value)> {
        last.tool_calls
            .iter()
            .map(|c| {
                (
                    c.id.clone(),
                    c.name.clone(),
                    serde_json::from_str(&c.arguments).unwrap(),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn fixed_hints_merge_over_generated_arguments() {
        let model = TestModel::new()
            .with_optional(true)
            .with_arg_hint("memory_read", json!({"query": "notes", "key": null}))
            .with_arg_hint("core__read_file", json!({"path": "notes.txt"}));
        let tools = memory_and_files();
        let memory = model.generate_args(&tools[1]);
        assert_eq!(memory["query"], json!("notes"));
        assert!(memory.get("key").is_none(), "null removes a key: {memory}");
        assert!(
            memory.get("limit").is_some(),
            "generated keys stay: {memory}"
        );
        assert_eq!(model.generate_args(&tools[2])["path"], json!("notes.txt"));
        let (_, last) = run(&model, request(vec![Message::user("x")], tools.clone())).await;
        let made = calls(&last);
        assert_eq!(made.len(), 3);
        assert_eq!(made[1].2, memory);
        // A later hint for the same tool replaces the earlier one.
        let model = model.with_arg_hint("core__memory_read", json!({"key": "k", "query": null}));
        let memory = model.generate_args(&tools[1]);
        assert_eq!(
            (memory.get("key"), memory.get("query")),
            (Some(&json!("k")), None)
        );
    }

    #[tokio::test]
    async fn a_results_hint_calls_its_tool_after_the_results_it_needs() {
        let model = TestModel::new().with_args_from_results("core__read_file", first_file);
        let tools = memory_and_files();
        let mut messages = vec![Message::user("look around")];

        // Turn 1: everything but read_file, which waits for the listing.
        let (_, first) = run(&model, request(messages.clone(), tools.clone())).await;
        let made = calls(&first);
        let names: Vec<&str> = made.iter().map(|c| c.1.as_str()).collect();
        assert_eq!(names, vec!["core__list_directory", "core__memory_read"]);
        messages.push(Message::Assistant {
            blocks: Vec::new(),
            content: None,
            reasoning: None,
            tool_calls: made
                .iter()
                .map(|(id, name, args)| MessageToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: args.to_string(),
                    raw: None,
                })
                .collect(),
        });
        messages.push(Message::tool("call_0", "docs/\nnotes.txt  (12 bytes)\n"));
        messages.push(Message::tool("call_1", r#"{"entries":[]}"#));

        // Turn 2: read_file, with the file the listing showed and a fresh call id.
        let (_, second) = run(&model, request(messages.clone(), tools.clone())).await;
        assert_eq!(
            calls(&second),
            vec![(
                "call_2".to_owned(),
                "core__read_file".to_owned(),
                json!({"path": "notes.txt"})
            )]
        );
        messages.push(Message::Assistant {
            blocks: Vec::new(),
            content: None,
            reasoning: None,
            tool_calls: vec![MessageToolCall {
                id: "call_2".into(),
                name: "core__read_file".into(),
                arguments: r#"{"path":"notes.txt"}"#.into(),
                raw: None,
            }],
        });
        messages.push(Message::tool("call_2", r#"{"content":"hello"}"#));

        // Turn 3: the summary of all three results.
        let (_, third) = run(&model, request(messages, tools)).await;
        assert!(third.tool_calls.is_empty());
        assert!(
            third.text.starts_with("Called 3 tool(s):"),
            "{}",
            third.text
        );
        assert!(
            third
                .text
                .contains("- core__read_file -> {\"content\":\"hello\"}")
        );
    }

    #[tokio::test]
    async fn a_results_hint_that_finds_nothing_skips_its_tool() {
        let model = TestModel::new().with_args_from_results("read_file", first_file);
        let tools = memory_and_files();
        let (_, first) = run(&model, request(vec![Message::user("x")], tools.clone())).await;
        assert_eq!(first.tool_calls.len(), 2);
        let messages = vec![
            Message::user("x"),
            Message::Assistant {
                blocks: Vec::new(),
                content: None,
                reasoning: None,
                tool_calls: vec![MessageToolCall {
                    id: "call_0".into(),
                    name: "core__list_directory".into(),
                    arguments: "{}".into(),
                    raw: None,
                }],
            },
            Message::tool("call_0", "(empty directory)\n"),
        ];
        let (_, second) = run(&model, request(messages, tools.clone())).await;
        assert!(second.tool_calls.is_empty());
        assert!(second.text.starts_with("Called 1 tool(s):"));

        // Alone in its round, the hint is asked with no results.
        let only_read = vec![tools[2].clone()];
        let (_, alone) = run(&model, request(vec![Message::user("x")], only_read.clone())).await;
        assert!(alone.tool_calls.is_empty());
        let eager = TestModel::new()
            .with_args_from_results("read_file", |_: &[PriorResult<'_>]| {
                Some(json!({"path": "a.txt"}))
            });
        let (_, alone) = run(&eager, request(vec![Message::user("x")], only_read)).await;
        assert_eq!(calls(&alone)[0].2, json!({"path": "a.txt"}));
    }

    #[tokio::test]
    async fn honours_cancellation() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let items: Vec<_> = TestModel::new()
            .complete(request(vec![Message::user("x")], catalog()), cancel)
            .collect()
            .await;
        assert_eq!(items, vec![Err(CompletionError::Cancelled)]);
    }

    #[test]
    fn excerpt_cuts_on_char_boundaries() {
        assert_eq!(excerpt("héllo", 2), "hé…");
        assert_eq!(excerpt("héllo", 5), "héllo");
        assert_eq!(excerpt("", 0), "");
    }
}
