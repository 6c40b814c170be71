//! `agent serve`: the chat endpoint (agent-server) with the same model, tools,
//! policy and graph as `agent chat`.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_server::{Access, ChatService, ChatSetup};
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
    let mut session = match crate::session::Session::open(config, graph).await {
        Ok(session) => session,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = serve_with(config, &mut session, ip, port, tokens).await;
    session.close().await;
    code
}

async fn serve_with(
    config: &AgentConfig,
    session: &mut crate::session::Session,
    ip: IpAddr,
    port: u16,
    tokens: Vec<[u8; 32]>,
) -> ExitCode {
    let graph = session.graph.clone();
    let service = match ChatService::new(ChatSetup {
        model: Arc::clone(&session.model),
        model_id: config.file.model.model.clone(),
        tools: std::mem::take(&mut session.tools),
        policy: session.policy.clone(),
        system_prompt: graph.system_prompt.clone(),
        limits: graph.limits.clone(),
        settings: graph.settings.clone(),
        select: Some(Arc::new(move |catalog| graph.select_tools(catalog))),
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
