//! Runs as Restate invocations: the `AgentRuns` service (`agent worker` serves
//! it, with the `worker` feature), whose `run` handler runs one durable run with
//! every step a `ctx.run`; and [`RestateEngine`], the [`crate::engine::Engine`]
//! a server submits its runs to (Restate's ingress, no SDK).
//!
//! How a step goes through Restate (`RestateJournal`): the run, in its own
//! task, asks for step N; the handler calls `ctx.run` named after it. When
//! Restate's journal already holds the entry (a retried invocation replaying),
//! `ctx.run` returns it without running its closure, and the run replays the
//! step. When it does not, the closure hands the run an open slot, waits for the
//! run to do the step and record it through the slot, and returns the step,
//! which Restate journals and acknowledges before `ctx.run` returns; only then
//! does the run go on. So a step is recorded before the next starts, and the
//! intent rule holds as with the embedded journal: an intent replayed from the
//! journal followed by a tool step that is not is a call that was under way when
//! the worker died (`outcome_unknown`, unless its tool is idempotent).
//!
//! Restate replays a journal in order, so the run opens its steps one at a time
//! ([`agent_graph::journal::StepJournal::one_step_at_a_time`]): read-only calls
//! of one turn run one after another.
//!
//! The run's events go to the run store, as `agent serve` writes them (its
//! event log is cleared and written anew by each attempt: the replayed steps'
//! events first); `agent serve` streams them to the client from there. The run
//! row is written by whoever submits the run, owned by [`crate::engine::ENGINE_OWNER`]:
//! Restate, not a process, answers for it.
//!
//! Anyone who reaches Restate's ingress or admin API, or the worker's
//! endpoint, could call the handler, replay an invocation or read its
//! journal; a run's start carries the user's conversation and approval
//! decisions. So:
//!
//! - the worker answers only requests Restate signed with its request
//!   identity key (`serve` with the server's public keys);
//! - every payload is sealed ([`crate::seal`]: encrypted and authenticated
//!   under a key the servers and workers hold in a private file): the run's
//!   input ([`crate::engine::RunInput`]), each journaled step, and the decisions that
//!   continue a paused run ([`crate::engine::Continuation`]), so the admin API shows
//!   ciphertext and a process without the key starts nothing;
//! - a sealed run is bound to its run id, account and an expiry: the handler
//!   runs it only when the run's row is Restate's in the store, only in the
//!   first invocation that presented it (redeemed once in the store,
//!   [`agent_store::Store::redeem`], before the expiry), and under its run id
//!   as idempotency key where Restate tells the handler the key; so a captured
//!   run resent under another key (another invocation), or after Restate
//!   forgot the first, runs nothing;
//! - a sealed continuation is bound to the paused run, to each call it decides
//!   (tool and argument hash) and to an expiry, and is redeemed once; one that
//!   does not hold is refused and the run goes on waiting (a new awakeable),
//!   so a captured or forged one neither runs a call nor ends the run.
//!
//! A run paused on approvals waits in its invocation on an awakeable (a durable
//! promise) whose id it writes to the store beside the paused run; the server
//! resolves it with the user's decisions ([`crate::engine::Continuation`], sealed too) when the
//! approval arrives, and the invocation goes on with the continuing run. While
//! it waits, Restate suspends the invocation after a minute without progress:
//! no worker holds it, so it can wait days, across worker restarts.

mod client;
#[cfg(feature = "worker")]
mod worker;

pub use client::{IdentityKeyPair, RestateClient, RestateEngine, RestateError};
#[cfg(feature = "worker")]
pub use worker::{AgentRuns, RestateJournal, serve};

/// The service's name at Restate's ingress (`POST /AgentRuns/run/send`).
pub const SERVICE: &str = "AgentRuns";
