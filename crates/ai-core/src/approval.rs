//! Approvals bound to one run, one call and its exact canonical arguments.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::tool::ToolEffect;
use crate::tool::ToolId;

/// What an approver is asked: one call, with the exact arguments that would run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The run.
    pub run_id: String,
    /// The call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_id: ToolId,
    /// The tool's declared effect.
    pub effect: ToolEffect,
    /// The validated arguments as canonical JSON (sorted keys, no whitespace): exactly
    /// what will run if approved.
    pub canonical_args: String,
    /// `sha256:<hex>` of `canonical_args`.
    pub args_hash: String,
}

impl ApprovalRequest {
    /// The arguments as the tool's argument type (or any type they deserialize
    /// into), to decide on their values:
    ///
    /// ```
    /// # use ai_core::approval::{ApprovalDecision, ApprovalRequest};
    /// #[derive(serde::Deserialize)]
    /// struct Refund { amount: u32 }
    ///
    /// fn decide(request: &ApprovalRequest) -> ApprovalDecision {
    ///     match request.args::<Refund>() {
    ///         Ok(refund) if refund.amount <= 100 => ApprovalDecision::approve(request),
    ///         Ok(_) => ApprovalDecision::deny("refunds over 100 need a manager"),
    ///         Err(_) => ApprovalDecision::deny("unexpected arguments"),
    ///     }
    /// }
    /// ```
    pub fn args<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.canonical_args)
    }
}

/// What one approval is bound to: one call of one tool with one canonical-argument
/// hash, in one scope. It is the one shape every approval takes from the runner to
/// the wire: a runner's grant (scope = the run that asked), and an approval id a
/// server issues (scope = the account's chat whose thread holds the call, since a
/// later run of that chat continues it). A binding issued in one scope never
/// approves a call of another, even one that reuses the call id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ApprovalBinding {
    /// Where it holds: a run id for a runner's grant, a chat for a server's id.
    pub scope: String,
    /// The call it approves.
    pub tool_call_id: String,
    /// The tool it approves.
    pub tool_id: String,
    /// Hash of the canonical arguments it approves (`sha256:<hex>`).
    pub args_hash: String,
}

impl ApprovalBinding {
    /// A binding of `tool_call_id` of `tool_id` with `args_hash`, in `scope`.
    pub fn new(
        scope: impl Into<String>,
        tool_call_id: impl Into<String>,
        tool_id: impl Into<String>,
        args_hash: impl Into<String>,
    ) -> Self {
        Self {
            scope: scope.into(),
            tool_call_id: tool_call_id.into(),
            tool_id: tool_id.into(),
            args_hash: args_hash.into(),
        }
    }

    /// The binding that approves exactly `request`, in its run.
    pub fn for_request(request: &ApprovalRequest) -> Self {
        Self::new(
            &request.run_id,
            &request.tool_call_id,
            request.tool_id.as_str(),
            &request.args_hash,
        )
    }

    /// Whether this binding approves exactly `request` (same run, call, tool and
    /// arguments).
    pub fn matches(&self, request: &ApprovalRequest) -> bool {
        self.scope == request.run_id
            && self.tool_call_id == request.tool_call_id
            && self.tool_id == request.tool_id.as_str()
            && self.args_hash == request.args_hash
    }
}

/// A decision about one call that needs an approval: an approver's answer, or one
/// given ahead of the call (a paused run's, by call id in
/// [`CallScope::decisions`](crate::runner::CallScope::decisions)), which the
/// runner takes instead of asking its approver. Either way the call still goes
/// through every other step of the pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[cfg_attr(not(agent_workspace), non_exhaustive)]
pub enum ApprovalDecision {
    /// Approved; the runner checks the binding matches the request before running
    /// (`approval_invalid` when it does not).
    Approved(ApprovalBinding),
    /// The user said no (`approval_denied`; the model reads [`denial_message`]).
    Denied {
        /// The user's reason, safe to show the model (empty for none).
        reason: String,
    },
    /// The approval sent for the call does not hold (forged, expired, used before):
    /// `approval_invalid`, nothing runs.
    Invalid {
        /// Why, safe to show.
        reason: String,
    },
    /// No one could answer (no user at a terminal, no approval given ahead):
    /// `approval_required`.
    Unavailable {
        /// Safe reason shown to the model.
        reason: String,
    },
}

impl ApprovalDecision {
    /// Approves exactly `request` (this run, call, tool and arguments).
    pub fn approve(request: &ApprovalRequest) -> Self {
        Self::Approved(ApprovalBinding::for_request(request))
    }

    /// The user says no; the model reads `reason` (`approval_denied`).
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Denied {
            reason: reason.into(),
        }
    }

    /// The approval sent for the call does not hold; the model reads `reason`
    /// (`approval_invalid`).
    pub fn invalid(reason: impl Into<String>) -> Self {
        Self::Invalid {
            reason: reason.into(),
        }
    }
}

/// What the model is told when the user denied a call: the sentence, and the
/// user's reason when there is one.
pub fn denial_message(reason: Option<&str>) -> String {
    match reason {
        Some(reason) if !reason.trim().is_empty() => {
            format!("The user denied this call. Reason: {reason}")
        }
        _ => "The user denied this call.".to_owned(),
    }
}

/// Decides whether a call that policy marks as needing approval may run.
pub trait Approver: Send + Sync {
    /// Reviews one call.
    fn review(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision>;
}

/// An approver holding grants issued ahead of time (e.g. by a UI), each used at most
/// once. A call with no grant gets no approval (`approval_required`), one whose grant
/// is for other arguments an invalid one (`approval_invalid`); grants are looked up
/// by run id and call id, so a call of another run neither uses nor consumes them.
#[derive(Debug, Default)]
pub struct GrantLedger {
    grants: Mutex<HashMap<(String, String), ApprovalBinding>>,
}

impl GrantLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a grant (replacing any earlier grant for the same run and call id).
    pub fn insert(&self, grant: ApprovalBinding) {
        if let Ok(mut grants) = self.grants.lock() {
            grants.insert((grant.scope.clone(), grant.tool_call_id.clone()), grant);
        }
    }

    /// Number of unused grants.
    pub fn len(&self) -> usize {
        self.grants.lock().map(|g| g.len()).unwrap_or(0)
    }

    /// Whether no unused grant remains.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Approver for GrantLedger {
    fn review(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        // The grant for this run and call id is consumed whether or not it matches: a
        // grant is good for one attempt only.
        let key = (request.run_id.clone(), request.tool_call_id.clone());
        let grant = self.grants.lock().ok().and_then(|mut g| g.remove(&key));
        let decision = match grant {
            // The runner checks the grant against the call (and refuses a mismatch).
            Some(grant) => ApprovalDecision::Approved(grant),
            None => ApprovalDecision::Unavailable {
                reason: "no approval was given for this call".into(),
            },
        };
        Box::pin(std::future::ready(decision))
    }
}

/// An approver from a closure that decides at once (a rule on the arguments, a
/// lookup): `approver_fn(|request| ...)`. For one that waits (a person, a
/// service), see [`approver_fn_async`].
///
/// ```
/// use ai_core::approval::{ApprovalDecision, approver_fn};
///
/// let approver = approver_fn(|request| {
///     if request.tool_id.name() == "refund" {
///         ApprovalDecision::deny("refunds are handled by a person")
///     } else {
///         ApprovalDecision::approve(request)
///     }
/// });
/// # let _: std::sync::Arc<dyn ai_core::approval::Approver> = approver;
/// ```
pub fn approver_fn<F>(decide: F) -> std::sync::Arc<dyn Approver>
where
    F: Fn(&ApprovalRequest) -> ApprovalDecision + Send + Sync + 'static,
{
    std::sync::Arc::new(FnApprover(decide))
}

/// An approver from an async closure, given each request by value:
/// `approver_fn_async(|request| async move { ... })`.
pub fn approver_fn_async<F, Fut>(decide: F) -> std::sync::Arc<dyn Approver>
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ApprovalDecision> + Send + 'static,
{
    std::sync::Arc::new(AsyncFnApprover(decide))
}

struct FnApprover<F>(F);

impl<F> Approver for FnApprover<F>
where
    F: Fn(&ApprovalRequest) -> ApprovalDecision + Send + Sync + 'static,
{
    fn review(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        Box::pin(std::future::ready((self.0)(&request)))
    }
}

struct AsyncFnApprover<F>(F);

impl<F, Fut> Approver for AsyncFnApprover<F>
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ApprovalDecision> + Send + 'static,
{
    fn review(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        Box::pin((self.0)(request))
    }
}
