//! Scripted turns of the Responses API and of Gemini's API for the loopback
//! server ([`crate::server::OpenAiServer`], feature `server`): the same
//! [`Reply`] values, in those APIs' stream formats, so a test or an example
//! can drive `wire-responses` or `wire-gemini` offline.
//!
//! - Responses (`POST {base}/responses`, base URL
//!   [`OpenAiServer::base_url`](crate::server::OpenAiServer::base_url)): typed
//!   SSE events from `response.created` to `response.completed`, usage 20/5.
//! - Gemini (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`,
//!   base URL [`OpenAiServer::gemini_base_url`](crate::server::OpenAiServer::gemini_base_url)):
//!   `data:` chunks of `GenerateContentResponse`, the last with the finish
//!   reason and usage 20/5.

use serde_json::{Value, json};

use crate::server::Reply;

/// One typed Responses event.
fn responses_event(kind: &str, mut data: Value) -> String {
    data["type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n")
}

/// The `response` object of a scripted Responses turn with `output`.
fn response(status: &str, output: Value) -> Value {
    let mut response = json!({"id": "resp_test", "object": "response", "model": "test-model",
                              "status": status, "output": output});
    if status == "completed" {
        response["usage"] = json!({"input_tokens": 20, "output_tokens": 5, "total_tokens": 25});
    }
    response
}

impl Reply {
    /// A streamed Responses API turn answering `text`, a word per delta.
    pub fn responses_text(text: &str) -> Self {
        let done = json!({"id": "msg_test", "type": "message", "status": "completed",
                          "role": "assistant",
                          "content": [{"type": "output_text", "text": text, "annotations": []}]});
        let mut events = vec![
            responses_event(
                "response.created",
                json!({"response": response("in_progress", json!([]))}),
            ),
            responses_event(
                "response.output_item.added",
                json!({"output_index": 0,
                "item": {"id": "msg_test", "type": "message", "status": "in_progress",
                         "role": "assistant", "content": []}}),
            ),
        ];
        for word in text.split_inclusive(' ') {
            events.push(responses_event(
                "response.output_text.delta",
                json!({
                "item_id": "msg_test", "output_index": 0, "content_index": 0, "delta": word}),
            ));
        }
        events.push(responses_event(
            "response.output_text.done",
            json!({
            "item_id": "msg_test", "output_index": 0, "content_index": 0, "text": text}),
        ));
        events.push(responses_event(
            "response.output_item.done",
            json!({"output_index": 0, "item": done}),
        ));
        events.push(responses_event(
            "response.completed",
            json!({"response": response("completed", json!([done]))}),
        ));
        Self::sse(events)
    }

    /// A streamed Responses API turn calling tools: for each `(call id, tool
    /// name, arguments)`, a `function_call` item with its arguments in one
    /// delta.
    pub fn responses_function_calls(calls: &[(&str, &str, Value)]) -> Self {
        let mut events = vec![responses_event(
            "response.created",
            json!({"response": response("in_progress", json!([]))}),
        )];
        let mut items = Vec::new();
        for (index, (id, name, args)) in calls.iter().enumerate() {
            let item_id = format!("fc_{index}");
            let arguments = args.to_string();
            let item = |status: &str, arguments: &str| {
                json!({"id": item_id, "type": "function_call",
                "status": status, "call_id": id, "name": name, "arguments": arguments})
            };
            events.push(responses_event(
                "response.output_item.added",
                json!({"output_index": index, "item": item("in_progress", "")}),
            ));
            events.push(responses_event(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": index, "delta": arguments}),
            ));
            events.push(responses_event(
                "response.function_call_arguments.done",
                json!({"item_id": item_id, "output_index": index, "arguments": arguments}),
            ));
            events.push(responses_event(
                "response.output_item.done",
                json!({"output_index": index, "item": item("completed", &arguments)}),
            ));
            items.push(item("completed", &arguments));
        }
        events.push(responses_event(
            "response.completed",
            json!({"response": response("completed", Value::Array(items))}),
        ));
        Self::sse(events)
    }

    /// A streamed Gemini turn answering `text`, a word per chunk.
    pub fn gemini_text(text: &str) -> Self {
        let parts: Vec<Value> = text
            .split_inclusive(' ')
            .map(|word| json!([{"text": word}]))
            .collect();
        Self::sse(gemini_chunks(parts))
    }

    /// A streamed Gemini turn calling tools: one chunk with a `functionCall`
    /// part per `(call id, tool name, arguments)`.
    pub fn gemini_function_calls(calls: &[(&str, &str, Value)]) -> Self {
        let parts: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| json!({"functionCall": {"id": id, "name": name, "args": args}}))
            .collect();
        Self::sse(gemini_chunks(vec![Value::Array(parts)]))
    }
}

/// `data:` chunks, one per entry of `parts` (each a list of parts), the last
/// with `STOP` and the usage.
fn gemini_chunks(parts: Vec<Value>) -> Vec<String> {
    let last = parts.len().saturating_sub(1);
    parts
        .into_iter()
        .enumerate()
        .map(|(i, parts)| {
            let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
            let mut chunk = json!({"modelVersion": "test-model", "responseId": "gemini-test"});
            if i == last {
                candidate["finishReason"] = json!("STOP");
                chunk["usageMetadata"] =
                    json!({"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25});
            }
            chunk["candidates"] = json!([candidate]);
            format!("data: {chunk}\r\n\r\n")
        })
        .collect()
}
