//! The real client parsers against the live endpoint: `ai` 6 and 7
//! (`parseJsonEventStream` + `uiMessageChunkSchema` + `readUIMessageStream`, the
//! pipeline behind `useChat`) and `assistant-stream` (its UI message stream and
//! data stream decoders and message accumulator), run by `tests/js/check-stream.mjs`
//! with Node. Every case must parse with no thrown error and no warning, and tool
//! parts must end in the expected state.

use agent_server::Access;
use agent_testing::{ScriptedModel, Turn};
use ai_core::completion::CompletionError;
use serde_json::{Value, json};

use crate::support::{body, run_js, start, user, write_k, write_then};

const UI_PARSERS: [&str; 3] = ["ai6", "ai7", "assistant-stream"];

/// Runs the checker; its one JSON line.
async fn check(parser: &str, protocol: &str, url: &str, request: &Value) -> Value {
    let args = ["--parser", parser, "--protocol", protocol, "--url", url];
    let what = format!("{parser}/{protocol}");
    run_js("check-stream.mjs", &args, ("--body-file", request), &what).await
}

/// `message` (the assistant message a client parsed) with the user's decision
/// on its call `w1` written into the tool part, as `addToolApprovalResponse`
/// does.
fn decided(mut message: Value, approved: bool) -> Value {
    let parts = message["parts"].as_array_mut().unwrap();
    let part = parts.iter_mut().find(|p| p["toolCallId"] == "w1").unwrap();
    part["state"] = json!("approval-responded");
    part["approval"]["approved"] = json!(approved);
    message
}

fn assert_clean(result: &Value, what: &str) {
    assert_eq!(result["ok"], true, "{what}: {result}");
    assert_eq!(result["warnings"], json!([]), "{what}: {result}");
}

fn url(live: &crate::support::Live, protocol: &str) -> String {
    match protocol {
        "data" => live.url("/api/chat?protocol=data"),
        _ => live.url("/api/chat"),
    }
}

/// Every (parser, protocol) pair, each against a fresh server playing `turns`.
async fn each_parser(turns: impl Fn() -> Vec<Turn>, mut verify: impl FnMut(&str, &Value)) {
    let pairs = UI_PARSERS
        .iter()
        .map(|p| (*p, "ui"))
        .chain([("assistant-stream", "data")]);
    for (parser, protocol) in pairs {
        let live = start(ScriptedModel::new(turns()), Access::loopback).await;
        let result = check(
            parser,
            protocol,
            &url(&live, protocol),
            &body(vec![user("go")]),
        )
        .await;
        verify(&format!("{parser}/{protocol}"), &result);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_only() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    each_parser(
        || vec![Turn::text("Hello there.")],
        |what, result| {
            assert_clean(result, what);
            assert_eq!(result["text"], "Hello there.", "{what}: {result}");
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_parallel_tools_with_results() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    each_parser(
        || {
            vec![
                Turn::new()
                    .tool_call("e1", "app__echo", json!({"text": "a"}))
                    .tool_call("e2", "app__echo", json!({"text": "b"})),
                Turn::text("Both echoed."),
            ]
        },
        |what, result| {
            assert_clean(result, what);
            for id in ["e1", "e2"] {
                let tool = &result["tools"][id];
                assert_eq!(tool["state"], "output-available", "{what}: {result}");
            }
            assert!(
                result["text"].as_str().unwrap().contains("Both echoed."),
                "{what}: {result}"
            );
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_error() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    each_parser(
        || {
            vec![
                Turn::new().tool_call("e1", "app__echo", json!({"wrong": 1})),
                Turn::text("It failed."),
            ]
        },
        |what, result| {
            assert_clean(result, what);
            let tool = &result["tools"]["e1"];
            assert_eq!(tool["state"], "output-error", "{what}: {result}");
            assert!(
                tool["errorText"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("invalid_args"),
                "{what}: {result}"
            );
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    each_parser(
        || vec![Turn::reasoning("Thinking it over.").and_text("Answer.")],
        |what, result| {
            assert_clean(result, what);
            assert_eq!(result["text"], "Answer.", "{what}: {result}");
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_mid_stream() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    each_parser(
        || {
            vec![
                Turn::text("Part of an ans").error_after_deltas(CompletionError::Protocol {
                    message: "the provider closed the stream".into(),
                }),
            ]
        },
        |what, result| {
            // The server's `error` chunk is the only failure: parsing itself succeeded.
            // The provider's own text stays in the server's log; the client gets
            // what failed and a request id.
            let error = result["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("could not answer (provider_protocol_error)")
                    && error.contains("Request id: ")
                    && !error.contains("provider closed the stream"),
                "{what}: {result}"
            );
            let other: Vec<&Value> = result["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|w| {
                    !w.as_str()
                        .unwrap_or_default()
                        .contains("provider closed the stream")
                })
                .collect();
            assert!(other.is_empty(), "{what}: {result}");
        },
    )
    .await;
}

/// The approval flow as `useChat` runs it: the paused message is kept as the
/// client parsed it, the user's decision is written into its tool part
/// (`addToolApprovalResponse`), and the next request continues the same message.
async fn approval_flow(approved: bool) {
    for parser in ["ai6", "ai7"] {
        let answer = if approved {
            "Written."
        } else {
            "Not written, as you wish."
        };
        let live = start(write_then(answer), Access::loopback).await;
        let first = check(
            parser,
            "ui",
            &live.url("/api/chat"),
            &body(vec![user("write k")]),
        )
        .await;
        assert_clean(&first, parser);
        let tool = &first["tools"]["w1"];
        assert_eq!(tool["state"], "approval-requested", "{parser}: {first}");
        let message = decided(first["message"].clone(), approved);
        let second = check(
            parser,
            "ui",
            &live.url("/api/chat"),
            &body(vec![user("write k"), message]),
        )
        .await;
        assert_clean(&second, parser);
        let expected = if approved {
            "output-available"
        } else {
            "output-denied"
        };
        assert_eq!(
            second["tools"]["w1"]["state"], expected,
            "{parser}: {second}"
        );
        assert_eq!(
            live.writes.load(std::sync::atomic::Ordering::SeqCst),
            usize::from(approved),
            "{parser}"
        );
        assert!(
            second["text"].as_str().unwrap().contains(if approved {
                "Written."
            } else {
                "Not written"
            }),
            "{parser}: {second}"
        );
    }
    // assistant-stream parses the paused response too. It has no approval flow
    // (0.3.55): its UI decoder drops `tool-approval-request` (the checker reports
    // that, and it is the only warning) and leaves the call waiting
    // ("requires-action"); its data decoder reads the request as a `2:` data part.
    for protocol in ["ui", "data"] {
        let live = start(ScriptedModel::new([write_k()]), Access::loopback).await;
        let paused = check(
            "assistant-stream",
            protocol,
            &url(&live, protocol),
            &body(vec![user("write k")]),
        )
        .await;
        let what = format!("assistant-stream/{protocol}");
        assert_eq!(paused["ok"], true, "{what}: {paused}");
        let expected: Vec<Value> = if protocol == "ui" {
            vec![json!(
                "check-stream: assistant-stream UIMessageStreamDecoder ignored chunk type \"tool-approval-request\""
            )]
        } else {
            Vec::new()
        };
        assert_eq!(paused["warnings"], json!(expected), "{what}: {paused}");
        assert_eq!(
            paused["tools"]["w1"]["state"], "input-available",
            "{what}: {paused}"
        );
        assert_eq!(
            paused["message"]["status"]["type"], "requires-action",
            "{what}: {paused}"
        );
        assert_eq!(live.writes.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_request_then_the_approved_continuation() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    approval_flow(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_approval() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    approval_flow(false).await;
}

/// assistant-stream's data decoder reads every response as a new message, and
/// throws on a result for a call it has not seen in that response: an approval
/// continuation on the data stream announces the continued call again first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assistant_stream_reads_an_approval_continuation_on_the_data_stream() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    let live = start(write_then("Written."), Access::loopback).await;
    let first = check(
        "ai7",
        "ui",
        &live.url("/api/chat"),
        &body(vec![user("write k")]),
    )
    .await;
    assert_clean(&first, "ai7");
    let message = decided(first["message"].clone(), true);
    let second = check(
        "assistant-stream",
        "data",
        &url(&live, "data"),
        &body(vec![user("write k"), message]),
    )
    .await;
    assert_clean(&second, "assistant-stream/data");
    assert_eq!(
        second["tools"]["w1"]["state"], "output-available",
        "{second}"
    );
    assert!(
        second["text"].as_str().unwrap().contains("Written."),
        "{second}"
    );
    assert_eq!(live.writes.load(std::sync::atomic::Ordering::SeqCst), 1);
}
