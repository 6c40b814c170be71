//! `agent chat` without a prompt on a terminal: an interactive session on a
//! line editor (rustyline).
//!
//! - Each turn continues one thread of the run store (a new one per session,
//!   and per `/new`), so the model sees the earlier turns.
//! - Ctrl-C while an answer is written stops that answer (the run is
//!   cancelled) and the session goes on; Ctrl-C at the prompt clears the
//!   line; Ctrl-D (or `/exit`) ends the session.
//! - A line ending with `\` continues on the next line (multi-line input).
//! - History is kept across sessions in the agent's data folder
//!   (`$XDG_DATA_HOME/agent/chat-history`).
//! - Approvals are asked inline, as in one-shot `agent chat`.

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::ExitCode;

use ai_core::{RunContext, policy::PolicyDecision};
use rustyline::error::ReadlineError;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Completer, Helper, Highlighter, Hinter};

use crate::cli::{ChatOptions, EXIT_USAGE, ThreadChoice};
use crate::config::AgentConfig;
use crate::session::Session;

/// The prompt of the line editor.
pub const PROMPT: &str = "you> ";

/// What `/help` prints.
const HELP: &str = "\
Type a message and press Enter. End a line with \\ to go on with the next.
  /tools        the tools this graph offers, with the policy's decision
  /graph NAME   run graph NAME from the next turn (`agent graphs` lists them)
  /new          start a new conversation (a new thread)
  /attach FILE  attach a file (image or text) to the next message
  /help         this help
  /exit         end the session (or Ctrl-D)
Ctrl-C stops the answer being written; the session goes on.";

/// Lines ending with `\` continue on the next one.
#[derive(Completer, Helper, Highlighter, Hinter)]
struct Lines;

impl Validator for Lines {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

/// One line of input, read.
enum Input {
    /// A message for the model.
    Message(String),
    /// A `/` command.
    Command(String, String),
    /// Nothing (an empty line, or Ctrl-C at the prompt).
    Nothing,
    /// The session ends.
    End,
}

/// The state of a session.
struct State {
    graph: String,
    thread: Option<String>,
    attachments: Vec<ai_core::message::Attachment>,
    approve: bool,
}

/// Where the session's history is kept.
fn history_path() -> Option<PathBuf> {
    crate::trust::UserDirs::from_env()
        .data_home
        .map(|d| d.join("agent").join("chat-history"))
}

/// Runs the interactive session on graph `graph` (`approve`: approve every
/// call that needs approval).
pub async fn run(config: &AgentConfig, graph: String, approve: bool) -> ExitCode {
    let mut editor = match rustyline::Editor::<Lines, rustyline::history::FileHistory>::new() {
        Ok(editor) => editor,
        Err(e) => {
            eprintln!("agent: cannot start the line editor: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    editor.set_helper(Some(Lines));
    let history = history_path();
    if let Some(path) = &history {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.load_history(path);
    }
    let mut session = match Session::open(config, &graph, false).await {
        Ok(session) => session,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut state = State {
        graph,
        thread: None,
        attachments: Vec::new(),
        approve,
    };
    eprintln!(
        "agent: graph `{}`; /help lists the commands, Ctrl-D ends",
        state.graph
    );
    loop {
        let input = tokio::task::block_in_place(|| read(&mut editor));
        if let (Some(path), Input::Message(_) | Input::Command(..)) = (&history, &input) {
            let _ = editor.save_history(path);
        }
        match input {
            Input::End => break,
            Input::Nothing => {}
            Input::Command(name, arg) => {
                match command(config, &mut session, &mut state, &name, &arg).await {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => eprintln!("agent: {e}"),
                }
            }
            Input::Message(text) => turn(config, &session, &mut state, text).await,
        }
    }
    session.close().await;
    ExitCode::SUCCESS
}

/// Reads one input from the editor.
fn read(editor: &mut rustyline::Editor<Lines, rustyline::history::FileHistory>) -> Input {
    match editor.readline(PROMPT) {
        Ok(line) => {
            let text = line.replace("\\\n", "\n");
            let trimmed = text.trim();
            if trimmed.is_empty() {
                return Input::Nothing;
            }
            let _ = editor.add_history_entry(line.as_str());
            match trimmed.strip_prefix('/') {
                Some(command) if !command.starts_with('/') => {
                    let (name, arg) = command.split_once(' ').unwrap_or((command, ""));
                    Input::Command(name.to_owned(), arg.trim().to_owned())
                }
                _ => Input::Message(text),
            }
        }
        Err(ReadlineError::Interrupted) => Input::Nothing,
        Err(ReadlineError::Eof) => Input::End,
        Err(e) => {
            eprintln!("agent: cannot read the terminal: {e}");
            Input::End
        }
    }
}

/// Runs one `/` command; `Ok(false)` ends the session.
async fn command(
    config: &AgentConfig,
    session: &mut Session,
    state: &mut State,
    name: &str,
    arg: &str,
) -> Result<bool, String> {
    match name {
        "help" | "?" => println!("{HELP}"),
        "exit" | "quit" => return Ok(false),
        "new" => {
            state.thread = None;
            state.attachments.clear();
            println!("(new conversation)");
        }
        "tools" => tools_table(session).print(),
        "graph" if arg.is_empty() => println!("graph: {}", state.graph),
        "graph" => {
            let next = Session::open(config, arg, false).await?;
            let previous = std::mem::replace(session, next);
            previous.close().await;
            state.graph = arg.to_owned();
            println!("(graph `{arg}` from the next turn)");
        }
        "attach" if arg.is_empty() => return Err("/attach needs a file".into()),
        "attach" => {
            let path = PathBuf::from(arg);
            let limit = config.file.server.max_file_bytes;
            let mut read = crate::attach::read_attachments(&[path], limit)?;
            state.attachments.append(&mut read);
            println!(
                "(attached {arg}; {} file(s) go with the next message)",
                state.attachments.len()
            );
        }
        other => {
            return Err(format!(
                "unknown command /{other} (/help lists them; start a message with // to send a slash)"
            ));
        }
    }
    Ok(true)
}

/// The tools of `session` as a table.
fn tools_table(session: &Session) -> crate::table::TextTable {
    let ctx = RunContext::generate();
    let mut table = crate::table::TextTable::new(&["tool", "effect", "decision", "description"]);
    let specs = session.tools.iter().map(|t| t.spec.clone());
    let catalog = match ai_core::ToolCatalog::build(specs, &session.policy, &ctx) {
        Ok(catalog) => session.graph.select_tools(catalog),
        Err(e) => {
            eprintln!("agent: {e}");
            return table;
        }
    };
    for spec in catalog.specs() {
        let decision = match session.policy.decide(&ctx, &spec.id, spec.effect) {
            PolicyDecision::Allow => "allow",
            PolicyDecision::RequireApproval => "approval",
            PolicyDecision::Deny => "deny",
        };
        table.row([
            spec.id.as_str(),
            spec.effect.as_str(),
            decision,
            &spec.description,
        ]);
    }
    table
}

/// Sends `text` (with the pending attachments) as the next turn of the
/// session's thread.
async fn turn(config: &AgentConfig, session: &Session, state: &mut State, text: String) {
    let text = match text.trim_start().strip_prefix("//") {
        Some(rest) => Cow::Owned(format!("/{rest}")),
        None => Cow::Borrowed(text.as_str()),
    };
    let message =
        ai_core::Message::user_with(text.into_owned(), std::mem::take(&mut state.attachments));
    let name = state
        .thread
        .get_or_insert_with(|| {
            let now = jiff::Timestamp::now();
            format!("chat-{}", now.strftime("%Y%m%d-%H%M%S"))
        })
        .clone();
    let choice = ThreadChoice::Named(name);
    let (store, thread) = match crate::history::for_chat(config, &choice, &message).await {
        Ok(found) => found,
        Err(e) => {
            eprintln!("agent: {e}; this turn stands alone");
            (None, None)
        }
    };
    let options = ChatOptions {
        json: false,
        approve: state.approve,
        thread: choice,
    };
    let _ = crate::cli::chat_with(
        config,
        session.tools.clone(),
        &session.graph,
        session.policy.clone(),
        std::sync::Arc::clone(&session.model),
        message,
        options,
        store.map(|store| (store, thread)),
    )
    .await;
}
