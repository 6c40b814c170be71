//! The Anthropic, Responses and Gemini wires against a real peer: LiteLLM's
//! proxy (`litellm[proxy]`, pinned in `tests/litellm/requirements.txt`,
//! installed by `cargo xtask test-env`) serving `/v1/messages`, `/v1/responses`
//! and `/v1beta/models/{model}:streamGenerateContent` on loopback, in front of
//! the scripted streaming provider of `tests/litellm/scripted_provider.py`.
//!
//! LiteLLM translates our Messages API request into its own chat format for the
//! provider and the provider's chunks back into Messages API events, so this checks
//! our encoder and decoder against another implementation of the format, quirks
//! included (it repeats the first thinking text in `content_block_start`). The
//! provider logs every request it receives: the test asserts on what reached the
//! model, not only on what we sent.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Home, json_lines};

/// LiteLLM's master key for the test (the proxy refuses to start without one);
/// the agent sends it as `x-api-key`.
const MASTER_KEY: &str = "sk-agent-test-7f3c9a1e5b2d4f6a8c0e1b3d5f7a9c2e";
/// What the scripted provider signs its thinking with.
const SIGNATURE: &str = "sig-EqQBCkgIARABGAIiQL/+scripted==signature";
/// The scripted provider's thinking.
const THINKING: &str = "The user wants the time. I should call the clock tool.";

/// The `litellm` command: `$AGENT_TEST_LITELLM`, else the workspace's
/// `target/litellm-venv` (made by `cargo xtask test-env`).
fn litellm() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENT_TEST_LITELLM") {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/litellm-venv/bin/litellm");
    assert!(
        venv.exists(),
        "the live Anthropic-wire test needs LiteLLM's proxy: run `cargo xtask test-env` \
         (or `cargo xtask test`), or set AGENT_TEST_LITELLM to a `litellm` command"
    );
    venv
}

/// A running proxy, killed when dropped.
struct Proxy {
    child: tokio::process::Child,
    url: String,
    log: PathBuf,
    output: PathBuf,
}

impl Proxy {
    /// Starts the proxy in `dir` and waits until it answers (at most 120 s: a cold
    /// start imports a lot of Python).
    async fn start(dir: &Path) -> Self {
        let port = crate::support::free_port();
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/litellm/config.yaml");
        let log = dir.join("provider.jsonl");
        let output = dir.join("proxy.log");
        let child = tokio::process::Command::new(litellm())
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .current_dir(dir)
            .env("LITELLM_MASTER_KEY", MASTER_KEY)
            // The bundled price map: no fetch from the network at start.
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("SCRIPTED_PROVIDER_LOG", &log)
            // Where the Gemini route's model (`scripted-gemini`) is served: the
            // proxy's own chat completions (see `config.yaml`).
            .env(
                "SCRIPTED_GATEWAY_BASE",
                format!("http://127.0.0.1:{port}/v1"),
            )
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&output).unwrap())
            .stderr(std::fs::File::create(dir.join("proxy.err")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let proxy = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
            output,
        };
        proxy.wait_ready().await;
        proxy
    }

    async fn wait_ready(&self) {
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(client_tls::client_config().unwrap())
            .build()
            .unwrap();
        let health = format!("{}/health/liveliness", self.url);
        for _ in 0..240 {
            if let Ok(response) = client.get(&health).send().await
                && response.status().is_success()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("LiteLLM did not start: {}", self.diagnostics());
    }

    /// What the proxy printed (for failure messages).
    fn diagnostics(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let err = read(&self.output.with_file_name("proxy.err"));
        let tail: String = err
            .chars()
            .rev()
            .take(4000)
            .collect::<String>()
            .chars()
            .rev()
            .collect();
        format!("{}\n{tail}", read(&self.output))
    }

    /// The requests the scripted provider received, in order.
    fn provider_requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The global flags that point the agent at the proxy's `/v1/messages`.
fn anthropic_args(proxy: &Proxy) -> Vec<String> {
    [
        "--api",
        "anthropic",
        "--base-url",
        &proxy.url,
        "--model",
        "scripted-claude",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The global flags that point the agent at the proxy's `/v1/responses`.
fn responses_args(proxy: &Proxy) -> Vec<String> {
    let base = format!("{}/v1", proxy.url);
    let args = [
        "--api",
        "responses",
        "--base-url",
        &base,
        "--model",
        "scripted-claude",
    ];
    args.map(str::to_owned).to_vec()
}

/// The global flags that point the agent at the proxy's
/// `/v1beta/models/scripted-gemini:streamGenerateContent`.
fn gemini_args(proxy: &Proxy) -> Vec<String> {
    [
        "--api",
        "gemini",
        "--base-url",
        &proxy.url,
        "--model",
        "scripted-gemini",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// `agent ARGS` in `home`, with the proxy's master key as every API's key.
fn proxied(home: &Home, args: &[&str]) -> tokio::process::Command {
    let mut command = home.command(None, args);
    command
        .env("ANTHROPIC_API_KEY", MASTER_KEY)
        .env("OPENAI_API_KEY", MASTER_KEY)
        .env("GEMINI_API_KEY", MASTER_KEY)
        .env_remove("GEMINI_BASE_URL");
    command
}

/// [`proxied`] run to its end (within 120 s).
async fn run_proxied(home: &Home, args: &[&str]) -> std::process::Output {
    tokio::time::timeout(Duration::from_secs(120), proxied(home, args).output())
        .await
        .expect("the agent hung")
        .unwrap()
}

/// A home whose `agent.toml` turns thinking on (the flags choose the API, so the
/// file loosens nothing and needs no trust).
fn thinking_home() -> Home {
    let home = Home::new("sk-openai-unused");
    home.write_config("[model]\nthinking_budget_tokens = 1024\n");
    home
}

/// `agent --api anthropic chat` and `agent --api anthropic serve` through
/// LiteLLM's `/v1/messages`, then the Responses and Gemini wires through its
/// `/v1/responses` and `streamGenerateContent` (one proxy for all: it takes
/// seconds to start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_wire_through_litellm() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::LiteLlm) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let proxy = Proxy::start(dir.path()).await;
    chat_tool_loop_with_signed_thinking(&proxy).await;
    serve_streams_reasoning_parts(&proxy, "anthropic").await;
    the_gateways_cost_is_the_recorded_cost(&proxy).await;
    responses_tool_loop_sends_the_reasoning_back(&proxy).await;
    serve_streams_reasoning_parts(&proxy, "responses").await;
    gemini_tool_loop_through_litellm(&proxy).await;
}

/// `agent --api gemini chat` through LiteLLM's
/// `/v1beta/models/scripted-gemini:streamGenerateContent`: a two-turn tool
/// loop, the call's result as the provider received it, and the scripted answer.
///
/// No thought signature is checked: LiteLLM 1.106.2 carries no thinking through
/// this route, in either direction. The route
/// (`google_stream_generate_content` in litellm/proxy/google_endpoints/endpoints.py)
/// hands a non-Gemini model to `GoogleGenAIAdapter`
/// (litellm/google_genai/adapters/transformation.py), which translates to and
/// from its chat format:
/// - Out: `_transform_openai_delta_to_google_genai_parts_with_accumulation`
///   makes parts of a delta's `content` and `tool_calls` only, so the
///   provider's `reasoning_content` and signed `thinking_blocks` are dropped:
///   no `thought` part, no `thoughtSignature`. The first chunk is
///   `{"candidates": [{"content": {"parts": [{"functionCall": {"name":
///   "core__get_current_time", "args": {"timezone": "UTC"}}}], "role": "model"},
///   "finishReason": null, "index": 0, "safetyRatings": []}]}` (the call's id is
///   dropped as well).
/// - In: `_transform_contents_to_messages` reads a `model` part's `text` and
///   `functionCall` only: a `thoughtSignature` would be dropped, and a
///   `thought: true` part's text would join the assistant's visible content.
///   It names each call `call_{function name}` and makes a `functionResponse`
///   the `tool` message answering that id, its content the JSON of `response`.
/// - The request's `thinkingConfig` is dropped too:
///   `translate_generate_content_to_completion` keeps only `temperature`,
///   `maxOutputTokens`, `topP` and `stopSequences` of the `generationConfig`.
///
/// `scripted-gemini` reaches the scripted provider through the proxy's own
/// `/v1/chat/completions` (see `config.yaml`), whose chunks do carry the
/// thinking and its signature (`thinking_blocks`): the loss is the adapter's.
/// So what holds is checked: no thinking reaches the agent, and none (nor the
/// provider's signature) goes back in the second request.
async fn gemini_tool_loop_through_litellm(proxy: &Proxy) {
    // Thinking asked for, as against Gemini itself.
    let home = thinking_home();
    let before = proxy.provider_requests().len();
    let mut args = gemini_args(proxy);
    args.extend(["chat", "--json", "What time is it?"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (stdout, events) = succeeded_events(proxy, &home, &args).await;
    let of = |kind: &'static str| events.iter().filter(move |e| e["type"] == kind);

    // The model's call reached the agent, with its arguments, and the clock ran.
    let start = of("tool_call_start")
        .next()
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(start["tool_name"], "core__get_current_time", "{start}");
    assert_eq!(start["args"], json!({"timezone": "UTC"}), "{start}");
    let result = of("tool_call_result")
        .next()
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(result["tool_name"], "core__get_current_time", "{result}");
    assert_eq!(result["ok"], true, "{result}");
    // No thinking came out of the proxy.
    assert_eq!(of("reasoning_delta").count(), 0, "{stdout}");
    assert!(!stdout.contains(SIGNATURE), "{stdout}");

    let requests = proxy.provider_requests();
    assert_eq!(requests.len() - before, 2, "{requests:#?}");
    let second = &requests[before + 1];
    assert!(
        !second.to_string().contains(SIGNATURE),
        "no signature went back: {second:#}"
    );
    let messages = second["messages"].as_array().unwrap();
    // The assistant turn came back as its call, without thinking.
    let assistant = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("{messages:#?}"));
    let call = &assistant["tool_calls"][0];
    assert_eq!(call["id"], "call_core__get_current_time", "{assistant:#}");
    assert_eq!(
        call["function"]["name"], "core__get_current_time",
        "{assistant:#}"
    );
    assert!(
        assistant["thinking_blocks"].is_null() && assistant["reasoning_content"].is_null(),
        "{assistant:#}"
    );
    // The result reached the model as the tool's answer to that call: LiteLLM's
    // JSON of the `functionResponse.response` the agent sent, `{"result": ..}`
    // around the clock's own JSON.
    let tool = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("{messages:#?}"));
    assert_eq!(
        tool["tool_call_id"], "call_core__get_current_time",
        "{tool:#}"
    );
    let content = tool["content"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool:#}"));
    let response: Value = serde_json::from_str(content).unwrap();
    let clock: Value = serde_json::from_str(response["result"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {content}"));
    assert_eq!(clock, result["result"], "{content}");
    assert_eq!(clock["timezone"], "UTC", "{content}");
    // The answer is the scripted one, which quotes the result as received.
    let final_text: String = of("assistant_final")
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert_eq!(final_text, format!("The clock tool says: {content}"));
}

/// `agent --api responses chat` through LiteLLM's `/v1/responses`: a two-turn
/// tool loop, and the reasoning item of the first turn (its encrypted content,
/// which LiteLLM makes of the provider's signed thinking) sent back on the
/// second request, where the provider receives the thinking and its signature.
async fn responses_tool_loop_sends_the_reasoning_back(proxy: &Proxy) {
    let home = Home::new("sk-openai-unused");
    let before = proxy.provider_requests().len();
    let mut args = responses_args(proxy);
    args.extend(["chat", "--json", "What time is it?"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    clock_tool_loop(proxy, &home, &args).await;
    let requests = proxy.provider_requests();
    assert_eq!(requests.len() - before, 2, "{requests:#?}");
    let second = requests[before + 1]["messages"].to_string();
    assert!(
        second.contains(SIGNATURE),
        "the reasoning came back: {second}"
    );
    assert!(
        second.contains("UTC"),
        "the tool result reached the model: {second}"
    );
}

/// The proxy prices each call (1 and 2 millionths of a dollar per prompt and
/// completion token, in its config) and reports it in the stream's last usage
/// (`usage.cost`): both wires carry it into the usage facts of the run store,
/// where `agent usage` reads it (no `[pricing]` is configured).
async fn the_gateways_cost_is_the_recorded_cost(proxy: &Proxy) {
    for wire in ["anthropic", "openai"] {
        let home = if wire == "anthropic" {
            thinking_home()
        } else {
            Home::new("sk-openai-unused")
        };
        let base = if wire == "openai" {
            format!("{}/v1", proxy.url)
        } else {
            proxy.url.clone()
        };
        let args = [
            "--api",
            wire,
            "--base-url",
            &base,
            "--model",
            "scripted-claude",
            "chat",
            "What time is it?",
        ];
        let output = run_proxied(&home, &args).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{wire}: {stderr}
{}",
            proxy.diagnostics()
        );
        let (code, usage, stderr) = home
            .run(None, &["--api", wire, "usage", "--by", "model", "--json"])
            .await;
        assert_eq!(code, 0, "{stderr}");
        let rows = json_lines(&usage);
        assert_eq!(rows.len(), 1, "{wire}: {usage}");
        let row = &rows[0];
        // Two calls: 20 + 12 and 40 + 8 tokens as the provider counted them.
        let prompt = row["prompt_tokens"].as_u64().unwrap();
        let completion = row["completion_tokens"].as_u64().unwrap();
        assert_eq!(row["calls"], 2, "{wire}: {row}");
        // Grouped by the model the agent was configured with, whatever name
        // the gateway reported for the deployment behind it.
        assert_eq!(row["key"], "scripted-claude", "{wire}: {row}");
        assert_eq!(
            row["cost_micros"].as_u64(),
            Some(prompt + 2 * completion),
            "{wire}: the proxy's cost: {row}"
        );
    }
}

/// Runs `agent ARGS` (a `chat --json`) against the proxy and checks it
/// succeeded: its stdout, and the events it holds.
async fn succeeded_events(proxy: &Proxy, home: &Home, args: &[&str]) -> (String, Vec<Value>) {
    let output = run_proxied(home, args).await;
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{stderr}\n{}",
        proxy.diagnostics()
    );
    let events = json_lines(&stdout);
    (stdout, events)
}

/// Runs `agent ARGS` (a `chat --json` of "What time is it?") against the proxy,
/// with the master key as both APIs' key, and checks the tool loop the scripted
/// provider plays: its thinking streamed once, the clock called, an answer that
/// quotes the clock. Returns the answer.
async fn clock_tool_loop(proxy: &Proxy, home: &Home, args: &[&str]) -> String {
    let (stdout, events) = succeeded_events(proxy, home, args).await;
    let of = |kind: &'static str| events.iter().filter(move |e| e["type"] == kind);

    // The thinking streamed once (LiteLLM's repeated first piece is not doubled).
    let reasoning: String = of("reasoning_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert_eq!(reasoning, THINKING, "{stdout}");
    // The call ran, and the answer quotes its result.
    let result = of("tool_call_result")
        .next()
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(result["tool_name"], "core__get_current_time", "{result}");
    let final_text: String = of("assistant_final")
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert!(final_text.starts_with("The clock tool says: "), "{stdout}");
    final_text
}

/// The model thinks (signed), calls the clock, gets the result as a `tool_result`
/// and answers; the second request carries the thinking and its signature back
/// unchanged.
async fn chat_tool_loop_with_signed_thinking(proxy: &Proxy) {
    let home = thinking_home();
    let mut args = anthropic_args(proxy);
    args.extend(["chat", "--json", "What time is it?"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let final_text = clock_tool_loop(proxy, &home, &args).await;

    let requests = proxy.provider_requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let second = requests[1]["messages"].as_array().unwrap();
    // The assistant turn came back with its thinking and signature unchanged, and
    // the call it made.
    let assistant = second
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("{second:#?}"));
    let thinking = &assistant["thinking_blocks"][0];
    assert_eq!(thinking["signature"], SIGNATURE, "{assistant:#}");
    assert_eq!(thinking["thinking"], THINKING, "{assistant:#}");
    assert_eq!(assistant["tool_calls"][0]["id"], "toolu_scripted_1");
    // The result went back as the tool's answer to that call.
    let tool = second
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("{second:#?}"));
    assert_eq!(tool["tool_call_id"], "toolu_scripted_1");
    let content = tool["content"].to_string();
    assert!(content.contains("UTC"), "{content}");
    assert!(final_text.contains("UTC"), "{final_text}");
}

/// `agent serve` on `wire` (`anthropic`, or `responses`, whose reasoning
/// summaries stream): the UI message stream carries the reasoning as reasoning
/// parts, then the tool call and the answer.
async fn serve_streams_reasoning_parts(proxy: &Proxy, wire: &str) {
    let (home, mut args) = if wire == "anthropic" {
        (thinking_home(), anthropic_args(proxy))
    } else {
        (Home::new("sk-openai-unused"), responses_args(proxy))
    };
    args.extend(["serve", "--port", "0"].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let served = crate::served::Served::spawn(proxied(&home, &args)).await;
    let body = crate::served::chat_body("chat-anthropic", "What time is it?");
    let response = served.post_chat(&body).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.unwrap();
    let chunks = crate::served::ui_chunks(&text);
    let kinds: Vec<&str> = chunks.iter().filter_map(|c| c["type"].as_str()).collect();
    let at = |kind: &str| {
        kinds
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_else(|| panic!("{kind} in {kinds:?}"))
    };
    assert!(at("reasoning-start") < at("reasoning-delta"), "{kinds:?}");
    assert!(
        at("reasoning-delta") < at("tool-input-available"),
        "{kinds:?}"
    );
    assert!(at("tool-output-available") < at("text-delta"), "{kinds:?}");
    let reasoning: String = chunks
        .iter()
        .filter(|c| c["type"] == "reasoning-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect();
    assert_eq!(reasoning, THINKING);
    assert_eq!(kinds.last(), Some(&"finish"), "{kinds:?}");
}
