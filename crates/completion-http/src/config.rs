//! What a client and its [`crate::HttpTransport`] are built from.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// An API key. Its `Debug` prints `ApiKey([redacted])`; it has no `Display`.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, to put in a header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// The waits a call may time out on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the TCP (and TLS) connection.
    pub connect: Duration,
    /// From sending the request until the response headers arrive.
    pub first_byte: Duration,
    /// Idle limit of a response body: for a stream, the longest wait for the next
    /// server-sent event (keepalive comments do not count as one); for a
    /// non-streaming body, for the next chunk.
    pub between_chunks: Duration,
    /// Deadline of the whole call, retries and body included (`None`: no deadline).
    pub total: Option<Duration>,
}

impl Default for Timeouts {
    /// 10 s to connect, 120 s to the first byte, 60 s idle, 10 minutes in total.
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            between_chunks: Duration::from_secs(60),
            total: Some(Duration::from_secs(600)),
        }
    }
}

/// Backoff between retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry (doubled for each further one).
    pub initial: Duration,
    /// Upper bound of a computed delay.
    pub max: Duration,
    /// Longest `Retry-After` the client waits for; a longer one returns the error.
    pub max_retry_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// What a wire reads from an error response's body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorBody {
    /// The provider's message (with its error code or type when it has one); the
    /// status's reason phrase is used when `None`.
    pub message: Option<String>,
    /// Waiting does not help (an exhausted quota rather than a rate limit): a 429
    /// with such a body is not retried.
    pub permanent: bool,
}

impl ErrorBody {
    /// A body a wire parsed into `(code, message)` (`parsed`): `message (code)`,
    /// or the message alone without a code; when it parsed nothing, a short
    /// plain-text body (not HTML, not JSON), trimmed. Never permanent.
    pub fn from_parsed(parsed: Option<(String, String)>, bytes: &[u8]) -> Self {
        let message = match parsed {
            Some((code, message)) if !message.is_empty() && !code.is_empty() => {
                Some(format!("{message} ({code})"))
            }
            Some((_, message)) if !message.is_empty() => Some(message),
            _ => plain_text(bytes),
        };
        Self {
            message,
            permanent: false,
        }
    }
}

/// A short body that is plain text (not HTML, not JSON), trimmed.
fn plain_text(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    let plain = !text.is_empty()
        && text.len() <= 512
        && !text.starts_with(['<', '{', '['])
        && !text.chars().any(char::is_control);
    plain.then(|| text.to_owned())
}

/// A client's configuration, built by the composition root: the endpoint settings
/// every wire shares, and the wire's own `options` (how it encodes and decodes).
/// The `Debug` output shows neither the key, nor header values, nor a user name or
/// password in the base URL.
#[derive(Clone)]
pub struct WireConfig<O> {
    /// The base URL the wire's path is appended to: up to the API version for the
    /// OpenAI wires (`https://api.openai.com/v1`, `http://localhost:11434/v1`),
    /// the API's origin for Anthropic's. A query string is kept after the path:
    /// `https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21`
    /// posts to `.../deployments/d/chat/completions?api-version=2024-10-21`.
    pub base_url: String,
    /// The API key, sent in the wire's auth header when set.
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request (values are never logged), e.g.
    /// `OpenAI-Organization` or `anthropic-beta`.
    pub extra_headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries after the first attempt (0 disables retries).
    pub max_retries: u32,
    /// Backoff between retries.
    pub backoff: Backoff,
    /// The wire's own options.
    pub options: O,
}

impl<O: Default> WireConfig<O> {
    /// A configuration for `base_url` with default timeouts, 2 retries, no key and
    /// the wire's default options (which stream).
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            extra_headers: Vec::new(),
            timeouts: Timeouts::default(),
            max_retries: 2,
            backoff: Backoff::default(),
            options: O::default(),
        }
    }
}

impl<O> WireConfig<O> {
    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }
}

impl<O: fmt::Debug> fmt::Debug for WireConfig<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("WireConfig")
            .field("base_url", &redact_userinfo(&self.base_url))
            .field("api_key", &self.api_key)
            .field("extra_headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("max_retries", &self.max_retries)
            .field("backoff", &self.backoff)
            .field("options", &self.options)
            .finish()
    }
}

/// Everything a [`crate::HttpTransport`] needs; [`crate::WireClient`] builds it
/// from a [`WireConfig`] and its wire's [`crate::WireSpec`].
#[derive(Clone)]
pub struct TransportConfig {
    /// Base URL as configured (see [`crate::HttpTransport::new`] for how `path` joins it).
    pub base_url: String,
    /// Path appended to the base URL's path, e.g. `/chat/completions`.
    pub path: &'static str,
    /// Headers of every request besides `content-type`, as (name, value, secret).
    /// A secret value is marked sensitive and scrubbed from error messages.
    pub headers: Vec<(String, String, bool)>,
    /// Further strings scrubbed from error messages (a key inside a header value).
    pub secrets: Vec<ApiKey>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries after the first attempt (0 disables retries).
    pub max_retries: u32,
    /// Backoff between retries.
    pub backoff: Backoff,
    /// Reads an error response's body (at most 64 KiB of it).
    pub error_body: fn(&[u8]) -> ErrorBody,
}

impl fmt::Debug for TransportConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _, _)| n.as_str()).collect();
        f.debug_struct("TransportConfig")
            .field("base_url", &redact_userinfo(&self.base_url))
            .field("path", &self.path)
            .field("headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("max_retries", &self.max_retries)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

/// `url` with any user name and password replaced by `redacted` (for `Debug`).
/// Works on the text, so a URL that does not parse is redacted too.
pub fn redact_userinfo(url: &str) -> Cow<'_, str> {
    let Some(scheme_end) = url.find("://") else {
        return Cow::Borrowed(url);
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => Cow::Owned(format!(
            "{}redacted@{}",
            &url[..authority_start],
            &rest[at + 1..]
        )),
        None => Cow::Borrowed(url),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted() {
        for (url, shown) in [
            ("https://user:pass@host/v1", "https://redacted@host/v1"),
            (
                "https://pass@host:8443/v1?q=1",
                "https://redacted@host:8443/v1?q=1",
            ),
            ("http://host/v1?email=a@b", "http://host/v1?email=a@b"),
            ("no scheme user:pass@host", "no scheme user:pass@host"),
            ("weird://us:er:pass@@host/x", "weird://redacted@host/x"),
        ] {
            assert_eq!(redact_userinfo(url), shown, "{url}");
        }
    }
}
