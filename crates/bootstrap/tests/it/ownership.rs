//! Who runs a run: finding 6 of the local-attacker review. Run ownership was
//! decided by `/proc/<pid>` existing and a 20 s heartbeat keyed on host and
//! PID: a second server in another PID namespace (same host name) took a live
//! server's run and ran its call that acts twice; a paused owner that resumed
//! was never fenced; a server restarted as PID 1 of a new PID namespace never
//! resumed its predecessor's runs; a restarted server's heartbeat kept its dead
//! predecessor's runs alive. Now an owner is a random instance id under a lease
//! (2 s here), and a step is recorded only under the generation its writer
//! holds. Each test drives real `agent serve` processes, `unshare` for PID
//! namespaces (skipped with the reason where it cannot run), `kill -STOP` for a
//! pause, and the MCP test server's `bump`, whose ledger counts how often a
//! call acted.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_testing::peers::Peer;
use agent_testing::server::{OpenAiServer, Reply};
use serde_json::json;

use crate::durable::Ledger;
use crate::mcp::server_table;
use crate::served::{Served, chat_body};
use crate::support::{Home, eventually, peers, signal};

const KEY: &str = "sk-e2e-ownership";

/// The lease of these tests, in milliseconds.
const LEASE_MS: u64 = 2_000;

/// The user's config: `bump` (acts, then blocks when asked) and `slow`
/// without approval, a 2 s lease, and the store `store` names (none: the
/// default SQLite file).
fn config(home: &Home, ledger: &Path, store: Option<&str>) -> PathBuf {
    let ledger = ledger.display().to_string();
    let store = store
        .map(|url| format!("[store]\nurl = {}\n\n", json!(url)))
        .unwrap_or_default();
    home.write_user_config(&format!(
        "{store}{}\n\
         [mcp.servers.fx.tools.slow]\neffect = \"read_only\"\n\n\
         [policy]\nallow = [\"mcp__fx__*\"]\nrequire_approval = []\n\n\
         [durable]\nlease_ms = {LEASE_MS}\n",
        server_table("fx", &["--ledger", &ledger]),
    ))
}

/// Whether `test`, which runs servers in PID namespaces of their own, is
/// skipped here: without the MCP servers' Python, or for a server cannot be
/// started in a PID namespace of its own (the reason printed).
fn skipped_without_pid_namespaces(test: &str) -> bool {
    if !peers(&[Peer::Python]) {
        return true;
    }
    let reason = pid_namespaces_unavailable();
    if let Some(reason) = &reason {
        eprintln!("SKIPPED {test}: {reason}");
    }
    reason.is_some()
}

/// Why a server cannot be started in a PID namespace of its own here.
fn pid_namespaces_unavailable() -> Option<String> {
    let probe = std::process::Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "--",
            "true",
        ])
        .output();
    match probe {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "unshare --pid --fork --mount-proc failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("util-linux unshare cannot run: {e}")),
    }
}

/// What a test here runs against: the ledger, the model server, the home
/// and its config (see [`config`]).
struct World {
    ledger: Ledger,
    model: OpenAiServer,
    home: Home,
    config: PathBuf,
}

impl World {
    /// A model playing `replies`, and a home whose runs are kept in `store`
    /// (none: the default SQLite file).
    async fn start(replies: impl IntoIterator<Item = Reply>, store: Option<&str>) -> Self {
        let ledger = Ledger::new();
        let model = OpenAiServer::start(replies).await.unwrap();
        let home = Home::new(KEY);
        let config = config(&home, &ledger.path, store);
        Self {
            ledger,
            model,
            home,
            config,
        }
    }

    /// `agent serve` with the config; as PID 1 of a new PID namespace (same
    /// host name, its own `/proc`) when `own_namespace`.
    async fn serve(&self, own_namespace: bool) -> Served {
        let config = self.config.display().to_string();
        let args = ["--config", config.as_str(), "serve", "--port", "0"];
        let wrapper: &[&str] = if own_namespace {
            &[
                "unshare",
                "--pid",
                "--fork",
                "--mount-proc",
                "--kill-child",
                "--",
            ]
        } else {
            &[]
        };
        let url = self.model.base_url();
        Served::spawn(self.home.command_via(wrapper, Some(&url), &args)).await
    }

    /// Waits until the model was asked `n` times.
    async fn asked(&self, n: usize) {
        eventually(
            || async { self.model.requests().len() },
            |asked| *asked == n,
        )
        .await;
    }
}

/// The run of chat `chat` once it is stored.
async fn run_of(store: &agent_store::Store, chat: &str) -> agent_store::RunRecord {
    let rows = store.account("local");
    eventually(
        || async { rows.latest_run(chat).await.unwrap() },
        Option::is_some,
    )
    .await
    .expect("the run is stored")
}

/// The run `run_id` as stored now.
async fn stored(store: &agent_store::Store, run_id: &str) -> agent_store::RunRecord {
    store.account("local").run(run_id).await.unwrap().unwrap()
}

/// The run `run_id` once another generation of owners holds it (or as it is
/// after 10 s).
async fn taken_over(store: &agent_store::Store, run_id: &str) -> agent_store::RunRecord {
    eventually(|| stored(store, run_id), |r| r.lease_gen > 0).await
}

/// The run `run_id` once it is done (or as it is after 10 s).
async fn done(store: &agent_store::Store, run_id: &str) -> agent_store::RunRecord {
    let ready = |r: &agent_store::RunRecord| r.status == agent_store::RunStatus::Done;
    eventually(|| stored(store, run_id), ready).await
}

/// Two servers on one store, each PID 1 of its own PID namespace with the same
/// host name (so the old owner strings were identical): while A holds its
/// run, B never takes it, over three leases, and the call that acts ran once.
/// When A dies, B takes the run over within the lease and the call is
/// `outcome_unknown`, not run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_in_another_pid_namespace_never_takes_a_live_servers_run() {
    if skipped_without_pid_namespaces(
        "a_server_in_another_pid_namespace_never_takes_a_live_servers_run",
    ) {
        return;
    }
    let world = World::start(
        [
            Reply::tool_calls(&[("call_b", "mcp__fx__bump", json!({"block_s": 120}))]),
            Reply::text("Checked, not bumped twice.").delayed(Duration::from_secs(2)),
        ],
        None,
    )
    .await;
    let mut a = world.serve(true).await;
    let _b = world.serve(true).await;
    let store = world.home.store().await;
    let _stream = a.streaming(&chat_body("chat-ns", "Bump."), 1).await;
    let ledger = &world.ledger;
    eventually(|| async { ledger.lines() }, |l| !l.is_empty()).await;
    let run = run_of(&store, "chat-ns").await;
    tokio::time::sleep(Duration::from_millis(3 * LEASE_MS)).await;
    let held = stored(&store, &run.run.id).await;
    assert_eq!(
        (held.run.owner.as_str(), held.lease_gen),
        (run.run.owner.as_str(), 0),
        "B took a live server's run: {held:?}"
    );
    assert_eq!(ledger.lines().len(), 1, "the call acted once");
    // A dies: B takes the run over within its lease.
    let killed = Instant::now();
    a.kill().await;
    let taken = taken_over(&store, &run.run.id).await;
    assert!(taken.lease_gen > 0, "never taken over: {taken:?}");
    assert!(
        killed.elapsed() < Duration::from_millis(LEASE_MS * 3),
        "taken over {:?} after the kill",
        killed.elapsed()
    );
    let done = done(&store, &run.run.id).await;
    assert_eq!(done.status, agent_store::RunStatus::Done, "{done:?}");
    assert_eq!(ledger.lines().len(), 1, "the call was not run again");
    let results = crate::durable::tool_results(&world.model, 1);
    assert!(results[0].contains("outcome_unknown"), "{results:?}");
}

/// A server paused (SIGSTOP) during its model call for longer than its lease:
/// another server takes the run over, calls the model again and runs the
/// call that acts. When the paused server resumes, its model answer (the same
/// call) arrives: it records nothing (fenced) and runs nothing. The call acted
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_that_resumes_runs_no_call_twice() {
    if !peers(&[Peer::Python]) {
        return;
    }
    let world = World::start(
        [
            // A's model call: answered while A is paused.
            Reply::tool_calls(&[("call_b", "mcp__fx__bump", json!({}))])
                .delayed(Duration::from_millis(LEASE_MS * 2)),
            // B's, once it took the run over.
            Reply::tool_calls(&[("call_b", "mcp__fx__bump", json!({}))]),
            Reply::text("Bumped once."),
        ],
        None,
    )
    .await;
    let a = world.serve(false).await;
    let _b = world.serve(false).await;
    let store = world.home.store().await;
    let chat = tokio::spawn({
        let request = a.post_chat(&chat_body("chat-stop", "Bump."));
        async move {
            let _ = request.send().await;
        }
    });
    world.asked(1).await;
    signal(&a.child, "STOP");
    let run = run_of(&store, "chat-stop").await;
    let done = done(&store, &run.run.id).await;
    assert_eq!(done.status, agent_store::RunStatus::Done, "{done:?}");
    let ledger = &world.ledger;
    assert_eq!(ledger.lines().len(), 1, "B ran the call");
    signal(&a.child, "CONT");
    // A's model answer arrives now; it must not run the call.
    tokio::time::sleep(Duration::from_millis(LEASE_MS * 2)).await;
    assert_eq!(
        ledger.lines().len(),
        1,
        "the paused owner ran the call again after it resumed"
    );
    let after = stored(&store, &run.run.id).await;
    assert_eq!(after.status, agent_store::RunStatus::Done, "{after:?}");
    let steps = store.account("local").steps(&run.run.id).await.unwrap();
    let intents = steps.iter().filter(|(_, k, _)| k == "intent").count();
    assert_eq!(intents, 1, "one intent, B's: {steps:?}");
    chat.abort();
    drop(a);
}

/// A server that is PID 1 of its PID namespace is killed, and started again
/// as PID 1 of a new one (a container restarted in place, same host name):
/// it goes on with its predecessor's run within the lease, and the run ends
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_as_pid_1_of_a_new_namespace_resumes_its_predecessors_run() {
    if skipped_without_pid_namespaces(
        "a_server_restarted_as_pid_1_of_a_new_namespace_resumes_its_predecessors_run",
    ) {
        return;
    }
    let world = World::start(
        [
            Reply::tool_calls(&[("call_s", "mcp__fx__slow", json!({"seconds": 3}))]),
            Reply::text("Slept, then answered once."),
        ],
        None,
    )
    .await;
    let mut first = world.serve(true).await;
    let store = world.home.store().await;
    let _stream = first.streaming(&chat_body("chat-pid1", "Sleep."), 1).await;
    world.asked(1).await;
    let run = run_of(&store, "chat-pid1").await;
    first.kill().await;
    let killed = Instant::now();
    let _second = world.serve(true).await;
    let taken = taken_over(&store, &run.run.id).await;
    assert!(
        taken.lease_gen > 0,
        "the restarted server never resumed it: {taken:?}"
    );
    assert!(
        killed.elapsed() < Duration::from_millis(LEASE_MS * 3),
        "resumed {:?} after the kill",
        killed.elapsed()
    );
    assert_ne!(taken.run.owner, run.run.owner, "a new instance owns it");
}

/// Two servers on one Postgres store. A dies during a run and is started
/// again at once (a pod restarting). The survivor or A's restart takes the
/// run over within the lease (a restarted process has a new id: it keeps
/// nothing of A's alive), and the run goes on to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_dead_servers_run_is_taken_over_within_the_lease_while_it_restarts() {
    if !peers(&[Peer::Python, Peer::Postgres]) {
        return;
    }
    let postgres = agent_testing::postgres::TestPostgres::start().unwrap();
    postgres.create_database("own").unwrap();
    let world = World::start(
        [
            Reply::tool_calls(&[("call_s", "mcp__fx__slow", json!({"seconds": 3}))]),
            Reply::text("Done after the takeover.").delayed(Duration::from_secs(1)),
        ],
        Some(&postgres.url("own")),
    )
    .await;
    let mut a = world.serve(false).await;
    let _b = world.serve(false).await;
    let store = agent_store::Store::open(&postgres.url("own"))
        .await
        .unwrap();
    let _stream = a.streaming(&chat_body("chat-pg", "Sleep."), 1).await;
    world.asked(1).await;
    let run = run_of(&store, "chat-pg").await;
    a.kill().await;
    let killed = Instant::now();
    let _a_again = world.serve(false).await;
    let taken = taken_over(&store, &run.run.id).await;
    let took = killed.elapsed();
    assert!(taken.lease_gen > 0, "never taken over: {taken:?}");
    assert!(
        took < Duration::from_millis(LEASE_MS * 3),
        "taken over {took:?} after the kill (lease {LEASE_MS} ms)"
    );
    let done = done(&store, &run.run.id).await;
    assert_eq!(done.status, agent_store::RunStatus::Done, "{done:?}");
    eprintln!("taken over {took:?} after the kill, with a {LEASE_MS} ms lease");
}
