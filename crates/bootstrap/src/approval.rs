//! The CLI's approver: asks on a terminal, otherwise follows `--approve`.

use std::io::{BufRead, IsTerminal, Write};

use ai_core::{ApprovalDecision, ApprovalGrant, ApprovalRequest, Approver};
use futures::future::BoxFuture;

/// How the CLI answers approval requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliApprover {
    /// Ask y/N on the terminal, showing the tool id and exact arguments.
    Ask,
    /// Approve every call (`--approve`).
    ApproveAll,
    /// Deny every call (no terminal and no `--approve`).
    DenyAll,
}

impl CliApprover {
    /// `Ask` when stdin and stderr are terminals, else `ApproveAll` with `--approve`,
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

fn ask(request: &ApprovalRequest) -> bool {
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\napprove {} ({}) with arguments {}? [y/N] ",
        request.tool_id,
        request.effect.as_str(),
        request.canonical_args
    );
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

impl Approver for CliApprover {
    fn review(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        let mode = *self;
        Box::pin(async move {
            let approved = match mode {
                Self::ApproveAll => true,
                Self::DenyAll => false,
                Self::Ask => {
                    let req = request.clone();
                    tokio::task::spawn_blocking(move || ask(&req))
                        .await
                        .unwrap_or(false)
                }
            };
            if approved {
                ApprovalDecision::Approved(ApprovalGrant::for_request(&request))
            } else {
                ApprovalDecision::Denied {
                    reason: match mode {
                        Self::DenyAll => "not on a terminal and --approve was not given".into(),
                        _ => "the user declined".into(),
                    },
                }
            }
        })
    }
}
