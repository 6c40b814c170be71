//! Type-aware bounding of model-facing results (invariant RESULTS_BOUNDED).
//!
//! The bounded form of a value is compact JSON of at most `budget` bytes:
//! - a string keeps a prefix and gets [`TRUNCATION_MARKER`] appended;
//! - an array keeps its leading items and ends with a sentinel object
//!   `{"_truncated":true,"omitted_items":N}`;
//! - anything else is wrapped as `{"_truncated_json":"<prefix of the JSON text>",
//!   "original_bytes":N}`.
//!
//! A UTF-8 character is never cut, the result is always valid JSON, and bounding is
//! idempotent (a bounded result fits its budget and is returned unchanged).

use serde_json::Value;

/// Appended to a truncated string.
pub const TRUNCATION_MARKER: &str = "…[truncated]";

/// Smallest budget honoured; smaller budgets are raised to this.
pub const MIN_RESULT_BUDGET: usize = 128;

/// Largest safe message of a failed tool call, in bytes (a tool's own
/// [`crate::tool::ToolFailure`] message, an approver's reason): longer messages are cut on
/// a character boundary and end with [`TRUNCATION_MARKER`].
pub const MAX_FAILURE_MESSAGE_BYTES: usize = 2048;

/// Longest value, in characters, of a tracing span field taken from outside input
/// (ids, tool names); see [`log_field`].
pub const MAX_LOG_FIELD_CHARS: usize = 128;

/// A bounded model-facing text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedValue {
    /// The text sent to the model.
    pub text: String,
    /// Whether anything was cut.
    pub truncated: bool,
}

/// Bounds a JSON value to `budget` bytes of compact JSON.
pub fn bound_value(value: &Value, budget: usize) -> BoundedValue {
    let budget = budget.max(MIN_RESULT_BUDGET);
    let full = value.to_string();
    if full.len() <= budget {
        return BoundedValue {
            text: full,
            truncated: false,
        };
    }
    let text = match value {
        Value::String(s) => bound_string_literal(s, budget),
        Value::Array(items) => bound_array(items, budget),
        _ => envelope(&full, budget),
    };
    BoundedValue {
        text,
        truncated: true,
    }
}

/// Bounds plain text (not JSON) to `budget` bytes, appending the marker when cut.
pub fn bound_text(text: &str, budget: usize) -> BoundedValue {
    let budget = budget.max(MIN_RESULT_BUDGET);
    if text.len() <= budget {
        return BoundedValue {
            text: text.to_owned(),
            truncated: false,
        };
    }
    let keep = floor_char_boundary(text, budget - TRUNCATION_MARKER.len());
    BoundedValue {
        text: format!("{}{TRUNCATION_MARKER}", &text[..keep]),
        truncated: true,
    }
}

/// A value fit for a log or span field: control characters (newlines, escapes, NUL,
/// ...) removed and at most [`MAX_LOG_FIELD_CHARS`] characters kept, with `…` appended
/// when cut. Model- and client-supplied ids and names go through this before they
/// reach a span, so they can neither forge log lines nor grow without bound.
pub fn log_field(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_LOG_FIELD_CHARS * 4));
    for (kept, c) in text.chars().filter(|c| !c.is_control()).enumerate() {
        if kept == MAX_LOG_FIELD_CHARS {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out
}

fn floor_char_boundary(s: &str, mut index: usize) -> usize {
    if index >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// Bytes `c` takes inside a JSON string literal as serde_json writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Longest prefix of `s` whose escaped form takes at most `room` bytes.
fn escaped_prefix(s: &str, room: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += escaped_len(c);
        if used > room {
            return &s[..i];
        }
    }
    s
}

fn escaped_total(s: &str) -> usize {
    s.chars().map(escaped_len).sum()
}

fn bound_string_literal(s: &str, budget: usize) -> String {
    let room = budget - 2 - escaped_total(TRUNCATION_MARKER);
    let prefix = escaped_prefix(s, room);
    Value::String(format!("{prefix}{TRUNCATION_MARKER}")).to_string()
}

fn sentinel(omitted: usize) -> String {
    format!(r#"{{"_truncated":true,"omitted_items":{omitted}}}"#)
}

fn bound_array(items: &[Value], budget: usize) -> String {
    // Reserve room for the largest sentinel this array can need.
    let reserve = sentinel(items.len()).len() + 2;
    let mut out = String::from("[");
    let mut kept = 0;
    for item in items {
        let text = item.to_string();
        if out.len() + text.len() + 1 + reserve > budget {
            break;
        }
        out.push_str(&text);
        out.push(',');
        kept += 1;
    }
    out.push_str(&sentinel(items.len() - kept));
    out.push(']');
    out
}

fn envelope(full: &str, budget: usize) -> String {
    let skeleton = format!(
        r#"{{"_truncated_json":"","original_bytes":{}}}"#,
        full.len()
    );
    let room = budget - skeleton.len();
    let prefix = escaped_prefix(full, room);
    let wrapped = serde_json::json!({
        "_truncated_json": prefix,
        "original_bytes": full.len(),
    });
    wrapped.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn small_values_pass_unchanged() {
        let b = bound_value(&json!({"a": 1}), 1024);
        assert_eq!(b.text, r#"{"a":1}"#);
        assert!(!b.truncated);
    }

    #[test]
    fn strings_get_a_marker() {
        let b = bound_value(&json!("é".repeat(200)), 128);
        assert!(b.truncated);
        let s: String = serde_json::from_str(&b.text).unwrap();
        assert!(s.ends_with(TRUNCATION_MARKER));
        assert!(b.text.len() <= 128);
    }

    #[test]
    fn arrays_keep_leading_items_and_a_sentinel() {
        let items: Vec<Value> = (0..100).map(|i| json!({"i": i})).collect();
        let b = bound_value(&Value::Array(items), 200);
        let v: Vec<Value> = serde_json::from_str(&b.text).unwrap();
        assert_eq!(v[0], json!({"i": 0}));
        let last = v.last().unwrap();
        assert_eq!(last["_truncated"], json!(true));
        assert_eq!(
            last["omitted_items"].as_u64().unwrap() as usize + v.len() - 1,
            100
        );
    }

    #[test]
    fn objects_are_wrapped() {
        let b = bound_value(&json!({"k": "x".repeat(1000)}), 256);
        let v: Value = serde_json::from_str(&b.text).unwrap();
        assert!(
            v["_truncated_json"]
                .as_str()
                .unwrap()
                .starts_with(r#"{"k":"xxx"#)
        );
        assert_eq!(v["original_bytes"], json!(1008));
        assert!(b.text.len() <= 256);
    }

    #[test]
    fn log_fields_lose_control_characters_and_are_bounded() {
        assert_eq!(log_field("call_1"), "call_1");
        assert_eq!(log_field("a\nb\r\u{1b}[31mc\u{0}"), "ab[31mc");
        let long = log_field(&"日".repeat(500));
        assert_eq!(long.chars().count(), MAX_LOG_FIELD_CHARS + 1);
        assert!(long.ends_with('…'));
        assert_eq!(
            log_field(&"x".repeat(MAX_LOG_FIELD_CHARS)).len(),
            MAX_LOG_FIELD_CHARS
        );
    }

    #[test]
    fn text_is_cut_on_a_char_boundary() {
        let b = bound_text(&"日本".repeat(100), 130);
        assert!(b.text.len() <= 130);
        assert!(b.text.ends_with(TRUNCATION_MARKER));
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<f64>().prop_map(|f| json!(f)),
            any::<i64>().prop_map(|n| json!(n)),
            "\\PC{0,40}".prop_map(Value::String),
            "[\"\\\\\u{0}-\u{1f}é日😀]{0,60}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
                prop::collection::btree_map("\\PC{0,8}", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn bounded_values_fit_parse_and_are_idempotent(value in arb_json(), budget in 0usize..600) {
            let b = bound_value(&value, budget);
            prop_assert!(b.text.len() <= budget.max(MIN_RESULT_BUDGET), "{} > {}", b.text.len(), budget);
            let parsed: Value = serde_json::from_str(&b.text).expect("valid JSON");
            let again = bound_value(&parsed, budget);
            prop_assert_eq!(&again.text, &b.text);
            prop_assert!(!again.truncated);
            if !b.truncated {
                prop_assert_eq!(parsed, value);
            }
        }

        #[test]
        fn bounded_text_fits_and_is_idempotent(text in "\\PC{0,300}", budget in 0usize..400) {
            let b = bound_text(&text, budget);
            // `text` is a String: a cut inside a character could not have produced it.
            prop_assert!(b.text.len() <= budget.max(MIN_RESULT_BUDGET));
            prop_assert_eq!(bound_text(&b.text, budget).text, b.text.clone());
            if !b.truncated { prop_assert_eq!(&b.text, &text); }
            else { prop_assert!(text.starts_with(b.text.trim_end_matches(TRUNCATION_MARKER))); }
        }
    }
}
