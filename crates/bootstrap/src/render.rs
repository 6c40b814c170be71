//! Shows a run's events: human-readable, or one JSON object per line (`--json`).

use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

use ai_core::{AiEvent, event::AiEventKind};

/// Longest argument preview on a tool line.
const ARGS_PREVIEW: usize = 80;

/// Spinner frames drawn on a terminal while a tool runs.
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Erases the current terminal line.
const CLEAR_LINE: &str = "\r\x1b[2K";

/// `text` as the terminal may show it: [`ai_core::text::printable`], the one list of
/// hidden characters the chat page escapes too. The one function for every
/// model-chosen text the CLI shows, the approval prompt included.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    ai_core::text::printable(text)
}

fn preview(text: &str, max: usize) -> String {
    let text = printable(text);
    let text = text.as_ref();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Renders events for a person: text to stdout as it streams, tool calls and the usage
/// line to stderr.
pub struct HumanRenderer<O: Write, E: Write> {
    out: O,
    err: E,
    terminal: bool,
    at_line_start: bool,
    running: Vec<(String, String)>,
    started: HashMap<String, Instant>,
    frame: usize,
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    model_calls: u32,
}

impl<O: Write, E: Write> HumanRenderer<O, E> {
    /// A renderer; `terminal` enables the live `running` line that results replace.
    pub fn new(out: O, err: E, terminal: bool) -> Self {
        Self {
            out,
            err,
            terminal,
            at_line_start: true,
            running: Vec::new(),
            started: HashMap::new(),
            frame: 0,
            prompt_tokens: 0,
            completion_tokens: 0,
            total_tokens: 0,
            model_calls: 0,
        }
    }

    fn end_text_line(&mut self) {
        if !self.at_line_start {
            let _ = writeln!(self.out);
            let _ = self.out.flush();
            self.at_line_start = true;
        }
    }

    /// Advances the spinner of the running tool line (on a terminal; call it a few
    /// times a second while tools run).
    pub fn tick(&mut self) {
        if self.terminal && !self.running.is_empty() {
            self.frame = (self.frame + 1) % SPINNER.len();
            self.draw_spinner();
        }
    }

    /// Whether a tool call is running (the spinner has something to show).
    pub fn tools_running(&self) -> bool {
        !self.running.is_empty()
    }

    fn draw_spinner(&mut self) {
        if let Some((_, line)) = self.running.last() {
            let more = match self.running.len() {
                1 => String::new(),
                n => format!(" (+{} more)", n - 1),
            };
            let _ = write!(
                self.err,
                "{CLEAR_LINE}{} {line} … running{more}",
                SPINNER[self.frame]
            );
            let _ = self.err.flush();
        }
    }

    /// Shows one event.
    pub fn event(&mut self, event: &AiEvent) {
        match &event.kind {
            AiEventKind::TextDelta { delta } => {
                let _ = write!(self.out, "{}", printable(delta));
                let _ = self.out.flush();
                self.at_line_start = delta.ends_with('\n');
            }
            AiEventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.end_text_line();
                self.started.insert(tool_call_id.clone(), Instant::now());
                let line = format!(
                    "{} [{}] {}",
                    printable(tool_name),
                    preview(tool_call_id, 24),
                    preview(&args.to_string(), ARGS_PREVIEW)
                );
                if self.terminal {
                    self.running.push((tool_call_id.clone(), line));
                    self.draw_spinner();
                } else {
                    let _ = writeln!(self.err, "⚙ {line} … running");
                    let _ = self.err.flush();
                }
            }
            AiEventKind::ToolCallResult {
                tool_call_id,
                tool_name,
                ok,
                error_code,
                message,
                duration_ms,
                truncated,
                ..
            } => {
                self.running.retain(|(id, _)| id != tool_call_id);
                self.started.remove(tool_call_id);
                let status = if *ok {
                    format!("ok{}", if *truncated { " (truncated)" } else { "" })
                } else {
                    format!(
                        "error {}: {}",
                        error_code.map_or("unknown", |c| c.as_str()),
                        printable(message.as_deref().unwrap_or(""))
                    )
                };
                let clear = if self.terminal { CLEAR_LINE } else { "" };
                let _ = writeln!(
                    self.err,
                    "{clear}{} {} [{}] {status} ({duration_ms} ms)",
                    if *ok { "✓" } else { "✗" },
                    printable(tool_name),
                    preview(tool_call_id, 24)
                );
                if self.terminal {
                    self.draw_spinner();
                }
            }
            AiEventKind::UsageReport {
                prompt_tokens,
                completion_tokens,
                total_tokens,
                ..
            } => {
                self.model_calls += 1;
                self.prompt_tokens += prompt_tokens;
                self.completion_tokens += completion_tokens;
                self.total_tokens += total_tokens;
            }
            AiEventKind::AssistantFinal { finish_reason, .. } => {
                self.end_text_line();
                if finish_reason != "stop" {
                    let _ = writeln!(
                        self.err,
                        "note: the answer is incomplete (the model stopped with `{}`)",
                        printable(finish_reason)
                    );
                }
            }
            AiEventKind::ToolWithheld { tool_name, reason } => {
                self.end_text_line();
                let _ = writeln!(
                    self.err,
                    "warning: {} is withheld: {}",
                    printable(tool_name),
                    printable(reason)
                );
            }
            AiEventKind::Error { code, message } => {
                self.end_text_line();
                let _ = writeln!(self.err, "error [{code}]: {}", printable(message));
            }
            AiEventKind::Done => {
                self.end_text_line();
                if self.model_calls == 0 {
                    let _ = writeln!(self.err, "usage: not reported by the model endpoint");
                } else {
                    let _ = writeln!(
                        self.err,
                        "usage: {} model call(s), {} prompt + {} completion = {} tokens",
                        self.model_calls,
                        self.prompt_tokens,
                        self.completion_tokens,
                        self.total_tokens
                    );
                }
            }
            AiEventKind::ToolCallsNotExecuted { calls, .. } => {
                self.end_text_line();
                for call in calls {
                    let _ = writeln!(
                        self.err,
                        "- {} [{}] not executed: the run reached its limit",
                        printable(&call.tool_name),
                        preview(&call.tool_call_id, 24)
                    );
                }
            }
            // Not shown: reasoning, arguments as they stream, approval requests and
            // client calls.
            AiEventKind::ReasoningDelta { .. }
            | AiEventKind::ToolInputDelta { .. }
            | AiEventKind::ToolApprovalRequested { .. }
            | AiEventKind::ClientToolCall { .. } => {}
            // Event kinds added later are ignored outside the workspace.
            #[cfg(not(agent_workspace))]
            _ => {}
        }
    }
}

/// Writes one event as one JSON line, in the public event shape.
pub fn json_line(out: &mut impl Write, event: &AiEvent) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, event)?;
    out.write_all(b"\n")?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ai_core::{RunContext, event::UsageFact};
    use serde_json::json;

    #[test]
    fn human_output_shows_text_tool_lines_and_usage() {
        let ctx = RunContext::new("r", "t");
        let events = [
            AiEventKind::ToolCallStart {
                tool_call_id: "c1".into(),
                tool_name: "core__get_current_time".into(),
                args: json!({"timezone": "UTC"}),
            },
            AiEventKind::ToolCallResult {
                tool_call_id: "c1".into(),
                tool_name: "core__get_current_time".into(),
                ok: true,
                result: Some(json!({})),
                error_code: None,
                message: None,
                duration_ms: 3,
                truncated: false,
            },
            AiEventKind::TextDelta {
                delta: "It is noon.".into(),
            },
            UsageFact::tokens("m", 10, 5).into(),
            AiEventKind::AssistantFinal {
                content: "It is noon.".into(),
                finish_reason: "stop".into(),
                prompt_hash: None,
            },
            AiEventKind::Done,
        ];
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut renderer = HumanRenderer::new(&mut out, &mut err, false);
        for kind in events {
            renderer.event(&AiEvent::new(&ctx, kind));
        }
        let out = String::from_utf8(out).unwrap();
        let err = String::from_utf8(err).unwrap();
        assert_eq!(out, "It is noon.\n");
        assert!(
            err.contains("⚙ core__get_current_time [c1] {\"timezone\":\"UTC\"} … running"),
            "{err}"
        );
        assert!(
            err.contains("✓ core__get_current_time [c1] ok (3 ms)"),
            "{err}"
        );
        assert!(
            err.contains("usage: 1 model call(s), 10 prompt + 5 completion = 15 tokens"),
            "{err}"
        );
    }

    #[test]
    fn terminal_output_spins_while_a_tool_runs_and_replaces_the_line() {
        let ctx = RunContext::new("r", "t");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut renderer = HumanRenderer::new(&mut out, &mut err, true);
        renderer.event(&AiEvent::new(
            &ctx,
            AiEventKind::ToolCallStart {
                tool_call_id: "c1".into(),
                tool_name: "core__list_directory".into(),
                args: json!({"path": "."}),
            },
        ));
        assert!(renderer.tools_running());
        renderer.tick();
        renderer.tick();
        renderer.event(&AiEvent::new(
            &ctx,
            AiEventKind::ToolCallResult {
                tool_call_id: "c1".into(),
                tool_name: "core__list_directory".into(),
                ok: false,
                result: None,
                error_code: Some(ai_core::tool::ToolErrorCode::PermissionDenied),
                message: Some("outside the workspace".into()),
                duration_ms: 1,
                truncated: false,
            },
        ));
        assert!(!renderer.tools_running());
        renderer.tick();
        let err = String::from_utf8(err).unwrap();
        for frame in ["⠋", "⠙", "⠹"] {
            assert!(
                err.contains(&format!("{CLEAR_LINE}{frame} core__list_directory [c1]")),
                "{err:?}"
            );
        }
        assert!(err.ends_with(&format!(
            "{CLEAR_LINE}✗ core__list_directory [c1] error permission_denied: outside the workspace (1 ms)\n"
        )), "{err:?}");
    }

    #[test]
    fn escape_sequences_from_the_model_never_reach_the_terminal() {
        let ctx = RunContext::new("r", "t");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut renderer = HumanRenderer::new(&mut out, &mut err, false);
        renderer.event(&AiEvent::new(
            &ctx,
            AiEventKind::TextDelta {
                delta: "hi\u{1b}[2J\u{7}\tthere\n".into(),
            },
        ));
        renderer.event(&AiEvent::new(
            &ctx,
            AiEventKind::ToolCallStart {
                tool_call_id: "c\u{1b}]0;title\u{7}".into(),
                tool_name: "core__x".into(),
                args: json!({"a": "\u{1b}[31m"}),
            },
        ));
        renderer.event(&AiEvent::new(
            &ctx,
            AiEventKind::Error {
                code: "provider_error".into(),
                message: "bad\u{9b}31m".into(),
            },
        ));
        let out = String::from_utf8(out).unwrap();
        let err = String::from_utf8(err).unwrap();
        assert_eq!(out, "hi\\u{1b}[2J\\u{7}\tthere\n");
        for text in [&out, &err] {
            assert!(
                !text
                    .chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\t'),
                "{text:?}"
            );
        }
        assert!(err.contains("[c\\u{1b}]0;title\\u{7}]"), "{err:?}");
        assert!(err.contains("bad\\u{9b}31m"), "{err:?}");
    }
}
