//! Durable runs on a real Restate server (`[durable] engine = "restate"`): the
//! server from the npm registry (`tests/restate`, installed by `cargo xtask
//! test-env`), `agent worker` running the runs, `agent serve` submitting them
//! and streaming their answers from the run store, which both share (a SQLite
//! file). Workers and the Restate server are killed with SIGKILL. The tools
//! are the MCP test server's, as in `durable.rs`: `bump` writes a ledger line
//! each time it acts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_testing::peers::Peer;
use agent_testing::restate::TestRestate;
use agent_testing::server::{OpenAiServer, Reply};
use serde_json::json;

use crate::durable::{Ledger, serve, tool_results};
use crate::mcp::server_table;
use crate::served::{Served, body_text, chat_body, stream_text, text_of, ui_chunks};
use crate::support::{Home, curl_as_nobody, eventually, first_line, free_port, peers, sigkill};
use crate::telemetry::{PARENT_ID, Receiver, TRACE_ID, events_trace_id, hex_of, spans_once};
use crate::threads::endless_words;

const KEY: &str = "sk-e2e-restate";

/// A Restate server that signs every request it sends a worker, and the
/// public key the workers are configured to check.
pub(crate) struct Signed {
    server: TestRestate,
    pub(crate) public_key: String,
}

impl std::ops::Deref for Signed {
    type Target = TestRestate;

    fn deref(&self) -> &TestRestate {
        &self.server
    }
}

impl std::ops::DerefMut for Signed {
    fn deref_mut(&mut self) -> &mut TestRestate {
        &mut self.server
    }
}

/// A fresh Restate server with its own request identity key pair (as `agent
/// keys restate-identity` makes one).
pub(crate) fn signed_restate() -> Signed {
    let pair = agent_durable::restate::IdentityKeyPair::generate().unwrap();
    Signed {
        server: TestRestate::start_signing(Some(&pair.private_pem)).unwrap(),
        public_key: pair.public_key,
    }
}

/// The user's config: the Restate engine at `restate`, the MCP server `fx`
/// with its ledger, `bump` behind an approval or not, declared idempotent or
/// not.
fn config(
    home: &Home,
    restate: &Signed,
    ledger: &Path,
    approval: bool,
    idempotent: bool,
) -> PathBuf {
    let ledger = ledger.display().to_string();
    let approval = if approval {
        "[\"external_side_effect\"]"
    } else {
        "[]"
    };
    home.write_user_config(&format!(
        "[durable]\nengine = \"restate\"\nrestate_ingress = {}\nrestate_admin = {}\nrestate_identity_keys = [{}]\n\n\
         {}\n\
         [mcp.servers.fx.tools.slow]\neffect = \"read_only\"\n\n\
         [mcp.servers.fx.tools.bump]\nidempotent = {idempotent}\n\n\
         [policy]\nallow = [\"mcp__fx__*\"]\nrequire_approval = {approval}\n",
        json!(restate.ingress_url()),
        json!(restate.admin_url()),
        json!(restate.public_key),
        server_table("fx", &["--ledger", &ledger]),
    ))
}

/// What a test here runs against: a signed Restate server, the ledger, the
/// model server, a home with its config (see [`config`]), and the port its
/// workers listen on (free when it started: a worker started again listens
/// where Restate pinned its invocations, the same address).
struct Deployment {
    restate: Signed,
    ledger: Ledger,
    model: OpenAiServer,
    home: Home,
    config: PathBuf,
    port: u16,
}

impl Deployment {
    /// A fresh Restate server and a model playing `replies`; `bump` behind an
    /// approval or not. `None` (the test is skipped) without Restate or the
    /// MCP servers' Python.
    async fn start(replies: impl IntoIterator<Item = Reply>, approval: bool) -> Option<Self> {
        Self::start_with(replies, approval, false).await
    }

    /// [`Deployment::start`], with `bump` declared idempotent or not.
    async fn start_with(
        replies: impl IntoIterator<Item = Reply>,
        approval: bool,
        idempotent: bool,
    ) -> Option<Self> {
        if !peers(&[Peer::Restate, Peer::Python]) {
            return None;
        }
        let restate = signed_restate();
        let ledger = Ledger::new();
        let model = OpenAiServer::start(replies).await.unwrap();
        let home = Home::new(KEY);
        let config = config(&home, &restate, &ledger.path, approval, idempotent);
        Some(Self {
            restate,
            ledger,
            model,
            home,
            config,
            port: free_port(),
        })
    }

    /// A worker (see [`Deployment::worker`]), then `agent serve`.
    async fn up(&self) -> (tokio::process::Child, Served) {
        let worker = self.worker().await;
        (worker, self.serve().await)
    }

    /// `agent worker` on the deployment's port, once it says it is registered.
    async fn worker(&self) -> tokio::process::Child {
        self.worker_with(&[]).await
    }

    /// [`Deployment::worker`] with the variables `env` set.
    async fn worker_with(&self, env: &[(&str, &str)]) -> tokio::process::Child {
        let config = self.config.display().to_string();
        let port = self.port.to_string();
        let args = ["--config", &config, "worker", "--port", &port];
        let url = self.model.base_url();
        let mut command = self.home.command(Some(&url), &args);
        command.envs(env.iter().copied());
        let mut child = command.spawn().unwrap();
        let line = first_line(&mut child, Duration::from_secs(60), "the worker's start").await;
        assert!(line.contains("worker serving runs"), "{line:?}");
        child
    }

    /// `agent serve` with the deployment's config.
    async fn serve(&self) -> Served {
        serve(&self.home, &self.model.base_url(), &self.config).await
    }

    /// Waits until the model was asked `n` times.
    async fn asked(&self, n: usize) {
        eventually(
            || async { self.model.requests().len() },
            |asked| *asked == n,
        )
        .await;
    }

    /// The stored run of chat `chat`, once it ended.
    async fn ended_run(&self, chat: &str) -> agent_store::RunRecord {
        let store = self.home.store().await;
        let rows = store.account("local");
        let run = eventually(
            || async { rows.latest_run(chat).await.unwrap() },
            |run: &Option<agent_store::RunRecord>| {
                run.as_ref()
                    .is_some_and(|r| r.status != agent_store::RunStatus::Running)
            },
        )
        .await;
        run.expect("the run is stored")
    }
}

/// Kills a worker with SIGKILL and waits until it is gone.
async fn kill(mut worker: tokio::process::Child) {
    sigkill(&worker);
    worker.wait().await.unwrap();
}

/// A worker killed during a slow read-only call, and the next one during a
/// model call, after a call that acts: each time a new worker on the same
/// address goes on with the run. The model is asked once more only
/// for the unrecorded step, the call that acts ran once, and the client's
/// stream (served from the store) carries the whole answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_is_replaced_and_the_run_goes_on_from_its_journal() {
    let Some(deployment) = Deployment::start(
        [
            Reply::tool_calls(&[("call_b", "mcp__fx__bump", json!({}))]),
            Reply::tool_calls(&[("call_s", "mcp__fx__slow", json!({"seconds": 3}))]),
            endless_words(20),
            Reply::text("All done."),
        ],
        false,
    )
    .await
    else {
        return;
    };
    let (first, served) = deployment.up().await;
    let chat = tokio::spawn({
        let api = served.api.clone();
        async move { api.say("chat-r", "Bump, then talk.").await }
    });
    // Killed during the slow read-only call, then during the model call after it.
    deployment.asked(2).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    kill(first).await;
    let second = deployment.worker().await;
    deployment.asked(3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(second).await;
    let _third = deployment.worker().await;
    // The client's stream had shown the cut model call: it ends saying the
    // answer started over, and the client's resume reads the new answer whole.
    let cut = tokio::time::timeout(Duration::from_secs(90), chat)
        .await
        .expect("the first stream ends")
        .unwrap();
    assert!(
        cut.iter().any(|c| c["errorText"]
            .as_str()
            .is_some_and(|t| t.contains("started over"))),
        "{cut:?}"
    );
    let run = deployment.ended_run("chat-r").await;
    // A client reloading gets the chat as stored: the answer, and the call once.
    let chat = served.json("/api/chats/chat-r").await;
    let shown = chat["messages"].to_string();
    assert!(shown.contains("All done."), "{chat}");
    assert!(!shown.contains("w0 "), "{chat}");
    assert_eq!(
        shown.matches("\"toolCallId\":\"call_b\"").count(),
        1,
        "{chat}"
    );
    assert_eq!(run.status, agent_store::RunStatus::Done, "{run:?}");
    let requests = deployment.model.requests();
    assert_eq!(requests.len(), 4, "one request per model step");
    assert_eq!(requests[3].body["messages"], requests[2].body["messages"]);
    let lines = deployment.ledger.lines();
    assert_eq!(lines.len(), 1, "the call that acts ran once: {lines:?}");
    // Restate holds the run's journal: the steps as `ctx.run` entries.
    let journal = deployment
        .restate
        .sql("SELECT name FROM sys_journal WHERE entry_type = 'Command: Run' ORDER BY index")
        .unwrap();
    let names = journal.to_string();
    assert!(
        names.contains("step 0 model") && names.contains("step 1 intent"),
        "{names}"
    );
}

/// Killed while `bump` blocks after it acted: the new worker does not run it
/// again; the model reads `outcome_unknown`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_by_a_killed_worker_is_outcome_unknown() {
    let Some(cut) = bump_cut_by_a_killed_worker(false).await else {
        return;
    };
    assert!(cut.stored.contains("I will check first."), "{}", cut.stored);
    assert_eq!(cut.lines.len(), 1, "the call acted once: {:?}", cut.lines);
    let results = tool_results(&cut.model, 1);
    assert!(results[0].contains("outcome_unknown"), "{results:?}");
}

/// The same with `bump` declared idempotent: the new worker runs it again with
/// the same idempotency key, and the server, which dedupes on it, acts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_call_cut_by_a_killed_worker_runs_again_with_its_key() {
    let Some(cut) = bump_cut_by_a_killed_worker(true).await else {
        return;
    };
    let lines = &cut.lines;
    assert_eq!(lines.len(), 2, "the tool saw the call twice: {lines:?}");
    assert!(
        lines[0].starts_with("acted ") && lines[1].starts_with("seen "),
        "{lines:?}"
    );
    assert_eq!(
        lines[0].split_once(' ').unwrap().1,
        lines[1].split_once(' ').unwrap().1,
        "with the same key"
    );
    let results = tool_results(&cut.model, 1);
    assert!(results[0].contains("seen; acted 1 time"), "{results:?}");
}

/// What a chat whose `bump` call was cut by a killed worker left.
struct Cut {
    /// The chat as `GET /api/chats/{id}` returns it, once the run ended.
    stored: String,
    /// The ledger.
    lines: Vec<String>,
    /// The model server.
    model: OpenAiServer,
}

/// A chat calls `bump` (acts, then blocks; deduped on its key); the worker is
/// killed once the ledger shows it acted and replaced at the same address.
/// `None` when the test is skipped (see [`Deployment::start`]).
async fn bump_cut_by_a_killed_worker(idempotent: bool) -> Option<Cut> {
    let deployment = Deployment::start_with(
        [
            Reply::tool_calls(&[(
                "call_b",
                "mcp__fx__bump",
                json!({"block_s": 120, "dedupe": true}),
            )]),
            Reply::text("I will check first."),
        ],
        false,
        idempotent,
    )
    .await?;
    let (first, served) = deployment.up().await;
    let chat = tokio::spawn({
        let api = served.api.clone();
        async move { api.say("chat-b", "Bump it.").await }
    });
    let ledger = &deployment.ledger;
    eventually(|| async { ledger.lines() }, |l| !l.is_empty()).await;
    kill(first).await;
    let _second = deployment.worker().await;
    // The client's stream ends (the answer started over on the new worker);
    // the chat as stored holds the answer.
    let _ = tokio::time::timeout(Duration::from_secs(90), chat).await;
    let run = deployment.ended_run("chat-b").await;
    assert_eq!(run.status, agent_store::RunStatus::Done, "{run:?}");
    let stored = served.text("/api/chats/chat-b").await;
    Some(Cut {
        stored,
        lines: deployment.ledger.lines(),
        model: deployment.model,
    })
}

/// The Restate server itself killed during a run and started again: the run
/// goes on, and ends once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_survives_its_restate_server_being_killed() {
    let Some(mut deployment) = Deployment::start(
        [
            Reply::tool_calls(&[("call_s", "mcp__fx__slow", json!({"seconds": 3}))]),
            Reply::text("Slept."),
        ],
        false,
    )
    .await
    else {
        return;
    };
    let (_worker, served) = deployment.up().await;
    let body = chat_body("chat-s", "Sleep.");
    let response = served.post_chat(&body).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    deployment.asked(1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    deployment.restate.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    deployment.restate.restart().unwrap();
    let run = deployment.ended_run("chat-s").await;
    assert_eq!(run.status, agent_store::RunStatus::Done, "{run:?}");
    assert_eq!(
        deployment.model.requests().len(),
        2,
        "the recorded model step was not asked again"
    );
    drop(response);
}

/// The same run submitted twice with its id as the idempotency key: the second
/// submission answers with the first run's summary, and nothing runs again. A
/// submission not sealed with the store's key is refused before it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_submitted_twice_runs_once() {
    let replies = [Reply::text("Once."), Reply::text("Twice?")];
    let Some(deployment) = Deployment::start(replies, false).await else {
        return;
    };
    let _worker = deployment.worker().await;
    let (restate, model, home) = (&deployment.restate, &deployment.model, &deployment.home);
    let mut request = agent_graph::run::RunRequest::new(
        ai_core::RunContext::generate(),
        "e2e-model",
        vec![ai_core::Message::user("Say it once.")],
    );
    request.graph = Some("chat".into());
    // The forged submission gets its own run id (an idempotency key Restate
    // remembers with its failure).
    let mut request_again = request.clone();
    request_again.context = ai_core::RunContext::generate();
    let mut input = agent_durable::engine::RunInput::new(
        "local",
        agent_graph::journal::RunStart::New { request },
    );
    let client =
        agent_durable::restate::RestateClient::new(&restate.ingress_url(), &restate.admin_url())
            .unwrap();
    // A submission not sealed with the servers' key runs nothing.
    let stranger = agent_durable::seal::DurableKey::parse(
        &agent_durable::seal::DurableKey::generate_line().unwrap(),
    )
    .unwrap();
    let forged = client.call(&input, &stranger).await.unwrap_err();
    assert!(
        forged.to_string().contains("seal does not hold"),
        "{forged}"
    );
    assert!(
        model.requests().is_empty(),
        "the forged run called no model"
    );
    // The key every server and worker on the store shares (the worker made
    // it), and the run's row as a server writes it before submitting.
    let key = bootstrap::keys::load_from(&home.data_home.join("agent/server.key")).unwrap();
    let store = home.store().await;
    let run_id = request_again.context.run_id.to_string();
    store
        .account("local")
        .start_run(&agent_store::NewRun {
            id: run_id.clone(),
            thread_id: None,
            graph: "chat".into(),
            model: "e2e-model".into(),
            prompt_hash: None,
            owner: agent_durable::engine::ENGINE_OWNER.into(),
            started_ms: 1,
        })
        .await
        .unwrap();
    input.start = agent_graph::journal::RunStart::New {
        request: request_again,
    };
    let first = client.call(&input, &key).await.unwrap();
    let second = client.call(&input, &key).await.unwrap();
    assert_eq!(first.status, "done", "{first:?}");
    assert_eq!(second, first);
    assert_eq!(
        model.requests().len(),
        1,
        "the second submission ran nothing"
    );
    let run = store.account("local").run(&run_id).await.unwrap().unwrap();
    assert_eq!(run.status, agent_store::RunStatus::Done);
}

/// A run paused on an approval waits on an awakeable in its invocation and
/// holds no worker: the worker is killed and replaced while the approval waits,
/// the approval resolves the awakeable, and the approved call then runs once,
/// in the same invocation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_waits_across_a_worker_restart() {
    let Some(deployment) = Deployment::start(
        [
            Reply::tool_calls(&[("call_b", "mcp__fx__bump", json!({}))]),
            Reply::text("Bumped."),
        ],
        true,
    )
    .await
    else {
        return;
    };
    let (first, served) = deployment.up().await;
    let asked = served.say("chat-a", "Bump it.").await;
    assert!(
        asked.iter().any(|c| c["type"] == "tool-approval-request"),
        "{asked:?}"
    );
    let (restate, ledger) = (&deployment.restate, &deployment.ledger);
    assert!(ledger.lines().is_empty(), "nothing ran before the approval");
    // The invocation is not over: it waits on its awakeable.
    let waiting = restate
        .sql("SELECT status FROM sys_invocation WHERE target_service_name = 'AgentRuns'")
        .unwrap();
    assert_ne!(waiting["rows"][0]["status"], "completed", "{waiting}");
    kill(first).await;
    let _second = deployment.worker().await;
    let approved = crate::threads::approval_answer("chat-a", "Bump it.", &asked);
    let answer = served.chat(&approved).await;
    assert_eq!(text_of(&answer), "Bumped.", "{answer:?}");
    assert_eq!(ledger.lines().len(), 1, "the approved call ran once");
    // The paused run waited in its invocation, on the awakeable the approval
    // resolved: one invocation for the whole chat turn, now completed.
    let invocations = restate
        .sql("SELECT status FROM sys_invocation WHERE target_service_name = 'AgentRuns'")
        .unwrap();
    assert_eq!(
        invocations["rows"].as_array().map(Vec::len),
        Some(1),
        "{invocations}"
    );
    assert_eq!(
        invocations["rows"][0]["status"], "completed",
        "{invocations}"
    );
}

/// What another account reads through Restate's admin API: every journal
/// entry and invocation, as text, with the hex-encoded raw entries decoded
/// (as an attacker would).
async fn admin_dump(restate: &Signed) -> String {
    let dump = admin_rows(restate).await;
    let mut decoded = dump.clone();
    for piece in dump.split('"') {
        if piece.len() >= 16
            && piece.len() % 2 == 0
            && piece.bytes().all(|b| b.is_ascii_hexdigit())
            && let Ok(bytes) = hex::decode(piece)
        {
            decoded.push('\n');
            decoded.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    decoded
}

/// The rows of Restate's introspection tables, as the admin API answers.
async fn admin_rows(restate: &Signed) -> String {
    let mut dump = String::new();
    for table in ["sys_journal", "sys_invocation", "sys_invocation_state"] {
        let query = json!({ "query": format!("SELECT * FROM {table}") }).to_string();
        let url = format!("{}/query", restate.admin_url());
        let (_, body) = curl_as_nobody(&[
            "-H",
            "content-type: application/json",
            "-H",
            "accept: application/json",
            "--data-raw",
            &query,
            &url,
        ])
        .await;
        dump.push_str(&body);
    }
    dump
}

/// The sealed payloads (`{"v":1,"nonce":..,"data":..}`) in `text`, as JSON.
fn sealed_payloads(text: &str) -> Vec<serde_json::Value> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest
        .find("{\\\"v\\\":1,")
        .or_else(|| rest.find("{\"v\":1,"))
    {
        let candidate = &rest[at..];
        let unescaped = candidate.replace("\\\"", "\"");
        if let Some(end) = unescaped.find('}')
            && let Ok(value) = serde_json::from_str::<serde_json::Value>(&unescaped[..=end])
        {
            found.push(value);
        }
        rest = &rest[at + 6..];
    }
    found
}

/// Findings 1, 2 and 15 of the local-attacker review, against a real Restate
/// server and worker, as uid 65534: before, another account copied the
/// store's submission key and started a run holding an approved shell call;
/// it read every journaled step through the admin API; it resent a captured
/// sealed run under a new idempotency key and answered its approval with a
/// captured sealed approval, and the approved call ran twice; and the worker's
/// port answered it. Now: the journal it reads holds no prompt, answer or tool
/// text; the worker answers it nothing; a captured run resent (another key, no
/// key) runs nothing; a captured approval sent to another paused run runs
/// nothing and leaves that run waiting for its own approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_local_account_cannot_start_replay_approve_or_read_runs_on_restate() {
    const SECRET: &str = "TOP-SECRET-PROMPT-7731";
    let Some(deployment) = Deployment::start(
        [
            Reply::tool_calls(&[("call_a", "mcp__fx__bump", json!({}))]),
            Reply::text("Bumped the SECRET-ANSWER-88."),
            Reply::tool_calls(&[("call_b", "mcp__fx__bump", json!({}))]),
            Reply::text("Bumped again."),
        ],
        true,
    )
    .await
    else {
        return;
    };
    if let Some(reason) = crate::serve::second_uid_unavailable() {
        eprintln!(
            "SKIPPED another_local_account_cannot_start_replay_approve_or_read_runs_on_restate: {reason}"
        );
        return;
    }
    let (_worker, served) = deployment.up().await;
    let (restate, ledger, model) = (&deployment.restate, &deployment.ledger, &deployment.model);
    // The victim's turn: a secret prompt, an approval, the call runs once.
    let prompt = format!("{SECRET}: bump it");
    let asked = served.say("chat-a", &prompt).await;
    let approved = crate::threads::approval_answer("chat-a", &prompt, &asked);
    let answer = served.chat(&approved).await;
    assert!(text_of(&answer).contains("SECRET-ANSWER-88"), "{answer:?}");
    assert_eq!(ledger.lines().len(), 1);

    // 15: the worker's endpoint answers only its Restate server.
    assert_the_worker_answers_only_restate(deployment.port).await;
    // 2: what the admin API shows is ciphertext.
    let captured = sealed_journal(restate, &[SECRET, "SECRET-ANSWER-88"]).await;
    // 1, 2: every captured payload resent as a new run runs nothing.
    resend_as_new_runs(restate, &captured).await;
    assert_eq!(ledger.lines().len(), 1, "no replay ran the call again");
    assert_eq!(model.requests().len(), 2, "no replay called the model");

    // A second paused run: every captured payload resolves its awakeable; the
    // run goes on waiting, runs nothing, and its own approval still works.
    // The attacker is given the awakeable's id (the worst case: the store is
    // private now, so it would have to derive it from the journal).
    let asked = served.say("chat-b", "bump again").await;
    let store = deployment.home.store().await;
    let rows = store.account("local");
    let paused = rows.latest_run("chat-b").await.unwrap().unwrap();
    let state = paused_state(&rows, &paused.run.id).await;
    let awakeable = state["awakeable"].as_str().unwrap().to_owned();
    for sealed in &captured {
        let url = format!(
            "{}/restate/awakeables/{awakeable}/resolve",
            restate.ingress_url()
        );
        let body = sealed.to_string();
        let json = "content-type: application/json";
        let _ = curl_as_nobody(&["-H", json, "--data-raw", &body, &url]).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ledger.lines().len(), 1, "a captured approval ran nothing");
    // The refused approvals reached the run, which refused them and went on
    // waiting, on a new awakeable.
    let waiting = rows.latest_run("chat-b").await.unwrap().unwrap();
    assert_eq!(
        waiting.status,
        agent_store::RunStatus::Paused,
        "{waiting:?}"
    );
    let now_waiting = paused_state(&rows, &paused.run.id).await;
    assert_ne!(
        now_waiting["awakeable"], state["awakeable"],
        "the run took the captured approval and refused it"
    );
    let approved = crate::threads::approval_answer("chat-b", "bump again", &asked);
    let answer = served.chat(&approved).await;
    assert_eq!(
        text_of(&answer),
        "Bumped again.",
        "{answer:?} (awakeable {awakeable:?})"
    );
    assert_eq!(ledger.lines().len(), 2, "its own approval ran it once");
}

/// Finding 15: the worker on `port` answers nobody but its Restate server,
/// neither discovery nor an invocation.
async fn assert_the_worker_answers_only_restate(port: u16) {
    let worker_url = format!("http://127.0.0.1:{port}");
    let (status, body) =
        curl_as_nobody(&["--http2-prior-knowledge", &format!("{worker_url}/discover")]).await;
    assert!(status != "200", "discover: {status} {body}");
    let (status, body) = curl_as_nobody(&[
        "--http2-prior-knowledge",
        "-X",
        "POST",
        "-H",
        "content-type: application/vnd.restate.invocation.v5",
        "--data-raw",
        "x",
        &format!("{worker_url}/invoke/AgentRuns/run"),
    ])
    .await;
    assert!(status != "200", "invoke: {status} {body}");
}

/// Finding 2: the journal as another account reads it through the admin API
/// is ciphertext: none of `secrets`, the tool's output or the call's
/// arguments is readable. The sealed payloads it holds (at least two).
async fn sealed_journal(restate: &Signed, secrets: &[&str]) -> Vec<serde_json::Value> {
    let dump = admin_dump(restate).await;
    assert!(dump.len() > 1_000, "the attacker read the journal: {dump}");
    let plain = ["acted", "mcp__fx__bump\\\",\\\"args"];
    for plain in secrets.iter().chain(&plain) {
        assert!(!dump.contains(plain), "{plain} is readable: {dump}");
    }
    let captured = sealed_payloads(&dump);
    assert!(
        captured.len() >= 2,
        "sealed payloads in the journal: {dump}"
    );
    captured
}

/// Findings 1 and 2: every `captured` payload resent by another account as a
/// new run, under a new idempotency key and with none, is refused.
async fn resend_as_new_runs(restate: &Signed, captured: &[serde_json::Value]) {
    let run_url = format!("{}/AgentRuns/run", restate.ingress_url());
    for sealed in captured {
        let body = sealed.to_string();
        for key in [Some("replayed-under-a-new-key"), None] {
            let mut args = vec!["-H", "content-type: application/json", "--data-raw", &body];
            let header;
            if let Some(key) = key {
                header = format!("idempotency-key: {key}");
                args.extend(["-H", &header]);
            }
            args.push(&run_url);
            let (status, reply) = curl_as_nobody(&args).await;
            assert_ne!(status, "200", "{reply}");
        }
    }
}

/// The paused state of run `run_id` as stored now (read, and put back as it
/// was).
async fn paused_state(rows: &agent_store::AccountStore<'_>, run_id: &str) -> serde_json::Value {
    let state = rows.take_paused(run_id).await.unwrap().unwrap();
    let now = agent_store::recorder::now_ms();
    rows.save_paused(run_id, &state, now).await.unwrap();
    state
}

/// What a follower of a run was told of the engine: the warnings of its
/// stream.
fn warnings_of(chunks: &[serde_json::Value]) -> Vec<String> {
    chunks
        .iter()
        .filter(|c| c["type"] == "data-warning")
        .filter_map(|c| c["data"]["warning"].as_str().map(str::to_owned))
        .collect()
}

/// Restate stopped for ten seconds while a run's tool call runs: the client
/// that sent the message and one that reattached are told that Restate cannot
/// be reached and that the run is retried (never that it was cancelled), and
/// both streams end with the run's answer once Restate is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restate_down_for_ten_seconds_mid_run_keeps_its_followers_until_the_answer() {
    let Some(mut deployment) = Deployment::start(
        [
            Reply::tool_calls(&[("call_s", "mcp__fx__slow", json!({"seconds": 2}))]),
            Reply::text("Slept through it."),
        ],
        false,
    )
    .await
    else {
        return;
    };
    let (_worker, served) = deployment.up().await;
    let sent = tokio::spawn({
        let api = served.api.clone();
        async move { api.say("chat-down", "Sleep.").await }
    });
    deployment.asked(1).await;
    // A client reattaching to the chat's running answer, read to its end.
    let reattached = tokio::spawn({
        let api = served.api.clone();
        async move { ui_chunks(&api.text("/api/chat/chat-down/stream").await) }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    deployment.restate.kill();
    tokio::time::sleep(Duration::from_secs(10)).await;
    deployment.restate.restart().unwrap();
    let run = deployment.ended_run("chat-down").await;
    assert_eq!(run.status, agent_store::RunStatus::Done, "{run:?}");
    for chunks in [sent.await.unwrap(), reattached.await.unwrap()] {
        let text = chunks
            .iter()
            .map(serde_json::Value::to_string)
            .collect::<String>();
        assert!(!text.contains("cancelled"), "{text}");
        assert!(!chunks.iter().any(|c| c["type"] == "error"), "{text}");
        assert!(text_of(&chunks).ends_with("Slept through it."), "{text}");
        let warnings = warnings_of(&chunks);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("Restate cannot be reached")),
            "{text}"
        );
    }
    assert_eq!(
        deployment.model.requests().len(),
        2,
        "the recorded model step was not asked again"
    );
}

/// A chat sent while Restate is down is stored and queued (its client told
/// so), then the server is killed before Restate ever acknowledged the run:
/// the next server submits it again once Restate is back, and the run
/// completes once, its call acting once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stored_but_never_acknowledged_is_submitted_again_and_runs_once() {
    let Some(mut deployment) = Deployment::start(
        [
            Reply::tool_calls(&[("call_b", "mcp__fx__bump", json!({}))]),
            Reply::text("Bumped once."),
        ],
        false,
    )
    .await
    else {
        return;
    };
    let (worker_first, mut first) = deployment.up().await;
    deployment.restate.kill();
    let queued = chat_body("chat-queued", "Bump it.");
    let mut response = first.post_chat(&queued).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200, "queued, not failed");
    let mut seen = String::new();
    while !seen.contains("Restate cannot be reached") {
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .expect("the client is told Restate is down")
            .unwrap()
            .expect("the stream goes on");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let store = deployment.home.store().await;
    let stored = store
        .account("local")
        .latest_run("chat-queued")
        .await
        .unwrap();
    assert!(
        stored.is_some_and(|r| r.status == agent_store::RunStatus::Running),
        "the run is stored before Restate acknowledges it"
    );
    first.kill().await;
    drop(response);
    drop(worker_first);
    deployment.restate.restart().unwrap();
    let _worker = deployment.worker().await;
    let _second = deployment.serve().await;
    let run = deployment.ended_run("chat-queued").await;
    assert_eq!(run.status, agent_store::RunStatus::Done, "{run:?}");
    assert_eq!(deployment.model.requests().len(), 2);
    assert_eq!(deployment.ledger.lines().len(), 1, "the call acted once");
}

/// A run on Restate continues the trace of the request that started it: the
/// worker (exporting to a loopback collector) exports the run's span as a
/// child of the `traceparent` `agent serve` was sent, the worker's model
/// request carries that trace on, and the run's events keep its trace id.
/// The trace travels in the submission, not in the worker's environment: a
/// worker serves many runs, each with its own caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_restate_continues_the_trace_of_its_request() {
    let Some(deployment) = Deployment::start([Reply::text("Traced.")], false).await else {
        return;
    };
    let receiver = Receiver::default();
    let endpoint = receiver.start().await;
    let _worker = deployment
        .worker_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)])
        .await;
    let served = deployment.serve().await;
    let traced = served
        .post_chat(&chat_body("chat-traced", "Hi"))
        .header("traceparent", format!("00-{TRACE_ID}-{PARENT_ID}-01"));
    let answer = body_text(traced).await;
    assert_eq!(stream_text(&answer), "Traced.", "{answer}");
    let spans = spans_once(&receiver, 0, "invoke_agent chat").await;
    let run = spans
        .iter()
        .find(|span| span.name == "invoke_agent chat")
        .unwrap();
    assert_eq!(run.trace_id, hex_of(TRACE_ID), "the request's trace");
    assert_eq!(run.parent_span_id, hex_of(PARENT_ID), "the request's span");
    let requests = deployment.model.requests();
    let parent = requests[0].header("traceparent").expect("a traceparent");
    assert!(parent.starts_with(&format!("00-{TRACE_ID}-")), "{parent}");
    assert_eq!(
        events_trace_id(&deployment.home, "chat-traced").await,
        TRACE_ID
    );
}
