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

/// An approval, valid in one run for one call of one tool with one argument hash,
/// used once. A grant issued in one run never approves a call of another run, even
/// one that reuses the call id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ApprovalGrant {
    /// The run it was issued for.
    pub run_id: String,
    /// The call it approves.
    pub tool_call_id: String,
    /// The tool it approves.
    pub tool_id: String,
    /// Hash of the canonical arguments it approves.
    pub args_hash: String,
}

impl ApprovalGrant {
    /// The grant that approves exactly `request`.
    pub fn for_request(request: &ApprovalRequest) -> Self {
        Self {
            run_id: request.run_id.clone(),
            tool_call_id: request.tool_call_id.clone(),
            tool_id: request.tool_id.as_str().to_owned(),
            args_hash: request.args_hash.clone(),
        }
    }

    /// Whether this grant approves exactly `request` (same run, call, tool and
    /// arguments).
    pub fn matches(&self, request: &ApprovalRequest) -> bool {
        self.run_id == request.run_id
            && self.tool_call_id == request.tool_call_id
            && self.tool_id == request.tool_id.as_str()
            && self.args_hash == request.args_hash
    }
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(agent_workspace), non_exhaustive)]
pub enum ApprovalDecision {
    /// Approved; the runner checks the grant matches the request before running
    /// (`approval_invalid` when it does not).
    Approved(ApprovalGrant),
    /// The user said no (`approval_denied`).
    Denied {
        /// Safe reason shown to the model.
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
        Self::Approved(ApprovalGrant::for_request(request))
    }

    /// The user says no; the model reads `reason` (`approval_denied`).
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Denied {
            reason: reason.into(),
        }
    }
}

/// An answer given ahead of the call it is for (the decisions a paused run is
/// resumed with): the runner takes it instead of asking the approver. The call still
/// goes through every other step of the pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[cfg_attr(not(agent_workspace), non_exhaustive)]
pub enum PriorDecision {
    /// Approved: the call runs only when the grant matches it exactly (run, call,
    /// tool, argument hash); otherwise it fails with `approval_invalid`.
    Approved {
        /// The grant.
        grant: ApprovalGrant,
    },
    /// The user said no (`approval_denied`; the model reads the reason).
    Denied {
        /// The call.
        tool_call_id: String,
        /// Why, in the user's words.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The approval sent for the call does not hold (forged, expired, used before):
    /// `approval_invalid`, nothing runs.
    Invalid {
        /// The call.
        tool_call_id: String,
        /// Why, safe to show.
        reason: String,
    },
}

impl PriorDecision {
    /// The call it decides.
    pub fn tool_call_id(&self) -> &str {
        match self {
            Self::Approved { grant } => &grant.tool_call_id,
            Self::Denied { tool_call_id, .. } | Self::Invalid { tool_call_id, .. } => tool_call_id,
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
    grants: Mutex<HashMap<(String, String), ApprovalGrant>>,
}

impl GrantLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a grant (replacing any earlier grant for the same run and call id).
    pub fn insert(&self, grant: ApprovalGrant) {
        if let Ok(mut grants) = self.grants.lock() {
            grants.insert((grant.run_id.clone(), grant.tool_call_id.clone()), grant);
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
