//! `agent.toml`: the model endpoint, policy, limits and workspace, with environment
//! and flag overrides.
//!
//! Precedence, lowest first: built-in defaults, the config file (`--config PATH`, else
//! `./agent.toml` when present), environment (the API's base URL variable,
//! `OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL` or `GEMINI_BASE_URL` by `model.api`;
//! the API key variable named by `model.api_key_env`, else `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY` or `GEMINI_API_KEY`;
//! `AGENT_MODEL`), flags (`--api`, `--base-url`, `--model`, `--workspace`). Unknown
//! keys and bad values are errors that name the line and column.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_graph::{graph::SubagentBudget, run::RunLimits};
use ai_core::policy::{Budgets, ToolPattern};
use ai_core::{ToolEffect, ToolId, ToolPolicy};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wire_openai::encode::{MaxTokensField, NamedToolChoice};

/// Why configuration could not be loaded. Maps to exit code 2.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is not valid for the schema (message includes line and column).
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What and where.
        message: String,
    },
    /// A value is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// The wire protocol of the model endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ModelApi {
    /// OpenAI chat completions (`POST {base_url}/chat/completions`): OpenAI and
    /// every compatible server (vLLM, Ollama, LiteLLM, ...).
    #[default]
    OpenAi,
    /// The Anthropic Messages API (`POST {base_url}/v1/messages`).
    Anthropic,
    /// OpenAI's Responses API (`POST {base_url}/responses`): reasoning carried
    /// across tool turns (encrypted, `store: false`); OpenAI, LiteLLM, vLLM.
    Responses,
    /// Gemini's own API (`POST {base_url}/v1beta/models/{model}:streamGenerateContent`):
    /// thought signatures returned on the parts they came on.
    Gemini,
}

impl ModelApi {
    /// Its name in the config file and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Responses => "responses",
            Self::Gemini => "gemini",
        }
    }

    /// The environment variable that overrides the base URL.
    pub fn base_url_env(self) -> &'static str {
        match self {
            Self::OpenAi | Self::Responses => "OPENAI_BASE_URL",
            Self::Anthropic => "ANTHROPIC_BASE_URL",
            Self::Gemini => "GEMINI_BASE_URL",
        }
    }

    /// The environment variable holding the key when `model.api_key_env` is unset.
    pub fn default_key_env(self) -> &'static str {
        match self {
            Self::OpenAi | Self::Responses => "OPENAI_API_KEY",
            Self::Anthropic => "ANTHROPIC_API_KEY",
            Self::Gemini => "GEMINI_API_KEY",
        }
    }

    /// The model id when `model.model` is unset.
    pub fn default_model(self) -> &'static str {
        match self {
            Self::OpenAi => "gpt-4o-mini",
            Self::Anthropic => "claude-sonnet-4-5",
            Self::Responses => "gpt-5-mini",
            Self::Gemini => "gemini-2.5-flash",
        }
    }
}

impl std::str::FromStr for ModelApi {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "openai" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            "responses" => Ok(Self::Responses),
            "gemini" => Ok(Self::Gemini),
            other => Err(format!(
                "unknown API `{other}` (expected `openai`, `anthropic`, `responses` or `gemini`)"
            )),
        }
    }
}

/// The model endpoint, and the settings of every model call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// The endpoint's wire protocol (`openai` by default, or `anthropic`).
    pub api: ModelApi,
    /// Base URL. For `openai`, up to the version (e.g. `http://localhost:11434/v1`);
    /// without one the embedded test model runs. For `anthropic`, the origin
    /// without `/v1` (default `https://api.anthropic.com`).
    pub base_url: Option<String>,
    /// Model id sent to the endpoint (default: `gpt-4o-mini` for `openai`,
    /// `claude-sonnet-4-5` for `anthropic`).
    pub model: String,
    /// Name of the environment variable holding the API key (the key itself never
    /// sits in the file); default `OPENAI_API_KEY` or `ANTHROPIC_API_KEY` by `api`.
    pub api_key_env: Option<String>,
    /// `anthropic` only: extended thinking with this many tokens of budget (at
    /// least 1024); its reasoning streams to the UI and its signed blocks go back
    /// to the model unchanged.
    pub thinking_budget_tokens: Option<u32>,
    /// `anthropic` only: mark the system prompt, the tools and the last user turn
    /// for prompt caching (`cache_control: ephemeral`).
    pub prompt_caching: bool,
    /// Extra HTTP headers sent with every request.
    pub extra_headers: BTreeMap<String, String>,
    /// Connect timeout, in milliseconds.
    pub connect_timeout_ms: u64,
    /// Time to the first response byte, in milliseconds.
    pub first_byte_timeout_ms: u64,
    /// Longest wait for the next stream event (keepalive comments do not count), in
    /// milliseconds.
    pub between_chunks_timeout_ms: u64,
    /// Deadline of a whole model call (retries and the streamed body included), in
    /// milliseconds; `0` means none.
    pub total_timeout_ms: u64,
    /// Retries on 408, 409, 429 (not for an exhausted quota), 5xx, connection errors
    /// and connect timeouts, before the first byte.
    pub max_retries: u32,
    /// Rewrite tool schemas to OpenAI's strict mode where possible.
    pub strict_tools: bool,
    /// Ask for a usage chunk at the end of a stream (`stream_options.include_usage`).
    /// Turn off for servers that reject `stream_options`.
    pub include_usage: bool,
    /// How a choice of one named tool is sent.
    pub named_tool_choice: NamedToolChoice,
    /// Sampling temperature (the provider's default when absent).
    pub temperature: Option<f32>,
    /// Upper bound of generated tokens per model call.
    pub max_tokens: Option<u32>,
    /// The request field that carries `max_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// Seed for providers that support reproducible sampling.
    pub seed: Option<i64>,
    /// Reasoning effort of reasoning models (`low`, `medium`, `high`, ...).
    pub reasoning_effort: Option<String>,
    /// Further top-level request fields, sent as JSON (e.g. `top_k` for vLLM). They
    /// never replace a field the client sets itself.
    pub extra_body: Map<String, Value>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            api: ModelApi::OpenAi,
            base_url: None,
            model: String::new(),
            api_key_env: None,
            thinking_budget_tokens: None,
            prompt_caching: false,
            extra_headers: BTreeMap::new(),
            connect_timeout_ms: 10_000,
            first_byte_timeout_ms: 60_000,
            between_chunks_timeout_ms: 60_000,
            total_timeout_ms: 600_000,
            max_retries: 2,
            strict_tools: false,
            include_usage: true,
            named_tool_choice: NamedToolChoice::Object,
            temperature: None,
            max_tokens: None,
            max_tokens_field: MaxTokensField::MaxTokens,
            seed: None,
            reasoning_effort: None,
            extra_body: Map::new(),
        }
    }
}

impl ModelConfig {
    /// The environment variable holding the API key.
    pub fn key_env(&self) -> &str {
        self.api_key_env
            .as_deref()
            .unwrap_or(self.api.default_key_env())
    }
}

/// The sandbox the built-in tools work in.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Workspace root (default: the current directory).
    pub root: Option<PathBuf>,
    /// SQLite file of the memory tools (default: `<root>/.agent/memory.db`).
    pub memory_db: Option<PathBuf>,
    /// Hosts, addresses or CIDRs `web_fetch` may reach even though they are
    /// private (e.g. `127.0.0.1:8080`, `10.0.0.0/8`).
    pub web_allow: Vec<String>,
    /// Run each `exec_shell` command in its own PID namespace (default `true`):
    /// it then cannot see, or read the environment of, any process but its own,
    /// such as a wrapper that holds the API key. `false` lets commands see and
    /// signal the machine's processes (`ps`, `kill`).
    pub shell_process_isolation: bool,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        Self {
            root: None,
            memory_db: None,
            web_allow: Vec::new(),
            shell_process_isolation: true,
        }
    }
}

/// Tool policy as written in the file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Allowed tool ids or `prefix*` patterns.
    pub allow: Vec<ToolPattern>,
    /// Denied ids or patterns (win over `allow`).
    pub deny: Vec<ToolPattern>,
    /// Effects that need approval.
    pub require_approval: Vec<ToolEffect>,
    /// Per-call budgets.
    pub budgets: Budgets,
}

impl Default for PolicyConfig {
    /// Every built-in tool allowed; state changes and external side effects need
    /// approval.
    fn default() -> Self {
        Self {
            allow: vec!["core__*".into()],
            deny: Vec::new(),
            require_approval: vec![ToolEffect::StateChange, ToolEffect::ExternalSideEffect],
            budgets: Budgets::default(),
        }
    }
}

impl PolicyConfig {
    /// The runtime policy.
    pub fn to_policy(&self) -> ToolPolicy {
        ToolPolicy {
            allow: self.allow.iter().cloned().collect(),
            deny: self.deny.iter().cloned().collect(),
            require_approval: self.require_approval.iter().copied().collect(),
            budgets: self.budgets.clone(),
        }
    }
}

/// Limits of a graph's runs (`[graphs.NAME.limits]`); a key not set takes the
/// value of `[limits]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct GraphLimits {
    /// Model turns before a run of the graph gives up.
    pub max_iterations: Option<u32>,
    /// Model requests allowed in a run of the graph.
    pub max_model_requests: Option<u32>,
    /// Total tokens allowed in a run of the graph.
    pub max_total_tokens: Option<u64>,
    /// Read-only calls of one turn run at most this many at a time.
    pub tool_concurrency: Option<usize>,
}

impl GraphLimits {
    /// These limits over `base` (the file's `[limits]`).
    pub fn over(&self, base: &RunLimits) -> RunLimits {
        RunLimits {
            max_iterations: self.max_iterations.unwrap_or(base.max_iterations),
            max_model_requests: self.max_model_requests.or(base.max_model_requests),
            max_total_tokens: self.max_total_tokens.or(base.max_total_tokens),
            tool_concurrency: self.tool_concurrency.unwrap_or(base.tool_concurrency),
        }
    }
}

/// One named graph (`[graphs.NAME]`): what `agent chat --graph NAME` runs, and what a
/// parent graph calls as the subagent tool `graph__NAME`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GraphConfig {
    /// One line for listings and the subagent tool's description.
    pub description: String,
    /// The system prompt (default: the `chat` graph's).
    pub system: Option<String>,
    /// Tool ids or `prefix*` patterns offered (default: every tool policy allows).
    /// Policy still decides: a tool listed here that policy denies is not offered.
    pub tools: Option<Vec<ToolPattern>>,
    /// Graphs this graph may call as `graph__<name>` tools (depth 1: a subagent has
    /// no subagents of its own).
    pub subagents: Vec<String>,
    /// Limits of its runs, over `[limits]`.
    pub limits: GraphLimits,
    /// Budget of one call of this graph as a subagent.
    pub budget: SubagentBudget,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    /// Model endpoint.
    pub model: ModelConfig,
    /// Tool policy.
    pub policy: PolicyConfig,
    /// Run limits.
    pub limits: RunLimits,
    /// Workspace.
    pub workspace: WorkspaceConfig,
    /// Named graphs, by name (a `chat` entry replaces the built-in one).
    pub graphs: BTreeMap<String, GraphConfig>,
    /// MCP servers.
    pub mcp: McpConfig,
    /// Credentials by connection id, for MCP servers that name one.
    pub connections: BTreeMap<String, ConnectionConfig>,
    /// `agent serve`.
    pub server: ServeConfig,
    /// Tools the web client runs (`client__<name>`), offered by `agent serve`
    /// only, by name.
    pub client_tools: BTreeMap<String, ClientToolConfig>,
    /// The run store.
    pub store: StoreConfig,
    /// Prices per model id (as the provider reports it), for the cost column of
    /// `agent usage`.
    pub pricing: BTreeMap<String, PriceConfig>,
    /// Durable runs of `agent serve`.
    pub durable: DurableConfig,
    /// Built-in tools that exist only when configured.
    pub tools: ToolsConfig,
    /// OpenTelemetry export of runs (off unless an endpoint is configured here or
    /// in `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub telemetry: TelemetryFileConfig,
}

/// `[telemetry]`: where the runs' spans are exported (OTLP over HTTP). The
/// standard `OTEL_EXPORTER_OTLP_*` and `OTEL_SERVICE_NAME` variables win over
/// these keys. A project file that sets `endpoint` or `headers` needs `agent
/// trust`: spans leave the machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryFileConfig {
    /// The collector's base URL (`http://localhost:4318`); spans go to
    /// `{endpoint}/v1/traces`.
    pub endpoint: Option<String>,
    /// Headers of every export request (a hosted collector's API key).
    pub headers: BTreeMap<String, String>,
    /// The `service.name` of the spans (default `agent`).
    pub service_name: Option<String>,
    /// Prompts and model text in spans, and the redacted views of tool arguments
    /// and results (never the raw values). Off by default.
    pub content: bool,
    /// Whether metrics are exported too (to `{endpoint}/v1/metrics`); on unless
    /// `false` (or `OTEL_METRICS_EXPORTER=none`).
    pub metrics: Option<bool>,
}

/// `[tools]`: built-in tools that are not bound unless their table is present.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// `[tools.web_search]`: `core__web_search`; absent, there is no such tool.
    pub web_search: Option<WebSearchConfig>,
}

/// Default of `tools.web_search.timeout_ms`.
pub const DEFAULT_WEB_SEARCH_TIMEOUT_MS: u64 = 15_000;

/// `[tools.web_search]`: the search provider `core__web_search` asks. The endpoint
/// goes through `web_fetch`'s address rules: one that resolves to a loopback,
/// private or link-local address is refused unless `allow_private` names it. A
/// project config that sets this table needs `agent trust`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    /// `searxng`, `brave` or `tavily`.
    #[serde(deserialize_with = "search_provider")]
    pub provider: ai_host::SearchProvider,
    /// The endpoint: a SearXNG instance's base URL (required; `/search` is
    /// appended), or the provider's search URL (default: Brave's
    /// `https://api.search.brave.com/res/v1/web/search`, Tavily's
    /// `https://api.tavily.com/search`).
    #[serde(default)]
    pub url: Option<String>,
    /// Name of the environment variable holding the provider's key (the key itself
    /// never sits in the file); default `BRAVE_API_KEY` or `TAVILY_API_KEY`.
    /// SearXNG takes none.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Time limit of one search, in milliseconds (default 15,000).
    #[serde(default = "default_web_search_timeout_ms")]
    pub timeout_ms: u64,
    /// Most results one search returns, 1 to 10 (default 5); the model's `count`
    /// is capped at it.
    #[serde(default = "default_web_search_max_results")]
    pub max_results: usize,
    /// Hosts, addresses or CIDRs, optionally with `:port` (the syntax of
    /// `workspace.web_allow`), that the endpoint may resolve to even though they
    /// are private, e.g. `["127.0.0.1:8888"]` for a SearXNG on this machine. Only
    /// the search endpoint may reach them, not `web_fetch`.
    #[serde(default)]
    pub allow_private: Vec<String>,
}

fn default_web_search_timeout_ms() -> u64 {
    DEFAULT_WEB_SEARCH_TIMEOUT_MS
}

fn default_web_search_max_results() -> usize {
    ai_tools::builtin::DEFAULT_SEARCH_RESULTS
}

fn search_provider<'de, D>(deserializer: D) -> Result<ai_host::SearchProvider, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let name = String::deserialize(deserializer)?;
    name.parse().map_err(serde::de::Error::custom)
}

impl WebSearchConfig {
    /// The environment variable holding the key: `api_key_env`, else the
    /// provider's default; `None` for a provider without a key.
    pub fn key_env(&self) -> Option<&str> {
        if !self.provider.needs_key() {
            return None;
        }
        self.api_key_env.as_deref().or(match self.provider {
            ai_host::SearchProvider::Brave => Some("BRAVE_API_KEY"),
            ai_host::SearchProvider::Tavily => Some("TAVILY_API_KEY"),
            _ => None,
        })
    }
}

/// `[durable]`: the runs of `agent serve` with a store are durable (each model
/// call and tool call a step journaled in the store before the next).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DurableConfig {
    /// Where runs run: `embedded` (in `agent serve`, journaled in the run
    /// store; default) or `restate` (each run an invocation of a Restate server,
    /// run by `agent worker` processes).
    pub engine: DurableEngine,
    /// At startup, go on with the runs a stopped `agent serve` on this host left
    /// running (default); `false` marks them interrupted.
    pub resume: bool,
    /// Journal the steps of runs (default); `false` records runs without a
    /// journal (nothing to resume; a little less store traffic).
    pub journal: bool,
    /// `restate`: the Restate server's ingress, where runs are submitted.
    pub restate_ingress: String,
    /// `restate`: its admin API, where `agent worker` registers.
    pub restate_admin: String,
    /// `restate`: the public keys of the Restate server's request identity
    /// (`publickeyv1_...`, from `agent keys restate-identity`): `agent worker`
    /// answers only requests signed with one of them.
    pub restate_identity_keys: Vec<String>,
    /// How long a process's lease on its runs lasts, in milliseconds (default
    /// 10,000; at least 1,000): a run whose owner stopped renewing it is taken
    /// over by another server this long after the last renewal at the soonest.
    pub lease_ms: u64,
}

impl Default for DurableConfig {
    fn default() -> Self {
        Self {
            engine: DurableEngine::Embedded,
            resume: true,
            journal: true,
            restate_ingress: "http://127.0.0.1:8080".into(),
            restate_admin: "http://127.0.0.1:9070".into(),
            restate_identity_keys: Vec::new(),
            lease_ms: 10_000,
        }
    }
}

impl DurableConfig {
    /// The lease of the processes that own runs.
    pub fn lease(&self) -> agent_durable::lease::LeaseTiming {
        agent_durable::lease::LeaseTiming::new(std::time::Duration::from_millis(self.lease_ms))
    }
}

/// `[durable] engine`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DurableEngine {
    /// Runs run in `agent serve`, their steps journaled in the run store.
    #[default]
    Embedded,
    /// Runs run as invocations of a Restate server (`agent worker`).
    Restate,
}

/// `[pricing."MODEL"]`: what a model's tokens cost, per million, in one currency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PriceConfig {
    /// Prompt tokens not read from a cache.
    pub prompt_per_million: f64,
    /// Prompt tokens read from a cache (default: the prompt price).
    pub cached_prompt_per_million: Option<f64>,
    /// Completion tokens (reasoning included).
    pub completion_per_million: f64,
}

impl PriceConfig {
    /// The cost of a call in millionths of the currency.
    pub fn cost_micros(&self, prompt: u64, cached: u64, completion: u64) -> i64 {
        let cached = cached.min(prompt);
        let cached_price = self
            .cached_prompt_per_million
            .unwrap_or(self.prompt_per_million);
        // A price per million tokens is a price per token in millionths.
        let micros = (prompt - cached) as f64 * self.prompt_per_million
            + cached as f64 * cached_price
            + completion as f64 * self.completion_per_million;
        micros.round().clamp(0.0, i64::MAX as f64) as i64
    }
}

/// `[store]`: where threads, runs, their events and usage are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://...` (a store many servers share) or a SQLite file path
    /// (default: `<data home>/agent/store.db`).
    pub url: Option<String>,
    /// Delete threads, runs and events untouched for this many days (default:
    /// keep them).
    pub retention_days: Option<u32>,
    /// Delete usage facts older than this many days (default: keep them; they are
    /// the billing record).
    pub usage_retention_days: Option<u32>,
    /// The key file the servers and workers on this store share (default:
    /// `<data home>/agent/server.key`, made on first use): it seals what
    /// crosses a durable engine and derives the approval key. Private to its
    /// user; see `agent keys rotate`.
    pub key_file: Option<String>,
}

/// `[client_tools.NAME]`: a tool the browser executes (it answers with
/// `addToolOutput`). Offered as `client__NAME` by `agent serve` (never by `agent
/// chat`), through the same catalog and policy as every tool: `[policy] allow`
/// must admit it (e.g. `"client__*"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientToolConfig {
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (default: an object with no properties).
    #[serde(default = "empty_object_schema")]
    pub parameters: serde_json::Value,
    /// What it does to the world (`read_only`, `state_change`,
    /// `external_side_effect`).
    pub effect: ToolEffect,
}

fn empty_object_schema() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// `[server]`: the chat endpoint of `agent serve`. Raising a limit above its
/// default needs `agent trust` in a project config.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Address to bind (default `127.0.0.1`).
    pub host: String,
    /// Port (default 8787; 0 picks a free one).
    pub port: u16,
    /// Hex SHA-256 of further accepted bearer tokens, besides the per-process
    /// secret (the tokens themselves are not stored; `AGENT_SERVER_TOKEN` adds one
    /// from the environment).
    pub tokens_sha256: Vec<String>,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// How long a request body may take to arrive, in milliseconds.
    pub body_timeout_ms: u64,
    /// Most responses streaming at once.
    pub max_streams: usize,
    /// The share of `max_streams` one account may hold, in percent.
    pub client_stream_share: u8,
    /// Most connections open at once (kept within the descriptor limit).
    pub max_connections: usize,
    /// Most authenticated connections open at once for one account.
    pub max_connections_per_client: usize,
    /// Most connections open at once that have not sent a token yet (a new one
    /// past it closes the oldest).
    pub max_unauthenticated: usize,
    /// How long a connection may stay open without a request carrying a
    /// token, in milliseconds.
    pub unauthenticated_timeout_ms: u64,
    /// How long a client may take to send a request head, in milliseconds, from
    /// when its connection opened or its previous response ended.
    pub header_read_timeout_ms: u64,
    /// How long a stream may wait for its client to read anything, in
    /// milliseconds: a client that reads nothing for this long loses its
    /// stream (its run goes on for `detach_grace_ms`, as when it disconnects).
    pub write_timeout_ms: u64,
    /// How long a run goes on after its client went away (a reload), for the
    /// page to reattach, in milliseconds; then it is cancelled. 0 cancels at
    /// once.
    pub detach_grace_ms: u64,
    /// Origins of pages elsewhere that may call the API from a browser (CORS),
    /// exact `scheme://host[:port]`; they still need a token. Default none.
    pub allowed_origins: Vec<String>,
    /// Largest file attached to a message, in bytes (decoded).
    pub max_file_bytes: usize,
    /// Largest sum of the files of one request (its whole history), in bytes.
    pub max_request_file_bytes: usize,
    /// Named accounts, each with its own token: an account's chats (in the run
    /// store) are its own; the per-process secret and `tokens_sha256` are the
    /// `local` account.
    pub accounts: BTreeMap<String, AccountConfig>,
}

/// `[server.accounts.NAME]`: one account of `agent serve`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    /// Hex SHA-256 of the account's bearer token (the token is not stored).
    pub token_sha256: String,
    /// The graphs this account may run (default: every graph `agent serve`
    /// offers); a request for another is refused.
    #[serde(default)]
    pub graphs: Option<Vec<String>>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        let connections = agent_server::ConnectionLimits::default();
        Self {
            host: "127.0.0.1".into(),
            port: 8787,
            tokens_sha256: Vec::new(),
            max_body_bytes: agent_server::DEFAULT_MAX_BODY_BYTES,
            body_timeout_ms: millis(agent_server::DEFAULT_BODY_TIMEOUT),
            max_streams: agent_server::DEFAULT_MAX_STREAMS,
            client_stream_share: agent_server::DEFAULT_CLIENT_STREAM_SHARE,
            max_connections: connections.max_connections,
            max_connections_per_client: connections.max_connections_per_client,
            max_unauthenticated: connections.max_unauthenticated,
            unauthenticated_timeout_ms: millis(connections.unauthenticated_timeout),
            header_read_timeout_ms: millis(connections.header_read_timeout),
            write_timeout_ms: millis(agent_server::DEFAULT_WRITE_TIMEOUT),
            detach_grace_ms: millis(agent_server::DEFAULT_DETACH_GRACE),
            allowed_origins: Vec::new(),
            max_file_bytes: agent_server::contract::DEFAULT_MAX_FILE_BYTES,
            max_request_file_bytes: agent_server::contract::DEFAULT_MAX_REQUEST_FILE_BYTES,
            accounts: BTreeMap::new(),
        }
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The keys of `[server]` that are limits: raising one above its default
/// needs trust.
const SERVER_LIMITS: [&str; 14] = [
    "max_body_bytes",
    "body_timeout_ms",
    "max_streams",
    "client_stream_share",
    "max_connections",
    "max_connections_per_client",
    "max_unauthenticated",
    "unauthenticated_timeout_ms",
    "header_read_timeout_ms",
    "write_timeout_ms",
    "detach_grace_ms",
    "allowed_origins",
    "max_file_bytes",
    "max_request_file_bytes",
];

impl ServeConfig {
    /// The limits that are above their defaults, as `server.<key>`.
    pub fn raised_limits(&self) -> Vec<String> {
        raised_keys(self, &Self::default(), &SERVER_LIMITS)
            .into_iter()
            .map(|key| format!("server.{key}"))
            .collect()
    }
}

/// The keys among `keys` whose value in `current` is above the one in
/// `defaults`, both read as tables of their serialized fields (see [`above`]).
/// A key either table lacks counts as raised, as does every key when either
/// cannot be serialized: a key misspelled here asks for trust rather than
/// letting a raised limit through.
pub(crate) fn raised_keys<'k>(
    current: &impl Serialize,
    defaults: &impl Serialize,
    keys: &[&'k str],
) -> Vec<&'k str> {
    let current = serde_json::to_value(current).unwrap_or_default();
    let defaults = serde_json::to_value(defaults).unwrap_or_default();
    keys.iter()
        .copied()
        .filter(|key| match (current.get(key), defaults.get(key)) {
            (Some(value), Some(default)) => above(value, default),
            _ => true,
        })
        .collect()
}

/// Whether a limit's `value` is above its `default`: a larger number, or a
/// list with more entries. A value not set (null) never is; values of any
/// other kind always are (they are not limits).
fn above(value: &Value, default: &Value) -> bool {
    match (value, default) {
        (Value::Null, _) => false,
        (Value::Number(value), Value::Number(default)) => {
            match (value.as_u64(), default.as_u64()) {
                (Some(value), Some(default)) => value > default,
                _ => value.as_f64() > default.as_f64(),
            }
        }
        (Value::Array(value), Value::Array(default)) => value.len() > default.len(),
        _ => true,
    }
}

/// `[mcp]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// `[mcp.servers.NAME]`, by server id (the `<server>` of `mcp__<server>__<tool>`).
    pub servers: BTreeMap<String, tools_mcp::ServerConfig>,
}

impl PartialEq for McpConfig {
    // Server tables hold no secrets, but may hold values not meant for logs: compare
    // by their (value-free) debug forms plus ids, which is what tests need.
    fn eq(&self, other: &Self) -> bool {
        format!("{:?}", self.servers) == format!("{:?}", other.servers)
    }
}

/// The kind of a connection's credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConnectionType {
    /// `Authorization: Bearer <secret>`.
    Bearer,
}

/// `[connections.NAME]`: where a connection's secret comes from. The secret itself
/// is never in the file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionConfig {
    /// The credential kind.
    #[serde(rename = "type")]
    pub kind: ConnectionType,
    /// The environment variable holding the secret (read when a server connects).
    pub env: String,
}

/// Overrides from the environment (read by the caller, passed in as data).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvOverrides {
    /// The API's base URL variable (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL` or
    /// `GEMINI_BASE_URL`).
    pub base_url: Option<String>,
    /// `AGENT_MODEL`.
    pub model: Option<String>,
    /// Value of the API key variable.
    pub api_key: Option<String>,
}

/// Overrides from command-line flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlagOverrides {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--api`.
    pub api: Option<ModelApi>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--workspace`.
    pub workspace: Option<PathBuf>,
}

/// Where the effective configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigSource {
    /// Built-in defaults (no file).
    Defaults,
    /// This file.
    File(PathBuf),
}

/// The effective configuration.
#[derive(Clone, PartialEq)]
pub struct AgentConfig {
    /// File contents after overrides.
    pub file: FileConfig,
    /// The API key, if any (never printed: see the `Debug` impl).
    pub api_key: Option<String>,
    /// Resolved workspace root.
    pub workspace_root: PathBuf,
    /// Where it came from.
    pub source: ConfigSource,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("file", &self.file)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("workspace_root", &self.workspace_root)
            .field("source", &self.source)
            .finish()
    }
}

/// Parses config text; errors name the line and column.
pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let position = e.span().map(|span| line_col(text, span.start));
        let message = match position {
            Some((line, col)) => format!("line {line}, column {col}: {}", e.message()),
            None => e.message().to_owned(),
        };
        ConfigError::Parse {
            path: path.to_owned(),
            message,
        }
    })
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Loads the effective configuration.
///
/// `cwd` is where `./agent.toml` is looked for and the default workspace root.
pub fn load(
    cwd: &Path,
    env: EnvOverrides,
    flags: FlagOverrides,
) -> Result<AgentConfig, ConfigError> {
    let read = find(cwd, &flags)?;
    build(read.as_ref(), cwd, env, flags)
}

/// A config file read once: the path it was asked for, its canonical path,
/// the sha256 of the bytes read and what they parse to. The trust check and
/// the configuration both use these bytes, never a second read a swapped file
/// could change.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigRead {
    /// The path as given.
    pub path: PathBuf,
    /// Its canonical path (what trust is recorded for).
    pub canonical: PathBuf,
    /// Lowercase hex sha256 of the bytes read.
    pub sha256: String,
    /// What they parse to.
    pub file: FileConfig,
}

/// The most a config file may hold.
const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// Reads the config file at `path` once (see [`ConfigRead`]): its canonical
/// path is opened without following a symlink put in its place since, and
/// read with a bound.
pub fn read_once(path: &Path) -> Result<ConfigRead, ConfigError> {
    use std::io::Read;
    let failed = |source: std::io::Error| ConfigError::Read {
        path: path.to_owned(),
        source,
    };
    let canonical = std::fs::canonicalize(path).map_err(failed)?;
    let file = open_no_follow(&canonical).map_err(failed)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ConfigError::Invalid(format!(
            "{} is over {MAX_CONFIG_BYTES} bytes",
            path.display()
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| ConfigError::Parse {
        path: path.to_owned(),
        message: "not UTF-8".into(),
    })?;
    Ok(ConfigRead {
        path: path.to_owned(),
        canonical,
        sha256: crate::trust::sha256_hex(text.as_bytes()),
        file: parse(&text, path)?,
    })
}

/// Opens `path` for reading, refusing a symlink as its last component and
/// anything but a regular file (a FIFO would block).
#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let file = std::fs::File::from(rustix::fs::open(path, flags, Mode::empty())?);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// The config file `flags` or `cwd` names, read once: `--config`, else
/// `./agent.toml` when there is one, else none (the defaults).
pub fn find(cwd: &Path, flags: &FlagOverrides) -> Result<Option<ConfigRead>, ConfigError> {
    match &flags.config {
        Some(path) => read_once(path).map(Some),
        None => {
            let default = cwd.join("agent.toml");
            if default.is_file() {
                read_once(&default).map(Some)
            } else {
                Ok(None)
            }
        }
    }
}

/// The effective configuration from a file read once (`None`: the
/// defaults), environment overrides and flags.
pub fn build(
    read: Option<&ConfigRead>,
    cwd: &Path,
    env: EnvOverrides,
    flags: FlagOverrides,
) -> Result<AgentConfig, ConfigError> {
    let (mut file, source) = match read {
        Some(read) => (read.file.clone(), ConfigSource::File(read.path.clone())),
        None => (FileConfig::default(), ConfigSource::Defaults),
    };
    if let Some(api) = flags.api {
        file.model.api = api;
    }
    if let Some(url) = env.base_url.filter(|u| !u.is_empty()) {
        file.model.base_url = Some(url);
    }
    if let Some(model) = env.model.filter(|m| !m.is_empty()) {
        file.model.model = model;
    }
    if let Some(url) = flags.base_url {
        file.model.base_url = Some(url);
    }
    if let Some(model) = flags.model {
        file.model.model = model;
    }
    if let Some(url) = &file.model.base_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ConfigError::Invalid(format!(
            "model.base_url must start with http:// or https:// (got {url:?})"
        )));
    }
    if file.model.model.is_empty() {
        file.model.model = file.model.api.default_model().to_owned();
    }
    if file.model.model.trim().is_empty() {
        return Err(ConfigError::Invalid("model.model must not be blank".into()));
    }
    validate_model_settings(&file.model)?;
    validate_graphs(&file.graphs)?;
    validate_pricing(&file.pricing)?;
    validate_mcp(&file)?;
    validate_tools(&file.tools)?;
    if file.limits.max_iterations == 0 {
        return Err(ConfigError::Invalid(
            "limits.max_iterations must be at least 1".into(),
        ));
    }
    let root = flags
        .workspace
        .or_else(|| file.workspace.root.clone())
        .unwrap_or_else(|| cwd.to_owned());
    let root = if root.is_absolute() {
        root
    } else {
        cwd.join(root)
    };
    Ok(AgentConfig {
        file,
        api_key: env.api_key.filter(|k| !k.is_empty()),
        workspace_root: root,
        source,
    })
}

/// Checks `[mcp.servers]` and `[connections]`: each server's table (transport,
/// id, timeouts, fields) and that every named connection exists.
fn validate_mcp(file: &FileConfig) -> Result<(), ConfigError> {
    for (id, server) in &file.mcp.servers {
        server
            .transport(id)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        if let Some(connection) = &server.connection
            && !file.connections.contains_key(connection)
        {
            return Err(ConfigError::Invalid(format!(
                "mcp.servers.{id}.connection names `{connection}`, but there is no [connections.{connection}]"
            )));
        }
    }
    for (name, connection) in &file.connections {
        if connection.env.trim().is_empty() {
            return Err(ConfigError::Invalid(format!(
                "connections.{name}.env must name an environment variable"
            )));
        }
    }
    Ok(())
}

/// Checks `[tools.web_search]`: an http(s) `url` (required for SearXNG), a key
/// variable only for a provider that takes one, the ranges of `timeout_ms` and
/// `max_results`, and the `allow_private` entries.
fn validate_tools(tools: &ToolsConfig) -> Result<(), ConfigError> {
    let Some(search) = &tools.web_search else {
        return Ok(());
    };
    let invalid = |what: String| Err(ConfigError::Invalid(format!("tools.web_search.{what}")));
    let provider = search.provider.as_str();
    match &search.url {
        Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
            return invalid(format!(
                "url must start with http:// or https:// (got {url:?})"
            ));
        }
        None if search.provider.default_endpoint().is_none() => {
            return invalid(format!(
                "url is required for provider `{provider}` (the instance's base URL, e.g. \"http://127.0.0.1:8888\")"
            ));
        }
        _ => {}
    }
    if let Some(env) = &search.api_key_env {
        if !search.provider.needs_key() {
            return invalid(format!("api_key_env: provider `{provider}` takes no key"));
        }
        if env.trim().is_empty() {
            return invalid("api_key_env must name an environment variable".to_owned());
        }
    }
    if search.timeout_ms == 0 {
        return invalid("timeout_ms must be at least 1".to_owned());
    }
    let max = ai_tools::builtin::MAX_SEARCH_RESULTS;
    if !(1..=max).contains(&search.max_results) {
        return invalid(format!(
            "max_results must be 1 to {max} (got {})",
            search.max_results
        ));
    }
    if let Err(e) = ai_tools::capability::NetAllowlist::parse(&search.allow_private) {
        return invalid(format!("allow_private: {e}"));
    }
    Ok(())
}

/// Checks the per-call settings of `[model]` (ranges the type does not express).
fn validate_model_settings(model: &ModelConfig) -> Result<(), ConfigError> {
    if let Some(t) = model.temperature
        && !(t.is_finite() && t >= 0.0)
    {
        return Err(ConfigError::Invalid(format!(
            "model.temperature must be a number of at least 0 (got {t})"
        )));
    }
    if let Some(budget) = model.thinking_budget_tokens {
        if !matches!(model.api, ModelApi::Anthropic | ModelApi::Gemini) {
            return Err(ConfigError::Invalid(
                "model.thinking_budget_tokens needs model.api = \"anthropic\" or \"gemini\" (for OpenAI reasoning models use model.reasoning_effort)".into(),
            ));
        }
        if budget < 1024 {
            return Err(ConfigError::Invalid(format!(
                "model.thinking_budget_tokens must be at least 1024 (got {budget})"
            )));
        }
    }
    if model.api == ModelApi::Anthropic {
        let openai_only = [
            ("model.extra_body", !model.extra_body.is_empty()),
            ("model.strict_tools", model.strict_tools),
            (
                "model.reasoning_effort (use model.thinking_budget_tokens)",
                model.reasoning_effort.is_some(),
            ),
        ];
        if let Some((key, _)) = openai_only.iter().find(|(_, set)| *set) {
            return Err(ConfigError::Invalid(format!(
                "{key} is for model.api = \"openai\"; the Anthropic wire does not send it"
            )));
        }
    }
    if model.prompt_caching && model.api != ModelApi::Anthropic {
        return Err(ConfigError::Invalid(
            "model.prompt_caching needs model.api = \"anthropic\" (OpenAI caches prompts by itself)".into(),
        ));
    }
    if model.max_tokens == Some(0) {
        return Err(ConfigError::Invalid(
            "model.max_tokens must be at least 1".into(),
        ));
    }
    if model
        .reasoning_effort
        .as_deref()
        .is_some_and(|e| e.trim().is_empty())
    {
        return Err(ConfigError::Invalid(
            "model.reasoning_effort must not be empty".into(),
        ));
    }
    Ok(())
}

/// Checks `[pricing]`: finite prices of at least 0.
fn validate_pricing(pricing: &BTreeMap<String, PriceConfig>) -> Result<(), ConfigError> {
    for (model, price) in pricing {
        let prices = [
            price.prompt_per_million,
            price.completion_per_million,
            price.cached_prompt_per_million.unwrap_or(0.0),
        ];
        if prices.iter().any(|p| !(p.is_finite() && *p >= 0.0)) {
            return Err(ConfigError::Invalid(format!(
                "pricing.{model:?}: prices must be numbers of at least 0"
            )));
        }
    }
    Ok(())
}

/// Names of the graphs every registry has, whether or not the file defines them.
pub const BUILTIN_GRAPHS: &[&str] = &["chat"];

/// Checks `[graphs]`: usable names, known subagents, no self-reference, depth at
/// most 1 and limits and budgets of at least 1.
fn validate_graphs(graphs: &BTreeMap<String, GraphConfig>) -> Result<(), ConfigError> {
    let invalid = |name: &str, what: String| ConfigError::Invalid(format!("graphs.{name}: {what}"));
    for (name, graph) in graphs {
        if ToolId::graph(name).is_err() {
            return Err(invalid(
                name,
                "the name must be usable in the tool id graph__<name> (ASCII letters, digits, `_` and `-`, not starting with `_`, at most 64 characters in all)".into(),
            ));
        }
        for sub in &graph.subagents {
            if sub == name {
                return Err(invalid(
                    name,
                    format!("lists itself as a subagent (`{sub}`)"),
                ));
            }
            let Some(child) = graphs.get(sub) else {
                if BUILTIN_GRAPHS.contains(&sub.as_str()) {
                    continue;
                }
                let known: Vec<&str> = graphs
                    .keys()
                    .map(String::as_str)
                    .chain(
                        BUILTIN_GRAPHS
                            .iter()
                            .copied()
                            .filter(|b| !graphs.contains_key(*b)),
                    )
                    .collect();
                return Err(invalid(
                    name,
                    format!("unknown subagent `{sub}` (graphs: {})", known.join(", ")),
                ));
            };
            if !child.subagents.is_empty() {
                return Err(invalid(
                    name,
                    format!(
                        "subagent `{sub}` has subagents of its own; subagents nest at most one level deep"
                    ),
                ));
            }
        }
        if graph
            .tools
            .iter()
            .flatten()
            .any(|t| t.as_str().trim().is_empty())
        {
            return Err(invalid(
                name,
                "tools must not contain an empty pattern".into(),
            ));
        }
        if graph.limits.max_iterations == Some(0) {
            return Err(invalid(
                name,
                "limits.max_iterations must be at least 1".into(),
            ));
        }
        let budget = &graph.budget;
        for (key, zero) in [
            ("max_wall_ms", budget.max_wall_ms == 0),
            ("max_model_requests", budget.max_model_requests == 0),
            ("max_total_tokens", budget.max_total_tokens == 0),
            ("max_result_bytes", budget.max_result_bytes == 0),
        ] {
            if zero {
                return Err(invalid(name, format!("budget.{key} must be at least 1")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_values_name_line_and_column() {
        let err = parse(
            "[model]\nmodel = \"m\"\nbase_ur = \"x\"\n",
            Path::new("a.toml"),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("line 3, column 1"), "{text}");
        assert!(text.contains("base_ur"), "{text}");

        let err = parse("[limits]\nmax_iterations = \"many\"\n", Path::new("a.toml")).unwrap_err();
        assert!(err.to_string().contains("line 2, column 18"), "{err}");

        let err = parse(
            "[policy]\nrequire_approval = [\"sometimes\"]\n",
            Path::new("a.toml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn precedence_is_defaults_file_env_flags() {
        let dir = std::env::temp_dir().join(format!("agent-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agent.toml");
        std::fs::write(
            &path,
            "[model]\nbase_url = \"http://file\"\nmodel = \"file-model\"\n",
        )
        .unwrap();

        let cfg = load(&dir, EnvOverrides::default(), FlagOverrides::default()).unwrap();
        assert_eq!(cfg.file.model.base_url.as_deref(), Some("http://file"));
        assert_eq!(cfg.source, ConfigSource::File(path.clone()));
        assert_eq!(cfg.workspace_root, dir);

        let env = EnvOverrides {
            base_url: Some("http://env".into()),
            model: Some("env-model".into()),
            api_key: Some("sk-secret".into()),
        };
        let cfg = load(&dir, env.clone(), FlagOverrides::default()).unwrap();
        assert_eq!(cfg.file.model.base_url.as_deref(), Some("http://env"));
        assert_eq!(cfg.file.model.model, "env-model");
        assert!(!format!("{cfg:?}").contains("sk-secret"));

        let flags = FlagOverrides {
            model: Some("flag-model".into()),
            base_url: Some("https://flag".into()),
            workspace: Some(PathBuf::from("sub")),
            config: None,
            api: None,
        };
        let cfg = load(&dir, env, flags).unwrap();
        assert_eq!(cfg.file.model.base_url.as_deref(), Some("https://flag"));
        assert_eq!(cfg.file.model.model, "flag-model");
        assert_eq!(cfg.workspace_root, dir.join("sub"));

        let bad = FlagOverrides {
            base_url: Some("ftp://x".into()),
            ..FlagOverrides::default()
        };
        assert!(matches!(
            load(&dir, EnvOverrides::default(), bad),
            Err(ConfigError::Invalid(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn defaults_allow_builtins_and_require_approval_for_side_effects() {
        let policy = PolicyConfig::default().to_policy();
        assert!(policy.allow.contains(&"core__*".into()));
        assert!(policy.require_approval.contains(&ToolEffect::StateChange));
        assert!(
            policy
                .require_approval
                .contains(&ToolEffect::ExternalSideEffect)
        );
        assert!(!policy.require_approval.contains(&ToolEffect::ReadOnly));
    }

    #[test]
    fn model_settings_parse_and_unknown_ones_are_errors() {
        let text = r#"
[model]
temperature = 0.7
max_tokens = 512
max_tokens_field = "max_completion_tokens"
seed = -3
reasoning_effort = "low"
total_timeout_ms = 0
named_tool_choice = "required"

[model.extra_body]
top_k = 40
chat_template_kwargs = { enable_thinking = false }
stop = ["</s>"]
"#;
        let model = parse(text, Path::new("a.toml")).unwrap().model;
        assert_eq!(model.temperature, Some(0.7));
        assert_eq!(model.max_tokens, Some(512));
        assert_eq!(model.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        assert_eq!(model.seed, Some(-3));
        assert_eq!(model.reasoning_effort.as_deref(), Some("low"));
        assert_eq!(model.total_timeout_ms, 0);
        assert_eq!(
            model.named_tool_choice,
            NamedToolChoice::RequiredWithOnlyThatTool
        );
        assert_eq!(
            Value::Object(model.extra_body),
            serde_json::json!({"top_k": 40, "chat_template_kwargs": {"enable_thinking": false}, "stop": ["</s>"]})
        );

        let defaults = ModelConfig::default();
        assert_eq!(defaults.total_timeout_ms, 600_000);
        assert_eq!(defaults.named_tool_choice, NamedToolChoice::Object);
        assert_eq!(defaults.temperature, None);

        let err = parse(
            "[model]\ntemperature = 0.5\ntop_p = 0.9\n",
            Path::new("a.toml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 3, column 1"), "{err}");
        assert!(err.to_string().contains("top_p"), "{err}");
        let err = parse(
            "[model]\nnamed_tool_choice = \"sometimes\"\n",
            Path::new("a.toml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 2, column 21"), "{err}");
        let err = parse("[model]\nseed = \"x\"\n", Path::new("a.toml")).unwrap_err();
        assert!(err.to_string().contains("line 2, column 8"), "{err}");
    }

    #[test]
    fn out_of_range_model_settings_are_invalid() {
        let dir = std::env::temp_dir().join(format!("agent-config-range-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agent.toml");
        for bad in [
            "temperature = -0.5",
            "temperature = nan",
            "max_tokens = 0",
            "reasoning_effort = \" \"",
        ] {
            std::fs::write(&path, format!("[model]\n{bad}\n")).unwrap();
            let result = load(&dir, EnvOverrides::default(), FlagOverrides::default());
            assert!(
                matches!(result, Err(ConfigError::Invalid(_))),
                "{bad}: {result:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn graphs_parse_and_unknown_graph_keys_name_line_and_column() {
        let text = r#"
[limits]
max_iterations = 10
max_total_tokens = 9000

[graphs.main]
description = "Main."
subagents = ["researcher"]

[graphs.researcher]
description = "Researches."
system = "You research."
tools = ["core__get_current_time", "core__read*"]

[graphs.researcher.limits]
max_iterations = 4

[graphs.researcher.budget]
max_wall_ms = 5000
max_result_bytes = 100
"#;
        let file = parse(text, Path::new("a.toml")).unwrap();
        let researcher = &file.graphs["researcher"];
        assert_eq!(researcher.system.as_deref(), Some("You research."));
        assert_eq!(researcher.tools.as_ref().unwrap().len(), 2);
        let limits = researcher.limits.over(&file.limits);
        assert_eq!(
            (limits.max_iterations, limits.max_total_tokens),
            (4, Some(9000))
        );
        assert_eq!(researcher.budget.max_wall_ms, 5000);
        assert_eq!(researcher.budget.max_model_requests, 8);
        assert_eq!(file.graphs["main"].subagents, ["researcher"]);
        validate_graphs(&file.graphs).unwrap();

        for (bad, line, col) in [
            ("[graphs.a]\nprompt = \"x\"\n", 2, 1),
            ("[graphs.a]\nbudget = { max_wall = 1 }\n", 2, 12),
            (
                "[graphs.a.limits]\nmax_iterations = 2\nmax_turns = 3\n",
                3,
                1,
            ),
            ("[graphs.a]\ntools = \"core__*\"\n", 2, 9),
        ] {
            let err = parse(bad, Path::new("a.toml")).unwrap_err().to_string();
            assert!(
                err.contains(&format!("line {line}, column {col}")),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn graph_references_are_checked_at_load() {
        let check = |text: &str| validate_graphs(&parse(text, Path::new("a.toml")).unwrap().graphs);
        for (bad, needle) in [
            (
                "[graphs.a]\nsubagents = [\"nope\"]\n",
                "unknown subagent `nope`",
            ),
            ("[graphs.a]\nsubagents = [\"a\"]\n", "lists itself"),
            (
                "[graphs.a]\nsubagents = [\"b\"]\n[graphs.b]\nsubagents = [\"c\"]\n[graphs.c]\n",
                "at most one level deep",
            ),
            ("[graphs.\"a b\"]\n", "graph__<name>"),
            (
                "[graphs.a]\nlimits = { max_iterations = 0 }\n",
                "at least 1",
            ),
            (
                "[graphs.a]\nbudget = { max_model_requests = 0 }\n",
                "budget.max_model_requests",
            ),
        ] {
            let err = check(bad).unwrap_err();
            assert!(matches!(err, ConfigError::Invalid(_)), "{bad}");
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
        // The built-in `chat` graph may be a subagent.
        check("[graphs.a]\nsubagents = [\"chat\"]\n").unwrap();
    }

    #[test]
    fn mcp_servers_and_connections_parse_and_are_checked() {
        let text = r#"
[mcp.servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
env = { LOG_LEVEL = "warn" }
startup_timeout_s = 10
call_timeout_s = 60

[mcp.servers.notes]
url = "http://127.0.0.1:8765/mcp"
connection = "notes"
[mcp.servers.notes.tools.search]
effect = "read_only"

[connections.notes]
type = "bearer"
env = "NOTES_TOKEN"

[policy]
allow = ["core__*", "mcp__everything__echo", "mcp__notes__*"]
"#;
        let path = Path::new("agent.toml");
        let file = parse(text, path).unwrap();
        validate_mcp(&file).unwrap();
        assert_eq!(
            file.mcp.servers["notes"].tools["search"].effect,
            Some(ToolEffect::ReadOnly)
        );
        assert_eq!(file.connections["notes"].env, "NOTES_TOKEN");
        // Starting programs and sending secrets needs the user's trust.
        let keys = crate::trust::loosened_keys(&file);
        assert!(
            keys.iter().any(|k| k.starts_with("mcp.servers.everything")),
            "{keys:?}"
        );
        assert!(
            keys.iter().any(|k| k.starts_with("connections.notes")),
            "{keys:?}"
        );

        // Unknown keys are errors with line and column.
        let err = parse("[mcp.servers.a]\ncommand = \"x\"\ncomand = \"y\"\n", path).unwrap_err();
        assert!(err.to_string().contains("line 3, column 1"), "{err}");
        let err = parse("[connections.a]\ntype = \"basic\"\nenv = \"X\"\n", path).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        // Semantic checks name the key.
        for (bad, needle) in [
            (
                "[mcp.servers.a]\ncommand = \"x\"\nurl = \"http://h/mcp\"\n",
                "exactly one of",
            ),
            ("[mcp.servers.A]\ncommand = \"x\"\n", "mcp server id `A`"),
            (
                "[mcp.servers.a]\nurl = \"http://h/mcp\"\nconnection = \"gh\"\n",
                "no [connections.gh]",
            ),
            (
                "[mcp.servers.a]\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer x\" }\n",
                "name a `connection`",
            ),
            (
                "[mcp.servers.a]\ncommand = \"x\"\ncall_timeout_s = 0\n",
                "call_timeout_s",
            ),
        ] {
            let file = parse(bad, path).unwrap();
            let err = validate_mcp(&file).unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn web_search_settings_parse_and_are_checked() {
        let path = Path::new("agent.toml");
        let file = parse(
            "[tools.web_search]\nprovider = \"searxng\"\nurl = \"http://127.0.0.1:8888\"\nallow_private = [\"127.0.0.1:8888\"]\n",
            path,
        )
        .unwrap();
        validate_tools(&file.tools).unwrap();
        let search = file.tools.web_search.unwrap();
        assert_eq!(search.provider, ai_host::SearchProvider::Searxng);
        assert_eq!(search.timeout_ms, DEFAULT_WEB_SEARCH_TIMEOUT_MS);
        assert_eq!(search.max_results, 5);
        assert_eq!(search.key_env(), None);

        let brave = parse("[tools.web_search]\nprovider = \"brave\"\n", path).unwrap();
        validate_tools(&brave.tools).unwrap();
        let brave = brave.tools.web_search.unwrap();
        assert_eq!(brave.key_env(), Some("BRAVE_API_KEY"));
        assert_eq!(brave.url, None);
        let tavily = parse(
            "[tools.web_search]\nprovider = \"tavily\"\napi_key_env = \"MY_TAVILY\"\n",
            path,
        )
        .unwrap();
        assert_eq!(
            tavily.tools.web_search.unwrap().key_env(),
            Some("MY_TAVILY")
        );
        assert_eq!(FileConfig::default().tools.web_search, None);

        // Unknown providers and keys are parse errors with line and column.
        let err = parse("[tools.web_search]\nprovider = \"google\"\n", path).unwrap_err();
        assert!(err.to_string().contains("line 2, column 12"), "{err}");
        assert!(err.to_string().contains("searxng"), "{err}");
        let err = parse(
            "[tools.web_search]\nprovider = \"brave\"\napi_key = \"sk\"\n",
            path,
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 3, column 1"), "{err}");
        assert!(parse("[tools.web_search]\nurl = \"http://x\"\n", path).is_err());
        assert!(parse("[tools.web_fetch]\n", path).is_err());

        for (bad, needle) in [
            ("provider = \"searxng\"", "url is required"),
            (
                "provider = \"brave\"\nurl = \"ftp://x\"",
                "url must start with",
            ),
            (
                "provider = \"searxng\"\nurl = \"http://x\"\napi_key_env = \"K\"",
                "takes no key",
            ),
            ("provider = \"brave\"\napi_key_env = \" \"", "api_key_env"),
            ("provider = \"brave\"\ntimeout_ms = 0", "timeout_ms"),
            ("provider = \"brave\"\nmax_results = 0", "max_results"),
            ("provider = \"brave\"\nmax_results = 11", "max_results"),
            (
                "provider = \"brave\"\nallow_private = [\"not a host!\"]",
                "allow_private",
            ),
        ] {
            let file = parse(&format!("[tools.web_search]\n{bad}\n"), path).unwrap();
            let err = validate_tools(&file.tools).unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
            assert!(err.contains("tools.web_search."), "{bad}: {err}");
        }
    }

    #[test]
    fn the_example_config_in_the_repository_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../agent.example.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let file = parse(&text, &path).unwrap();
        validate_graphs(&file.graphs).unwrap();
        assert_eq!(file.graphs["main"].subagents, ["researcher"]);
        assert_eq!(crate::trust::loosened_keys(&file), Vec::<String>::new());

        // The commented `[tools.web_search]` section, uncommented, is a valid table.
        let section: String = text
            .lines()
            .skip_while(|l| *l != "# [tools.web_search]")
            .take_while(|l| !l.is_empty())
            .map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or(l)))
            .collect();
        let file = parse(&section, &path).unwrap();
        validate_tools(&file.tools).unwrap();
        let search = file.tools.web_search.unwrap();
        assert_eq!(search.provider, ai_host::SearchProvider::Brave);
        assert_eq!(search.key_env(), Some("BRAVE_API_KEY"));
    }

    #[test]
    fn the_api_picks_its_defaults_and_refuses_the_other_wires_settings() {
        let dir = std::env::temp_dir();
        let openai = load(&dir, EnvOverrides::default(), FlagOverrides::default()).unwrap();
        assert_eq!(openai.file.model.api, ModelApi::OpenAi);
        assert_eq!(openai.file.model.model, "gpt-4o-mini");
        assert_eq!(openai.file.model.key_env(), "OPENAI_API_KEY");
        let flags = FlagOverrides {
            api: Some(ModelApi::Anthropic),
            ..FlagOverrides::default()
        };
        let anthropic = load(&dir, EnvOverrides::default(), flags).unwrap();
        assert_eq!(anthropic.file.model.model, "claude-sonnet-4-5");
        assert_eq!(anthropic.file.model.key_env(), "ANTHROPIC_API_KEY");
        assert_eq!(
            anthropic.file.model.api.base_url_env(),
            "ANTHROPIC_BASE_URL"
        );
        assert_eq!("anthropic".parse::<ModelApi>(), Ok(ModelApi::Anthropic));
        assert!("claude".parse::<ModelApi>().is_err());

        let file = parse(
            "[model]\napi = \"anthropic\"\nthinking_budget_tokens = 2048\nprompt_caching = true\napi_key_env = \"MY_KEY\"\n",
            Path::new("agent.toml"),
        )
        .unwrap();
        assert_eq!(file.model.thinking_budget_tokens, Some(2048));
        assert!(file.model.prompt_caching);
        assert_eq!(file.model.key_env(), "MY_KEY");
        assert!(validate_model_settings(&file.model).is_ok());

        let refused = [
            "[model]\nthinking_budget_tokens = 2048\n",
            "[model]\nprompt_caching = true\n",
            "[model]\napi = \"anthropic\"\nthinking_budget_tokens = 100\n",
            "[model]\napi = \"anthropic\"\nreasoning_effort = \"high\"\n",
            "[model]\napi = \"anthropic\"\nstrict_tools = true\n",
            "[model]\napi = \"anthropic\"\n[model.extra_body]\ntop_k = 3\n",
        ];
        for text in refused {
            let file = parse(text, Path::new("agent.toml")).unwrap();
            assert!(
                matches!(
                    validate_model_settings(&file.model),
                    Err(ConfigError::Invalid(_))
                ),
                "{text}"
            );
        }
        assert!(parse("[model]\napi = \"vertex\"\n", Path::new("agent.toml")).is_err());
    }

    #[test]
    fn prices_make_costs_in_millionths() {
        let file = parse(
            "[pricing.\"gpt-test\"]\nprompt_per_million = 2.5\ncached_prompt_per_million = 1.25\ncompletion_per_million = 10.0\n",
            Path::new("agent.toml"),
        )
        .unwrap();
        let price = file.pricing["gpt-test"];
        // 1,000 prompt tokens of which 400 cached, 100 completion tokens:
        // 600 * 2.5 + 400 * 1.25 + 100 * 10 = 3,000 millionths.
        assert_eq!(price.cost_micros(1_000, 400, 100), 3_000);
        assert_eq!(
            price.cost_micros(10, 50, 0),
            13,
            "cached is at most the prompt"
        );
        let bad = parse(
            "[pricing.m]\nprompt_per_million = -1.0\n",
            Path::new("a.toml"),
        )
        .unwrap();
        assert!(validate_pricing(&bad.pricing).is_err());
    }

    #[test]
    fn raised_limits_name_every_server_limit_above_its_default_and_nothing_else() {
        let defaults = ServeConfig::default();
        assert!(defaults.raised_limits().is_empty());
        let raised = ServeConfig {
            host: "0.0.0.0".into(),
            max_body_bytes: defaults.max_body_bytes + 1,
            body_timeout_ms: defaults.body_timeout_ms + 1,
            max_streams: defaults.max_streams + 1,
            client_stream_share: defaults.client_stream_share + 1,
            max_connections: defaults.max_connections + 1,
            max_connections_per_client: defaults.max_connections_per_client + 1,
            max_unauthenticated: defaults.max_unauthenticated + 1,
            unauthenticated_timeout_ms: defaults.unauthenticated_timeout_ms + 1,
            header_read_timeout_ms: defaults.header_read_timeout_ms + 1,
            write_timeout_ms: defaults.write_timeout_ms + 1,
            detach_grace_ms: defaults.detach_grace_ms + 1,
            allowed_origins: vec!["https://app.example".into()],
            max_file_bytes: defaults.max_file_bytes + 1,
            max_request_file_bytes: defaults.max_request_file_bytes + 1,
            ..defaults.clone()
        };
        let every: Vec<String> = SERVER_LIMITS
            .iter()
            .map(|key| format!("server.{key}"))
            .collect();
        assert_eq!(raised.raised_limits(), every);
        let lowered = ServeConfig {
            max_body_bytes: 1,
            body_timeout_ms: 1,
            ..defaults
        };
        assert!(lowered.raised_limits().is_empty());
    }

    #[test]
    fn raised_keys_compare_numbers_and_lists_and_never_count_an_unset_value() {
        let current = serde_json::json!({"n": 3, "list": ["a"], "unset": null, "same": 2});
        let defaults = serde_json::json!({"n": 2, "list": [], "unset": 5, "same": 2});
        let keys = ["n", "list", "unset", "same"];
        assert_eq!(raised_keys(&current, &defaults, &keys), ["n", "list"]);
        // A key either side lacks counts as raised.
        assert_eq!(
            raised_keys(&current, &defaults, &["misspelled"]),
            ["misspelled"]
        );
    }
}
