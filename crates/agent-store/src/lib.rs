//! The run store: what outlives a process. Threads and the messages the model saw,
//! runs with their status and append-only event log, one usage fact per model
//! call, and the serialized state of paused runs, on SQLite (the embedded default:
//! one file, WAL) or Postgres (many servers sharing one store), through one set of
//! migrations.
//!
//! Every row belongs to an account, and every read and write goes through an
//! [`AccountStore`] ([`Store::account`]): a query cannot be written without the
//! account, so one account never reads, lists or deletes another's rows (they are
//! simply not found).
//!
//! Writes are idempotent where a retry can repeat them: appending an event or a
//! usage fact with a key that is already stored is a no-op when the content is the
//! same and a [`StoreError::Conflict`] when it differs, so a writer may retry after
//! a timeout without duplicating or losing a row.
//!
//! [`RunRecorder`] writes a run's events in the background: batched, deltas merged,
//! retried, never blocking the run, with a bounded backlog. [`RunRecording`] is
//! the whole of one run on top of it (row, thread, events, usage, messages), the
//! one way the command line and the server record runs. The appends of every
//! recorder of a process go through one writer, which writes those that queued
//! meanwhile in one transaction (see `batch`).
//!
//! The store keeps what it is given: events are redacted by their writer before
//! they reach it (the run's events already carry redacted views of arguments and
//! results).
//!
//! agent-store depends on ai-core only: not on the loop, the server, a wire crate or
//! the composition root.

mod account;
mod batch;
mod error;
mod files;
pub mod recorder;
pub mod recording;
mod sql;
mod sqlite;
mod store;
mod turn;

pub use account::{
    AccountStore, CallUsage, Fence, NewRun, RunRecord, RunStatus, StoredEvent, Thread,
    UsageGrouping, UsageRow,
};
pub use error::StoreError;
pub use recorder::{EventLog, RecordError, RecordSummary, RecorderOptions, RunRecorder, StoreLog};
pub use recording::{Pricing, RunEnd, RunRecording, StartWritten, title_from};
pub use store::{Backend, Orphan, Store};
pub use turn::{CallDecision, NewTurn, Opened, StoredMessage, TurnMessage};
