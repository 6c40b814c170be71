//! The `agent` command line: `agent chat`, `agent tools`, `agent mcp`, `agent graphs`,
//! `agent threads`, `agent runs`, `agent usage` and `agent trust`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use ai_core::policy::ToolPattern;
use ai_core::{CompletionPort, RunContext, ToolRunner, policy::PolicyDecision};
use clap::{Args, Parser, Subcommand};
use futures::StreamExt;

use crate::approval::{ApprovalMode, CliApprover};
use crate::config::{self, AgentConfig, ConfigSource, EnvOverrides, FlagOverrides};
use crate::render::{HumanRenderer, json_line};
use crate::tools;

/// Exit code of a run error.
pub const EXIT_RUN_ERROR: u8 = 1;
/// Exit code of a usage or configuration error.
pub const EXIT_USAGE: u8 = 2;

/// Let an LLM call tools safely.
#[derive(Debug, Parser)]
#[command(name = "agent", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Shared options.
    #[command(flatten)]
    pub global: GlobalArgs,
}

/// Options shared by every command.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Config file (default: ./agent.toml when present).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Workspace root for the file tools (default: current directory).
    #[arg(long, global = true, value_name = "PATH")]
    pub workspace: Option<PathBuf>,
    /// The endpoint's API: `openai` (chat completions, the default), `anthropic`
    /// (Messages API; key from ANTHROPIC_API_KEY) or `responses` (OpenAI's
    /// Responses API).
    #[arg(long, global = true, value_name = "API")]
    pub api: Option<config::ModelApi>,
    /// The endpoint's base URL (overrides config and OPENAI_BASE_URL or
    /// ANTHROPIC_BASE_URL).
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,
    /// Model id (overrides config and AGENT_MODEL).
    #[arg(long, global = true)]
    pub model: Option<String>,
    /// More logs on stderr (-v info, -vv debug); RUST_LOG wins when set.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Commands.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum Command {
    /// Run a graph (default `chat`) on a prompt.
    Chat {
        /// The user's prompt.
        prompt: String,
        /// Print one AiEvent JSON object per line instead of text.
        #[arg(long)]
        json: bool,
        /// Approve every call that policy says needs approval.
        #[arg(long)]
        approve: bool,
        /// Graph to run (`agent graphs` lists them).
        #[arg(long, default_value = "chat", value_name = "NAME")]
        graph: String,
        /// Attach a file to the prompt (repeatable): an image (png, jpeg, webp,
        /// gif) the model sees, or a UTF-8 text file it reads inline. At most
        /// `[server] max_file_bytes` each.
        #[arg(long, value_name = "FILE")]
        attach: Vec<PathBuf>,
        /// Continue thread NAME (created when new): the model sees its earlier
        /// turns, and this turn is added to it (`agent threads` lists them).
        #[arg(long, value_name = "NAME", conflicts_with = "continue_thread")]
        thread: Option<String>,
        /// Continue the most recent thread.
        #[arg(long = "continue")]
        continue_thread: bool,
    },
    /// The stored threads: list them, show one, remove one.
    Threads {
        /// What to do (default: list).
        #[command(subcommand)]
        command: Option<ThreadsCommand>,
    },
    /// Stored runs.
    Runs {
        /// What to do.
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Token usage of the stored runs (the billing report).
    Usage {
        /// Only calls on or after this UTC day (YYYY-MM-DD).
        #[arg(long, value_name = "DAY")]
        since: Option<String>,
        /// Group by `model`, `day` or `thread`.
        #[arg(long, value_name = "KEY", default_value = "model")]
        by: crate::history::UsageBy,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the graphs: the built-in `chat` and those of `[graphs]`, with their
    /// tools and subagents.
    Graphs {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List every known tool with its effect and the active policy's decision.
    Tools {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Serve the chat endpoint for web UIs (`POST /api/chat`, `GET /api/tools`):
    /// the same model, tools and policy as `agent chat`; calls that need approval
    /// are approved in the UI, with server-bound approval ids.
    Serve {
        /// Address to bind (default: `[server] host`, else 127.0.0.1). Every bind
        /// needs a token: the per-process secret printed in the page's address,
        /// or `[server] tokens_sha256` / AGENT_SERVER_TOKEN.
        #[arg(long)]
        host: Option<String>,
        /// Port (default: `[server] port`, else 8787; 0 picks a free one).
        #[arg(long)]
        port: Option<u16>,
        /// Graph to serve (`agent graphs` lists them).
        #[arg(long, default_value = "chat", value_name = "NAME")]
        graph: String,
        /// Take requests without a token (loopback only): every local account,
        /// container and browser extension can then run and approve tool calls as
        /// you.
        #[arg(long)]
        no_auth: bool,
    },
    /// Run runs for a Restate server (`[durable] engine = "restate"`): serves
    /// the runs' handler on an HTTP/2 endpoint and registers it with the
    /// server's admin API (`[durable] restate_admin`). Needs the run store that
    /// `agent serve` uses (a Postgres store, for workers on several machines).
    Worker {
        /// Address to bind (default 127.0.0.1; Restate must reach it).
        #[arg(long)]
        host: Option<String>,
        /// Port (default 9080; 0 picks a free one).
        #[arg(long, default_value_t = 9080)]
        port: u16,
        /// Graph whose runs it runs (the one `agent serve --graph` serves).
        #[arg(long, default_value = "chat", value_name = "NAME")]
        graph: String,
    },
    /// MCP servers: list them with their tools, or accept their current tool
    /// definitions.
    Mcp {
        /// What to do.
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Trust a config file's current content. A config that redirects requests,
    /// changes the API key variable or loosens policy is used only once trusted; any
    /// later change needs trusting again.
    Trust {
        /// The config file (default: --config, else ./agent.toml).
        path: Option<PathBuf>,
    },
}

/// `agent threads` commands.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum ThreadsCommand {
    /// Every thread, most recent first.
    List {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A thread's messages.
    Show {
        /// The thread.
        name: String,
        /// Print the messages as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Remove a thread with its runs and events (usage is kept).
    Rm {
        /// The thread.
        name: String,
    },
}

/// `agent runs` commands.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum RunsCommand {
    /// The most recent runs (of one thread with `--thread`), newest first.
    List {
        /// Only the runs of this thread.
        #[arg(long, value_name = "NAME")]
        thread: Option<String>,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Go on with a run that was cut (its `agent chat` process was killed):
    /// its recorded steps are replayed from the store, not asked or run again,
    /// and it goes on from the first that is missing. A call that was changing
    /// something when the process died is reported to the model as
    /// `outcome_unknown`, never run twice.
    Resume {
        /// The run id (`agent runs list` shows interrupted runs).
        run: String,
        /// Print events as JSON lines.
        #[arg(long)]
        json: bool,
        /// Approve every call that needs approval (a run without a terminal).
        #[arg(long)]
        approve: bool,
    },
    /// A run's status; with `--events`, its stored events replayed as the live
    /// run showed them.
    Show {
        /// The run id (`agent chat --json` prints it on every event).
        run: String,
        /// Replay the events.
        #[arg(long)]
        events: bool,
        /// Print JSON lines (the run, then its events).
        #[arg(long)]
        json: bool,
    },
}

/// `agent mcp` commands.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum McpCommand {
    /// Start every configured server and show its transport, status and tools
    /// (description, effect, pin state, whether it is withheld).
    List {
        /// Print one JSON object per server instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Accept a server's current tool definitions: changed and new tools are enabled
    /// (policy still decides), removed ones forgotten.
    Pin {
        /// The server id.
        server: String,
    },
}

fn env_overrides(model: &config::ModelConfig) -> EnvOverrides {
    let get = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    EnvOverrides {
        base_url: get(model.api.base_url_env()),
        model: get("AGENT_MODEL"),
        api_key: get(model.key_env()),
    }
}

fn load_config(global: &GlobalArgs) -> Result<AgentConfig, config::ConfigError> {
    let cwd = std::env::current_dir()
        .map_err(|e| config::ConfigError::Invalid(format!("no current directory: {e}")))?;
    let flags = FlagOverrides {
        config: global.config.clone(),
        api: global.api,
        base_url: global.base_url.clone(),
        model: global.model.clone(),
        workspace: global.workspace.clone(),
    };
    // The API and the key variable's name may come from the file: load once to
    // learn them.
    let first = config::load(&cwd, EnvOverrides::default(), flags.clone())?;
    // A config that redirects requests, picks the secret or loosens policy needs
    // `agent trust` first (PROJECT_CONFIG_TRUSTED_EXPLICITLY).
    if let ConfigSource::File(path) = &first.source {
        crate::trust::enforce(path, &crate::trust::UserDirs::from_env())
            .map_err(|e| config::ConfigError::Invalid(e.to_string()))?;
    }
    config::load(&cwd, env_overrides(&first.file.model), flags)
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Runs the CLI with parsed arguments.
pub async fn run(cli: Cli) -> ExitCode {
    init_logging(cli.global.verbose);
    if let Command::Trust { path } = &cli.command {
        // Before loading: the file to trust is the one loading would refuse.
        return trust_command(path.as_deref().or(cli.global.config.as_deref()));
    }
    let config = match load_config(&cli.global) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let ConfigSource::File(path) = &config.source {
        tracing::info!(path = %path.display(), "loaded config");
    }
    match cli.command {
        Command::Tools { json } => list_tools(&config, json).await,
        Command::Mcp { command } => mcp_command(&config, command).await,
        Command::Serve {
            host,
            port,
            graph,
            no_auth,
        } => {
            let args = crate::serve::ServeArgs {
                host,
                port,
                graph,
                no_auth,
            };
            crate::serve::run(&config, args).await
        }
        Command::Worker { host, port, graph } => {
            let args = crate::worker::WorkerArgs { host, port, graph };
            crate::worker::run(&config, args).await
        }
        Command::Graphs { json } => list_graphs(&config, json),
        Command::Threads { command } => crate::history::threads_command(&config, command).await,
        Command::Runs {
            command: RunsCommand::Resume { run, json, approve },
        } => resume_run(&config, &run, json, approve).await,
        Command::Runs { command } => crate::history::runs_command(&config, command).await,
        Command::Usage { since, by, json } => {
            crate::history::usage_command(&config, since.as_deref(), by, json).await
        }
        Command::Chat {
            prompt,
            json,
            approve,
            graph,
            attach,
            thread,
            continue_thread,
        } => {
            let attachments = match read_attachments(&attach, config.file.server.max_file_bytes) {
                Ok(attachments) => attachments,
                Err(e) => {
                    eprintln!("agent: {e}");
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            let message = ai_core::Message::user_with(prompt, attachments);
            let thread = match (thread, continue_thread) {
                (Some(name), _) => ThreadChoice::Named(name),
                (None, true) => ThreadChoice::Latest,
                (None, false) => ThreadChoice::None,
            };
            let options = ChatOptions {
                json,
                approve,
                thread,
            };
            chat(&config, message, &graph, options).await
        }
        Command::Trust { .. } => ExitCode::SUCCESS,
    }
}

fn trust_command(path: Option<&std::path::Path>) -> ExitCode {
    let path = path.unwrap_or(std::path::Path::new(crate::tools::CONFIG_FILE));
    match crate::trust::trust_file(path, &crate::trust::UserDirs::from_env()) {
        Ok((canonical, keys)) => {
            println!("trusted {}", canonical.display());
            for key in keys {
                println!("  it sets {key}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("agent: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

async fn list_tools(config: &AgentConfig, json: bool) -> ExitCode {
    let tools = match tools::bind(config) {
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
    let mut tools = tools;
    tools.extend(sources.iter().flat_map(|s| s.tools()));
    let reports = sources.as_ref().map(|s| s.report()).unwrap_or_default();
    let policy = config.file.policy.to_policy();
    let ctx = RunContext::generate();
    let mut listed: Vec<_> = tools.iter().collect();
    listed.sort_by(|a, b| a.spec.id.cmp(&b.spec.id));
    for tool in listed {
        let spec = &tool.spec;
        let decision = match policy.decide(&ctx, &spec.id, spec.effect) {
            PolicyDecision::Allow => "allow",
            PolicyDecision::RequireApproval => "approval",
            PolicyDecision::Deny => "deny",
        };
        let mcp = reports
            .iter()
            .flat_map(|r| r.tools.iter())
            .find(|t| t.id.as_deref() == Some(spec.id.as_str()));
        let withheld = tool.executor.availability().err();
        if json {
            let mut line = serde_json::json!({"id": spec.id.as_str(), "effect": spec.effect, "decision": decision, "description": spec.description});
            if let Some(mcp) = mcp {
                line["pin"] = serde_json::json!(mcp.pin);
                line["mcp_name"] = serde_json::json!(mcp.name);
            }
            if let Some(reason) = &withheld {
                line["withheld"] = serde_json::json!(reason);
            }
            println!("{line}");
        } else {
            let state = match (mcp, &withheld) {
                (_, Some(_)) => "withheld",
                (Some(mcp), None) => mcp.pin.as_str(),
                (None, None) => "",
            };
            println!(
                "{:<28} {:<22} {:<9} {:<11} {}",
                spec.id,
                spec.effect.as_str(),
                decision,
                state,
                crate::render::printable(&spec.description)
            );
            if let Some(reason) = withheld {
                println!("{:<28} withheld: {}", "", crate::render::printable(&reason));
            }
        }
    }
    if let Some(sources) = sources {
        sources.shutdown().await;
    }
    ExitCode::SUCCESS
}

async fn mcp_command(config: &AgentConfig, command: McpCommand) -> ExitCode {
    let sources = match crate::mcp::start(config).await {
        Ok(Some(sources)) => sources,
        Ok(None) => {
            eprintln!("agent: no MCP servers are configured ([mcp.servers.NAME] in the config)");
            return ExitCode::from(EXIT_USAGE);
        }
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = match command {
        McpCommand::List { json } => {
            for server in sources.report() {
                if json {
                    println!(
                        "{}",
                        serde_json::to_string(&server).unwrap_or_else(|_| "{}".to_owned())
                    );
                    continue;
                }
                println!(
                    "{} ({} {}): {}",
                    server.id,
                    server.transport,
                    crate::render::printable(&server.target),
                    crate::render::printable(&server.status)
                );
                for tool in &server.tools {
                    println!(
                        "  {:<24} {:<22} {:<11} {}",
                        crate::render::printable(&tool.name),
                        tool.effect.as_str(),
                        tool.pin.as_str(),
                        crate::render::printable(&tool.description)
                    );
                    if let Some(id) = &tool.id {
                        println!("  {:<24} id: {id}", "");
                    }
                    if let Some(annotations) = &tool.annotations {
                        println!("  {:<24} annotations (not trusted): {annotations}", "");
                    }
                    if let Some(reason) = &tool.withheld {
                        println!(
                            "  {:<24} withheld: {}",
                            "",
                            crate::render::printable(reason)
                        );
                    }
                }
            }
            ExitCode::SUCCESS
        }
        McpCommand::Pin { server } => {
            let path = crate::mcp::lock_path(config);
            let outcome = crate::mcp::read_pins(&path).and_then(|pins| {
                let updated = sources.accept(&server, &pins).ok_or_else(|| {
                    format!("MCP server `{server}` is not configured or did not start")
                })?;
                let count = updated.servers.get(&server).map_or(0, BTreeMap::len);
                crate::mcp::write_pins(&path, &updated)?;
                Ok(count)
            });
            match outcome {
                Ok(count) => {
                    println!(
                        "pinned {count} tool definition(s) of `{server}` in {}",
                        path.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("agent: {e}");
                    ExitCode::from(EXIT_USAGE)
                }
            }
        }
    };
    sources.shutdown().await;
    code
}

fn list_graphs(config: &AgentConfig, json: bool) -> ExitCode {
    for graph in crate::graphs::listing(config) {
        if json {
            println!(
                "{}",
                serde_json::to_string(&graph).unwrap_or_else(|_| "{}".to_owned())
            );
        } else {
            println!("{:<20} {}", graph.name, graph.description);
            let tools: Vec<&str> = graph.tools.iter().map(ToolPattern::as_str).collect();
            println!("{:<20} tools: {}", "", tools.join(", "));
            if !graph.subagents.is_empty() {
                println!("{:<20} subagents: {}", "", graph.subagents.join(", "));
            }
        }
    }
    ExitCode::SUCCESS
}

/// The files of `--attach`, each at most `limit` bytes.
fn read_attachments(
    paths: &[PathBuf],
    limit: usize,
) -> Result<Vec<ai_core::message::Attachment>, String> {
    paths
        .iter()
        .map(|path| {
            let name = path
                .file_name()
                .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
            let size = std::fs::metadata(path)
                .map_err(|e| format!("cannot attach {}: {e}", path.display()))?
                .len();
            if size > limit as u64 {
                return Err(format!(
                    "cannot attach {}: it is {size} bytes, over the limit of {limit} ([server] max_file_bytes)",
                    path.display()
                ));
            }
            let bytes = std::fs::read(path)
                .map_err(|e| format!("cannot attach {}: {e}", path.display()))?;
            ai_core::message::Attachment::from_bytes(&name, None, &bytes, limit)
                .map_err(|e| format!("cannot attach {}: {e}", path.display()))
        })
        .collect()
}

/// Which thread `agent chat` continues.
pub(crate) enum ThreadChoice {
    /// None: the run stands alone (it is still recorded).
    None,
    /// This one (created when new).
    Named(String),
    /// The most recent one.
    Latest,
}

/// How `agent chat` runs.
pub(crate) struct ChatOptions {
    json: bool,
    approve: bool,
    thread: ThreadChoice,
}

async fn chat(
    config: &AgentConfig,
    prompt: ai_core::Message,
    graph: &str,
    options: ChatOptions,
) -> ExitCode {
    let (store, thread) = match crate::history::for_chat(config, &options.thread, &prompt).await {
        Ok(found) => found,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut session = match crate::session::Session::open(config, graph, false).await {
        Ok(session) => session,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let tools = std::mem::take(&mut session.tools);
    let code = chat_with(
        config,
        tools,
        &session.graph,
        session.policy.clone(),
        Arc::clone(&session.model),
        prompt,
        options,
        store.map(|store| (store, thread)),
    )
    .await;
    // Every MCP server ends with the command (sessions deleted, process groups
    // terminated), whether the run succeeded, failed or was cancelled.
    session.close().await;
    code
}

#[allow(clippy::too_many_arguments)]
async fn chat_with(
    config: &AgentConfig,
    tools: Vec<ai_core::tool::RegisteredTool>,
    graph: &agent_graph::Graph,
    policy: ai_core::ToolPolicy,
    model: Arc<dyn CompletionPort>,
    prompt: ai_core::Message,
    options: ChatOptions,
    store: Option<(agent_store::Store, Option<crate::history::ChatThread>)>,
) -> ExitCode {
    let json = options.json;
    let approver = CliApprover::new(ApprovalMode::detect(options.approve));
    let prompting = approver.prompting();
    let runner = match ToolRunner::new(tools, policy) {
        Ok(runner) => runner.with_approver(Arc::new(approver)),
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let runner = Arc::new(runner);
    let mut conversation = store
        .as_ref()
        .and_then(|(_, thread)| thread.as_ref())
        .map(|thread| thread.history.clone())
        .unwrap_or_default();
    conversation.push(prompt);
    let model_id = &config.file.model.model;
    let params = agent_graph::prompt::Params::new();
    let prepared = match graph.prepare(
        RunContext::generate(),
        &runner,
        model_id,
        conversation,
        &params,
    ) {
        Ok(prepared) => prepared,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let recording = match store {
        Some((store, thread)) => {
            crate::history::start_recording(config, store, &prepared, thread).await
        }
        None => None,
    };
    // A recorded run is durable: its steps journaled, so `agent runs resume`
    // goes on with it if this process dies.
    let handle = match &recording {
        Some(recording) => {
            let journal = recording.journal(&prepared.request);
            let start = agent_graph::journal::RunStart::New {
                request: prepared.request.clone(),
            };
            agent_graph::run::durable(start, prepared.deps(model, runner), journal)
        }
        None => prepared.start(model, runner),
    };
    show_run(handle, recording, json, &prompting).await
}

/// `agent runs resume RUN`: the run's graph bound again, its journal replayed,
/// and the rest of it run and shown like `agent chat`.
async fn resume_run(config: &AgentConfig, run_id: &str, json: bool, approve: bool) -> ExitCode {
    let (saved, recording, journal) = match crate::history::reopen(config, run_id).await {
        Ok(reopened) => reopened,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let session = match crate::session::Session::open(config, &saved.graph, false).await {
        Ok(session) => session,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let approver = CliApprover::new(ApprovalMode::detect(approve));
    let prompting = approver.prompting();
    let code = match ToolRunner::new(session.tools.clone(), session.policy.clone()) {
        Ok(runner) => {
            let runner = Arc::new(runner.with_approver(Arc::new(approver)));
            let model = Arc::clone(&session.model);
            match session.graph.durable(saved.start, model, runner, journal) {
                Ok(handle) => show_run(handle, Some(recording), json, &prompting).await,
                Err(e) => {
                    eprintln!("agent: {e}");
                    ExitCode::from(EXIT_USAGE)
                }
            }
        }
        Err(e) => {
            eprintln!("agent: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    };
    session.close().await;
    code
}

/// Shows a run's events (JSON lines or the human rendering) as they come,
/// records them, and says how it ended. Ctrl-C cancels it.
async fn show_run(
    handle: agent_graph::RunHandle,
    mut recording: Option<crate::history::Recording>,
    json: bool,
    prompting: &Arc<std::sync::atomic::AtomicBool>,
) -> ExitCode {
    let cancel = handle.cancel_token();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let (mut events, outcome) = handle.into_parts();
    if json {
        let mut out = std::io::stdout().lock();
        while let Some(event) = events.next().await {
            if let Some(recording) = &mut recording {
                recording.record(&event);
            }
            if json_line(&mut out, &event).is_err() {
                break;
            }
        }
    } else {
        let terminal = std::io::stderr().is_terminal();
        let mut renderer = HumanRenderer::new(std::io::stdout(), std::io::stderr(), terminal);
        let mut spinner = tokio::time::interval(std::time::Duration::from_millis(100));
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(event) => {
                        if let Some(recording) = &mut recording {
                            recording.record(&event);
                        }
                        renderer.event(&event);
                    }
                    None => break,
                },
                _ = spinner.tick(), if terminal && renderer.tools_running() => {
                    if !prompting.load(std::sync::atomic::Ordering::SeqCst) {
                        renderer.tick();
                    }
                }
            }
        }
    }
    let outcome = outcome.await;
    if let Some(recording) = recording {
        recording.finish(&outcome).await;
    }
    match outcome {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(EXIT_RUN_ERROR),
    }
}
