//! Text a UI shows from a model, a tool or a server: the characters that must not
//! reach a terminal or a page as themselves, and their visible form.
//!
//! The list is data (`hidden_characters.json` beside this file), read here and by
//! the chat page's build, so a terminal and a browser escape exactly the same
//! characters: C0 controls but newline and tab, DEL and C1 controls, bidirectional
//! embeddings, overrides, isolates and marks, and invisible format characters. An
//! approval prompt must show `echo safe \u{202e}\u{2066} ;touch X\u{2069} #` as
//! it will run, not as the reordered text (`touch X` seemingly commented out) a
//! bidi-aware renderer would draw from the raw characters.

use std::borrow::Cow;
use std::sync::LazyLock;

/// The list's source.
const LIST: &str = include_str!("hidden_characters.json");

#[derive(serde::Deserialize)]
struct List {
    ranges: Vec<(String, String)>,
}

/// The ranges, parsed once. `None` when the embedded list does not parse (a unit
/// test makes sure it does); [`is_hidden`] then hides every character that is not
/// printable ASCII, newline or tab, which is safe, only less readable.
static RANGES: LazyLock<Option<Vec<(u32, u32)>>> = LazyLock::new(|| {
    let list: List = serde_json::from_str(LIST).ok()?;
    list.ranges
        .iter()
        .map(|(from, to)| {
            let from = u32::from_str_radix(from, 16).ok()?;
            let to = u32::from_str_radix(to, 16).ok()?;
            (from <= to).then_some((from, to))
        })
        .collect()
});

/// Whether `c` must not be shown as itself (see the module docs).
pub fn is_hidden(c: char) -> bool {
    let code = u32::from(c);
    match RANGES.as_deref() {
        Some(ranges) => ranges.iter().any(|&(from, to)| (from..=to).contains(&code)),
        None => !matches!(c, ' '..='~' | '\n' | '\t'),
    }
}

/// Whether `text` holds any character [`is_hidden`] hides (a UI warns about those
/// in arguments it asks the user to approve).
pub fn has_hidden(text: &str) -> bool {
    text.chars().any(is_hidden)
}

/// `text` with every hidden character (see [`is_hidden`]) written visibly as
/// `\u{<lower-case hex>}`; newline and tab stay. Model and tool text then never
/// reaches a terminal as escape sequences or invisible characters.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !has_hidden(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_list_parses() {
        let ranges = RANGES.as_deref().expect("hidden_characters.json parses");
        assert!(ranges.len() >= 10);
        assert!(is_hidden('\u{202e}') && is_hidden('\u{e0041}') && is_hidden('\r'));
        assert!(!is_hidden('\n') && !is_hidden('\t') && !is_hidden('é'));
    }

    /// The shared cases: the chat page's browser test checks the same file.
    #[test]
    fn the_shared_cases() {
        #[derive(serde::Deserialize)]
        struct Cases {
            cases: Vec<Case>,
        }
        #[derive(serde::Deserialize)]
        struct Case {
            input: String,
            shown: String,
        }
        let text = include_str!("../../../../fixtures/printable/cases.json");
        let cases: Cases = serde_json::from_str(text).expect("the cases parse");
        for case in cases.cases {
            assert_eq!(printable(&case.input), case.shown, "{:?}", case.input);
            assert_eq!(has_hidden(&case.input), case.input != case.shown);
        }
    }
}
