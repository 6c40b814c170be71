//! The one enum of tool error codes.

use serde::{Deserialize, Serialize};

/// Why a tool call produced no value. The snake_case codes are a stable public
/// contract (events, tool messages, logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(not(agent_workspace), non_exhaustive)]
pub enum ToolErrorCode {
    /// The arguments were not valid JSON (or were truncated by the provider).
    InvalidJson,
    /// The arguments did not match the tool's input schema, or were too large.
    InvalidArgs,
    /// Policy does not allow this tool in this run.
    PolicyDenied,
    /// The tool needs approval and none was given (no approver, or none asked).
    ApprovalRequired,
    /// The user (or the approver for them) said no: the model is told the user
    /// refused, not that an approval was missing.
    ApprovalDenied,
    /// The approval given does not hold: forged, expired, used before, or given for
    /// another run, call or other arguments.
    ApprovalInvalid,
    /// No tool with this name exists.
    UnknownTool,
    /// The tool ran and failed (including a panic).
    ExecutionFailed,
    /// The tool ran longer than its budget.
    Timeout,
    /// The run was cancelled while the tool ran.
    Cancelled,
    /// The tool's output did not match its declared output schema.
    OutputInvalid,
    /// The tool declares no redaction allowlist.
    RedactionMissing,
    /// The sandbox refused the operation.
    PermissionDenied,
    /// A resource the tool needed does not exist.
    NotFound,
    /// A subagent (a `graph__` tool) reached one of its per-call budgets (wall time,
    /// model requests, total tokens or turns); the message names which.
    BudgetExceeded,
    /// A subagent tried to call a subagent: graphs nest at most one level deep.
    DepthExceeded,
    /// A durable run stopped (its process died) after this call was about to act
    /// and before its result was recorded: the call may or may not have happened,
    /// and it is not run again. The model should check (read the file, list the
    /// resource) before it acts again.
    OutcomeUnknown,
}

impl ToolErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ToolErrorCode; 17] = [
        Self::InvalidJson,
        Self::InvalidArgs,
        Self::PolicyDenied,
        Self::ApprovalRequired,
        Self::ApprovalDenied,
        Self::ApprovalInvalid,
        Self::UnknownTool,
        Self::ExecutionFailed,
        Self::Timeout,
        Self::Cancelled,
        Self::OutputInvalid,
        Self::RedactionMissing,
        Self::PermissionDenied,
        Self::NotFound,
        Self::BudgetExceeded,
        Self::DepthExceeded,
        Self::OutcomeUnknown,
    ];

    /// The stable snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::InvalidArgs => "invalid_args",
            Self::PolicyDenied => "policy_denied",
            Self::ApprovalRequired => "approval_required",
            Self::ApprovalDenied => "approval_denied",
            Self::ApprovalInvalid => "approval_invalid",
            Self::UnknownTool => "unknown_tool",
            Self::ExecutionFailed => "execution_failed",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::OutputInvalid => "output_invalid",
            Self::RedactionMissing => "redaction_missing",
            Self::PermissionDenied => "permission_denied",
            Self::NotFound => "not_found",
            Self::BudgetExceeded => "budget_exceeded",
            Self::DepthExceeded => "depth_exceeded",
            Self::OutcomeUnknown => "outcome_unknown",
        }
    }
}

impl std::fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_names_match_as_str() {
        for code in ToolErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            let back: ToolErrorCode = serde_json::from_str(&json).unwrap();
            assert_eq!(back, code);
        }
    }
}
