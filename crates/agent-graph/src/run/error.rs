//! Why a run failed: [`RunError`], each variant with a stable code.

use ai_core::{completion::CompletionError, event::ToolCallRef};

/// Why a run failed. Each variant has a stable [`RunError::code`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The model call failed.
    #[error(transparent)]
    Model(#[from] CompletionError),
    /// The model kept calling tools for `limit` turns.
    #[error(
        "the run stopped after {limit} model turns without a final answer{}; raise limits.max_iterations if the task needs more turns",
        not_executed_note(not_executed)
    )]
    MaxIterations {
        /// The limit.
        limit: u32,
        /// Tool calls of the last turn, not executed because no model turn was left
        /// to see their results (also listed by the `tool_calls_not_executed` event).
        not_executed: Vec<ToolCallRef>,
    },
    /// A usage limit was reached.
    #[error(
        "the run reached its {what} limit of {limit}{}",
        not_executed_note(not_executed)
    )]
    UsageLimit {
        /// `model_requests` or `total_tokens`.
        what: &'static str,
        /// The limit.
        limit: u64,
        /// Tool calls of the last turn, not executed because the limit left no model
        /// turn to see their results (also listed by the `tool_calls_not_executed`
        /// event).
        not_executed: Vec<ToolCallRef>,
    },
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
    /// The answer is not complete (returned by
    /// [`RunOutput::complete`](super::RunOutput::complete) only).
    #[error("the answer is incomplete: the model stopped with `{reason}`")]
    Incomplete {
        /// `length`, `content_filter`, `refusal` or the provider's reason.
        reason: String,
    },
    /// A typed answer did not match its type, after every retry.
    #[error("the answer did not match the requested type after {attempts} attempts: {message}")]
    InvalidOutput {
        /// How many answers were asked for.
        attempts: u32,
        /// What was wrong with the last one (where, never the values).
        message: String,
    },
    /// A paused run could not be resumed (written by another version, or resumed
    /// with another graph); the message says why.
    #[error("the paused run cannot be resumed: {0}")]
    InvalidResume(String),
    /// A durable run's step journal could not be read or written: the run
    /// stops rather than go on with a step it cannot record.
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    /// The run failed in an unexpected way (a bug); the message is safe.
    #[error("internal error: {0}")]
    Internal(String),
}

fn not_executed_note(calls: &[ToolCallRef]) -> String {
    match calls.len() {
        0 => String::new(),
        1 => " (the last turn's tool call was not executed)".to_owned(),
        n => format!(" (the last turn's {n} tool calls were not executed)"),
    }
}

impl RunError {
    /// The tool calls the run did not execute because it hit a limit first.
    pub fn not_executed(&self) -> &[ToolCallRef] {
        match self {
            Self::MaxIterations { not_executed, .. } | Self::UsageLimit { not_executed, .. } => {
                not_executed
            }
            _ => &[],
        }
    }

    /// Stable snake_case code (the `code` of the `error` event).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Model(e) => e.code(),
            Self::MaxIterations { .. } => "max_iterations_exceeded",
            Self::UsageLimit { .. } => "usage_limit_exceeded",
            Self::Cancelled => "cancelled",
            Self::Incomplete { .. } => "incomplete_answer",
            Self::InvalidOutput { .. } => "invalid_output",
            Self::InvalidResume(_) => "invalid_resume",
            Self::Journal(_) => "journal_failed",
            Self::Internal(_) => "internal_error",
        }
    }
}
