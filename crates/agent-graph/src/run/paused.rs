//! A run paused on deferred calls ([`PausedRun`]: the calls waiting for an
//! approval, [`PendingApproval`], or for the client, [`ClientCall`]) and the
//! user's answers that continue it ([`Decision`]).

use ai_core::{
    RunContext,
    approval::{ApprovalBinding, ApprovalDecision},
    event::UsageFact,
    runner::ToolInvocationRecord,
};
use serde_json::Value;

use super::RunRequest;

/// A call a run with deferred approvals did not execute (see
/// [`RunRequest::defer_approvals`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingApproval {
    /// The call id, as the runner settled it.
    pub tool_call_id: String,
    /// The tool id.
    pub tool_name: String,
    /// The validated arguments.
    pub args: Value,
    /// `sha256:<hex>` of the canonical arguments (`ai_core::tool::args_hash`).
    pub args_hash: String,
    /// The provider-native payload of the call, kept for its record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
}

/// A call of a tool the client runs (`client__<name>`), handed to the client by a
/// run with deferred calls (see [`RunRequest::defer_approvals`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClientCall {
    /// The call id, as the runner settled it.
    pub tool_call_id: String,
    /// The tool id.
    pub tool_name: String,
    /// The validated arguments.
    pub args: Value,
}

/// What the model reads for a client call that got no output.
pub const NO_CLIENT_OUTPUT: &str = "The client gave no output for this call.";

/// The version of [`PausedRun`]'s serialized form.
pub const PAUSED_RUN_VERSION: u32 = 1;

/// A run paused on approvals: all it needs to go on, in this process or another
/// (it is serializable, with a version). Continue it with [`resume`](super::resume()) (or
/// `Graph::resume`, `Agent::resume`) and the user's [`Decision`]s.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PausedRun {
    /// [`PAUSED_RUN_VERSION`] when it was written.
    pub version: u32,
    /// The run: its ids, model, settings, limits, graph and prompt hash, and in
    /// `messages` the history up to the pause (the assistant turn with every call,
    /// and the tool messages of the calls that ran).
    pub request: RunRequest,
    /// The calls waiting for a decision, in call order.
    pub pending: Vec<PendingApproval>,
    /// The calls of tools the client runs, waiting for its output, in call order
    /// ([`Decision::ClientOutput`] answers them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_calls: Vec<ClientCall>,
    /// Usage of every model call so far.
    pub usage: Vec<UsageFact>,
    /// The record of every tool call so far, in call order.
    pub records: Vec<ToolInvocationRecord>,
    /// Model turns taken so far (they count against `limits`).
    pub model_turns: u32,
}

/// The user's answer about one pending call of a [`PausedRun`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[cfg_attr(not(agent_workspace), non_exhaustive)]
pub enum Decision {
    /// Run it, exactly as it was asked for.
    Approve {
        /// The call.
        tool_call_id: String,
    },
    /// Do not run it; the model is told the user said no (`approval_denied`).
    Deny {
        /// The call.
        tool_call_id: String,
        /// The user's reason, for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The approval sent for it does not hold (forged, expired, used before):
    /// nothing runs (`approval_invalid`).
    Invalid {
        /// The call.
        tool_call_id: String,
        /// Why, safe to show the user and the model.
        reason: String,
    },
    /// The output of a call the client ran ([`PausedRun::client_calls`]): the
    /// model reads it as the call's result (bounded like any result).
    ClientOutput {
        /// The call.
        tool_call_id: String,
        /// What the client's tool returned.
        output: Value,
    },
}

impl Decision {
    /// Approves the call `tool_call_id`.
    pub fn approve(tool_call_id: impl Into<String>) -> Self {
        Self::Approve {
            tool_call_id: tool_call_id.into(),
        }
    }

    /// Denies the call `tool_call_id`, with the user's reason if any.
    pub fn deny(tool_call_id: impl Into<String>, reason: Option<String>) -> Self {
        Self::Deny {
            tool_call_id: tool_call_id.into(),
            reason,
        }
    }

    /// Refuses the call `tool_call_id` because its approval does not hold.
    pub fn invalid(tool_call_id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            tool_call_id: tool_call_id.into(),
            reason: reason.into(),
        }
    }

    /// The call it is about.
    pub fn tool_call_id(&self) -> &str {
        match self {
            Self::Approve { tool_call_id }
            | Self::Deny { tool_call_id, .. }
            | Self::Invalid { tool_call_id, .. }
            | Self::ClientOutput { tool_call_id, .. } => tool_call_id,
        }
    }

    /// What the runner takes instead of asking its approver: an approval becomes a
    /// binding to this run, this call, its tool and its argument hash.
    pub(super) fn prior(&self, run: &RunContext, pending: &PendingApproval) -> ApprovalDecision {
        match self {
            Self::Approve { tool_call_id } => ApprovalDecision::Approved(ApprovalBinding::new(
                &run.run_id,
                tool_call_id,
                &pending.tool_name,
                &pending.args_hash,
            )),
            Self::Deny { reason, .. } => ApprovalDecision::deny(reason.clone().unwrap_or_default()),
            Self::Invalid { reason, .. } => ApprovalDecision::invalid(reason),
            Self::ClientOutput { .. } => {
                ApprovalDecision::invalid("an output is not a decision about an approval")
            }
        }
    }
}
