//! `agent serve`: the chat endpoint (agent-server) with the same model, tools,
//! policy and graph as `agent chat`.
//!
//! Every bind needs a credential, loopback included: a random secret per process,
//! printed once inside the page's address (`/#token=...`), plus any configured
//! tokens. `--no-auth` drops it on loopback only, and says what that gives up.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_server::{Access, ChatService, ChatSetup, ConnectionLimits, ServerSecret};
use sha2::{Digest, Sha256};

use crate::cli::{EXIT_RUN_ERROR, EXIT_USAGE};
use crate::config::AgentConfig;

/// How long open streams may take to end after Ctrl-C.
const DRAIN: Duration = Duration::from_secs(30);

/// The configured token hashes: `[server] tokens_sha256` plus `AGENT_SERVER_TOKEN`
/// (accepted besides the per-process secret).
fn token_hashes(config: &AgentConfig) -> Result<Vec<[u8; 32]>, String> {
    let mut hashes = Vec::new();
    for (i, text) in config.file.server.tokens_sha256.iter().enumerate() {
        let mut hash = [0u8; 32];
        hex::decode_to_slice(text, &mut hash)
            .map_err(|_| format!("server.tokens_sha256[{i}] must be 64 hex digits"))?;
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

/// The tokens of `[server.accounts]`, with their account names (letters, digits,
/// `_` and `-`, at most 64; `local` is the server's own account).
fn account_hashes(config: &AgentConfig) -> Result<Vec<([u8; 32], String)>, String> {
    let mut accounts = Vec::new();
    for (name, account) in &config.file.server.accounts {
        let plain = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !plain || name == agent_server::access::Account::LOCAL {
            return Err(format!(
                "server.accounts.{name:?}: a name is 1 to 64 letters, digits, `_` or `-`, and not `local`"
            ));
        }
        let mut hash = [0u8; 32];
        hex::decode_to_slice(&account.token_sha256, &mut hash)
            .map_err(|_| format!("server.accounts.{name}.token_sha256 must be 64 hex digits"))?;
        if accounts.iter().any(|(other, _)| *other == hash) {
            return Err(format!(
                "server.accounts.{name}.token_sha256 is another account's token"
            ));
        }
        accounts.push((hash, name.clone()));
    }
    Ok(accounts)
}

/// The accepted credentials: token hashes of the `local` account, and of named
/// accounts with their names.
type Credentials = (Vec<[u8; 32]>, Vec<([u8; 32], String)>);

/// What `agent serve` was asked for on its command line.
#[derive(Debug, Clone, Default)]
pub struct ServeArgs {
    /// `--host`.
    pub host: Option<String>,
    /// `--port`.
    pub port: Option<u16>,
    /// `--graph`.
    pub graph: String,
    /// `--no-auth` (loopback only).
    pub no_auth: bool,
}

/// What `--no-auth` gives up, said when it is used.
const NO_AUTH_WARNING: &str = "agent: warning: --no-auth: the chat endpoint takes requests without a token. \
Every local account, every container sharing this network namespace and every browser extension \
can reach 127.0.0.1, and can then run and approve tool calls as you";

/// Runs `agent serve` until Ctrl-C.
pub async fn run(config: &AgentConfig, args: ServeArgs) -> ExitCode {
    let host = args
        .host
        .clone()
        .unwrap_or_else(|| config.file.server.host.clone());
    let port = args.port.unwrap_or(config.file.server.port);
    let ip: IpAddr = match host.parse() {
        Ok(ip) => ip,
        Err(_) if host == "localhost" => IpAddr::from([127, 0, 0, 1]),
        Err(_) => {
            eprintln!("agent: --host must be an IP address (got {host:?})");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if args.no_auth && !ip.is_loopback() {
        eprintln!(
            "agent: --no-auth is only for loopback addresses ({ip} is not one): off loopback every request needs a token"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let share = config.file.server.client_stream_share;
    if !(1..=100).contains(&share) {
        eprintln!(
            "agent: server.client_stream_share must be a percentage from 1 to 100 (got {share})"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    if let Some(bad) = config
        .file
        .server
        .allowed_origins
        .iter()
        .find(|o| !valid_origin(o))
    {
        eprintln!(
            "agent: server.allowed_origins takes exact origins like \"http://localhost:5173\" (scheme and host, no path; got {bad:?})"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let tokens = match token_hashes(config).and_then(|t| Ok((t, account_hashes(config)?))) {
        Ok(tokens) => tokens,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Err(e) = ai_host::raise_open_file_limit() {
        tracing::debug!(error = %e, "could not raise the open-file limit");
    }
    let mut session = match crate::session::Session::open(config, &args.graph, true).await {
        Ok(session) => session,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = serve_with(config, &mut session, ip, port, tokens, args.no_auth).await;
    session.close().await;
    code
}

/// An exact origin: `http(s)://host[:port]`, nothing after it, no wildcard.
fn valid_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"));
    rest.is_some_and(|host| !host.is_empty() && !host.contains(['/', '*', '?', '#', '@', ' ']))
}

/// The access of a server bound to `bound`: host checks on loopback, the
/// per-process `secret` plus the configured tokens, and the configured limits.
fn access(
    config: &AgentConfig,
    bound: SocketAddr,
    secret: &ServerSecret,
    (tokens, accounts): Credentials,
    no_auth: bool,
) -> Access {
    let server = &config.file.server;
    let mut access = if bound.ip().is_loopback() {
        Access::loopback(bound.port())
    } else {
        Access::tokens(Vec::new())
    };
    access = access.with_token(secret.expose());
    access.tokens_sha256.extend(tokens);
    access.accounts = accounts;
    access.no_auth = no_auth;
    access.max_body_bytes = server.max_body_bytes;
    access.body_timeout = Duration::from_millis(server.body_timeout_ms);
    access.max_streams = server.max_streams;
    access.client_stream_share = server.client_stream_share;
    access.allowed_origins.clone_from(&server.allowed_origins);
    access.detach_grace = Duration::from_millis(server.detach_grace_ms);
    access.write_timeout = Duration::from_millis(server.write_timeout_ms);
    access
}

fn connection_limits(config: &AgentConfig) -> ConnectionLimits {
    let server = &config.file.server;
    ConnectionLimits {
        max_connections: server.max_connections,
        max_connections_per_client: server.max_connections_per_client,
        max_unauthenticated: server.max_unauthenticated,
        unauthenticated_timeout: Duration::from_millis(server.unauthenticated_timeout_ms),
        header_read_timeout: Duration::from_millis(server.header_read_timeout_ms),
    }
}

/// Why a server could not start listening.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The bound listener's address could not be read.
    #[error("{0}")]
    Address(std::io::Error),
}

/// A listener bound to `addr`, and the address it got (a free port when
/// `addr`'s is 0).
pub(crate) async fn listen(
    addr: SocketAddr,
) -> Result<(tokio::net::TcpListener, SocketAddr), ListenError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(ListenError::Address)?;
    Ok((listener, bound))
}

/// The address to print: the bound one, or loopback for an unspecified bind.
fn page_authority(bound: SocketAddr) -> String {
    let ip = match bound.ip() {
        ip if ip.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        ip => ip,
    };
    SocketAddr::new(ip, bound.port()).to_string()
}

/// `runs` with `[durable] engine`: runs handed to a Restate server (each
/// submitted to its ingress, sealed with `key`) instead of run here.
fn with_engine(
    config: &AgentConfig,
    runs: agent_durable::Runs,
    key: agent_durable::seal::DurableKey,
) -> Result<agent_durable::Runs, String> {
    let durable = &config.file.durable;
    match durable.engine {
        crate::config::DurableEngine::Restate => {
            let client = agent_durable::restate::RestateClient::new(
                &durable.restate_ingress,
                &durable.restate_admin,
            )
            .map_err(|e| e.to_string())?;
            eprintln!(
                "agent: runs go to the Restate server at {} (run by `agent worker`)",
                durable.restate_ingress
            );
            let engine = agent_durable::restate::RestateEngine::new(client, key);
            Ok(runs.with_engine(Arc::new(engine)))
        }
        _ => Ok(runs),
    }
}

/// Goes on with (or, with `[durable] resume = false`, interrupts) the
/// durable runs stopped servers left (said on stderr), and keeps looking for
/// more while it serves.
async fn resume_runs(service: &Arc<ChatService>) {
    match service.settle_orphans().await {
        Ok(0) => {}
        Ok(n) => eprintln!(
            "agent: settled {n} run(s) a stopped server left unfinished (going on with them, GET /api/chat/ID/stream follows each; or interrupted with [durable] resume = false)"
        ),
        Err(e) => eprintln!("agent: the runs a stopped server left could not be resumed: {e}"),
    }
    service.watch_orphans();
}

/// The service with `others` (every graph of `config` besides the served one,
/// `--graph`, the default of new chats), and the graphs each named account may
/// use.
fn offer_graphs(
    config: &AgentConfig,
    others: Vec<agent_graph::Graph>,
    mut service: ChatService,
) -> Result<ChatService, String> {
    for graph in others {
        service = service.with_graph(graph);
    }
    let known: Vec<String> = crate::graphs::listing(config)
        .into_iter()
        .map(|g| g.name)
        .collect();
    for (name, account) in &config.file.server.accounts {
        let Some(graphs) = &account.graphs else {
            continue;
        };
        if let Some(unknown) = graphs.iter().find(|g| !known.contains(g)) {
            return Err(format!(
                "server.accounts.{name}.graphs: unknown graph `{unknown}` (known: {})",
                known.join(", ")
            ));
        }
        service = service.with_account_graphs(name.clone(), graphs.iter().cloned());
    }
    Ok(service)
}

async fn serve_with(
    config: &AgentConfig,
    session: &mut crate::session::Session,
    ip: IpAddr,
    port: u16,
    tokens: Credentials,
    no_auth: bool,
) -> ExitCode {
    let others = match session.other_graphs(config) {
        Ok(others) => others,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let service = match ChatService::new(ChatSetup {
        model: Arc::clone(&session.model),
        model_id: config.file.model.model.clone(),
        tools: std::mem::take(&mut session.tools),
        policy: session.policy.clone(),
        graph: session.graph.clone(),
    }) {
        Ok(service) => {
            let service = match offer_graphs(config, others, service) {
                Ok(service) => service,
                Err(e) => {
                    eprintln!("agent: {e}");
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let service = service.with_limits(agent_server::contract::Limits {
                max_file_bytes: config.file.server.max_file_bytes,
                max_request_file_bytes: config.file.server.max_request_file_bytes,
            });
            // Runs are recorded and conversations kept when the store opens; a
            // server without one still serves chats (and says so).
            match crate::history::server_runs(config).await {
                Ok((runs, approvals, sealing)) => {
                    let runs = match with_engine(config, runs, sealing) {
                        Ok(runs) => runs,
                        Err(e) => {
                            eprintln!("agent: {e}");
                            return ExitCode::from(EXIT_USAGE);
                        }
                    };
                    let service = Arc::new(
                        service
                            .with_runs(runs)
                            .with_take_over(config.file.durable.resume)
                            .with_approvals(agent_server::approval::Approvals::new(
                                approvals,
                                agent_server::approval::DEFAULT_APPROVAL_TTL,
                            )),
                    );
                    resume_runs(&service).await;
                    service
                }
                Err(e) if config.file.durable.engine == crate::config::DurableEngine::Restate => {
                    // Restate's workers write the runs' events to the store and
                    // the server streams them from there: no store, no runs.
                    eprintln!(
                        "agent: [durable] engine = \"restate\" needs the run store, which is not available: {e}"
                    );
                    return ExitCode::from(EXIT_USAGE);
                }
                Err(e) => {
                    eprintln!("agent: the run store is not available, so chats are not kept: {e}");
                    Arc::new(service)
                }
            }
        }
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (listener, bound) = match listen(SocketAddr::new(ip, port)).await {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_RUN_ERROR);
        }
    };
    let secret = ServerSecret::generate();
    let access = access(config, bound, &secret, tokens, no_auth);
    // One line on stdout with the page's address, which carries this process's
    // secret (in the fragment, which the browser never sends): for people and for
    // scripts. API clients send the token as `Authorization: Bearer <token>`.
    println!(
        "agent: serving on {} (POST /api/chat, GET /api/tools; the token after #token= is this process's secret)",
        secret.page_url(&page_authority(bound))
    );
    if no_auth {
        eprintln!("{NO_AUTH_WARNING}");
    }
    if !bound.ip().is_loopback() {
        eprintln!(
            "agent: warning: serving plain HTTP on {}: the token and the chats cross the network unencrypted; put a TLS-terminating proxy in front",
            bound.ip()
        );
    }
    let router = service.router(access);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match agent_server::serve(listener, router, connection_limits(config), shutdown, DRAIN).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent: {e}");
            ExitCode::from(EXIT_RUN_ERROR)
        }
    }
}
