//! One configured MCP server: its connection (started, lost, reconnected with
//! backoff), its current tool definitions and their pin states, and its child
//! process or HTTP session.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ai_core::{
    text::log_field,
    tool::{ToolErrorCode, ToolFailure},
};
use rmcp::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::config::{ServerConfig, Transport};
use crate::connection::{Credential, ServerHost};
use crate::pin::{Definition, PinState, definition_hash, legacy_definition_hash};

/// First wait before reconnecting after a failed connect; doubles per failure.
const BACKOFF_START: Duration = Duration::from_millis(250);
/// Longest wait between reconnect attempts.
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long closing a connection may take before the process group is killed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes of a server's stderr logged over its lifetime (the rest is counted).
const STDERR_LOG_BUDGET: usize = 256 * 1024;
/// Longest stderr line logged (longer lines are cut).
const STDERR_LINE_MAX: usize = 1024;
/// Bytes of stderr kept to explain a failed start.
const STDERR_TAIL: usize = 2048;

/// A connection state, for `agent mcp list`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerStatus {
    /// Not connected yet.
    Idle,
    /// Connected with this negotiated protocol version.
    Connected {
        /// Protocol version.
        protocol: String,
    },
    /// The last connect failed or the connection was lost.
    Down {
        /// Why (no secrets).
        error: String,
    },
}

impl std::fmt::Display for ServerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Idle => f.write_str("idle"),
            Self::Connected { protocol } => write!(f, "connected (protocol {protocol})"),
            Self::Down { error } => write!(f, "down: {error}"),
        }
    }
}

/// A tool definition as the server last sent it, with its pin state.
#[derive(Debug, Clone)]
pub(crate) struct ToolState {
    /// The definition.
    pub(crate) definition: Tool,
    /// Its hash (see [`definition_hash`]).
    pub(crate) hash: String,
    /// How it relates to its pin.
    pub(crate) pin: PinState,
    /// Changed only because its pin predates title and annotations counting.
    pub(crate) legacy_pin: bool,
    /// Whether the server still lists it.
    pub(crate) present: bool,
}

impl ToolState {
    /// Why the tool may not be offered, if it may not.
    pub(crate) fn unavailable(&self, server: &str) -> Option<String> {
        if !self.present {
            return Some(format!(
                "the MCP server `{server}` no longer lists this tool"
            ));
        }
        match self.pin {
            PinState::Pinned | PinState::FirstSight => None,
            PinState::Changed if self.legacy_pin => Some(format!(
                "it was pinned by an earlier version, whose pins did not cover titles and \
                 annotations, and it has some now; review it with `agent mcp list` and accept \
                 it with `agent mcp pin {server}`"
            )),
            PinState::Changed => Some(format!(
                "its definition on MCP server `{server}` changed since it was pinned; \
                 review it with `agent mcp list` and accept it with `agent mcp pin {server}`"
            )),
            PinState::Unpinned => Some(format!(
                "MCP server `{server}` lists it, but `agent.lock` holds no pin for it (the \
                 server's other tools are pinned): review it with `agent mcp list` and accept \
                 it with `agent mcp pin {server}`"
            )),
            PinState::New => Some(format!(
                "it appeared on MCP server `{server}` while running; new tools are not enabled \
                 by appearing: accept it with `agent mcp pin {server}`"
            )),
        }
    }
}

/// The hash of a definition (see [`definition_hash`]) and the one earlier
/// versions pinned.
pub(crate) fn tool_hashes(tool: &Tool) -> (String, String) {
    let input = Value::Object((*tool.input_schema).clone());
    let output = tool
        .output_schema
        .as_ref()
        .map(|s| Value::Object((**s).clone()));
    let annotations = tool
        .annotations
        .as_ref()
        .and_then(|a| serde_json::to_value(a).ok());
    let definition = Definition {
        name: &tool.name,
        title: tool.title.as_deref(),
        description: tool.description.as_deref().unwrap_or_default(),
        input_schema: &input,
        output_schema: output.as_ref(),
        annotations: annotations.as_ref(),
    };
    (
        definition_hash(&definition),
        legacy_definition_hash(&definition),
    )
}

struct Live {
    service: RunningService<RoleClient, Handler>,
    pid: Option<u32>,
    /// A stdio server's processes: itself and everything it started, also what
    /// left its process group (`setsid`).
    processes: Processes,
}

/// The variable that marks every process a stdio server starts.
pub const SERVER_MARKER_VAR: &str = "AGENT_MCP_SERVER";

/// Kills a stdio server's processes when dropped (on a short-lived thread);
/// [`Processes::end`] does it on a blocking task and waits.
#[derive(Default)]
struct Processes(Option<process_scope::Scope>);

impl Processes {
    async fn end(mut self) {
        if let Some(scope) = self.0.take() {
            let _ = tokio::task::spawn_blocking(move || scope.sweep()).await;
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        if let Some(scope) = self.0.take() {
            scope.kill_group();
            let _ = std::thread::Builder::new()
                .name("mcp-server-sweep".to_owned())
                .spawn(move || scope.sweep());
        }
    }
}

/// A stdio server's process and its stderr.
type Spawned = (TokioChildProcess, Option<tokio::process::ChildStderr>);

/// Starts a stdio server, the leader of its own process group, killed when
/// dropped, from the spawner thread ([`process_scope::on_spawner_thread`]): its
/// parent-death signal then fires when this process dies, not when the thread
/// that polled the connect ends.
async fn spawn_stdio(cmd: tokio::process::Command) -> std::io::Result<Spawned> {
    fn spawn(cmd: tokio::process::Command) -> std::io::Result<Spawned> {
        let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
        wrapped
            .wrap(process_wrap::tokio::ProcessGroup::leader())
            .wrap(process_wrap::tokio::KillOnDrop);
        TokioChildProcess::builder(wrapped)
            .stderr(Stdio::piped())
            .spawn()
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return spawn(cmd);
    };
    let (sent, spawned) = tokio::sync::oneshot::channel();
    process_scope::on_spawner_thread(move || {
        // tokio's child handling registers with the runtime that waits on it; a
        // server whose connect was dropped meanwhile is killed as it is dropped.
        let _entered = runtime.enter();
        let _ = sent.send(spawn(cmd));
    });
    spawned
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the spawner thread dropped a spawn")))
}

#[derive(Default)]
struct Slot {
    live: Option<Live>,
    failures: u32,
    retry_at: Option<Instant>,
}

struct State {
    status: ServerStatus,
    /// By the tool's name on the server.
    tools: BTreeMap<String, ToolState>,
    /// Accepted hashes by tool name (the lock file's, plus first sights).
    pins: BTreeMap<String, String>,
    /// Whether the lock file has an entry for this server (then no tool is pinned
    /// on first sight), or a first tool list was taken.
    locked: bool,
}

/// One MCP server.
pub(crate) struct Server {
    id: String,
    config: ServerConfig,
    transport: Transport,
    host: ServerHost,
    slot: tokio::sync::Mutex<Slot>,
    state: Mutex<State>,
    /// Bumped whenever the tool table changes (calls in flight watch it).
    changes: watch::Sender<u64>,
    stderr_tail: Arc<Mutex<String>>,
    /// `notifications/cancelled` being sent for calls dropped mid-flight; shutdown
    /// waits for them so the server hears of every cancellation before its input
    /// closes.
    cancels: tokio_util::task::TaskTracker,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("id", &self.id)
            .field("transport", &self.transport.kind())
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Receives the server's notifications; declares no sampling, elicitation or roots
/// capability (none is implemented).
struct Handler {
    server: Weak<Server>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agent", env!("CARGO_PKG_VERSION")),
        )
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let server = self.server.upgrade();
        async move {
            if let Some(server) = server {
                // Listing again is a request on the same connection: run it on its own
                // task so the service loop keeps reading responses.
                tokio::spawn(async move { server.refresh().await });
            }
        }
    }
}

impl Server {
    /// A server that is not connected yet. `pins` are the accepted hashes of its
    /// tools, `None` when the lock file has no entry for it (its first tool list is
    /// then pinned as it comes);
    /// tools (from the lock file).
    pub(crate) fn new(
        id: String,
        config: ServerConfig,
        transport: Transport,
        host: ServerHost,
        pins: Option<BTreeMap<String, String>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            config,
            transport,
            host,
            slot: tokio::sync::Mutex::new(Slot::default()),
            state: Mutex::new(State {
                status: ServerStatus::Idle,
                tools: BTreeMap::new(),
                locked: pins.is_some(),
                pins: pins.unwrap_or_default(),
            }),
            changes: watch::channel(0).0,
            stderr_tail: Arc::new(Mutex::new(String::new())),
            cancels: tokio_util::task::TaskTracker::new(),
        })
    }

    /// The server id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Its configuration.
    pub(crate) fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// How it is reached.
    pub(crate) fn transport(&self) -> &Transport {
        &self.transport
    }

    /// The connection state.
    pub(crate) fn status(&self) -> ServerStatus {
        lock(&self.state).status.clone()
    }

    /// The current tool table, by the tool's name on the server.
    pub(crate) fn tools(&self) -> BTreeMap<String, ToolState> {
        lock(&self.state).tools.clone()
    }

    /// One tool's state.
    pub(crate) fn tool(&self, name: &str) -> Option<ToolState> {
        lock(&self.state).tools.get(name).cloned()
    }

    /// Where cancellations of dropped calls are sent from.
    pub(crate) fn cancels(&self) -> &tokio_util::task::TaskTracker {
        &self.cancels
    }

    /// Subscribes to tool table changes.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The pid of the running stdio server, if any.
    pub(crate) async fn pid(&self) -> Option<u32> {
        self.slot.lock().await.live.as_ref().and_then(|l| l.pid)
    }

    /// Connects (startup): handshake and first tool list within the startup
    /// timeout. Tools seen for the first time are pinned (trust on first use).
    pub(crate) async fn start(self: &Arc<Self>) -> Result<(), String> {
        self.peer().await.map(|_| ()).map_err(|f| f.message)
    }

    /// A live peer: the current connection, or a new one when it was lost (at most
    /// one attempt per backoff interval after failures).
    pub(crate) async fn peer(self: &Arc<Self>) -> Result<Peer<RoleClient>, ToolFailure> {
        let mut slot = self.slot.lock().await;
        if let Some(live) = &slot.live {
            if !live.service.is_closed() {
                return Ok(live.service.peer().clone());
            }
            tracing::warn!(server = %self.id, "MCP server connection lost; reconnecting");
            slot.live = None;
        }
        if let Some(at) = slot.retry_at
            && Instant::now() < at
        {
            let wait = at.saturating_duration_since(Instant::now());
            return Err(ToolFailure::new(
                ToolErrorCode::ExecutionFailed,
                format!(
                    "the MCP server `{}` is down ({}); next reconnect attempt in {} ms",
                    self.id,
                    self.status(),
                    wait.as_millis()
                ),
            ));
        }
        let startup = self
            .config
            .startup_timeout(&self.id)
            .unwrap_or(crate::config::DEFAULT_STARTUP_TIMEOUT);
        let attempt = async {
            let live = self.connect().await?;
            let tools = live
                .service
                .peer()
                .list_all_tools()
                .await
                .map_err(|e| format!("tools/list failed: {e}"))?;
            Ok::<_, String>((live, tools))
        };
        let outcome = match tokio::time::timeout(startup, attempt).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "no handshake and tool list within {} s",
                startup.as_secs()
            )),
        };
        match outcome {
            Ok((live, tools)) => {
                let protocol = live
                    .service
                    .peer()
                    .peer_info()
                    .map(|info| info.protocol_version.to_string())
                    .unwrap_or_default();
                let peer = live.service.peer().clone();
                slot.live = Some(live);
                slot.failures = 0;
                slot.retry_at = None;
                drop(slot);
                lock(&self.state).status = ServerStatus::Connected { protocol };
                self.apply_list(tools);
                Ok(peer)
            }
            Err(error) => {
                let error = match self.stderr_tail() {
                    tail if tail.is_empty() => error,
                    tail => format!("{error}; stderr ends with: {tail}"),
                };
                slot.failures = slot.failures.saturating_add(1);
                let backoff = BACKOFF_START
                    .saturating_mul(1 << slot.failures.min(8).saturating_sub(1))
                    .min(BACKOFF_MAX);
                slot.retry_at = Some(Instant::now() + backoff);
                drop(slot);
                tracing::warn!(server = %self.id, error = %log_field(&error), "MCP server did not start");
                lock(&self.state).status = ServerStatus::Down {
                    error: error.clone(),
                };
                Err(ToolFailure::new(
                    ToolErrorCode::ExecutionFailed,
                    format!("the MCP server `{}` is not available: {error}", self.id),
                ))
            }
        }
    }

    fn stderr_tail(&self) -> String {
        let tail = lock(&self.stderr_tail);
        tail.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_owned()
    }

    /// Marks the connection lost (a call saw the transport close), so the next use
    /// reconnects.
    pub(crate) async fn lost(&self, why: &str) {
        let mut slot = self.slot.lock().await;
        if let Some(live) = slot.live.take() {
            drop(slot);
            close(live, &self.id).await;
        }
        lock(&self.state).status = ServerStatus::Down {
            error: why.to_owned(),
        };
    }

    async fn connect(self: &Arc<Self>) -> Result<Live, String> {
        let handler = Handler {
            server: Arc::downgrade(self),
        };
        match &self.transport {
            Transport::Stdio { command, args, cwd } => {
                // With a lifeline the server gets `SIGKILL` when this process dies
                // (its stdin's end of file may not end it).
                let mut cmd = match process_scope::Lifeline::get() {
                    Some(lifeline) => {
                        let argv = lifeline.argv(command);
                        let mut cmd = tokio::process::Command::new(&argv[0]);
                        cmd.args(&argv[1..]);
                        cmd
                    }
                    None => tokio::process::Command::new(command),
                };
                cmd.args(args).env_clear();
                cmd.envs(self.host.inherited_env.iter().map(|(k, v)| (k, v)));
                cmd.envs(&self.config.env);
                let marker = process_scope::Marker::new(SERVER_MARKER_VAR);
                cmd.env(marker.name(), marker.value());
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                let (process, stderr) = spawn_stdio(cmd)
                    .await
                    .map_err(|e| format!("could not start `{command}`: {e}"))?;
                let pid = process.id();
                let processes = Processes(Some(process_scope::Scope::new(pid, &marker)));
                if let Some(stderr) = stderr {
                    tokio::spawn(drain_stderr(
                        self.id.clone(),
                        stderr,
                        Arc::clone(&self.stderr_tail),
                    ));
                }
                let service = handler
                    .serve(process)
                    .await
                    .map_err(|e| format!("handshake failed: {e}"))?;
                Ok(Live {
                    service,
                    pid,
                    processes,
                })
            }
            Transport::Http { url } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                let mut headers = std::collections::HashMap::new();
                for (name, value) in &self.config.headers {
                    // Checked when the config was validated.
                    if let (Ok(name), Ok(value)) = (
                        reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                        reqwest::header::HeaderValue::from_str(value),
                    ) {
                        headers.insert(name, value);
                    }
                }
                config = config.custom_headers(headers);
                if let Some(connection) = &self.config.connection {
                    let broker = self
                        .host
                        .broker
                        .as_ref()
                        .ok_or_else(|| format!("connection `{connection}` cannot be resolved: no connections are configured"))?;
                    match broker.resolve(connection).map_err(|e| e.to_string())? {
                        Credential::Bearer(secret) => {
                            config = config.auth_header(secret.expose());
                        }
                    }
                }
                let tls = client_tls::client_config().map_err(|e| e.to_string())?;
                let client = reqwest::Client::builder()
                    .tls_backend_preconfigured(tls)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| format!("HTTP client: {e}"))?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                let service = handler
                    .serve(transport)
                    .await
                    .map_err(|e| format!("handshake failed: {}", describe_init_error(&e)))?;
                Ok(Live {
                    service,
                    pid: None,
                    processes: Processes::default(),
                })
            }
        }
    }

    /// Lists the tools again (after `notifications/tools/list_changed`).
    pub(crate) async fn refresh(self: &Arc<Self>) {
        let peer = {
            let slot = self.slot.lock().await;
            match &slot.live {
                Some(live) if !live.service.is_closed() => live.service.peer().clone(),
                _ => return,
            }
        };
        match peer.list_all_tools().await {
            Ok(tools) => self.apply_list(tools),
            Err(error) => {
                tracing::warn!(server = %self.id, error = %error, "listing tools after list_changed failed");
            }
        }
    }

    /// Merges a fresh tool list into the table. The first list of a server the
    /// lock file does not know is pinned as it comes (trust on first use); after
    /// that, and for every server the lock knows, a tool without a pin is disabled
    /// (`Unpinned` at startup, `New` while running), as is a changed one; a tool no
    /// longer listed is absent; policy is untouched.
    fn apply_list(&self, tools: Vec<Tool>) {
        let mut state = lock(&self.state);
        let startup = state.tools.is_empty();
        let first_use = startup && !state.locked;
        state.locked = true;
        let mut seen = BTreeMap::new();
        for tool in tools {
            let name = tool.name.to_string();
            let (hash, legacy) = tool_hashes(&tool);
            let pinned = state.pins.get(&name);
            let legacy_pin = pinned.is_some_and(|p| *p != hash && *p == legacy);
            let pin = match pinned {
                Some(pinned) if *pinned == hash => PinState::Pinned,
                Some(_) => PinState::Changed,
                None if first_use => PinState::FirstSight,
                None if startup => PinState::Unpinned,
                None => PinState::New,
            };
            if pin == PinState::FirstSight {
                state.pins.insert(name.clone(), hash.clone());
            }
            match (state.tools.get(&name), pin) {
                (Some(old), PinState::Changed) if old.hash != hash => {
                    tracing::warn!(server = %self.id, tool = %log_field(&name), "MCP tool definition changed; disabled until pinned");
                }
                (None, PinState::Changed) => {
                    tracing::warn!(server = %self.id, tool = %log_field(&name), "MCP tool definition differs from its pin; disabled until pinned");
                }
                (None, PinState::Unpinned) => {
                    tracing::warn!(server = %self.id, tool = %log_field(&name), "MCP tool has no pin while the server's others do; disabled until pinned");
                }
                (None, PinState::New) => {
                    tracing::warn!(server = %self.id, tool = %log_field(&name), "new MCP tool appeared; not enabled until pinned");
                }
                _ => {}
            }
            seen.insert(
                name,
                ToolState {
                    definition: tool,
                    hash,
                    pin,
                    legacy_pin,
                    present: true,
                },
            );
        }
        for (name, old) in &state.tools {
            if !seen.contains_key(name) {
                tracing::warn!(server = %self.id, tool = %log_field(name), "MCP tool removed by the server");
                let mut gone = old.clone();
                gone.present = false;
                seen.insert(name.clone(), gone);
            }
        }
        state.tools = seen;
        drop(state);
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Closes the connection: the HTTP session is deleted, a stdio server's input is
    /// closed and its process group terminated (SIGTERM, then SIGKILL).
    pub(crate) async fn shutdown(&self) {
        // Cancellations of calls dropped just before (a cancelled run) go out first.
        self.cancels.close();
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, self.cancels.wait()).await;
        let live = self.slot.lock().await.live.take();
        if let Some(live) = live {
            close(live, &self.id).await;
        }
        lock(&self.state).status = ServerStatus::Idle;
    }
}

/// Closes the connection, then kills whatever the server left behind (processes
/// it started in a new session survive its process group).
async fn close(mut live: Live, id: &str) {
    match live.service.close_with_timeout(CLOSE_TIMEOUT).await {
        Ok(Some(_)) => {}
        Ok(None) => tracing::warn!(server = %id, "MCP server did not close in time; killed"),
        Err(error) => tracing::warn!(server = %id, error = %error, "closing MCP server failed"),
    }
    let processes = std::mem::take(&mut live.processes);
    drop(live);
    processes.end().await;
}

fn describe_init_error(error: &rmcp::service::ClientInitializeError) -> String {
    if error.is_authorization_required() {
        return "the server requires authorization (HTTP 401/403)".into();
    }
    error.to_string()
}

/// Logs a server's stderr at debug level, line by line, cutting long lines and
/// stopping after a budget (still reading, so the server never blocks on a full
/// pipe); keeps the last bytes to explain a failed start.
async fn drain_stderr(
    server: String,
    mut stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<String>>,
) {
    let mut buffer = vec![0u8; 8192];
    let mut line = Vec::new();
    let mut logged = 0usize;
    let mut dropped = 0usize;
    loop {
        let n = match stderr.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let mut tail = lock(&tail);
            tail.push_str(&String::from_utf8_lossy(&buffer[..n]));
            if tail.len() > STDERR_TAIL {
                let mut cut = tail.len() - STDERR_TAIL;
                while !tail.is_char_boundary(cut) {
                    cut += 1;
                }
                tail.drain(..cut);
            }
        }
        for &byte in &buffer[..n] {
            if byte == b'\n' {
                if logged < STDERR_LOG_BUDGET {
                    logged += line.len();
                    tracing::debug!(server = %server, line = %log_field(&String::from_utf8_lossy(&line)), "mcp server stderr");
                } else {
                    dropped += line.len();
                }
                line.clear();
            } else if line.len() < STDERR_LINE_MAX {
                line.push(byte);
            }
        }
    }
    if dropped > 0 {
        tracing::debug!(server = %server, dropped_bytes = dropped, "mcp server stderr over budget; not logged");
    }
}
