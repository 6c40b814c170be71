//! Real adapters for the capability traits of `ai-tools`, and one function that binds
//! every built-in tool to them.
//!
//! - [`LocalWorkspace`]: the path sandbox of the file tools (paths resolved beneath a
//!   root handle with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, folders
//!   created and walked on handles, only regular files read or written, atomic
//!   writes renamed relative to the checked folder's handle, protected paths).
//! - [`LocalShell`]: `sh -c` in its own process group, scrubbed environment, timeout
//!   and capped output; the group and every descendant (escaped ones too) are killed
//!   when the call ends.
//! - [`GuardedHttpFetch`]: http(s) fetch that resolves once, refuses private,
//!   loopback, link-local and metadata addresses, connects to the checked address and
//!   re-checks every redirect.
//! - [`GuardedWebSearch`]: one search provider (SearXNG, Brave, Tavily) at one
//!   configured endpoint, under the address rules of [`GuardedHttpFetch`] (the
//!   same check and pinned connection), redirects not followed.
//! - [`SqliteMemory`]: long-term memory in SQLite (WAL, FTS5 ranking, capped
//!   namespaces).
//! - [`SystemClock`].
//! - [`harden_process`] and its steps: non-dumpable, no `CAP_SYS_PTRACE` (nor the other capabilities
//!   that bypass it), child
//!   subreaper; for the application's `main` (see the `process` module docs).
//! - [`bind_builtin_tools`]: every built-in tool of `ai_tools::builtin` bound to
//!   these adapters from a plain [`BuiltinConfig`] (`core__web_search` only when
//!   [`BuiltinConfig::web_search`] names a provider); [`bind_in_dir`]: one file tool
//!   bound to one folder.
//!
//! This crate defines adapters; it never instantiates them on its own. The
//! application's composition root (its `main`, or this project's `bootstrap`) calls
//! [`bind_builtin_tools`] or builds adapters itself (invariant
//! BINDING_IN_COMPOSITION_ROOT). ai-host reads no configuration file and no
//! environment variable. It depends on `ai-core`, `ai-tools`, `process-scope` and
//! `client-tls` only among project crates, and must not depend on a `wire-*` crate,
//! `agent-graph` or `bootstrap`.

mod clock;
mod http;
mod memory;
mod process;
mod search;
mod shell;
mod workspace;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ai_core::tool::RegisteredTool;
use ai_tools::builtin::{
    DEFAULT_FETCH_BYTES, DEFAULT_FETCH_TIMEOUT, DEFAULT_MAX_FILE_BYTES, DEFAULT_SHELL_OUTPUT_BYTES,
    DEFAULT_SHELL_TIMEOUT, EditFile, ExecShell, GetCurrentTime, ListDirectory, MemoryRead,
    MemoryWrite, MemoryWriteCapabilities, ReadFile, WebFetch, WebSearch, WriteFile,
};
use ai_tools::capability::{
    AllowlistError, Clock, DEFAULT_MAX_ENTRIES_PER_NAMESPACE, HttpFetch, MemoryStore, NetAllowlist,
    SearchEngine, Shell, Workspace,
};
use ai_tools::{ContractError, bind};

pub use clock::SystemClock;
pub use http::{GuardedHttpFetch, MAX_REDIRECTS};
pub use memory::{BUSY_TIMEOUT, MemoryOpenError, SqliteMemory};
pub use process::{
    Hardening, become_child_subreaper, drop_introspection_capabilities, harden_process,
    is_child_subreaper, is_non_dumpable, make_non_dumpable, raise_open_file_limit,
};
pub use search::{GuardedWebSearch, SearchKey, SearchProvider, WebSearchSettings};
pub use shell::{CALL_MARKER_VAR, ENV_ALLOWLIST, LocalShell, PidNamespace};
pub use workspace::{LocalWorkspace, MAX_COMPONENT_BYTES, MAX_PATH_BYTES};

/// What the built-in tools need to be bound: plain data, mapped from configuration by
/// the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltinConfig {
    /// The sandbox folder for the file tools and the shell's working directory.
    pub workspace_root: PathBuf,
    /// The SQLite file of long-term memory.
    pub memory_db_path: PathBuf,
    /// Hosts, addresses and CIDRs (optionally `:port`) `web_fetch` may reach even
    /// though they are loopback, private or otherwise refused by default.
    pub web_allowlist: Vec<String>,
    /// Default and largest shell timeout. Keep it below the runner's runtime budget.
    pub shell_timeout: Duration,
    /// Cap per shell output stream, in bytes.
    pub shell_output_bytes: usize,
    /// Largest file read or edited, in bytes.
    pub max_file_bytes: u64,
    /// Largest fetched body, in bytes.
    pub fetch_max_bytes: usize,
    /// Time limit of one fetch.
    pub fetch_timeout: Duration,
    /// Paths no tool may write or edit: the active config file, its lock file, the
    /// agent's state folders (see [`LocalWorkspace::with_protected`]).
    pub protected: Vec<PathBuf>,
    /// Most memory entries per namespace.
    pub memory_max_entries: usize,
    /// Whether the shell also kills children of this process that started during a
    /// call (see [`LocalShell::claiming_orphans`]); for applications that start no
    /// processes of their own and are child subreapers.
    pub shell_claims_orphans: bool,
    /// Run each shell command in its own PID namespace (see [`PidNamespace`]);
    /// `None`: commands see every process of the machine.
    pub shell_pid_namespace: Option<PidNamespace>,
    /// The variables shell commands get (only [`ENV_ALLOWLIST`] names are kept):
    /// the caller reads them from its environment; ai-host reads none.
    pub shell_env: Vec<(String, String)>,
    /// `core__web_search`'s provider, endpoint, key and bounds; `None` (the
    /// default): the tool is not bound at all.
    pub web_search: Option<WebSearchSettings>,
}

impl BuiltinConfig {
    /// Defaults for everything but the two paths (nothing protected).
    pub fn new(workspace_root: impl Into<PathBuf>, memory_db_path: impl Into<PathBuf>) -> Self {
        Self {
            workspace_root: workspace_root.into(),
            memory_db_path: memory_db_path.into(),
            web_allowlist: Vec::new(),
            shell_timeout: DEFAULT_SHELL_TIMEOUT,
            shell_output_bytes: DEFAULT_SHELL_OUTPUT_BYTES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            fetch_max_bytes: DEFAULT_FETCH_BYTES,
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
            protected: Vec::new(),
            memory_max_entries: DEFAULT_MAX_ENTRIES_PER_NAMESPACE,
            shell_claims_orphans: false,
            shell_pid_namespace: None,
            shell_env: Vec::new(),
            web_search: None,
        }
    }
}

/// Why the built-in tools could not be bound.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BindError {
    /// The workspace root is missing or not a folder.
    #[error("the workspace root is unusable: {0}")]
    Workspace(String),
    /// The memory database could not be opened.
    #[error(transparent)]
    Memory(#[from] MemoryOpenError),
    /// A web allowlist entry is malformed.
    #[error(transparent)]
    Allowlist(#[from] AllowlistError),
    /// The web search settings are unusable (endpoint, key).
    #[error("web_search: {0}")]
    WebSearch(String),
    /// A contract is invalid (a bug in ai-tools).
    #[error(transparent)]
    Contract(#[from] ContractError),
}

/// Binds one built-in file tool ([`ReadFile`], [`ListDirectory`], [`WriteFile`],
/// [`EditFile`], or any contract over a [`Workspace`]) to the folder `dir`, sandboxed
/// beneath it like every file tool: the one-call way to give an agent a folder.
///
/// ```no_run
/// use ai_tools::builtin::{ListDirectory, ReadFile};
///
/// let read = ai_host::bind_in_dir(ReadFile::default(), "./docs")?;
/// let list = ai_host::bind_in_dir(ListDirectory, "./docs")?;
/// # Ok::<(), ai_host::BindError>(())
/// ```
pub fn bind_in_dir<C>(contract: C, dir: impl Into<PathBuf>) -> Result<RegisteredTool, BindError>
where
    C: ai_tools::ToolContract<Capabilities = Arc<dyn Workspace>>,
{
    let dir = dir.into();
    let local =
        LocalWorkspace::new(&dir).map_err(|e| BindError::Workspace(e.kind().to_string()))?;
    let workspace: Arc<dyn Workspace> = Arc::new(local);
    Ok(bind(contract, workspace)?)
}

/// Binds every built-in tool to the real adapters.
pub fn bind_builtin_tools(cfg: &BuiltinConfig) -> Result<Vec<RegisteredTool>, BindError> {
    let local = LocalWorkspace::new(&cfg.workspace_root)
        .map_err(|e| BindError::Workspace(e.kind().to_string()))?
        .with_protected(cfg.protected.iter().cloned());
    let mut shell = LocalShell::with_env(local.root(), cfg.shell_env.clone());
    if cfg.shell_claims_orphans {
        shell = shell.claiming_orphans();
    }
    if let Some(namespace) = &cfg.shell_pid_namespace {
        shell = shell.in_pid_namespace(namespace.clone());
    }
    let shell: Arc<dyn Shell> = Arc::new(shell);
    let workspace: Arc<dyn Workspace> = Arc::new(local);
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let memory: Arc<dyn MemoryStore> =
        Arc::new(SqliteMemory::open(&cfg.memory_db_path)?.with_max_entries(cfg.memory_max_entries));
    let http: Arc<dyn HttpFetch> = Arc::new(GuardedHttpFetch::new(NetAllowlist::parse(
        &cfg.web_allowlist,
    )?));
    let search = cfg
        .web_search
        .as_ref()
        .map(|settings| {
            let engine: Arc<dyn SearchEngine> =
                Arc::new(GuardedWebSearch::from_settings(settings)?);
            let contract = WebSearch {
                max_results: settings.max_results,
                max_bytes: settings.max_bytes,
                timeout: settings.timeout,
            };
            Ok::<_, BindError>(bind(contract, engine)?)
        })
        .transpose()?;
    let mut tools = vec![
        bind(GetCurrentTime, Arc::clone(&clock))?,
        bind(
            ReadFile {
                max_bytes: cfg.max_file_bytes,
            },
            Arc::clone(&workspace),
        )?,
        bind(ListDirectory, Arc::clone(&workspace))?,
        bind(WriteFile, Arc::clone(&workspace))?,
        bind(
            EditFile {
                max_bytes: cfg.max_file_bytes,
            },
            workspace,
        )?,
        bind(
            ExecShell {
                default_timeout: cfg.shell_timeout,
                max_timeout: cfg.shell_timeout,
                max_output_bytes: cfg.shell_output_bytes,
            },
            shell,
        )?,
        bind(
            WebFetch {
                max_bytes: cfg.fetch_max_bytes,
                timeout: cfg.fetch_timeout,
            },
            http,
        )?,
        bind(
            MemoryWrite,
            MemoryWriteCapabilities {
                store: Arc::clone(&memory),
                clock,
            },
        )?,
        bind(MemoryRead, memory)?,
    ];
    tools.extend(search);
    Ok(tools)
}
