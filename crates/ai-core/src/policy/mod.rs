//! Deny-by-default tool policy, as plain data.

use std::collections::BTreeSet;
use std::time::Duration;

mod catalog;
mod pattern;

pub use catalog::{CatalogError, ToolCatalog};
pub(crate) use catalog::{check_collisions, check_subset};
pub use pattern::ToolPattern;

use serde::{Deserialize, Serialize};

use crate::context::RunContext;
use crate::tool::ToolEffect;
use crate::tool::ToolId;

/// Resource limits applied to every tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budgets {
    /// Longest a tool may run, in milliseconds (default 30 s).
    pub max_runtime_ms: u64,
    /// Largest model-facing result, in bytes (default 64 KiB).
    pub max_result_bytes: usize,
    /// Largest argument text, in bytes (default 8 KiB).
    pub max_argument_bytes: usize,
    /// Longest tool call id accepted from a model (default 128).
    pub max_tool_call_id_len: usize,
    /// How long a stopped call (its run cancelled, or over `max_runtime_ms`) may take
    /// to finish after its cancellation token fires, in milliseconds (default 500):
    /// time to observe the token and clean up before its future is dropped. The same
    /// for every tool; a subagent (`graph__`) gets twice as long, so that its own
    /// calls end within their grace first.
    pub stop_grace_ms: u64,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_runtime_ms: 30_000,
            max_result_bytes: 64 * 1024,
            max_argument_bytes: 8 * 1024,
            max_tool_call_id_len: 128,
            stop_grace_ms: 500,
        }
    }
}

impl Budgets {
    /// `max_runtime_ms` as a duration.
    pub fn max_runtime(&self) -> Duration {
        Duration::from_millis(self.max_runtime_ms)
    }

    /// `stop_grace_ms` as a duration.
    pub fn stop_grace(&self) -> Duration {
        Duration::from_millis(self.stop_grace_ms)
    }
}

// tidy: exhaustive: a call is allowed, denied or needs an approval; nothing else.
/// What policy says about one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyDecision {
    /// The tool may be offered and run.
    Allow,
    /// The tool may be offered; each call needs an approval bound to its arguments.
    RequireApproval,
    /// The tool is neither offered nor run.
    Deny,
}

impl PolicyDecision {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::RequireApproval => "require_approval",
            Self::Deny => "deny",
        }
    }
}

/// Which tools a run may use, which need approval, and the budgets of every call.
///
/// Deny by default: a tool is allowed only when an `allow` entry matches its id and no
/// `deny` entry does. An entry is an exact id or a prefix ending in `*`
/// (`core__*`, `mcp__github__*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolPolicy {
    /// Allowed tool ids or `prefix*` patterns.
    pub allow: BTreeSet<ToolPattern>,
    /// Denied tool ids or `prefix*` patterns (win over `allow`).
    pub deny: BTreeSet<ToolPattern>,
    /// Effects whose calls need an approval.
    pub require_approval: BTreeSet<ToolEffect>,
    /// Per-call budgets.
    pub budgets: Budgets,
}

impl Default for ToolPolicy {
    /// Allows nothing; state changes and external side effects need approval once
    /// allowed.
    fn default() -> Self {
        Self {
            allow: BTreeSet::new(),
            deny: BTreeSet::new(),
            require_approval: [ToolEffect::StateChange, ToolEffect::ExternalSideEffect]
                .into_iter()
                .collect(),
            budgets: Budgets::default(),
        }
    }
}

fn matches(patterns: &BTreeSet<ToolPattern>, id: &str) -> bool {
    patterns.iter().any(|pattern| pattern.matches(id))
}

impl ToolPolicy {
    /// A policy that allows the given ids (or patterns), with default approvals and
    /// budgets.
    pub fn allowing<I, S>(ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<ToolPattern>,
    {
        Self {
            allow: ids.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Sets the effects that require approval.
    pub fn with_approval_for(mut self, effects: impl IntoIterator<Item = ToolEffect>) -> Self {
        self.require_approval = effects.into_iter().collect();
        self
    }

    /// Sets the budgets.
    pub fn with_budgets(mut self, budgets: Budgets) -> Self {
        self.budgets = budgets;
        self
    }

    /// Decides about one tool. Pure: the same inputs always give the same answer.
    pub fn decide(&self, _ctx: &RunContext, id: &ToolId, effect: ToolEffect) -> PolicyDecision {
        let id = id.as_str();
        if matches(&self.deny, id) || !matches(&self.allow, id) {
            PolicyDecision::Deny
        } else if self.require_approval.contains(&effect) {
            PolicyDecision::RequireApproval
        } else {
            PolicyDecision::Allow
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> ToolId {
        ToolId::parse(s).unwrap()
    }

    #[test]
    fn denies_by_default() {
        let ctx = RunContext::new("r", "t");
        let policy = ToolPolicy::default();
        assert_eq!(
            policy.decide(&ctx, &id("core__x"), ToolEffect::ReadOnly),
            PolicyDecision::Deny
        );
    }

    #[test]
    fn allow_patterns_deny_wins_and_effects_need_approval() {
        let ctx = RunContext::new("r", "t");
        let mut policy = ToolPolicy::allowing(["core__*", "mcp__gh__list"]);
        policy.deny.insert("core__exec_shell".into());
        for (tool, effect, expected) in [
            ("core__read", ToolEffect::ReadOnly, PolicyDecision::Allow),
            (
                "core__write",
                ToolEffect::StateChange,
                PolicyDecision::RequireApproval,
            ),
            (
                "core__exec_shell",
                ToolEffect::ReadOnly,
                PolicyDecision::Deny,
            ),
            ("mcp__gh__list", ToolEffect::ReadOnly, PolicyDecision::Allow),
            ("mcp__gh__listx", ToolEffect::ReadOnly, PolicyDecision::Deny),
            ("mcp__other__a", ToolEffect::ReadOnly, PolicyDecision::Deny),
        ] {
            assert_eq!(policy.decide(&ctx, &id(tool), effect), expected, "{tool}");
        }
    }

    #[test]
    fn policy_is_plain_data_with_defaults_and_strict_keys() {
        let policy: ToolPolicy =
            serde_json::from_str(r#"{"allow":["core__a"],"budgets":{"max_runtime_ms":5}}"#)
                .unwrap();
        assert_eq!(policy.budgets.max_runtime_ms, 5);
        assert_eq!(policy.budgets.max_result_bytes, 64 * 1024);
        assert_eq!(policy.budgets.max_argument_bytes, 8 * 1024);
        assert_eq!(policy.budgets.max_tool_call_id_len, 128);
        assert!(policy.require_approval.contains(&ToolEffect::StateChange));
        assert!(serde_json::from_str::<ToolPolicy>(r#"{"alow":[]}"#).is_err());
    }
}
