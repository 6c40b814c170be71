//! `core__web_search`: search the web through the configured provider.
//!
//! The search goes through [`SearchEngine`], whose adapter sends the query to the one
//! endpoint the configuration names, under the address rules of `web_fetch` (see
//! [`crate::capability::classify`]). The model chooses the query and how many
//! results, never the endpoint or the key. Whatever the provider answers is bounded
//! here: at most `count` results, each title and snippet on one line and cut at
//! [`MAX_TITLE_CHARS`] and [`MAX_SNIPPET_CHARS`] characters, and only `http`/`https`
//! URLs of at most [`MAX_RESULT_URL_CHARS`] characters (other results are dropped).

use std::sync::Arc;
use std::time::Duration;

use ai_core::{
    ToolEffect,
    tool::{Redaction, ToolCallContext, ToolErrorCode, ToolFailure},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Namespace;
use crate::capability::{SearchEngine, SearchError, SearchHit, SearchRequest};
use crate::contract::ToolContract;

/// Results returned when the model does not say how many.
pub const DEFAULT_SEARCH_RESULTS: usize = 5;
/// Most results one search returns (and the most `count` may ask for).
pub const MAX_SEARCH_RESULTS: usize = 10;
/// Longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 400;
/// Longest title kept, in characters.
pub const MAX_TITLE_CHARS: usize = 300;
/// Longest snippet kept, in characters.
pub const MAX_SNIPPET_CHARS: usize = 1_000;
/// Longest result URL kept, in characters; a longer one drops its result.
pub const MAX_RESULT_URL_CHARS: usize = 2_048;
/// Default cap on the provider's response (2 MiB).
pub const DEFAULT_SEARCH_BYTES: usize = 2 * 1024 * 1024;
/// Default search timeout (15 s).
pub const DEFAULT_SEARCH_TIMEOUT: Duration = Duration::from_secs(15);

/// Arguments of `core__web_search`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// What to search for, as words a search engine understands (1 to 400
    /// characters).
    #[schemars(length(min = 1, max = 400))]
    pub query: String,
    /// How many results, 1 to 10 (default 5).
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub count: Option<u32>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WebSearchResult {
    /// The page's title (one line, at most 300 characters).
    pub title: String,
    /// The page's http or https URL.
    pub url: String,
    /// The provider's excerpt of the page (one line, at most 1,000 characters).
    pub snippet: String,
}

/// Output of `core__web_search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WebSearchResults {
    /// The results, best first (the provider's order).
    pub results: Vec<WebSearchResult>,
    /// Whether any title or snippet was cut at its bound.
    pub truncated: bool,
}

/// Searches the web through the configured provider.
#[derive(Debug, Clone, Copy)]
pub struct WebSearch {
    /// Most results a search returns, whatever `count` asks (1 to
    /// [`MAX_SEARCH_RESULTS`]).
    pub max_results: usize,
    /// Largest provider response read, in bytes.
    pub max_bytes: usize,
    /// Time limit for one search.
    pub timeout: Duration,
}

impl Default for WebSearch {
    fn default() -> Self {
        Self {
            max_results: MAX_SEARCH_RESULTS,
            max_bytes: DEFAULT_SEARCH_BYTES,
            timeout: DEFAULT_SEARCH_TIMEOUT,
        }
    }
}

/// `text` on one line (whitespace runs become one space, hidden characters are
/// dropped), cut at `max` characters; whether it was cut.
fn one_line(text: &str, max: usize) -> (String, bool) {
    let mut out = String::with_capacity(text.len().min(max * 4));
    let mut kept = 0;
    for word in text
        .split_whitespace()
        .map(|w| w.chars().filter(|c| !ai_core::text::is_hidden(*c)))
    {
        let mut word = word.peekable();
        if word.peek().is_none() {
            continue;
        }
        if kept > 0 {
            // A separator only goes in when a character of the word fits after it.
            if kept + 1 >= max {
                return (out, true);
            }
            out.push(' ');
            kept += 1;
        }
        for c in word {
            if kept == max {
                return (out, true);
            }
            out.push(c);
            kept += 1;
        }
    }
    (out, false)
}

/// The URL if it is a plain `http`/`https` URL of at most [`MAX_RESULT_URL_CHARS`]
/// characters with a host, without whitespace or control characters.
fn web_url(url: &str) -> Option<String> {
    let url = url.trim();
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &url[8..]
    } else if lower.starts_with("http://") {
        &url[7..]
    } else {
        return None;
    };
    let host_present = rest
        .chars()
        .next()
        .is_some_and(|c| !matches!(c, '/' | '?' | '#'));
    let clean = !url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || ai_core::text::is_hidden(c));
    (host_present && clean && url.chars().count() <= MAX_RESULT_URL_CHARS).then(|| url.to_owned())
}

/// Bounds what a provider returned: `http`/`https` results only, at most `count`,
/// titles and snippets on one line and cut; whether any text was cut.
pub fn bound_hits(hits: Vec<SearchHit>, count: usize) -> WebSearchResults {
    let mut truncated = false;
    let results = hits
        .into_iter()
        .filter_map(|hit| {
            let url = web_url(&hit.url)?;
            let (title, title_cut) = one_line(&hit.title, MAX_TITLE_CHARS);
            let (snippet, snippet_cut) = one_line(&hit.snippet, MAX_SNIPPET_CHARS);
            Some((
                WebSearchResult {
                    title,
                    url,
                    snippet,
                },
                title_cut || snippet_cut,
            ))
        })
        .take(count)
        .map(|(result, cut)| {
            truncated |= cut;
            result
        })
        .collect();
    WebSearchResults { results, truncated }
}

fn search_failure(error: SearchError) -> ToolFailure {
    let code = match error {
        SearchError::Blocked(_) => ToolErrorCode::PermissionDenied,
        SearchError::Unresolved => ToolErrorCode::NotFound,
        SearchError::Timeout => ToolErrorCode::Timeout,
        SearchError::Cancelled => ToolErrorCode::Cancelled,
        _ => ToolErrorCode::ExecutionFailed,
    };
    ToolFailure::new(code, error.to_string())
}

impl ToolContract for WebSearch {
    type Args = WebSearchArgs;
    type Output = WebSearchResults;
    type Capabilities = Arc<dyn SearchEngine>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "web_search"
    }

    fn description(&self) -> &str {
        "Search the web and return result titles, URLs and snippets, best first. Read a result's page with core__web_fetch."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ExternalSideEffect
    }

    fn redaction(&self) -> Redaction {
        Redaction::new(
            ["query", "count"],
            ["results.title", "results.url", "truncated"],
        )
        .unwrap_or_default()
    }

    async fn execute(
        &self,
        engine: &Arc<dyn SearchEngine>,
        cx: &ToolCallContext,
        args: WebSearchArgs,
    ) -> Result<WebSearchResults, ToolFailure> {
        let query = args.query.trim();
        if query.is_empty() {
            return Err(ToolFailure::new(
                ToolErrorCode::InvalidArgs,
                "the query is blank",
            ));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(ToolFailure::new(
                ToolErrorCode::InvalidArgs,
                "the query is longer than 400 characters",
            ));
        }
        let asked = args
            .count
            .map_or(DEFAULT_SEARCH_RESULTS, |n| {
                usize::try_from(n).unwrap_or(MAX_SEARCH_RESULTS)
            })
            .clamp(1, MAX_SEARCH_RESULTS);
        let count = asked.min(self.max_results.clamp(1, MAX_SEARCH_RESULTS));
        let request = SearchRequest {
            query: query.to_owned(),
            count,
            max_bytes: self.max_bytes,
            timeout: self.timeout,
        };
        let hits = engine
            .search(request, cx.cancel.clone())
            .await
            .map_err(search_failure)?;
        Ok(bound_hits(hits, count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(title: &str, url: &str, snippet: &str) -> SearchHit {
        SearchHit {
            title: title.into(),
            url: url.into(),
            snippet: snippet.into(),
        }
    }

    #[test]
    fn text_goes_on_one_line_and_is_cut_on_a_char_boundary() {
        assert_eq!(one_line("  a \n b\t\tc ", 10), ("a b c".to_owned(), false));
        assert_eq!(one_line("ééééé", 3), ("ééé".to_owned(), true));
        assert_eq!(one_line("ab cd", 2), ("ab".to_owned(), true));
        assert_eq!(one_line("ab cd", 3), ("ab".to_owned(), true));
        assert_eq!(one_line("ab cd", 4), ("ab c".to_owned(), true));
        assert_eq!(one_line("ab", 2), ("ab".to_owned(), false));
        assert_eq!(
            one_line("a\u{202e}b \u{200b} c", 10),
            ("ab c".to_owned(), false)
        );
    }

    #[test]
    fn only_plain_web_urls_are_kept() {
        for good in [
            "https://example.com/a?b#c",
            "HTTP://example.com",
            " http://x.test/ ",
        ] {
            assert!(web_url(good).is_some(), "{good}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_RESULT_URL_CHARS));
        for bad in [
            "javascript:alert(1)",
            "ftp://example.com/",
            "file:///etc/passwd",
            "data:text/html,x",
            "https:///path",
            "http://",
            "https://exa mple.com/",
            "https://example.com/\u{202e}x",
            "//example.com/",
            long.as_str(),
        ] {
            assert_eq!(web_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn hits_are_filtered_before_the_count_is_applied() {
        let hits = vec![
            hit("one", "javascript:x", "s"),
            hit("two", "https://two.test/", "s"),
            hit(&"t".repeat(400), "http://three.test/", "s"),
            hit("four", "https://four.test/", "s"),
        ];
        let out = bound_hits(hits, 2);
        let urls: Vec<&str> = out.results.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls, ["https://two.test/", "http://three.test/"]);
        assert_eq!(out.results[1].title.chars().count(), MAX_TITLE_CHARS);
        assert!(out.truncated);
        let out = bound_hits(vec![hit("a", "https://a.test/", "b")], 5);
        assert!(!out.truncated);
    }
}
