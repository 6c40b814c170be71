//! What a `tools/call` result becomes: text for the model, no base64 in the
//! context, structured content checked against the output schema, `isError` as a
//! typed failure.

use ai_core::{
    text::bound_text,
    tool::{ModelView, ToolErrorCode, ToolFailure, ToolOutput},
};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

/// Bytes of a server's error text passed on to the model.
pub const MAX_ERROR_TEXT_BYTES: usize = 4096;

/// Decoded size of base64 text (without decoding it).
fn base64_size(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

fn placeholder(kind: &str, block: &Value) -> String {
    let mime = block
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("application/octet-stream");
    let size = block
        .get("data")
        .and_then(Value::as_str)
        .map_or(0, base64_size);
    format!("[{kind}: {mime}, {size} bytes, not shown]")
}

/// One content block as text for the model.
fn block_text(block: &Value) -> String {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => block
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        Some("image") => placeholder("image", block),
        Some("audio") => placeholder("audio", block),
        Some("resource_link") => {
            let uri = block.get("uri").and_then(Value::as_str).unwrap_or_default();
            let name = block.get("name").and_then(Value::as_str).unwrap_or(uri);
            format!("[resource: {name} <{uri}>]")
        }
        Some("resource") => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let uri = resource
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource <{uri}>]\n{text}"),
                None => {
                    let mime = resource
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("application/octet-stream");
                    let size = resource
                        .get("blob")
                        .and_then(Value::as_str)
                        .map_or(0, base64_size);
                    format!("[resource <{uri}>: {mime}, {size} bytes, not shown]")
                }
            }
        }
        other => format!("[content of type {} not shown]", other.unwrap_or("unknown")),
    }
}

/// The result's content as one text: text blocks joined by newlines, other blocks
/// as short placeholders.
pub(crate) fn joined_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .map(|block| block_text(&serde_json::to_value(block).unwrap_or(Value::Null)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Converts a result. With an output schema, `structuredContent` is required and
/// must match `output` (the validator of the server's own schema); it becomes the
/// value. Without one, the value is `{"text": ...}`. `isError` is an
/// `execution_failed` failure carrying the server's (bounded) text.
pub(crate) fn convert(
    result: CallToolResult,
    output: Option<&jsonschema::Validator>,
) -> Result<ToolOutput, ToolFailure> {
    let text = joined_text(&result);
    if result.is_error == Some(true) {
        let shown = if text.is_empty() {
            "the tool reported an error and gave no text".to_owned()
        } else {
            bound_text(&text, MAX_ERROR_TEXT_BYTES).text
        };
        return Err(ToolFailure::new(ToolErrorCode::ExecutionFailed, shown));
    }
    let model_view = if text.is_empty() {
        ModelView::Json
    } else {
        ModelView::Text(text.clone())
    };
    match (output, result.structured_content) {
        (Some(validator), Some(structured)) => {
            if !validator.is_valid(&structured) {
                return Err(ToolFailure::new(
                    ToolErrorCode::OutputInvalid,
                    "the server's structured result does not match its output schema",
                ));
            }
            Ok(ToolOutput {
                value: structured,
                model_view,
            })
        }
        (Some(_), None) => Err(ToolFailure::new(
            ToolErrorCode::OutputInvalid,
            "the tool declares an output schema but returned no structured content",
        )),
        (None, Some(structured)) => Ok(ToolOutput {
            value: json!({"text": text, "structured": structured}),
            model_view,
        }),
        (None, None) => Ok(ToolOutput {
            value: json!({"text": text}),
            model_view,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_is_joined_and_binary_content_becomes_a_placeholder() {
        let r = result(json!({"content": [
            {"type": "text", "text": "see"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAAAA==", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///n.txt", "name": "n.txt"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "inline"}},
            {"type": "resource", "resource": {"uri": "file:///b", "blob": "AAAA", "mimeType": "x/y"}}
        ]}));
        let text = joined_text(&r);
        assert_eq!(
            text,
            "see\n[image: image/png, 3 bytes, not shown]\n[audio: audio/wav, 4 bytes, not shown]\n\
             [resource: n.txt <file:///n.txt>]\n[resource <file:///a>]\ninline\n\
             [resource <file:///b>: x/y, 3 bytes, not shown]"
        );
        assert!(!text.contains("AAAA"));
        let output = convert(r, None).unwrap();
        assert_eq!(output.model_view, ModelView::Text(text));
    }

    #[test]
    fn is_error_is_a_typed_failure_with_bounded_text() {
        let long = "x".repeat(10_000);
        let failure = convert(
            result(json!({"content": [{"type":"text","text": long}], "isError": true})),
            None,
        )
        .unwrap_err();
        assert_eq!(failure.code, ToolErrorCode::ExecutionFailed);
        assert!(failure.message.len() <= MAX_ERROR_TEXT_BYTES + 64);
    }

    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        let schema =
            json!({"type":"object","properties":{"sum":{"type":"integer"}},"required":["sum"]});
        let validator = jsonschema::validator_for(&schema).unwrap();
        let ok = convert(
            result(json!({"content": [], "structuredContent": {"sum": 3}})),
            Some(&validator),
        )
        .unwrap();
        assert_eq!(ok.value, json!({"sum": 3}));
        let bad = convert(
            result(json!({"content": [], "structuredContent": {"sum": "3"}})),
            Some(&validator),
        )
        .unwrap_err();
        assert_eq!(bad.code, ToolErrorCode::OutputInvalid);
        let missing = convert(result(json!({"content": []})), Some(&validator)).unwrap_err();
        assert_eq!(missing.code, ToolErrorCode::OutputInvalid);
    }
}
