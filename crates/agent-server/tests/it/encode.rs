//! Golden responses of both encoders: each case feeds one response's events (as the
//! agent loop emits them) to the UI message stream encoder and to the data stream
//! encoder, and snapshots the whole response body each would send:
//! `snapshots/it__encode__ui_<case>.snap` (the server-sent events, `[DONE]`
//! included) and `snapshots/it__encode__data_<case>.snap` (the lines).

use agent_server::data_stream::DataStreamEncoder;
use agent_server::ui_stream::{self, UiStreamEncoder};
use ai_core::{
    AiEvent, RunContext,
    event::{AiEventKind, UsageFact},
    tool::ToolErrorCode,
};
use serde_json::{Value, json};

/// How a response begins: fresh, or continuing a message whose calls the client has.
enum Start<'a> {
    New,
    Continuing(&'a [&'a str]),
}

/// What the server sends before the run's events (a continuation's decisions).
enum Before<'a> {
    Nothing,
    Denied(&'a str),
}

const MESSAGE_ID: &str = "msg-1";

fn sign(binding: &ai_core::approval::ApprovalBinding) -> String {
    format!("apr-{}", binding.tool_call_id)
}

/// Approval ids `apr-<call id>`.
const APPROVAL_ID: chat_protocol::stream::ApprovalIssuer<'static> =
    chat_protocol::stream::ApprovalIssuer {
        scope: "chat",
        sign: &sign,
    };

fn known(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|id| (*id).to_owned()).collect()
}

/// The UI message stream body of one response.
fn ui(start: &Start<'_>, before: &Before<'_>, events: &[AiEvent]) -> String {
    let mut encoder = match start {
        Start::New => UiStreamEncoder::new(MESSAGE_ID),
        Start::Continuing(ids) => UiStreamEncoder::continuing(MESSAGE_ID, known(ids)),
    };
    let mut chunks: Vec<Value> = match before {
        Before::Nothing => Vec::new(),
        Before::Denied(id) => encoder.denied(id),
    };
    for event in events {
        chunks.extend(encoder.event(event, APPROVAL_ID));
    }
    assert!(encoder.finish().is_empty(), "every case ends with done");
    let mut body: String = chunks.iter().map(UiStreamEncoder::sse).collect();
    body.push_str(ui_stream::DONE);
    body
}

/// The data stream body of one response.
fn data(start: &Start<'_>, before: &Before<'_>, events: &[AiEvent]) -> String {
    let mut encoder = match start {
        Start::New => DataStreamEncoder::new(MESSAGE_ID),
        Start::Continuing(ids) => DataStreamEncoder::continuing(MESSAGE_ID, known(ids)),
    };
    let mut lines = match before {
        Before::Nothing => Vec::new(),
        Before::Denied(id) => encoder.denied(id),
    };
    for event in events {
        lines.extend(encoder.event(event, APPROVAL_ID));
    }
    assert!(encoder.finish().is_empty(), "every case ends with done");
    lines.concat()
}

/// Snapshots both encodings of one response as `ui_<case>` and `data_<case>`.
fn assert_case(case: &str, start: Start<'_>, before: Before<'_>, events: &[AiEvent]) {
    agent_testing::refuse_snapshot_updates_on_ci();
    let mut settings = insta::Settings::clone_current();
    settings.set_omit_expression(true);
    settings.set_description("UI message stream body (server-sent events)");
    settings.bind(|| insta::assert_snapshot!(format!("ui_{case}"), ui(&start, &before, events)));
    settings.set_description("Data stream body (CODE:JSON lines)");
    settings.bind(|| {
        insta::assert_snapshot!(format!("data_{case}"), data(&start, &before, events));
    });
}

fn ev(kind: AiEventKind) -> AiEvent {
    AiEvent::new(&RunContext::new("run-1", "trace-1"), kind)
}

fn text(delta: &str) -> AiEvent {
    ev(AiEventKind::TextDelta {
        delta: delta.to_owned(),
    })
}

fn reasoning(delta: &str) -> AiEvent {
    ev(AiEventKind::ReasoningDelta {
        delta: delta.to_owned(),
    })
}

fn usage(prompt: u64, completion: u64) -> AiEvent {
    ev(UsageFact::tokens("test-model", prompt, completion).into())
}

fn call(id: &str, tool: &str, args: Value) -> AiEvent {
    ev(AiEventKind::ToolCallStart {
        tool_call_id: id.to_owned(),
        tool_name: tool.to_owned(),
        args,
    })
}

fn ok(id: &str, tool: &str, result: Value) -> AiEvent {
    ev(AiEventKind::ToolCallResult {
        tool_call_id: id.to_owned(),
        tool_name: tool.to_owned(),
        ok: true,
        result: Some(result),
        error_code: None,
        message: None,
        duration_ms: 12,
        truncated: false,
    })
}

fn failed(id: &str, tool: &str, code: ToolErrorCode, message: &str) -> AiEvent {
    ev(AiEventKind::ToolCallResult {
        tool_call_id: id.to_owned(),
        tool_name: tool.to_owned(),
        ok: false,
        result: None,
        error_code: Some(code),
        message: Some(message.to_owned()),
        duration_ms: 3,
        truncated: false,
    })
}

fn final_(content: &str) -> AiEvent {
    ev(AiEventKind::AssistantFinal {
        content: content.to_owned(),
        finish_reason: "stop".to_owned(),
        prompt_hash: None,
    })
}

fn done() -> AiEvent {
    ev(AiEventKind::Done)
}

#[test]
fn text_only() {
    assert_case(
        "text_only",
        Start::New,
        Before::Nothing,
        &[
            text("Hello"),
            text(", world."),
            usage(12, 3),
            final_("Hello, world."),
            done(),
        ],
    );
}

/// Read-only calls of one turn run concurrently: both start, then the results
/// arrive in completion order; the answer is the next step.
#[test]
fn two_parallel_tools() {
    assert_case(
        "two_parallel_tools",
        Start::New,
        Before::Nothing,
        &[
            text("Reading both."),
            usage(20, 10),
            call("call_a", "core__read_file", json!({"path": "a.txt"})),
            call("call_b", "core__read_file", json!({"path": "b.txt"})),
            ok("call_b", "core__read_file", json!({"content": "B"})),
            ok("call_a", "core__read_file", json!({"content": "A"})),
            text("A and B."),
            usage(40, 4),
            final_("A and B."),
            done(),
        ],
    );
}

#[test]
fn tool_error() {
    assert_case(
        "tool_error",
        Start::New,
        Before::Nothing,
        &[
            usage(15, 8),
            call("call_1", "core__read_file", json!({"path": "missing.txt"})),
            failed(
                "call_1",
                "core__read_file",
                ToolErrorCode::NotFound,
                "no such file: missing.txt",
            ),
            text("That file does not exist."),
            usage(30, 6),
            final_("That file does not exist."),
            done(),
        ],
    );
}

/// A call that needs approval pauses the run: no `assistant_final`, then `done`.
#[test]
fn approval_request() {
    assert_case(
        "approval_request",
        Start::New,
        Before::Nothing,
        &[
            text("I will delete it."),
            usage(25, 9),
            ev(AiEventKind::ToolApprovalRequested {
                tool_call_id: "call_1".to_owned(),
                tool_name: "core__delete_file".to_owned(),
                args: json!({"path": "old.txt"}),
                args_hash: "sha256:4f2a".to_owned(),
            }),
            done(),
        ],
    );
}

/// The continuation after the user approved `call_1`: the call runs first, then
/// the model answers.
#[test]
fn approved_continuation() {
    assert_case(
        "approved_continuation",
        Start::Continuing(&["call_1"]),
        Before::Nothing,
        &[
            call("call_1", "core__delete_file", json!({"path": "old.txt"})),
            ok("call_1", "core__delete_file", json!({"deleted": true})),
            text("Deleted old.txt."),
            usage(40, 5),
            final_("Deleted old.txt."),
            done(),
        ],
    );
}

/// The continuation after the user denied `call_1`: the denial, then the model's
/// follow-up.
#[test]
fn denied_continuation() {
    assert_case(
        "denied_continuation",
        Start::Continuing(&["call_1"]),
        Before::Denied("call_1"),
        &[
            text("Understood, I left it."),
            usage(38, 6),
            final_("Understood, I left it."),
            done(),
        ],
    );
}

#[test]
fn provider_error_mid_stream() {
    assert_case(
        "provider_error_mid_stream",
        Start::New,
        Before::Nothing,
        &[
            text("Partial"),
            ev(AiEventKind::Error {
                code: "provider_error".to_owned(),
                message: "the model provider closed the stream".to_owned(),
            }),
            done(),
        ],
    );
}

#[test]
fn reasoning_then_text() {
    assert_case(
        "reasoning_then_text",
        Start::New,
        Before::Nothing,
        &[
            reasoning("The user wants "),
            reasoning("a greeting."),
            text("Hi!"),
            ev(AiEventKind::UsageReport {
                model: "test-model".to_owned(),
                response_model: None,
                prompt_tokens: 10,
                completion_tokens: 30,
                total_tokens: 40,
                cached_tokens: Some(4),
                reasoning_tokens: Some(25),
                cache_creation_tokens: None,
                cost_micros: None,
                prompt_hash: None,
            }),
            final_("Hi!"),
            done(),
        ],
    );
}

/// A snapshot whose case was renamed or deleted fails here (insta itself does not
/// notice): every `it__encode__` file in `snapshots/` must name a case of this file.
#[test]
fn every_encode_snapshot_belongs_to_a_case() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    let source = include_str!("encode.rs");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return; // no snapshots yet
    };
    for entry in entries {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(case) = name
            .strip_prefix("it__encode__")
            .and_then(|n| n.strip_suffix(".snap"))
        else {
            continue; // another module's snapshot, or a pending `.snap.new`
        };
        let case = case
            .strip_prefix("ui_")
            .or_else(|| case.strip_prefix("data_"))
            .unwrap_or_else(|| panic!("unexpected snapshot {name}"));
        assert!(
            source.contains(&format!("\"{case}\",")),
            "stale snapshot {name}: no case `{case}` in encode.rs; delete it"
        );
    }
}
