//! `core__web_fetch`: fetch an http(s) URL and return readable text.
//!
//! The fetch goes through [`HttpFetch`], whose adapter refuses private, loopback and
//! metadata addresses (see [`crate::capability::classify`]). HTML is reduced to text
//! by a small tag stripper ([`html_to_text`]) that drops scripts and styles and
//! decodes common entities.

use std::sync::Arc;
use std::time::Duration;

use ai_core::{Redaction, ToolCallContext, ToolEffect, ToolErrorCode, ToolFailure};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Namespace;
use crate::capability::{FetchError, FetchRequest, HttpFetch};
use crate::contract::ToolContract;

/// Default cap on the fetched body (2 MiB).
pub const DEFAULT_FETCH_BYTES: usize = 2 * 1024 * 1024;
/// Default fetch timeout (20 s).
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// Elements whose content is dropped entirely.
const DROPPED: &[&str] = &["script", "style", "noscript", "template", "svg", "head"];
/// Elements that break lines.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "tr",
    "table",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "header",
    "footer",
    "pre",
    "blockquote",
    "hr",
    "title",
    "dt",
    "dd",
];

fn decode_entity(entity: &str) -> Option<char> {
    Some(match entity {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '\u{2014}',
        "ndash" => '\u{2013}',
        "hellip" => '\u{2026}',
        "copy" => '\u{a9}',
        _ => {
            let num = entity.strip_prefix('#')?;
            let code = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code)?
        }
    })
}

/// Decodes `&amp;`-style entities; unknown ones stay as written.
pub fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest[1..].find(';').map(|j| j + 1).filter(|&j| j <= 10);
        match end.and_then(|j| decode_entity(&rest[1..j]).map(|c| (j, c))) {
            Some((j, c)) => {
                out.push(c);
                rest = &rest[j + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Reduces HTML to readable text: drops tags, comments, scripts and styles, breaks
/// lines at block elements, decodes entities and collapses whitespace.
pub fn html_to_text(html: &str) -> String {
    let mut raw = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    while i < html.len() {
        let Some(off) = html[i..].find('<') else {
            raw.push_str(&html[i..]);
            break;
        };
        raw.push_str(&html[i..i + off]);
        i += off;
        if lower[i..].starts_with("<!--") {
            i = lower[i..].find("-->").map_or(html.len(), |j| i + j + 3);
            continue;
        }
        let Some(close) = html[i..].find('>') else {
            break;
        };
        let tag = &lower[i + 1..i + close];
        i += close + 1;
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if !tag.starts_with('/') && DROPPED.contains(&name.as_str()) && !tag.ends_with('/') {
            let end = format!("</{name}");
            i = lower[i..].find(&end).map_or(html.len(), |j| {
                let at = i + j;
                lower[at..].find('>').map_or(html.len(), |k| at + k + 1)
            });
            continue;
        }
        if BLOCKS.contains(&name.as_str()) {
            raw.push('\n');
        } else {
            raw.push(' ');
        }
    }
    let decoded = decode_entities(&raw);
    let mut out = String::with_capacity(decoded.len());
    let mut blank = false;
    for line in decoded.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn is_textual(content_type: Option<&str>) -> bool {
    let Some(ct) = content_type else { return true };
    let ct = ct.to_ascii_lowercase();
    ct.starts_with("text/")
        || ct.contains("json")
        || ct.contains("xml")
        || ct.contains("javascript")
        || ct.contains("x-www-form-urlencoded")
}

/// Arguments of `core__web_fetch`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    /// An http or https URL.
    pub url: String,
}

/// Output of `core__web_fetch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WebPage {
    /// The final URL, after redirects.
    pub url: String,
    /// HTTP status code.
    pub status: u16,
    /// The response's content type, if given.
    pub content_type: Option<String>,
    /// Readable text (HTML reduced to text; other text as is).
    pub text: String,
    /// Whether the body was cut at the size cap.
    pub truncated: bool,
    /// Redirects followed.
    pub redirects: u32,
}

/// Fetches a web page as text.
#[derive(Debug, Clone, Copy)]
pub struct WebFetch {
    /// Largest body read, in bytes.
    pub max_bytes: usize,
    /// Time limit for the fetch.
    pub timeout: Duration,
}

impl Default for WebFetch {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_FETCH_BYTES,
            timeout: DEFAULT_FETCH_TIMEOUT,
        }
    }
}

impl ToolContract for WebFetch {
    type Args = WebFetchArgs;
    type Output = WebPage;
    type Capabilities = Arc<dyn HttpFetch>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "web_fetch"
    }

    fn description(&self) -> &str {
        "Fetch an http or https URL and return its readable text (HTML reduced to text), status and content type. Private and local addresses are refused."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ExternalSideEffect
    }

    fn redaction(&self) -> Redaction {
        Redaction::new(
            ["url"],
            ["url", "status", "content_type", "truncated", "redirects"],
        )
        .unwrap_or_default()
    }

    async fn execute(
        &self,
        http: &Arc<dyn HttpFetch>,
        cx: &ToolCallContext,
        args: WebFetchArgs,
    ) -> Result<WebPage, ToolFailure> {
        let request = FetchRequest {
            url: args.url,
            max_bytes: self.max_bytes,
            timeout: self.timeout,
        };
        let response = http.fetch(request, cx.cancel.clone()).await.map_err(|e| {
            let code = match e {
                FetchError::InvalidUrl(_) => ToolErrorCode::InvalidArgs,
                FetchError::Blocked(_) => ToolErrorCode::PermissionDenied,
                FetchError::Timeout => ToolErrorCode::Timeout,
                FetchError::Cancelled => ToolErrorCode::Cancelled,
                FetchError::Unresolved => ToolErrorCode::NotFound,
                FetchError::TooManyRedirects | FetchError::Network(_) => {
                    ToolErrorCode::ExecutionFailed
                }
            };
            ToolFailure::new(code, e.to_string())
        })?;
        if !is_textual(response.content_type.as_deref()) {
            return Err(ToolFailure::new(
                ToolErrorCode::ExecutionFailed,
                "the response is not text (binary content type); nothing to show",
            ));
        }
        let body = String::from_utf8_lossy(&response.body);
        let html = response
            .content_type
            .as_deref()
            .is_some_and(|ct| ct.to_ascii_lowercase().contains("html"));
        let text = if html {
            html_to_text(&body)
        } else {
            body.into_owned()
        };
        Ok(WebPage {
            url: response.final_url,
            status: response.status,
            content_type: response.content_type,
            text,
            truncated: response.truncated,
            redirects: response.redirects,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_tags_scripts_and_decodes_entities() {
        let html = "<html><head><title>T</title><style>p{}</style></head><body>\
            <h1>Hello &amp; welcome</h1><script>alert('x')</script>\
            <p>a&lt;b &#65;&#x42; &nbsp;c</p><!-- secret --><ul><li>one</li><li>two</li></ul></body></html>";
        let text = html_to_text(html);
        assert_eq!(text, "Hello & welcome\n\na<b AB c\n\none\n\ntwo\n");
        assert!(!text.contains("alert"));
        assert!(!text.contains("secret"));
    }

    #[test]
    fn unknown_entities_stay() {
        assert_eq!(decode_entities("a &bogus; & b"), "a &bogus; & b");
    }
}
