//! Durable runs: the one owner of a recorded run ([`Runs`]), and where a run's
//! steps are journaled, so a run outlives the process that started it (see
//! `agent_graph::journal` for the step seam itself: what a step is, what is
//! replayed, and the intent rule for calls that act).
//!
//! - [`runs`]: [`Runs`], the run owner `agent serve`, `agent chat` and `agent
//!   worker` start runs through: a run and its user turn stored before the
//!   model is called, its steps journaled, each event recorded, its end
//!   written; one Stop reaches it from any process. Nothing else assembles a
//!   recorded run.
//!   Library code records runs of an `Agent` through it too:
//!   [`Runs::open`] on a store, [`Runs::run_agent`] per run.
//! - [`lease`]: processes as owners of runs under a lease, fenced.
//! - [`store`]: the embedded journal, [`StoreJournal`]: each step a row of the
//!   run store (SQLite, or Postgres for many servers), read once when the run
//!   starts and written before the run goes on. `agent serve` uses it for every
//!   run it records, and goes on with a dead server's runs at startup.
//! - [`engine`]: a durable engine behind the run owner ([`engine::Engine`]):
//!   runs stored, then submitted, and submitted again until acknowledged.
//! - [`restate`]: the engine on Restate: [`restate::RestateEngine`] submits
//!   (Restate's ingress), and with the `worker` feature the `AgentRuns`
//!   service `agent worker` serves runs each run as an invocation, each step a
//!   `ctx.run` whose journal Restate keeps and replays in order. Restate
//!   retries an invocation whose worker died on another worker, and an
//!   idempotency key (the run id) makes a submission that is repeated return
//!   the first run's answer.
//! - [`seal`]: what goes through the engine is sealed with the key the
//!   servers and workers share.
//!
//! agent-durable depends on ai-core, agent-graph, agent-store and client-tls: not on
//! ai-tools, a wire crate, agent-server or bootstrap (the composition root hands
//! it a model, a runner and a graph). Only its `worker` feature links
//! restate-sdk: a server that submits runs does not.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod agent_runs;
pub mod engine;
pub mod lease;
pub mod restate;
pub mod runs;
pub mod seal;
pub mod store;

pub use agent_runs::{AgentRun, DEFAULT_ACCOUNT};
pub use runs::{Ended, RecordedRun, RunSpec, Runs, RunsError, ThreadTurn, answer_id, prompt_id};
pub use store::{SavedStart, StoreJournal, journal_for, run_end};
