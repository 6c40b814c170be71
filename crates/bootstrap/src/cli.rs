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

/// What `agent --help` opens with: what the program does for its user.
const ABOUT: &str = "Chat with an LLM that uses tools on your machine (files, shell, web, MCP servers), \
every call checked by your policy and the risky ones approved by you.";

/// Below the commands of `agent --help`.
const AFTER_HELP: &str = "\
Start:
  agent init --openai            write a starter agent.toml
  agent chat                     talk (interactive; Ctrl-D ends)
  agent chat \"What time is it?\"  one prompt, one answer
With no endpoint configured, the embedded offline TestModel answers (and says so).
Each command has its own --help with an example.";

/// The `agent` command line.
#[derive(Debug, Parser)]
#[command(name = "agent", version, about = ABOUT, long_about = None, after_help = AFTER_HELP)]
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
    /// (Messages API; key from ANTHROPIC_API_KEY), `responses` (OpenAI's
    /// Responses API) or `gemini` (Gemini's own API; key from GEMINI_API_KEY).
    #[arg(long, global = true, value_name = "API")]
    pub api: Option<config::ModelApi>,
    /// The endpoint's base URL (overrides config and the API's variable:
    /// OPENAI_BASE_URL, ANTHROPIC_BASE_URL or GEMINI_BASE_URL).
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
    /// Talk with the model: one prompt, or an interactive session.
    ///
    /// With a prompt (or one piped on stdin) it answers once. Without one, on
    /// a terminal, it opens a session: each turn continues the same thread,
    /// Ctrl-C stops the answer being written, Ctrl-D ends the session, and
    /// `/help` lists the commands (`/tools`, `/graph NAME`, `/new`, `/attach
    /// FILE`). History is kept across sessions.
    #[command(
        after_help = "Examples:\n  agent chat\n  agent chat \"List the files here\"\n  echo \"Summarise README.md\" | agent chat --attach README.md"
    )]
    Chat {
        /// The prompt (none: read stdin when it is piped, else start a session).
        prompt: Option<String>,
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
    #[command(after_help = "Example:\n  agent threads show notes")]
    Threads {
        /// What to do (default: list).
        #[command(subcommand)]
        command: Option<ThreadsCommand>,
    },
    /// Stored runs: list, show, resume one that was cut.
    #[command(after_help = "Example:\n  agent runs list --thread notes")]
    Runs {
        /// What to do.
        #[command(subcommand)]
        command: RunsCommand,
    },
    /// Token usage of the stored runs (the billing report).
    #[command(after_help = "Example:\n  agent usage --since 2026-11-01 --by day")]
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
    /// List the graphs: the built-in `chat` and those of `[graphs]`.
    ///
    /// Each with its description, tools and subagents.
    #[command(after_help = "Example:\n  agent graphs --json")]
    Graphs {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List every tool with its effect and the policy's decision.
    #[command(after_help = "Example:\n  agent tools")]
    Tools {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Serve the chat page and the chat endpoint for web UIs.
    ///
    /// `POST /api/chat` and the page at `/`: the same model, tools and policy
    /// as `agent chat`; calls that need approval are approved in the UI, with
    /// server-bound approval ids.
    #[command(after_help = "Example:\n  agent serve --port 8787   (open the address it prints)")]
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
    /// Run durable runs for a Restate server.
    ///
    /// With `[durable] engine = "restate"`: serves the runs' handler on an
    /// HTTP/2 endpoint and registers it with the server's admin API (`[durable]
    /// restate_admin`). Needs the run store that `agent serve` uses (a Postgres
    /// store, for workers on several machines).
    #[command(after_help = "Example:\n  agent worker --port 9080")]
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
    /// Rotate the servers' shared key, or make a Restate identity key pair.
    ///
    /// The key file (`[store] key_file`) seals what crosses Restate and
    /// derives the approval key; a Restate server signs its requests to
    /// workers with an identity key.
    #[command(
        after_help = "Examples:\n  agent keys rotate\n  agent keys restate-identity --out restate-identity.pem"
    )]
    Keys {
        /// What to do.
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// MCP servers: list them with their tools, or pin their definitions.
    #[command(after_help = "Example:\n  agent mcp list")]
    Mcp {
        /// What to do.
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Trust a config file's current content.
    ///
    /// A config that redirects requests, changes the API key variable or
    /// loosens policy is used only once trusted; any later change needs
    /// trusting again.
    #[command(after_help = "Example:\n  agent trust agent.toml")]
    Trust {
        /// The config file (default: --config, else ./agent.toml).
        path: Option<PathBuf>,
    },
    /// Write a commented starter agent.toml for an endpoint.
    ///
    /// Refuses to overwrite an existing file; prints the next command to run.
    #[command(
        after_help = "Examples:\n  agent init --openai\n  agent init --anthropic\n  agent init --local http://127.0.0.1:11434/v1"
    )]
    Init {
        /// OpenAI (key from OPENAI_API_KEY).
        #[arg(long, group = "endpoint")]
        openai: bool,
        /// Anthropic (key from ANTHROPIC_API_KEY).
        #[arg(long, group = "endpoint")]
        anthropic: bool,
        /// Gemini's own API (key from GEMINI_API_KEY).
        #[arg(long, group = "endpoint")]
        gemini: bool,
        /// A local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LiteLLM).
        #[arg(long, group = "endpoint", value_name = "URL")]
        local: Option<String>,
        /// Where to write it (default: ./agent.toml).
        #[arg(long, value_name = "PATH")]
        path: Option<PathBuf>,
    },
    /// Print a shell completion script (bash, zsh or fish).
    #[command(
        after_help = "Example:\n  agent completions bash > ~/.local/share/bash-completion/completions/agent"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
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

/// `agent keys` commands.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum KeysCommand {
    /// Put a fresh key first in the key file the servers and workers on the
    /// store share (`[store] key_file`): restart them all, then delete the old
    /// line once nothing sealed under it waits (an hour).
    Rotate,
    /// Make a request identity key pair for a Restate server: the private key
    /// (for its `request-identity-private-key-pem-file`) is written to a new
    /// private file, the public key printed for `[durable]
    /// restate_identity_keys`.
    RestateIdentity {
        /// Where to write the private key (refused when it exists).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
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

/// `agent keys rotate|restate-identity`.
fn keys_command(config: &AgentConfig, command: KeysCommand) -> ExitCode {
    match command {
        KeysCommand::Rotate => match crate::keys::rotate(config) {
            Ok(path) => {
                println!(
                    "agent: a new key is first in {}; restart every server and worker on the store, then delete the old line in an hour",
                    path.display()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("agent: {e}");
                ExitCode::from(EXIT_RUN_ERROR)
            }
        },
        KeysCommand::RestateIdentity { out } => {
            let written = agent_durable::restate::IdentityKeyPair::generate().and_then(|pair| {
                crate::keys::write_new_private(&out, &pair.private_pem).map(|()| pair)
            });
            match written {
                Ok(pair) => {
                    println!(
                        "agent: wrote the private key to {} (give it to the Restate server as request-identity-private-key-pem-file, or RESTATE_WORKER__INVOKER__REQUEST_IDENTITY_PRIVATE_KEY_PEM_FILE)\n\n[durable]\nrestate_identity_keys = [\"{}\"]",
                        out.display(),
                        pair.public_key
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("agent: {e}");
                    ExitCode::from(EXIT_RUN_ERROR)
                }
            }
        }
    }
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
    // The file is read once: a config that redirects requests, picks the secret
    // or loosens policy needs `agent trust` first (PROJECT_CONFIG_TRUSTED_EXPLICITLY),
    // and the bytes checked are the bytes used.
    let read = config::find(&cwd, &flags)?;
    if let Some(read) = &read {
        crate::trust::enforce_read(
            &read.canonical,
            &read.sha256,
            &read.file,
            &crate::trust::UserDirs::from_env(),
        )
        .map_err(|e| config::ConfigError::Invalid(e.to_string()))?;
    }
    // The API and the key variable's name may come from the file: built once to
    // learn them.
    let first = config::build(read.as_ref(), &cwd, EnvOverrides::default(), flags.clone())?;
    config::build(read.as_ref(), &cwd, env_overrides(&first.file.model), flags)
}

/// The environment variable a caller sets to continue its trace (the
/// convention's environment carrier of a W3C `traceparent`).
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";

/// The environment variable that carries the caller's `tracestate` beside
/// [`TRACEPARENT_ENV`].
pub const TRACESTATE_ENV: &str = "TRACESTATE";

/// A run context for a run the CLI starts: continuing the trace `TRACEPARENT`
/// names (with `TRACESTATE`), or a new one.
pub(crate) fn run_context_from_env() -> RunContext {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let traceparent = var(TRACEPARENT_ENV);
    let tracestate = var(TRACESTATE_ENV);
    RunContext::from_traceparent(traceparent.as_deref()).with_trace_state(tracestate.as_deref())
}

/// Installs the process's subscriber: the log on stderr (filtered by `RUST_LOG`
/// or `-v`) and, when telemetry runs, the exporting layer (with its own filter:
/// the log's level does not decide what is exported).
fn init_logging(verbose: u8, telemetry: Option<&crate::telemetry::Exporter>) {
    use tracing_subscriber::{EnvFilter, Layer as _, layer::SubscriberExt as _};
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter);
    let subscriber = tracing_subscriber::registry().with(log);
    #[cfg(feature = "telemetry")]
    let subscriber = subscriber.with(telemetry.map(agent_telemetry::Telemetry::layer));
    #[cfg(not(feature = "telemetry"))]
    let _ = telemetry;
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Runs the CLI with parsed arguments.
pub async fn run(cli: Cli) -> ExitCode {
    if !matches!(
        cli.command,
        Command::Trust { .. } | Command::Completions { .. } | Command::Init { .. }
    ) {
        return run_loaded(cli).await;
    }
    init_logging(cli.global.verbose, None);
    if let Command::Trust { path } = &cli.command {
        // Before loading: the file to trust is the one loading would refuse.
        return trust_command(path.as_deref().or(cli.global.config.as_deref()));
    }
    if let Command::Completions { shell } = cli.command {
        use clap::CommandFactory as _;
        clap_complete::generate(shell, &mut Cli::command(), "agent", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    if let Command::Init {
        openai,
        anthropic,
        gemini,
        local,
        path,
    } = cli.command
    {
        // Before loading: there is no config yet.
        return init_command(openai, anthropic, gemini, local, path);
    }
    ExitCode::SUCCESS
}

/// A command that loads the configuration: the log and telemetry it configures
/// installed first, telemetry flushed last.
async fn run_loaded(cli: Cli) -> ExitCode {
    let config = match load_config(&cli.global) {
        Ok(config) => config,
        Err(e) => {
            init_logging(cli.global.verbose, None);
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let telemetry = crate::telemetry::start(&config).await;
    init_logging(cli.global.verbose, telemetry.as_ref());
    if let ConfigSource::File(path) = &config.source {
        tracing::info!(path = %path.display(), "loaded config");
    }
    let code = dispatch(cli.command, &config).await;
    crate::telemetry::stop(telemetry).await;
    code
}

/// Runs a command that needs the configuration.
async fn dispatch(command: Command, config: &AgentConfig) -> ExitCode {
    match command {
        Command::Tools { json } => list_tools(config, json).await,
        Command::Mcp { command } => mcp_command(config, command).await,
        Command::Keys { command } => keys_command(config, command),
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
            crate::serve::run(config, args).await
        }
        Command::Worker { host, port, graph } => {
            let args = crate::worker::WorkerArgs { host, port, graph };
            crate::worker::run(config, args).await
        }
        Command::Graphs { json } => list_graphs(config, json),
        Command::Threads { command } => crate::history::threads_command(config, command).await,
        Command::Runs {
            command: RunsCommand::Resume { run, json, approve },
        } => resume_run(config, &run, json, approve).await,
        Command::Runs { command } => crate::history::runs_command(config, command).await,
        Command::Usage { since, by, json } => {
            crate::history::usage_command(config, since.as_deref(), by, json).await
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
            let prompt = match prompt {
                Some(prompt) => prompt,
                None if std::io::stdin().is_terminal() && !json => {
                    if !attach.is_empty() || thread.is_some() || continue_thread {
                        eprintln!(
                            "agent: an interactive session takes no --attach, --thread or --continue (use /attach; each session is a thread)"
                        );
                        return ExitCode::from(EXIT_USAGE);
                    }
                    return crate::interactive::run(config, graph, approve).await;
                }
                None => match read_stdin_prompt() {
                    Ok(prompt) => prompt,
                    Err(e) => {
                        eprintln!("agent: {e}");
                        return ExitCode::from(EXIT_USAGE);
                    }
                },
            };
            let attachments =
                match crate::attach::read_attachments(&attach, config.file.server.max_file_bytes) {
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
            chat(config, message, &graph, options).await
        }
        // Handled before the config is loaded.
        Command::Trust { .. } | Command::Init { .. } | Command::Completions { .. } => {
            ExitCode::SUCCESS
        }
    }
}

/// `agent init`: the starter config for the endpoint chosen.
fn init_command(
    openai: bool,
    anthropic: bool,
    gemini: bool,
    local: Option<String>,
    path: Option<PathBuf>,
) -> ExitCode {
    use crate::init::Endpoint;
    let endpoint = match (openai, anthropic, gemini, local) {
        (true, ..) => Endpoint::OpenAi,
        (_, true, ..) => Endpoint::Anthropic,
        (_, _, true, _) => Endpoint::Gemini,
        (.., Some(url)) => Endpoint::Local(url),
        _ => {
            eprintln!("agent: say which endpoint: --openai, --anthropic, --gemini or --local URL");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let path = path.unwrap_or_else(|| PathBuf::from(crate::tools::CONFIG_FILE));
    match crate::init::write_starter(&path, &endpoint) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("agent: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// A prompt piped on stdin (at most 1 MiB), for a one-shot `agent chat`.
fn read_stdin_prompt() -> Result<String, String> {
    use std::io::Read as _;
    const MAX: u64 = 1024 * 1024;
    let mut text = String::new();
    std::io::stdin()
        .take(MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
    if text.len() as u64 > MAX {
        return Err("the prompt on stdin is over 1 MiB".into());
    }
    if text.trim().is_empty() {
        return Err("no prompt: give one (`agent chat \"...\"`), pipe one on stdin, or run `agent chat` on a terminal for a session".into());
    }
    Ok(text)
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
    let mut table =
        crate::table::TextTable::new(&["tool", "effect", "decision", "state", "description"]);
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
            continue;
        }
        let (state, description) = match (mcp, &withheld) {
            (_, Some(reason)) => ("withheld", format!("withheld: {reason}")),
            (Some(mcp), None) => (mcp.pin.as_str(), spec.description.clone()),
            (None, None) => ("", spec.description.clone()),
        };
        table.row([
            spec.id.as_str(),
            spec.effect.as_str(),
            decision,
            state,
            &description,
        ]);
    }
    if !json {
        table.print();
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
                let mut table =
                    crate::table::TextTable::new(&["tool", "effect", "pin", "description"]);
                let mut notes = Vec::new();
                for tool in &server.tools {
                    let name = tool.id.clone().unwrap_or_else(|| tool.name.clone());
                    let description = match &tool.withheld {
                        Some(reason) => format!("withheld: {reason}"),
                        None => tool.description.clone(),
                    };
                    table.row([
                        name.as_str(),
                        tool.effect.as_str(),
                        tool.pin.as_str(),
                        &description,
                    ]);
                    if let Some(annotations) = &tool.annotations {
                        notes.push(format!(
                            "  {}: annotations (not trusted): {annotations}",
                            crate::render::printable(&name)
                        ));
                    }
                }
                for line in table.lines() {
                    println!("  {line}");
                }
                for note in notes {
                    println!("{note}");
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
    let mut table = crate::table::TextTable::new(&["graph", "tools", "subagents", "description"]);
    for graph in crate::graphs::listing(config) {
        if json {
            println!(
                "{}",
                serde_json::to_string(&graph).unwrap_or_else(|_| "{}".to_owned())
            );
            continue;
        }
        let tools: Vec<&str> = graph.tools.iter().map(ToolPattern::as_str).collect();
        let subagents = if graph.subagents.is_empty() {
            "-".to_owned()
        } else {
            graph.subagents.join(", ")
        };
        table.row([
            graph.name.as_str(),
            &tools.join(", "),
            &subagents,
            &graph.description,
        ]);
    }
    if !json {
        table.print();
    }
    ExitCode::SUCCESS
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
    pub(crate) json: bool,
    pub(crate) approve: bool,
    pub(crate) thread: ThreadChoice,
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
pub(crate) async fn chat_with(
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
    let mut context = run_context_from_env();
    if let Some(thread) = store.as_ref().and_then(|(_, thread)| thread.as_ref()) {
        context = context.with_conversation_id(thread.id.clone());
    }
    let prepared = match graph.prepare(context, &runner, model_id, conversation, &params) {
        Ok(prepared) => prepared,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let deps = prepared.deps(model, runner);
    let start = agent_graph::journal::RunStart::New {
        request: prepared.request,
    };
    // A recorded run is durable: its steps journaled, so `agent runs resume`
    // goes on with it if this process dies.
    let shown = match store {
        Some((store, thread)) => {
            let threaded = thread.is_some();
            let started =
                crate::history::start_recorded(config, &store, start.clone(), deps.clone(), thread)
                    .await;
            match started {
                Ok((run, runs)) => Shown::Recorded(Box::new(run), runs),
                // A thread's turn is never run unrecorded: it would be lost.
                Err(e) if threaded => {
                    eprintln!("agent: {e}");
                    return ExitCode::from(EXIT_RUN_ERROR);
                }
                Err(e) => {
                    eprintln!("agent: the run store refused the run, so it is not recorded: {e}");
                    Shown::Plain(agent_graph::run::start(start, deps))
                }
            }
        }
        None => Shown::Plain(agent_graph::run::start(start, deps)),
    };
    show_run(shown, json, &prompting).await
}

/// `agent runs resume RUN`: the run's graph bound again, its journal replayed,
/// and the rest of it run and shown like `agent chat`.
async fn resume_run(config: &AgentConfig, run_id: &str, json: bool, approve: bool) -> ExitCode {
    let reopened = match crate::history::reopen(config, run_id).await {
        Ok(reopened) => reopened,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let session = match crate::session::Session::open(config, &reopened.saved.graph, false).await {
        Ok(session) => session,
        Err(e) => {
            reopened.runs.instance().release().await;
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let approver = CliApprover::new(ApprovalMode::detect(approve));
    let prompting = approver.prompting();
    let crate::history::Reopened {
        saved,
        record,
        runs,
        lease,
        journal,
    } = reopened;
    let handle = ToolRunner::new(session.tools.clone(), session.policy.clone())
        .map_err(|e| e.to_string())
        .and_then(|runner| {
            let runner = Arc::new(runner.with_approver(Arc::new(approver)));
            let model = Arc::clone(&session.model);
            let spec = agent_durable::RunSpec::new(
                crate::history::LOCAL_ACCOUNT,
                (
                    saved.graph.clone(),
                    saved.model.clone(),
                    saved.prompt_hash.clone(),
                ),
            )
            .with_answer_id(agent_durable::answer_id(&record.id));
            session
                .graph
                .durable(saved.start, model, runner, journal)
                .map(|handle| runs.go_on(spec, (handle, &record), (Some(lease), saved.kept)))
                .map_err(|e| e.to_string())
        });
    let code = match handle {
        Ok(run) => show_run(Shown::Recorded(Box::new(run), runs), json, &prompting).await,
        Err(e) => {
            runs.instance().release().await;
            eprintln!("agent: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    };
    session.close().await;
    code
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A run `agent chat` shows: recorded by this process's run owner, or (no
/// store) not recorded.
enum Shown {
    Recorded(Box<agent_durable::RecordedRun>, agent_durable::Runs),
    Plain(agent_graph::RunHandle),
}

/// The events of a [`Shown`] run, one at a time.
enum ShownEvents {
    Recorded(Box<agent_durable::RecordedRun>, agent_durable::Runs),
    Plain(
        agent_graph::run::EventStream,
        agent_graph::run::OutputFuture,
    ),
}

impl ShownEvents {
    async fn next(&mut self) -> Option<ai_core::AiEvent> {
        match self {
            Self::Recorded(run, _) => run.next().await,
            Self::Plain(events, _) => events.next().await,
        }
    }

    /// The run's outcome, its end recorded and this process's lease given up.
    async fn finish(self) -> Result<agent_graph::run::RunOutput, agent_graph::run::RunError> {
        match self {
            Self::Recorded(run, runs) => {
                let lost = run.lost();
                let outcome = run.finish().await;
                if lost {
                    eprintln!(
                        "agent: this process lost its lease on the run; its end is not recorded"
                    );
                }
                runs.instance().release().await;
                outcome
            }
            Self::Plain(_, outcome) => outcome.await,
        }
    }
}

/// Shows a run's events (JSON lines or the human rendering) as they come,
/// records them, and says how it ended. Ctrl-C cancels it.
async fn show_run(
    shown: Shown,
    json: bool,
    prompting: &Arc<std::sync::atomic::AtomicBool>,
) -> ExitCode {
    let (cancel, mut events) = match shown {
        Shown::Recorded(run, runs) => (run.cancel_token(), ShownEvents::Recorded(run, runs)),
        Shown::Plain(handle) => {
            let cancel = handle.cancel_token();
            let (events, outcome) = handle.into_parts();
            (cancel, ShownEvents::Plain(events, outcome))
        }
    };
    // Ctrl-C cancels this run only: the listener ends with it (an interactive
    // session goes on to its next prompt).
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let _stop_listening = AbortOnDrop(ctrl_c);
    if json {
        let mut out = std::io::stdout().lock();
        while let Some(event) = events.next().await {
            if json_line(&mut out, &event).is_err() {
                break;
            }
        }
    } else {
        render_events(&mut events, prompting).await;
    }
    match events.finish().await {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(EXIT_RUN_ERROR),
    }
}

/// Renders a run's events for a person as they come (a spinner while tools
/// run on a terminal, unless an approval prompt is up).
async fn render_events(events: &mut ShownEvents, prompting: &Arc<std::sync::atomic::AtomicBool>) {
    let terminal = std::io::stderr().is_terminal();
    let mut renderer = HumanRenderer::new(std::io::stdout(), std::io::stderr(), terminal);
    let mut spinner = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(event) => renderer.event(&event),
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
