//! One run of the loop: model turn, tool calls, model turn, ... until a final answer.
//!
//! [`run()`] starts a prepared [`RunRequest`] and returns a [`RunHandle`]: the run's
//! events as a stream, and its [`RunOutput`] (or [`RunError`]) once. A run with
//! deferred approvals pauses with a [`PausedRun`]; [`resume`] continues it with the
//! user's [`Decision`]s, and [`durable`] runs it as journaled steps
//! ([`crate::journal`]).
//!
//! The submodules, by concept (everything public is re-exported here):
//! - what a run is asked and gives back: `request` ([`RunRequest`], [`RunLimits`],
//!   [`ToolChoiceScope`], [`RunDeps`]), `paused` ([`PausedRun`], [`PendingApproval`],
//!   [`ClientCall`], [`Decision`]), `output` ([`RunOutput`]) and `error`
//!   ([`RunError`]);
//! - how the caller holds it: `handle` ([`RunHandle`], [`EventStream`],
//!   [`OutputFuture`]) over `queue` (the one event queue: pushing never waits);
//! - how it is started and driven: `launch` (the entry points and the run's task),
//!   `emitter` (how the loop emits events), `driver` (the loop, a step per
//!   method), `model` (a model turn), `tools` (a turn's tool calls) and `settle`
//!   (a resumed run's pending calls), and `spans` (the run's and model calls'
//!   spans, in the OpenTelemetry GenAI conventions' names).

mod driver;
mod emitter;
mod error;
mod handle;
mod launch;
mod model;
mod output;
mod paused;
mod queue;
mod request;
mod settle;
mod spans;
mod tools;

pub use error::RunError;
pub use handle::{EventStream, OutputFuture, RunHandle};
pub use launch::{durable, resume, run, start};
pub use output::RunOutput;
pub use paused::{
    ClientCall, Decision, NO_CLIENT_OUTPUT, PAUSED_RUN_VERSION, PausedRun, PendingApproval,
};
pub use request::{RunDeps, RunLimits, RunRequest, ToolChoiceScope};

pub(crate) use launch::{fail, run_nested};
pub(crate) use queue::{Queue, Slot};
