//! `agent serve`: the chat endpoint (agent-server) with the same model, tools,
//! policy and graph as `agent chat`.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_server::{Access, ChatService, ChatSetup};
use ai_core::CompletionPort;
use sha2::{Digest, Sha256};

use crate::cli::{EXIT_RUN_ERROR, EXIT_USAGE};
use crate::config::AgentConfig;

/// How long open streams may take to end after Ctrl-C.
const DRAIN: Duration = Duration::from_secs(30);

/// The accepted token hashes: `[server] tokens_sha256` plus `AGENT_SERVER_TOKEN`.
fn token_hashes(config: &AgentConfig) -> Result<Vec<[u8; 32]>, String> {
    let mut hashes = Vec::new();
    for (i, hex) in config.file.server.tokens_sha256.iter().enumerate() {
        let bytes: Option<Vec<u8>> = (0..hex.len())
            .step_by(2)
            .map(|j| {
                hex.get(j..j + 2)
                    .and_then(|b| u8::from_str_radix(b, 16).ok())
            })
            .collect();
        let hash: [u8; 32] = bytes
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| format!("server.tokens_sha256[{i}] must be 64 hex digits"))?;
        hashes.push(hash);
    }
    if let Some(token) = std::env::var("AGENT_SERVER_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        hashes.push(Sha256::digest(token.as_bytes()).into());
    }
    Ok(hashes)
}

/// Runs `agent serve` until Ctrl-C.
pub async fn run(
    config: &AgentConfig,
    host: Option<String>,
    port: Option<u16>,
    graph: &str,
) -> ExitCode {
    let host = host.unwrap_or_else(|| config.file.server.host.clone());
    let port = port.unwrap_or(config.file.server.port);
    let ip: IpAddr = match host.parse() {
        Ok(ip) => ip,
        Err(_) if host == "localhost" => IpAddr::from([127, 0, 0, 1]),
        Err(_) => {
            eprintln!("agent: --host must be an IP address (got {host:?})");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let tokens = match token_hashes(config) {
        Ok(tokens) => tokens,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if !ip.is_loopback() && tokens.is_empty() {
        eprintln!(
            "agent: serving on {ip} (not loopback) needs bearer tokens: set [server] tokens_sha256 or AGENT_SERVER_TOKEN"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let mut tools = match crate::tools::bind(config) {
        Ok(tools) => tools,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let sources = match crate::mcp::start(config).await {
        Ok(sources) => sources,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    tools.extend(sources.iter().flat_map(|s| s.tools()));
    let code = serve_with(config, tools, ip, port, tokens, graph).await;
    if let Some(sources) = sources {
        sources.shutdown().await;
    }
    code
}

async fn serve_with(
    config: &AgentConfig,
    mut tools: Vec<ai_core::RegisteredTool>,
    ip: IpAddr,
    port: u16,
    tokens: Vec<[u8; 32]>,
    graph: &str,
) -> ExitCode {
    let tool_ids: Vec<&str> = tools.iter().map(|t| t.spec.id.as_str()).collect();
    let registry = crate::graphs::registry(config, &tool_ids);
    let Some(graph) = registry.get(graph).cloned() else {
        eprintln!("agent: unknown graph `{graph}`");
        return ExitCode::from(EXIT_USAGE);
    };
    match registry.subagent_tools(&graph.name) {
        Ok(subagents) => tools.extend(subagents),
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    }
    let model: Arc<dyn CompletionPort> = match crate::model::build(config) {
        Ok(model) => model,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let policy = crate::graphs::policy_for(config, &graph);
    let selection = graph.clone();
    let service = match ChatService::new(ChatSetup {
        model,
        model_id: config.file.model.model.clone(),
        tools,
        policy,
        system_prompt: graph.system_prompt.clone(),
        limits: graph.limits.clone(),
        settings: graph.settings.clone(),
        select: Some(Arc::new(move |catalog| selection.select_tools(catalog))),
    }) {
        Ok(service) => Arc::new(service),
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let listener = match tokio::net::TcpListener::bind(SocketAddr::new(ip, port)).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("agent: cannot listen on {ip}:{port}: {e}");
            return ExitCode::from(EXIT_RUN_ERROR);
        }
    };
    let bound = match listener.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_RUN_ERROR);
        }
    };
    let mut access = if ip.is_loopback() {
        Access::loopback(bound.port())
    } else {
        Access::tokens(Vec::new())
    };
    access.tokens_sha256 = tokens;
    access.max_body_bytes = config.file.server.max_body_bytes;
    access.max_streams = config.file.server.max_streams;
    // One line on stdout with the address, for people and for scripts.
    println!("agent: serving on http://{bound} (POST /api/chat, GET /api/tools)");
    let router = service.router(access);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match agent_server::serve(listener, router, shutdown, DRAIN).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent: {e}");
            ExitCode::from(EXIT_RUN_ERROR)
        }
    }
}
