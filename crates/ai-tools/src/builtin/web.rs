//! `core__web_fetch`: fetch an http(s) URL and return readable text.
//!
//! The fetch goes through [`HttpFetch`], whose adapter refuses private, loopback and
//! metadata addresses (see [`crate::capability::classify`]). HTML is reduced to text
//! by a small tag stripper ([`html_to_text`]) that drops scripts and styles and
//! decodes common entities. The conversion is linear in the page (a 2 MiB page of
//! `&` or `&#` costs one pass), and the tool runs it in chunks that yield to the
//! executor and check cancellation, so the runner's timeout and cancellation reach it.

use std::sync::Arc;
use std::time::Duration;

use ai_core::{
    CancellationToken, ToolEffect,
    tool::{Redaction, ToolCallContext, ToolErrorCode, ToolFailure},
};
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

/// Longest entity name between `&` and `;` that is looked for (`#x10FFFF` is 8).
const MAX_ENTITY_LEN: usize = 10;

/// How much input [`html_to_text_cancellable`] strips between two checks of the
/// cancellation token (and two yields to the executor).
const STRIP_CHUNK: usize = 64 * 1024;

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
///
/// Linear in the input: the `;` that ends an entity is looked for only within the
/// next `MAX_ENTITY_LEN` (10) bytes, so a page of `&` (or `&#`) runs costs one pass.
pub fn decode_entities(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while let Some(off) = text[i..].find('&') {
        let amp = i + off;
        let window = &bytes[amp + 1..(amp + 2 + MAX_ENTITY_LEN).min(bytes.len())];
        // `&` and `;` are ASCII, so both ends of the name are char boundaries.
        let decoded = window.iter().position(|&b| b == b';').and_then(|len| {
            let name = text.get(amp + 1..amp + 1 + len)?;
            decode_entity(name).map(|c| (c, amp + len + 2))
        });
        match decoded {
            Some((c, next)) => {
                out.push_str(&text[copied..amp]);
                out.push(c);
                copied = next;
                i = next;
            }
            None => i = amp + 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The tag-stripping pass of [`html_to_text`], resumable so that long inputs can be
/// worked through in chunks. Every byte of the input is looked at a bounded number of
/// times: the whole pass is linear.
struct Stripper<'a> {
    html: &'a str,
    lower: String,
    i: usize,
    raw: String,
    done: bool,
}

impl<'a> Stripper<'a> {
    fn new(html: &'a str) -> Self {
        Self {
            html,
            lower: html.to_ascii_lowercase(),
            i: 0,
            raw: String::with_capacity(html.len() / 2),
            done: false,
        }
    }

    /// Strips at least `budget` more bytes of input (or to the end); returns whether
    /// the pass is complete.
    fn step(&mut self, budget: usize) -> bool {
        let html = self.html;
        let lower = self.lower.as_str();
        let stop = self.i.saturating_add(budget);
        while !self.done && self.i < stop {
            let i = self.i;
            if i >= html.len() {
                self.done = true;
                break;
            }
            let Some(off) = html[i..].find('<') else {
                self.raw.push_str(&html[i..]);
                self.done = true;
                break;
            };
            self.raw.push_str(&html[i..i + off]);
            let i = i + off;
            if lower[i..].starts_with("<!--") {
                self.i = lower[i..].find("-->").map_or(html.len(), |j| i + j + 3);
                continue;
            }
            let Some(close) = html[i..].find('>') else {
                self.done = true;
                break;
            };
            let tag = &lower[i + 1..i + close];
            let after = i + close + 1;
            let name: String = tag
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if !tag.starts_with('/') && DROPPED.contains(&name.as_str()) && !tag.ends_with('/') {
                let end = format!("</{name}");
                self.i = lower[after..].find(&end).map_or(html.len(), |j| {
                    let at = after + j;
                    lower[at..].find('>').map_or(html.len(), |k| at + k + 1)
                });
                continue;
            }
            self.raw.push(if BLOCKS.contains(&name.as_str()) {
                '\n'
            } else {
                ' '
            });
            self.i = after;
        }
        self.done
    }

    /// Decodes entities and collapses whitespace of the stripped text.
    fn finish(self) -> String {
        let decoded = decode_entities(&self.raw);
        let mut out = String::with_capacity(decoded.len());
        let mut blank = false;
        for line in decoded.lines() {
            let mut words = line.split_whitespace();
            let Some(first) = words.next() else {
                blank = !out.is_empty();
                continue;
            };
            if blank {
                out.push('\n');
                blank = false;
            }
            out.push_str(first);
            for word in words {
                out.push(' ');
                out.push_str(word);
            }
            out.push('\n');
        }
        out
    }
}

/// Reduces HTML to readable text: drops tags, comments, scripts and styles, breaks
/// lines at block elements, decodes entities and collapses whitespace. Linear in the
/// input.
pub fn html_to_text(html: &str) -> String {
    let mut stripper = Stripper::new(html);
    while !stripper.step(usize::MAX) {}
    stripper.finish()
}

/// Returns `Pending` once after waking itself: lets the executor run timers (the
/// runner's timeout) and other tasks between two chunks of CPU work.
struct YieldNow(bool);

impl std::future::Future for YieldNow {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// [`html_to_text`] in chunks of 64 KiB of input, yielding to the executor between
/// chunks (so a timeout around the call can fire) and checking `cancel`; `None` when
/// cancelled.
pub async fn html_to_text_cancellable(html: &str, cancel: &CancellationToken) -> Option<String> {
    let mut stripper = Stripper::new(html);
    while !stripper.step(STRIP_CHUNK) {
        if cancel.is_cancelled() {
            return None;
        }
        YieldNow(false).await;
    }
    if cancel.is_cancelled() {
        return None;
    }
    Some(stripper.finish())
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
            html_to_text_cancellable(&body, &cx.cancel)
                .await
                .ok_or_else(|| {
                    ToolFailure::new(ToolErrorCode::Cancelled, "the fetch was cancelled")
                })?
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
        assert_eq!(decode_entities("&&amp;&#65;&#x42;&"), "&&AB&");
        assert_eq!(
            decode_entities("&#;&#x;&#99999999999;&é;"),
            "&#;&#x;&#99999999999;&é;"
        );
        assert_eq!(decode_entities("&hellip;é&amp"), "\u{2026}é&amp");
    }

    #[tokio::test]
    async fn chunked_conversion_matches_the_one_pass_conversion() {
        let page = "<p>a &amp; b</p><script>x</script>".repeat(10_000);
        let cancel = CancellationToken::new();
        let chunked = html_to_text_cancellable(&page, &cancel).await;
        assert_eq!(chunked.as_deref(), Some(html_to_text(&page).as_str()));
        cancel.cancel();
        let cancelled = html_to_text_cancellable(&page, &cancel).await;
        assert_eq!(cancelled, None);
    }
}
