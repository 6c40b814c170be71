//! The CLI's approver: asks on a terminal, otherwise follows `--approve`.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ai_core::approval::{ApprovalBinding, ApprovalDecision, ApprovalRequest, Approver};
use futures::future::BoxFuture;

use crate::render::printable;

/// How the CLI answers approval requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalMode {
    /// Ask y/N on the terminal, showing the tool id and exact arguments.
    Ask,
    /// Approve every call (`--approve`).
    ApproveAll,
    /// Deny every call (no terminal and no `--approve`).
    DenyAll,
}

impl ApprovalMode {
    /// `ApproveAll` with `--approve`, else `Ask` when stdin and stderr are terminals,
    /// else `DenyAll`.
    pub fn detect(approve_flag: bool) -> Self {
        if approve_flag {
            Self::ApproveAll
        } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            Self::Ask
        } else {
            Self::DenyAll
        }
    }
}

/// The y/N question for `request`. The tool id and the canonical arguments pass
/// through [`printable`]: control, bidirectional and invisible format characters in
/// model-chosen arguments are shown escaped (`\u{202e}`), so they cannot hide or
/// reorder the dangerous part of a command.
pub fn prompt_text(request: &ApprovalRequest) -> String {
    format!(
        "\napprove {} ({}) with arguments {}? [y/N] ",
        printable(request.tool_id.as_str()),
        request.effect.as_str(),
        printable(&request.canonical_args)
    )
}

fn ask(request: &ApprovalRequest) -> bool {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{}", prompt_text(request));
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

/// The CLI's approver. While it waits for an answer, [`CliApprover::prompting`] is
/// set so the renderer keeps its spinner off the question.
#[derive(Debug, Clone)]
pub struct CliApprover {
    mode: ApprovalMode,
    prompting: Arc<AtomicBool>,
}

impl CliApprover {
    /// An approver answering in `mode`.
    pub fn new(mode: ApprovalMode) -> Self {
        Self {
            mode,
            prompting: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Set while a question is on the terminal.
    pub fn prompting(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.prompting)
    }
}

impl Approver for CliApprover {
    fn review(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        let mode = self.mode;
        let prompting = Arc::clone(&self.prompting);
        Box::pin(async move {
            let approved = match mode {
                ApprovalMode::ApproveAll => true,
                ApprovalMode::DenyAll => false,
                ApprovalMode::Ask => {
                    let req = request.clone();
                    prompting.store(true, Ordering::SeqCst);
                    let answer = tokio::task::spawn_blocking(move || ask(&req))
                        .await
                        .unwrap_or(false);
                    prompting.store(false, Ordering::SeqCst);
                    answer
                }
            };
            if approved {
                ApprovalDecision::Approved(ApprovalBinding::for_request(&request))
            } else if mode == ApprovalMode::DenyAll {
                // Nobody was asked: the model is told no approval could be given.
                ApprovalDecision::Unavailable {
                    reason: "not on a terminal and --approve was not given".into(),
                }
            } else {
                // The model reads "The user denied this call."
                ApprovalDecision::deny("")
            }
        })
    }
}
