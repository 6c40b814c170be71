//! Picks the model: a client for the configured API (`[model] api`: OpenAI chat
//! completions, the Anthropic Messages API, the OpenAI Responses API or Gemini's
//! own API), or, for
//! `openai` without a base URL, the embedded test model (announced on stderr).
//!
//! `[model]` splits in two: endpoint settings go into the client's configuration
//! ([`client_config`], one mapper for every wire: base URL, key, headers,
//! timeouts, retries, and the wire's own options from [`openai_options`],
//! [`anthropic_options`] or the Responses defaults); per-call sampling settings go
//! into each run's [`ModelSettings`] ([`model_settings`], for
//! `RunRequest::settings`).

use std::sync::Arc;
use std::time::Duration;

use agent_testing::TestModel;
use ai_core::{CompletionPort, completion::ModelSettings};
use wire_anthropic::client::AnthropicSpec;
use wire_anthropic::encode::AnthropicEncodeOptions;
use wire_gemini::client::GeminiSpec;
use wire_gemini::encode::{GeminiOptions, Thinking};
use wire_openai::client::{OpenAiOptions, OpenAiSpec, Timeouts, WireClient, WireSpec};
use wire_openai::completion_http::WireConfig;
use wire_responses::client::ResponsesSpec;

use crate::config::{AgentConfig, ModelApi, ModelConfig};

/// Why the model could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the model client: {0}")]
pub struct ModelError(String);

fn timeouts(m: &ModelConfig) -> Timeouts {
    Timeouts {
        connect: Duration::from_millis(m.connect_timeout_ms),
        first_byte: Duration::from_millis(m.first_byte_timeout_ms),
        between_chunks: Duration::from_millis(m.between_chunks_timeout_ms),
        total: (m.total_timeout_ms > 0).then(|| Duration::from_millis(m.total_timeout_ms)),
    }
}

/// The client configuration of wire `S` for `config`, with the wire's own
/// `options`: the base URL (the wire's default when `[model]` sets none; `None`
/// when the wire has no default either), the key, the extra headers, timeouts and
/// retries.
pub fn client_config<S: WireSpec>(
    config: &AgentConfig,
    options: S::Options,
) -> Option<WireConfig<S::Options>> {
    let m = &config.file.model;
    let base_url = m.base_url.as_deref().or(S::DEFAULT_BASE_URL)?;
    let mut client = WireConfig::new(base_url);
    if let Some(key) = &config.api_key {
        client = client.with_api_key(key.clone());
    }
    client.extra_headers = m.extra_headers.clone().into_iter().collect();
    client.timeouts = timeouts(m);
    client.max_retries = m.max_retries;
    client.options = options;
    Some(client)
}

/// The chat-completions wire's options from `[model]`.
pub fn openai_options(m: &ModelConfig) -> OpenAiOptions {
    let mut options = OpenAiOptions {
        // Every delta: the loop streams text and, for tools that allow it, a
        // call's arguments as they arrive (`tool_input_delta`: the page's tool
        // cards fill in while a long `write_file` is written).
        deltas: wire_openai::decode::DeltaMode::All,
        ..OpenAiOptions::default()
    };
    let encode = &mut options.encode;
    encode.include_usage = m.include_usage;
    if m.strict_tools {
        encode.strict = wire_openai::encode::StrictMode::WhenPossible;
    }
    encode.named_tool_choice = m.named_tool_choice;
    encode.max_tokens_field = m.max_tokens_field;
    encode.extra_body = m.extra_body.clone();
    options
}

/// The Messages API wire's options from `[model]`.
pub fn anthropic_options(m: &ModelConfig) -> AnthropicEncodeOptions {
    AnthropicEncodeOptions {
        cache: m.prompt_caching,
        thinking_budget_tokens: m.thinking_budget_tokens,
        ..AnthropicEncodeOptions::default()
    }
}

/// Gemini's wire options from `[model]`: `thinking_budget_tokens` asks for
/// thinking with that budget and its thought summaries.
pub fn gemini_options(m: &ModelConfig) -> GeminiOptions {
    GeminiOptions {
        thinking: m.thinking_budget_tokens.map(|budget| Thinking {
            include_thoughts: true,
            budget_tokens: Some(i32::try_from(budget).unwrap_or(i32::MAX)),
        }),
        ..GeminiOptions::default()
    }
}

/// The settings of every model call of a run (`RunRequest::settings`): temperature,
/// token limit, seed and reasoning effort from `[model]`. (`model.extra_body` is an
/// endpoint setting: [`openai_options`] puts it in the client.)
pub fn model_settings(config: &AgentConfig) -> ModelSettings {
    let m = &config.file.model;
    ModelSettings {
        temperature: m.temperature,
        max_tokens: m.max_tokens,
        seed: m.seed,
        reasoning_effort: m.reasoning_effort.clone(),
        ..ModelSettings::default()
    }
}

/// Builds the completion port for `config`.
pub fn build(config: &AgentConfig) -> Result<Arc<dyn CompletionPort>, ModelError> {
    let m = &config.file.model;
    match m.api {
        ModelApi::Anthropic => client::<AnthropicSpec>(config, anthropic_options(m)),
        ModelApi::Responses => client::<ResponsesSpec>(config, Default::default()),
        ModelApi::Gemini => client::<GeminiSpec>(config, gemini_options(m)),
        ModelApi::OpenAi => client::<OpenAiSpec>(config, openai_options(m)),
    }
}

/// The client of wire `S` for `config`, or the offline test model when neither
/// `[model]` nor the wire gives a base URL.
fn client<S: WireSpec>(
    config: &AgentConfig,
    options: S::Options,
) -> Result<Arc<dyn CompletionPort>, ModelError> {
    let Some(client) = client_config::<S>(config, options) else {
        eprintln!(
            "agent: no model endpoint configured (set OPENAI_BASE_URL, model.base_url or --base-url); using the embedded offline TestModel"
        );
        return Ok(Arc::new(TestModel::builtin_demo()));
    };
    let client = WireClient::<S>::new(client).map_err(|e| ModelError(e.to_string()))?;
    Ok(Arc::new(client))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigSource, FileConfig};
    use wire_openai::encode::{MaxTokensField, NamedToolChoice};

    fn config(base_url: Option<&str>) -> AgentConfig {
        let mut file = FileConfig::default();
        file.model.base_url = base_url.map(str::to_owned);
        file.model.include_usage = false;
        file.model.first_byte_timeout_ms = 1234;
        file.model
            .extra_headers
            .insert("X-Team".into(), "research".into());
        AgentConfig {
            file,
            api_key: Some("sk-test".into()),
            workspace_root: std::env::temp_dir(),
            source: ConfigSource::Defaults,
        }
    }

    fn openai(config: &AgentConfig) -> Option<WireConfig<OpenAiOptions>> {
        client_config::<OpenAiSpec>(config, openai_options(&config.file.model))
    }

    #[test]
    fn no_base_url_means_no_client_but_for_wires_with_a_default() {
        assert!(openai(&config(None)).is_none());
        let anthropic = client_config::<AnthropicSpec>(&config(None), Default::default()).unwrap();
        assert_eq!(anthropic.base_url, wire_anthropic::client::DEFAULT_BASE_URL);
        let responses = client_config::<ResponsesSpec>(&config(None), Default::default()).unwrap();
        assert_eq!(responses.base_url, wire_responses::client::DEFAULT_BASE_URL);
        assert!(responses.api_key.is_some());
    }

    #[test]
    fn file_settings_reach_the_client() {
        let client = openai(&config(Some("http://127.0.0.1:1/v1"))).unwrap();
        assert_eq!(client.base_url, "http://127.0.0.1:1/v1");
        assert!(client.api_key.is_some());
        assert!(!format!("{client:?}").contains("sk-test"));
        assert_eq!(
            client.extra_headers,
            vec![("X-Team".to_owned(), "research".to_owned())]
        );
        assert_eq!(client.timeouts.first_byte, Duration::from_millis(1234));
        assert!(!client.options.encode.include_usage);
        assert_eq!(client.options.deltas, wire_openai::decode::DeltaMode::All);
        assert_eq!(client.timeouts.total, Some(Duration::from_secs(600)));
        assert_eq!(
            client.options.encode.named_tool_choice,
            NamedToolChoice::Object
        );

        let mut config = config(Some("http://127.0.0.1:1/v1"));
        config.file.model.total_timeout_ms = 0;
        config.file.model.named_tool_choice = NamedToolChoice::RequiredWithOnlyThatTool;
        config.file.model.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        config
            .file
            .model
            .extra_body
            .insert("top_k".into(), serde_json::json!(40));
        let client = openai(&config).unwrap();
        assert_eq!(client.timeouts.total, None);
        assert_eq!(
            client.options.encode.named_tool_choice,
            NamedToolChoice::RequiredWithOnlyThatTool
        );
        assert_eq!(
            client.options.encode.max_tokens_field,
            MaxTokensField::MaxCompletionTokens
        );
        assert_eq!(client.options.encode.extra_body["top_k"], 40);
    }

    #[test]
    fn sampling_settings_reach_the_run_settings() {
        let mut config = config(None);
        assert_eq!(model_settings(&config), ModelSettings::default());
        config.file.model.temperature = Some(0.25);
        config.file.model.max_tokens = Some(300);
        config.file.model.seed = Some(9);
        config.file.model.reasoning_effort = Some("medium".into());
        let settings = model_settings(&config);
        assert_eq!(settings.temperature, Some(0.25));
        assert_eq!(settings.max_tokens, Some(300));
        assert_eq!(settings.seed, Some(9));
        assert_eq!(settings.reasoning_effort.as_deref(), Some("medium"));
        assert!(settings.extra_body.is_empty());
    }

    /// The file's settings, through `build` and `model_settings`, on the wire.
    #[tokio::test]
    async fn file_settings_reach_the_request_on_the_wire() {
        use agent_testing::server::{OpenAiServer, Reply};
        use ai_core::{
            CancellationToken, Message, RunContext, ToolEffect, ToolId, ToolSpec,
            completion::{CompletionItem, CompletionRequest, ToolChoice},
        };
        use futures::StreamExt;
        use serde_json::json;

        let server = OpenAiServer::start([Reply::tool_calls(&[("c1", "core__b", json!({}))])])
            .await
            .unwrap();
        let text = format!(
            r#"[model]
base_url = "{}"
temperature = 0.7
max_tokens = 256
max_tokens_field = "max_completion_tokens"
seed = 42
reasoning_effort = "high"
named_tool_choice = "required"

[model.extra_body]
top_k = 20
seed = 1
"#,
            server.base_url()
        );
        let file = crate::config::parse(&text, std::path::Path::new("agent.toml")).unwrap();
        let config = AgentConfig {
            file,
            api_key: None,
            workspace_root: std::env::temp_dir(),
            source: ConfigSource::Defaults,
        };
        let model = build(&config).unwrap();
        let tool = |name: &str| {
            ToolSpec::new(
                ToolId::parse(name).unwrap(),
                "A tool.",
                json!({"type": "object", "properties": {}}),
                ToolEffect::ReadOnly,
            )
        };
        let request = CompletionRequest {
            model: config.file.model.model.clone(),
            messages: vec![Message::user("hi")],
            tools: vec![tool("core__a"), tool("core__b")].into(),
            tool_choice: ToolChoice::Tool(ToolId::parse("core__b").unwrap()),
            context: RunContext::new("run-1", "trace-1"),
            settings: model_settings(&config),
        };
        let mut stream = model.complete(request, CancellationToken::new());
        let mut finals = 0;
        while let Some(item) = stream.next().await {
            if let CompletionItem::Final(_) = item.unwrap() {
                finals += 1;
            }
        }
        assert_eq!(finals, 1);
        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        let body = &requests[0].body;
        assert_eq!(body["temperature"], json!(0.7));
        assert_eq!(body["max_completion_tokens"], json!(256));
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["seed"], json!(42), "the setting wins over extra_body");
        assert_eq!(body["reasoning_effort"], json!("high"));
        assert_eq!(body["top_k"], json!(20));
        assert_eq!(body["tool_choice"], json!("required"));
        let tools = body["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0]["function"]["name"], "core__b");
    }
}
