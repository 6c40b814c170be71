//! `agent worker`: runs for a Restate server (`[durable] engine = "restate"`).
//! It binds the same model, tools, policy and graph as `agent serve`, serves the
//! `AgentRuns` service on an HTTP/2 endpoint, registers it with the Restate
//! server's admin API, and runs each run Restate invokes: every step a `ctx.run`,
//! the events written to the run store, where `agent serve` reads them.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use agent_durable::restate::{AgentRuns, RestateClient};
use ai_core::ToolRunner;
use ai_core::approval::{Approver, GrantLedger};

use crate::cli::{EXIT_RUN_ERROR, EXIT_USAGE};
use crate::config::AgentConfig;

/// What `agent worker` was asked for on its command line.
#[derive(Debug, Clone, Default)]
pub struct WorkerArgs {
    /// `--host` (default 127.0.0.1).
    pub host: Option<String>,
    /// `--port` (0 picks a free one).
    pub port: u16,
    /// `--graph`.
    pub graph: String,
}

/// Runs `agent worker` until Ctrl-C.
pub async fn run(config: &AgentConfig, args: WorkerArgs) -> ExitCode {
    let host = args.host.unwrap_or_else(|| "127.0.0.1".into());
    let Ok(ip) = host.parse::<IpAddr>() else {
        eprintln!("agent: --host must be an IP address (got {host:?})");
        return ExitCode::from(EXIT_USAGE);
    };
    let store = match crate::history::open(config).await {
        Ok(store) => store,
        Err(e) => {
            eprintln!("agent: a worker needs the run store: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let session = match crate::session::Session::open(config, &args.graph, true).await {
        Ok(session) => session,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = serve(config, &session, store, SocketAddr::new(ip, args.port)).await;
    session.close().await;
    code
}

async fn serve(
    config: &AgentConfig,
    session: &crate::session::Session,
    store: agent_store::Store,
    addr: SocketAddr,
) -> ExitCode {
    // Approval-required calls run in a continued run under the decisions it was
    // given, as in `agent serve`: the ledger is the approver no one asks.
    let ledger: Arc<dyn Approver> = Arc::new(GrantLedger::new());
    let runner = match ToolRunner::new(session.tools.clone(), session.policy.clone()) {
        Ok(runner) => runner.with_approver(ledger),
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // Only runs sealed with the key the servers and workers share run here.
    let key = match crate::keys::load(config) {
        Ok(key) => key,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let owner = match crate::history::runs_of(config, &store, "worker").await {
        Ok(owner) => owner,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let runs = AgentRuns::new(
        Arc::clone(&session.model),
        Arc::new(runner),
        session.graph.clone(),
        (owner.clone(), key),
    );
    let durable = &config.file.durable;
    let restate = match RestateClient::new(&durable.restate_ingress, &durable.restate_admin) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (listener, bound) = match crate::serve::listen(addr).await {
        Ok(bound) => bound,
        Err(e) => {
            eprintln!("agent: {e}");
            return ExitCode::from(EXIT_RUN_ERROR);
        }
    };
    let uri = format!("http://{bound}");
    let identity = durable.restate_identity_keys.clone();
    if identity.is_empty() {
        eprintln!(
            "agent: a worker answers only requests its Restate server signed: set [durable] restate_identity_keys (agent keys restate-identity makes a key pair)"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let serving = tokio::spawn(async move {
        agent_durable::restate::serve(runs, listener, &identity, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
    });
    // Restate asks the endpoint what it serves while registering it: it serves
    // already.
    if let Err(e) = restate.register(&uri).await {
        eprintln!("agent: the worker could not register with Restate: {e}");
        serving.abort();
        owner.instance().release().await;
        return ExitCode::from(EXIT_RUN_ERROR);
    }
    println!(
        "agent: worker serving runs on {uri} (registered with {})",
        durable.restate_admin
    );
    let code = match serving.await {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("agent: {e}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(e) => {
            eprintln!("agent: the worker stopped: {e}");
            ExitCode::from(EXIT_RUN_ERROR)
        }
    };
    owner.instance().release().await;
    code
}
