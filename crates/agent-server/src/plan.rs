//! What a checked chat request does, before anything runs: its history built
//! on the thread as stored, its client tool outputs checked, its files
//! bounded, its decisions checked against the server's key and made ready to
//! be recorded with the run's turn (see [`crate::chat`]).

use std::collections::HashSet;

use agent_graph::run::{Decision, PendingApproval};
use agent_store::{CallDecision, StoredMessage};
use ai_core::Message;
use ai_core::approval::ApprovalBinding;
use axum::response::Response;
use chat_protocol::contract::{self, ChatRequest, Transcript};

use crate::server::{ChatRef, ChatService};

/// The calls a continuation answers, and the decisions about them as this
/// server checked them.
pub(crate) type Redeemed = (Vec<PendingApproval>, Vec<Decision>);

/// What a checked request runs.
pub(crate) struct Plan {
    /// How many of the run's first messages are the thread's as stored
    /// (`None` without a store).
    pub(crate) kept: Option<usize>,
    /// How many messages the stored thread held when the plan read it
    /// (`None` without a store): the turn opens only while it still does.
    pub(crate) seen: Option<usize>,
    /// The calls it decides and its decisions (when it continues a paused
    /// run).
    pub(crate) redeemed: Option<Redeemed>,
    /// Its decisions and client tool outputs as the store records them, with
    /// the turn.
    pub(crate) decisions: Vec<CallDecision>,
    /// What the response warns of (parts of the request left out).
    pub(crate) warnings: Vec<String>,
}

/// A decision of a request as the server checked it, before it is redeemed.
struct Checked {
    /// The call it decides.
    pending: PendingApproval,
    /// What it decides (invalid when its approval id did not verify).
    decision: Decision,
    /// Its approval id's tag and expiry, to redeem once.
    redemption: Option<([u8; 32], u64)>,
}

impl ChatService {
    /// What `chat` runs (see the module docs). `replayed`: calls whose
    /// approval id the store found used (their decisions are invalid);
    /// `stored`: the chat's stored messages when they were just read (read
    /// here otherwise).
    pub(crate) async fn plan(
        &self,
        chat: &mut ChatRequest,
        chat_ref: &ChatRef,
        (replayed, stored): (&HashSet<String>, Option<Vec<StoredMessage>>),
    ) -> Result<Plan, Response> {
        let Some(runs) = self.runs() else {
            let warnings = self.accept_client_outputs(chat, &[]);
            self.bound_files(chat);
            let redeemed = self.redeem_here(self.check_decisions(chat));
            return Ok(Plan {
                kept: None,
                seen: None,
                redeemed,
                decisions: Vec::new(),
                warnings,
            });
        };
        let rows = runs.store().account(chat_ref.account.clone());
        let stored = match stored {
            Some(stored) => stored,
            None => rows
                .stored_messages(&chat_ref.id)
                .await
                .map_err(|error| crate::chat::store_failed(&error))?,
        };
        let (stored, stored_ids): (Vec<Message>, Vec<Option<String>>) =
            stored.into_iter().map(|m| (m.message, m.id)).unzip();
        let seen = stored.len();
        let warnings = self.accept_client_outputs(chat, &stored);
        let continued = chat_protocol::thread::continue_thread(&stored, &stored_ids, chat);
        chat.history = continued.history;
        self.bound_files(chat);
        let checked = self.check_decisions(chat);
        let (redeemed, decisions) = recorded(chat, checked, replayed);
        Ok(Plan {
            kept: Some(continued.kept),
            seen: Some(seen),
            redeemed,
            decisions,
            warnings,
        })
    }

    /// Holds the request's files, the thread's stored ones included, to the
    /// request budget (the oldest left out, named).
    fn bound_files(&self, chat: &mut ChatRequest) {
        let omitted = chat_protocol::thread::bound_files(
            &mut chat.history,
            self.limits().max_request_file_bytes,
        );
        if omitted > 0 {
            tracing::info!(
                omitted,
                "older files of the chat left out of the model request"
            );
        }
    }

    /// Keeps each first output of a client tool that answers a call this
    /// server handed to this chat's client (or a call the chat's stored thread
    /// holds unanswered, as any server on the store handed it), for that tool
    /// and those arguments (compared as canonical JSON on both sides), and
    /// records it. An output that answers no such call never reaches the model
    /// (it reads [`contract::OUTPUT_REFUSED`] in its place) and is warned of
    /// (the warnings returned): never a refusal the client would repeat with
    /// every later message.
    fn accept_client_outputs(&self, chat: &mut ChatRequest, stored: &[Message]) -> Vec<String> {
        let open = chat_protocol::thread::unanswered(stored);
        let canonical = |text: &str| {
            serde_json::from_str::<serde_json::Value>(text)
                .map_or_else(|_| text.to_owned(), |v| ai_core::tool::canonical_json(&v))
        };
        let (accepted, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut chat.client_outputs)
            .into_iter()
            .partition(|output| {
                let issued = self
                    .client_calls()
                    .recall(&chat.chat_id, &output.tool_call_id)
                    .or_else(|| {
                        open.get(output.tool_call_id.as_str())
                            .map(|(tool, arguments)| ((*arguments).to_owned(), (*tool).to_owned()))
                    });
                issued.is_some_and(|(arguments, tool)| {
                    tool == output.tool_name
                        && canonical(&arguments) == canonical(&output.arguments)
                })
            });
        let mut warnings = Vec::new();
        for output in &refused {
            tracing::warn!(
                call = %ai_core::text::log_field(&output.tool_call_id),
                "a client tool output answers no call this chat waits for; left out"
            );
            for message in &mut chat.history {
                if matches!(message, Message::Tool { tool_call_id, .. } if *tool_call_id == output.tool_call_id)
                {
                    *message =
                        Message::tool_error(output.tool_call_id.clone(), contract::OUTPUT_REFUSED);
                }
            }
            warnings.push(format!(
                "{}: this output answers no call the server handed out; the model did not read it",
                output.path
            ));
        }
        for output in &accepted {
            self.transcript().store(
                &chat.chat_id,
                &output.tool_call_id,
                output.arguments.clone(),
                output.result.clone(),
            );
        }
        chat.client_outputs = accepted;
        warnings
    }

    /// The request's decisions as this server checked them: each approval id
    /// verified against the server's key (a forged, expired or edited one is
    /// an invalid decision, and nothing of it runs), not yet redeemed.
    fn check_decisions(&self, chat: &ChatRequest) -> Vec<Checked> {
        chat.decisions
            .iter()
            .map(|answer| {
                let pending = PendingApproval {
                    tool_call_id: answer.tool_call_id.clone(),
                    tool_name: answer.tool_name.clone(),
                    args: answer.args.clone(),
                    args_hash: answer.args_hash.clone(),
                    raw: None,
                };
                let binding = ApprovalBinding::new(
                    &chat.chat_id,
                    &answer.tool_call_id,
                    &answer.tool_name,
                    &answer.args_hash,
                );
                let verified = self.approvals().verify(&answer.approval_id, &binding);
                let (decision, redemption) = match verified {
                    Err(error) => {
                        tracing::warn!(chat = %ai_core::text::log_field(&chat.chat_id), error = %error, "approval refused");
                        (
                            Decision::invalid(&answer.tool_call_id, error.to_string()),
                            None,
                        )
                    }
                    Ok(redemption) if answer.approved => {
                        (Decision::approve(&answer.tool_call_id), Some(redemption))
                    }
                    Ok(redemption) => (
                        Decision::deny(&answer.tool_call_id, answer.reason.clone()),
                        Some(redemption),
                    ),
                };
                Checked {
                    pending,
                    decision,
                    redemption,
                }
            })
            .collect()
    }

    /// Redeems `checked`'s approval ids in this process (a service without a
    /// store): an id used before is an invalid decision.
    fn redeem_here(&self, checked: Vec<Checked>) -> Option<Redeemed> {
        if checked.is_empty() {
            return None;
        }
        let mut redeemed: Redeemed = Default::default();
        for mut check in checked {
            if let Some((tag, expiry)) = check.redemption
                && let Err(error) = self.approvals().mark_used(tag, expiry)
            {
                check.decision =
                    Decision::invalid(check.decision.tool_call_id(), error.to_string());
            }
            redeemed.0.push(check.pending);
            redeemed.1.push(check.decision);
        }
        Some(redeemed)
    }
}

/// `checked` as the run carries it out and as the store records it with the
/// turn (each approval id to be used up there), and `chat`'s client tool
/// outputs as decisions too; a call in `replayed` (its approval id was used
/// before) is decided invalid, with nothing to use up.
fn recorded(
    chat: &ChatRequest,
    checked: Vec<Checked>,
    replayed: &HashSet<String>,
) -> (Option<Redeemed>, Vec<CallDecision>) {
    let mut redeemed: Option<Redeemed> = (!checked.is_empty()).then(Default::default);
    let mut decisions = Vec::with_capacity(checked.len() + chat.client_outputs.len());
    for mut check in checked {
        let call = check.decision.tool_call_id().to_owned();
        if replayed.contains(&call) {
            let error = crate::approval::ApprovalError::Replayed.to_string();
            check.decision = Decision::invalid(&call, error);
            check.redemption = None;
        }
        decisions.push(CallDecision {
            call_id: call,
            decision: serde_json::to_string(&check.decision).unwrap_or_default(),
            approval: check
                .redemption
                .map(|(tag, expiry)| (hex::encode(tag), expiry)),
        });
        if let Some((pending, made)) = redeemed.as_mut() {
            pending.push(check.pending);
            made.push(check.decision);
        }
    }
    for output in &chat.client_outputs {
        decisions.push(CallDecision {
            call_id: output.tool_call_id.clone(),
            decision: serde_json::json!({"decision": "client_output", "output": output.result})
                .to_string(),
            approval: None,
        });
    }
    (redeemed, decisions)
}
