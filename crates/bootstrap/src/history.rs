//! The run store from the command line: every `agent chat` run is recorded (its
//! status, its event log, the usage of each model call), and with `--thread` /
//! `--continue` its conversation is kept as a thread the next run continues.
//! `agent threads`, `agent runs` and `agent usage` read it back.
//!
//! The CLI is the `local` account. The store is `[store] url` (Postgres or a
//! SQLite file), else `<data home>/agent/store.db`.

use std::sync::Arc;

use agent_durable::lease::{Instance, RunLease};
use agent_store::recorder::now_ms;
use agent_store::{CallUsage, NewRun, Pricing, Store};
use ai_core::Message;

use crate::config::AgentConfig;
use crate::trust::UserDirs;

/// The account of the command line.
pub const LOCAL_ACCOUNT: &str = "local";

const DAY_MS: i64 = 86_400_000;

/// Opens the store of `config` and applies its retention; the runs `agent
/// chat` processes left running when they stopped (their lease ran out) are
/// marked interrupted on the way (`agent runs resume` goes on with one), and
/// with `[durable] resume = false` those of stopped servers too.
pub async fn open(config: &AgentConfig) -> Result<Store, String> {
    let store = match config.file.store.url.as_deref() {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Store::open(url).await
        }
        Some(path) => {
            let path = path.strip_prefix("sqlite://").unwrap_or(path);
            Store::open_sqlite(&config.workspace_root.join(path)).await
        }
        None => {
            let dir = UserDirs::from_env().agent_data_dir().ok_or(
                "no data folder for the run store (set HOME or XDG_DATA_HOME, or [store] url)",
            )?;
            Store::open_sqlite_in(&dir.join("store.db"), true).await
        }
    }
    .map_err(|e| e.to_string())?;
    interrupt_orphans(&store, "cli")
        .await
        .map_err(|e| e.to_string())?;
    // With `[durable] resume = false` no server goes on with a dead one's runs:
    // they end interrupted, whichever process finds them first.
    if !config.file.durable.resume {
        interrupt_orphans(&store, "serve")
            .await
            .map_err(|e| e.to_string())?;
    }
    let days = |d: Option<u32>| d.map_or(i64::MIN, |d| now_ms() - i64::from(d) * DAY_MS);
    let (runs, usage) = (
        days(config.file.store.retention_days),
        days(config.file.store.usage_retention_days),
    );
    if runs > i64::MIN || usage > i64::MIN {
        store.purge(runs, usage).await.map_err(|e| e.to_string())?;
    }
    Ok(store)
}

/// The kind of process that owned an orphan (`serve`, `cli`, `worker`).
fn kind_of(orphan: &agent_store::Orphan) -> &str {
    orphan
        .kind
        .as_deref()
        .unwrap_or_else(|| orphan.owner.split(':').next().unwrap_or(""))
}

/// Marks `interrupted` the runs processes of `kind` left running when they
/// stopped (their lease ran out); returns how many.
async fn interrupt_orphans(store: &Store, kind: &str) -> Result<u64, agent_store::StoreError> {
    let now = now_ms();
    let mut marked = 0;
    for orphan in store.orphaned_runs(now).await? {
        if kind_of(&orphan) == kind
            && store
                .interrupt_orphan(
                    &orphan,
                    "the agent process running it stopped during the run",
                    now,
                )
                .await?
        {
            marked += 1;
        }
    }
    if marked > 0 {
        tracing::info!(
            kind,
            runs = marked,
            "runs of stopped agent processes marked interrupted"
        );
    }
    Ok(marked)
}

/// What `agent serve` records and resumes with: the run owner on the run
/// store (runs of stopped `agent chat` processes marked interrupted on the
/// way, and with `[durable] resume = false` those of stopped servers too),
/// this server as an owner of runs under a lease, `[pricing]`, the approval
/// key and the sealing key, both from the key file every server and worker on
/// the store shares (so approval ids outlive a restart and any server honours
/// them).
pub(crate) async fn server_runs(
    config: &AgentConfig,
) -> Result<
    (
        agent_durable::Runs,
        [u8; 32],
        agent_durable::seal::DurableKey,
    ),
    String,
> {
    let store = open(config).await?;
    let key = crate::keys::load(config)?;
    let approvals = key.derive("approvals");
    let runs = runs_of(config, &store, "serve")
        .await?
        .with_journal(config.file.durable.journal);
    Ok((runs, approvals, key))
}

/// The run owner of an `agent chat` process on `store`: this process under
/// `config`'s lease, `[pricing]`; its runs journaled, so `agent runs resume`
/// goes on with one this process could not finish. Release its instance
/// (`Runs::instance().release()`) when the process is done with it.
pub(crate) async fn cli_runs(
    config: &AgentConfig,
    store: &Store,
) -> Result<agent_durable::Runs, String> {
    runs_of(config, store, "cli").await
}

/// The run owner of a process of `kind` (`serve`, `cli`, `worker`) on `store`:
/// the process under `config`'s lease, with `[pricing]`.
pub(crate) async fn runs_of(
    config: &AgentConfig,
    store: &Store,
    kind: &str,
) -> Result<agent_durable::Runs, String> {
    let instance = Instance::start(store.clone(), kind, config.file.durable.lease())
        .await
        .map_err(|e| e.to_string())?;
    let runs = agent_durable::Runs::new(instance);
    Ok(match pricing(config, &config.file.model.model) {
        Some(pricing) => runs.with_pricing(pricing),
        None => runs,
    })
}

/// The `[pricing]` of `config` as the store's pricing callback (see
/// [`price_for`]); `None` without prices.
pub(crate) fn pricing(config: &AgentConfig, requested: &str) -> Option<Pricing> {
    if config.file.pricing.is_empty() {
        return None;
    }
    let prices = config.file.pricing.clone();
    let requested = requested.to_owned();
    Some(Arc::new(move |reported: &str, call: &CallUsage| {
        price_for(&prices, reported, &requested).map(|price| {
            price.cost_micros(
                call.prompt_tokens,
                call.cached_tokens.unwrap_or(0),
                call.completion_tokens,
            )
        })
    }))
}

/// The price of a call: by the model id the provider reported, else the longest
/// priced id it starts with (`gpt-4o-mini` for `gpt-4o-mini-2024-07-18`), else
/// the id the run asked for.
fn price_for<'a>(
    pricing: &'a std::collections::BTreeMap<String, crate::config::PriceConfig>,
    reported: &str,
    requested: &str,
) -> Option<&'a crate::config::PriceConfig> {
    pricing
        .get(reported)
        .or_else(|| {
            pricing
                .iter()
                .filter(|(id, _)| reported.starts_with(id.as_str()))
                .max_by_key(|(id, _)| id.len())
                .map(|(_, price)| price)
        })
        .or_else(|| pricing.get(requested))
}

/// The title of a new thread, from the prompt.
pub fn title_of(prompt: &Message) -> String {
    match prompt {
        Message::User { content, .. } => agent_store::title_from(content),
        _ => agent_store::title_from(""),
    }
}

/// The thread an `agent chat` continues.
pub struct ChatThread {
    /// Its id.
    pub id: String,
    /// Its title (for a new thread, from the prompt).
    pub title: String,
    /// Its messages so far (empty for a new thread).
    pub history: Vec<Message>,
}

/// The store and thread of an `agent chat`. Without a thread, a store that does
/// not open is a warning (the run is not recorded); with one, an error.
pub(crate) async fn for_chat(
    config: &AgentConfig,
    choice: &crate::cli::ThreadChoice,
    prompt: &Message,
) -> Result<(Option<Store>, Option<ChatThread>), String> {
    use crate::cli::ThreadChoice;
    let store = match open(config).await {
        Ok(store) => store,
        Err(e) if matches!(choice, ThreadChoice::None) => {
            eprintln!("agent: the run store is not available, so this run is not recorded: {e}");
            return Ok((None, None));
        }
        Err(e) => return Err(format!("the run store is not available: {e}")),
    };
    let account = store.account(LOCAL_ACCOUNT);
    let id = match choice {
        ThreadChoice::None => return Ok((Some(store), None)),
        ThreadChoice::Named(name) if name.trim().is_empty() => {
            return Err("a thread name must not be blank".into());
        }
        ThreadChoice::Named(name) => name.clone(),
        ThreadChoice::Latest => match account.threads(1).await.map_err(|e| e.to_string())?.pop() {
            Some(thread) => thread.id,
            None => {
                return Err(
                    "there is no thread to continue yet (start one with --thread NAME)".into(),
                );
            }
        },
    };
    let stored = account.thread(&id).await.map_err(|e| e.to_string())?;
    let history = account.messages(&id).await.map_err(|e| e.to_string())?;
    let title = stored.map_or_else(|| title_of(prompt), |t| t.title);
    Ok((Some(store), Some(ChatThread { id, title, history })))
}

/// Starts `start` recorded by this process's run owner (which the caller
/// releases once the run is finished): with `thread`, its turn opened first
/// (the prompt known by `u-<run id>`, the answer by `msg-<run id>`).
pub(crate) async fn start_recorded(
    config: &AgentConfig,
    store: &Store,
    start: agent_graph::journal::RunStart,
    deps: agent_graph::run::RunDeps,
    thread: Option<ChatThread>,
) -> Result<(agent_durable::RecordedRun, agent_durable::Runs), String> {
    let runs = cli_runs(config, store).await?;
    let agent_graph::journal::RunStart::New { request } = &start else {
        return Err("only a new run starts recorded".into());
    };
    let thread = thread.map(|thread| {
        let kept = thread.history.len();
        (thread.id, thread.title, kept)
    });
    let spec = agent_durable::RunSpec::for_request(LOCAL_ACCOUNT, (request, "chat"), thread);
    match runs.start(spec, start, deps).await {
        Ok(run) => Ok((run, runs)),
        Err(e) => {
            runs.instance().release().await;
            Err(e.to_string())
        }
    }
}

/// How `agent usage` groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UsageBy {
    /// By model id.
    Model,
    /// By UTC day.
    Day,
    /// By thread.
    Thread,
}

impl std::str::FromStr for UsageBy {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "model" => Ok(Self::Model),
            "day" => Ok(Self::Day),
            "thread" => Ok(Self::Thread),
            other => Err(format!("unknown grouping `{other}` (model, day or thread)")),
        }
    }
}

/// Rows as a table: columns padded to their widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut table = crate::table::TextTable::new(header);
    for row in rows {
        table.row(row);
    }
    table.lines().join("\n") + "\n"
}

/// `YYYY-MM-DD HH:MM` (UTC) of Unix milliseconds.
fn when(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|_| "-".into())
}

fn fail(message: impl std::fmt::Display) -> std::process::ExitCode {
    eprintln!("agent: {message}");
    std::process::ExitCode::from(crate::cli::EXIT_RUN_ERROR)
}

/// `agent threads [list|show|rm]`.
pub(crate) async fn threads_command(
    config: &AgentConfig,
    command: Option<crate::cli::ThreadsCommand>,
) -> std::process::ExitCode {
    use crate::cli::ThreadsCommand;
    let store = match open(config).await {
        Ok(store) => store,
        Err(e) => return fail(format!("the run store is not available: {e}")),
    };
    let account = store.account(LOCAL_ACCOUNT);
    match command.unwrap_or(ThreadsCommand::List { json: false }) {
        ThreadsCommand::List { json } => {
            let threads = match account.threads(1_000).await {
                Ok(threads) => threads,
                Err(e) => return fail(e),
            };
            if json {
                for t in &threads {
                    let line = serde_json::json!({"id": t.id, "title": t.title, "graph": t.graph, "created_ms": t.created_ms, "updated_ms": t.updated_ms});
                    println!("{line}");
                }
            } else if threads.is_empty() {
                println!("no threads yet (agent chat --thread NAME \"...\" starts one)");
            } else {
                let rows: Vec<Vec<String>> = threads
                    .iter()
                    .map(|t| {
                        vec![
                            t.id.clone(),
                            when(t.updated_ms),
                            t.graph.clone(),
                            t.title.clone(),
                        ]
                    })
                    .collect();
                print!(
                    "{}",
                    table(&["THREAD", "UPDATED (UTC)", "GRAPH", "TITLE"], &rows)
                );
            }
        }
        ThreadsCommand::Show { name, json } => {
            let Ok(Some(thread)) = account.thread(&name).await else {
                return fail(format!("no thread `{}`", shown(&name)));
            };
            let messages = match account.messages(&name).await {
                Ok(messages) => messages,
                Err(e) => return fail(e),
            };
            if json {
                for message in &messages {
                    println!("{}", serde_json::to_string(message).unwrap_or_default());
                }
            } else {
                println!(
                    "{} ({}, {} messages)\n",
                    shown(&thread.title),
                    shown(&thread.graph),
                    messages.len()
                );
                for message in &messages {
                    print!("{}", show_message(message));
                }
            }
        }
        ThreadsCommand::Rm { name } => match account.delete_thread(&name).await {
            Ok(true) => println!("removed thread `{}`", shown(&name)),
            Ok(false) => return fail(format!("no thread `{}`", shown(&name))),
            Err(e) => return fail(e),
        },
    }
    std::process::ExitCode::SUCCESS
}

/// A stored string (a title, a file name, a model's or a tool's text) as it may
/// reach a terminal: control, escape, bidi and invisible characters written
/// visibly, one line.
fn shown(text: &str) -> String {
    crate::render::printable(text).replace(['\n', '\r'], " ")
}

/// One message for `agent threads show`, its text made safe for a terminal.
fn show_message(message: &Message) -> String {
    let safe = |text: &str| ai_core::text::printable(text).into_owned();
    match message {
        Message::User {
            content,
            attachments,
        } => {
            let files: Vec<String> = attachments
                .iter()
                .map(|a| match a {
                    ai_core::message::Attachment::Image { name, .. } => {
                        name.as_deref().map_or_else(|| "image".into(), shown)
                    }
                    ai_core::message::Attachment::Text { name, .. } => shown(name),
                    _ => "file".into(),
                })
                .collect();
            let files = if files.is_empty() {
                String::new()
            } else {
                format!(" [{}]", files.join(", "))
            };
            format!("you{files}: {}\n", safe(content))
        }
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => {
            let mut out = String::new();
            for call in tool_calls {
                out.push_str(&format!(
                    "  -> {} {}\n",
                    safe(&call.name),
                    safe(&call.arguments)
                ));
            }
            if let Some(content) = content.as_deref().filter(|c| !c.is_empty()) {
                out.push_str(&format!("assistant: {}\n", safe(content)));
            }
            out
        }
        Message::Tool {
            content, is_error, ..
        } => {
            let mark = if *is_error { "  <- error: " } else { "  <- " };
            let mut text: String = content.chars().take(200).collect();
            if content.chars().count() > 200 {
                text.push('…');
            }
            format!("{mark}{}\n", safe(&text))
        }
        _ => String::new(),
    }
}

/// One run as a JSON object.
fn run_json(record: &agent_store::RunRecord) -> serde_json::Value {
    serde_json::json!({
        "run_id": record.run.id, "thread": record.run.thread_id, "graph": record.run.graph,
        "model": record.run.model, "status": record.status.as_str(), "error": record.error,
        "started_ms": record.run.started_ms, "updated_ms": record.updated_ms,
    })
}

fn list_runs(runs: &[agent_store::RunRecord], json: bool) {
    if json {
        for record in runs {
            println!("{}", run_json(record));
        }
        return;
    }
    if runs.is_empty() {
        println!("no runs recorded");
        return;
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                r.run.id.clone(),
                r.status.as_str().to_owned(),
                when(r.run.started_ms),
                r.run.thread_id.clone().unwrap_or_else(|| "-".into()),
                r.run.model.clone(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &["RUN", "STATUS", "STARTED (UTC)", "THREAD", "MODEL"],
            &rows
        )
    );
}

/// What `agent runs resume RUN` goes on with: the run's saved start, its
/// record, the run owner of this process, the run made this process's (its
/// lease) and its journal. The error is a message for the user.
pub(crate) struct Reopened {
    /// How the run starts again.
    pub saved: agent_durable::SavedStart,
    /// Its record.
    pub record: NewRun,
    /// This process as the run's owner.
    pub runs: agent_durable::Runs,
    /// The run's lease.
    pub lease: RunLease,
    /// Its journal (its steps so far, then the new ones, under the lease).
    pub journal: Arc<dyn agent_graph::journal::StepJournal>,
}

/// Makes the interrupted run `run_id` this process's again (see [`Reopened`]).
pub(crate) async fn reopen(config: &AgentConfig, run_id: &str) -> Result<Reopened, String> {
    let store = open(config).await?;
    let rows = store.account(LOCAL_ACCOUNT);
    let run = rows
        .run(run_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no run `{run_id}`"))?;
    let saved = rows
        .start_of(run_id)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("run `{run_id}` has no journal (it was recorded before durable runs, or without a store)"))?;
    let saved: agent_durable::SavedStart = serde_json::from_str(&saved)
        .map_err(|e| format!("the start of run `{run_id}` is unreadable: {e}"))?;
    let runs = cli_runs(config, &store).await?;
    let instance = Arc::clone(runs.instance());
    let Some(fence) = rows
        .reopen_run(run_id, &instance.id(), now_ms())
        .await
        .map_err(|e| e.to_string())?
    else {
        instance.release().await;
        return Err(format!(
            "run `{run_id}` is {}: only an interrupted run goes on",
            run.status.as_str()
        ));
    };
    let lease = instance.taken(&fence);
    rows.clear_events(run_id).await.map_err(|e| e.to_string())?;
    let journal: Arc<dyn agent_graph::journal::StepJournal> = Arc::new(
        agent_durable::StoreJournal::new(store.clone(), LOCAL_ACCOUNT, None)
            .with_lease(lease.clone()),
    );
    Ok(Reopened {
        saved,
        record: run.run,
        runs,
        lease,
        journal,
    })
}

/// `agent runs [list|show RUN [--events] [--json]]`.
pub(crate) async fn runs_command(
    config: &AgentConfig,
    command: crate::cli::RunsCommand,
) -> std::process::ExitCode {
    let store = match open(config).await {
        Ok(store) => store,
        Err(e) => return fail(format!("the run store is not available: {e}")),
    };
    let account = store.account(LOCAL_ACCOUNT);
    let (run, events, json) = match command {
        crate::cli::RunsCommand::Show { run, events, json } => (run, events, json),
        crate::cli::RunsCommand::Resume { .. } => {
            return fail("`agent runs resume` runs in the chat command's loop");
        }
        crate::cli::RunsCommand::List { thread, json } => {
            let runs = match &thread {
                Some(thread) => account.runs_of_thread(thread).await.map(|mut runs| {
                    runs.reverse();
                    runs
                }),
                None => account.recent_runs(100).await,
            };
            return match runs {
                Ok(runs) => {
                    list_runs(&runs, json);
                    std::process::ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            };
        }
    };
    let record = match account.run(&run).await {
        Ok(Some(record)) => record,
        Ok(None) => return fail(format!("no run `{run}`")),
        Err(e) => return fail(e),
    };
    let stored = if events || json {
        match account.events(&run, None).await {
            Ok(stored) => stored,
            Err(e) => return fail(e),
        }
    } else {
        Vec::new()
    };
    if json {
        println!("{}", run_json(&record));
        let mut out = std::io::stdout().lock();
        for event in &stored {
            if crate::render::json_line(&mut out, &event.event).is_err() {
                break;
            }
        }
        return std::process::ExitCode::SUCCESS;
    }
    println!(
        "run {} ({}): {} on {}, started {}{}",
        shown(&record.run.id),
        record.status.as_str(),
        shown(&record.run.graph),
        shown(&record.run.model),
        when(record.run.started_ms),
        record
            .error
            .map(|e| format!(": {}", shown(&e)))
            .unwrap_or_default()
    );
    if events {
        println!();
        let mut renderer =
            crate::render::HumanRenderer::new(std::io::stdout(), std::io::stdout(), false);
        for event in &stored {
            renderer.event(&event.event);
        }
    }
    std::process::ExitCode::SUCCESS
}

/// The cost of a usage row, `-` when no call has a price, `+?` when some lack one.
fn cost(row: &agent_store::UsageRow) -> String {
    if row.calls_without_cost == row.calls {
        return "-".into();
    }
    let amount = format!("{:.4}", row.cost_micros as f64 / 1_000_000.0);
    if row.calls_without_cost > 0 {
        amount + " +?"
    } else {
        amount
    }
}

/// `agent usage [--since DAY] [--by KEY] [--json]`.
pub(crate) async fn usage_command(
    config: &AgentConfig,
    since: Option<&str>,
    by: UsageBy,
    json: bool,
) -> std::process::ExitCode {
    let since_ms = match since {
        None => i64::MIN,
        Some(day) => match day.parse::<jiff::civil::Date>() {
            Ok(date) => match date.to_zoned(jiff::tz::TimeZone::UTC) {
                Ok(zoned) => zoned.timestamp().as_millisecond(),
                Err(e) => return fail(format!("--since {day}: {e}")),
            },
            Err(e) => {
                eprintln!("agent: --since {day}: expected YYYY-MM-DD ({e})");
                return std::process::ExitCode::from(crate::cli::EXIT_USAGE);
            }
        },
    };
    let store = match open(config).await {
        Ok(store) => store,
        Err(e) => return fail(format!("the run store is not available: {e}")),
    };
    let grouping = match by {
        UsageBy::Model => agent_store::UsageGrouping::Model,
        UsageBy::Day => agent_store::UsageGrouping::Day,
        UsageBy::Thread => agent_store::UsageGrouping::Thread,
    };
    let rows = match store.account(LOCAL_ACCOUNT).usage(since_ms, grouping).await {
        Ok(rows) => rows,
        Err(e) => return fail(e),
    };
    if json {
        for r in &rows {
            let line = serde_json::json!({
                "key": r.key, "calls": r.calls, "prompt_tokens": r.prompt_tokens,
                "completion_tokens": r.completion_tokens, "cached_tokens": r.cached_tokens,
                "cost_micros": r.cost_micros, "calls_without_cost": r.calls_without_cost,
            });
            println!("{line}");
        }
        return std::process::ExitCode::SUCCESS;
    }
    if rows.is_empty() {
        println!(
            "no usage recorded{}",
            since.map(|d| format!(" since {d}")).unwrap_or_default()
        );
        return std::process::ExitCode::SUCCESS;
    }
    let key = match by {
        UsageBy::Model => "MODEL",
        UsageBy::Day => "DAY (UTC)",
        UsageBy::Thread => "THREAD",
    };
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.key.clone(),
                r.calls.to_string(),
                r.prompt_tokens.to_string(),
                r.cached_tokens.to_string(),
                r.completion_tokens.to_string(),
                cost(r),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[key, "CALLS", "PROMPT", "CACHED", "COMPLETION", "COST"],
            &table_rows
        )
    );
    if rows.iter().any(|r| r.calls_without_cost > 0) {
        println!("+? : some calls are of models without a [pricing] entry");
    }
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PriceConfig;

    #[test]
    fn prices_are_found_by_reported_id_prefix_then_requested_id() {
        let price = |p: f64| PriceConfig {
            prompt_per_million: p,
            ..PriceConfig::default()
        };
        let pricing = std::collections::BTreeMap::from([
            ("gpt-4o".to_owned(), price(1.0)),
            ("gpt-4o-mini".to_owned(), price(2.0)),
            ("local".to_owned(), price(3.0)),
        ]);
        let found = |reported, requested| {
            price_for(&pricing, reported, requested).map(|p| p.prompt_per_million)
        };
        assert_eq!(found("gpt-4o-mini-2024-07-18", "x"), Some(2.0));
        assert_eq!(found("gpt-4o-2024-08-06", "x"), Some(1.0));
        assert_eq!(found("test-model", "local"), Some(3.0));
        assert_eq!(found("test-model", "other"), None);
    }
}
