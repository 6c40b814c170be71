//! `GuardedWebSearch`: the real [`SearchEngine`], one provider at one endpoint.
//!
//! Each search connects the way `web_fetch` does (see [`GuardedHttpFetch`]): the
//! endpoint's host is resolved once, every address is checked with
//! [`check_address`](ai_tools::capability::check_address) (loopback, private,
//! link-local and metadata addresses refused unless allowlisted), and the request
//! goes to the checked address. Redirects are not followed at all (the key would go
//! along): a 3xx answer is [`SearchError::Redirected`]. Proxies from the
//! environment are ignored, the answer is read up to a cap, and the whole search
//! runs under one timeout.
//!
//! Providers:
//! - [`SearchProvider::Searxng`]: `GET <base>/search?q=...&format=json` on a
//!   SearXNG instance (no key); results from `results[].{title, url, content}`.
//! - [`SearchProvider::Brave`]: `GET <endpoint>?q=...&count=N` with the key in
//!   `X-Subscription-Token`; results from `web.results[].{title, url,
//!   description}` (their markup reduced to text).
//! - [`SearchProvider::Tavily`]: `POST <endpoint>` with `{"query", "max_results"}`
//!   and `Authorization: Bearer <key>`; results from `results[].{title, url,
//!   content}`.
//!
//! The key comes from the composition root (this crate reads no environment
//! variable) as a [`SearchKey`]; it is sent only in its header, marked sensitive,
//! never shown by `Debug`, and scrubbed from error excerpts.

use std::time::Duration;

use ai_core::CancellationToken;
use ai_tools::builtin::html_to_text;
use ai_tools::capability::{
    FetchError, NetAllowlist, SearchEngine, SearchError, SearchHit, SearchRequest,
};
use futures::future::BoxFuture;
use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::Value;

use crate::BindError;
use crate::http::{GuardedHttpFetch, network, read_capped};

/// The user agent of search requests.
const USER_AGENT: &str = "agent-web-search/0.1";
/// Most bytes of an error answer read for its excerpt.
const ERROR_BODY_BYTES: usize = 4 * 1024;
/// Longest excerpt of an error answer, in characters.
const EXCERPT_CHARS: usize = 200;

/// A web search API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SearchProvider {
    /// A SearXNG instance (its JSON format must be enabled); no key.
    Searxng,
    /// Brave's Web Search API; needs a key.
    Brave,
    /// Tavily's search API; needs a key.
    Tavily,
}

impl SearchProvider {
    /// Every provider, in the order the configuration documents them.
    pub const ALL: [Self; 3] = [Self::Searxng, Self::Brave, Self::Tavily];

    /// Its name in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Searxng => "searxng",
            Self::Brave => "brave",
            Self::Tavily => "tavily",
        }
    }

    /// The provider's public endpoint; `None` for SearXNG (an instance is someone's
    /// own server: its URL must be given).
    pub fn default_endpoint(self) -> Option<&'static str> {
        match self {
            Self::Searxng => None,
            Self::Brave => Some("https://api.search.brave.com/res/v1/web/search"),
            Self::Tavily => Some("https://api.tavily.com/search"),
        }
    }

    /// Whether a search needs an API key.
    pub fn needs_key(self) -> bool {
        !matches!(self, Self::Searxng)
    }
}

impl std::str::FromStr for SearchProvider {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "unknown search provider `{text}` (expected `searxng`, `brave` or `tavily`)"
                )
            })
    }
}

/// A provider's API key, with the name of the environment variable the composition
/// root read it from (what a missing key's error names). `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SearchKey {
    env: String,
    value: Option<String>,
}

impl SearchKey {
    /// The key read from the variable `env`; `value` is `None` (or empty) when the
    /// variable is not set: each search then fails with
    /// [`SearchError::MissingKey`] naming `env`.
    pub fn from_env(env: impl Into<String>, value: Option<String>) -> Self {
        Self {
            env: env.into(),
            value: value.filter(|v| !v.is_empty()),
        }
    }

    /// The variable's name.
    pub fn env(&self) -> &str {
        &self.env
    }

    /// Whether the variable held a key.
    pub fn is_set(&self) -> bool {
        self.value.is_some()
    }
}

impl std::fmt::Debug for SearchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchKey")
            .field("env", &self.env)
            .field(
                "value",
                &if self.value.is_some() {
                    "<redacted>"
                } else {
                    "<unset>"
                },
            )
            .finish()
    }
}

/// What `core__web_search` needs to be bound: plain data, mapped from
/// configuration by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSearchSettings {
    /// The provider.
    pub provider: SearchProvider,
    /// The endpoint: a SearXNG instance's base URL, or the provider's search URL;
    /// `None` takes [`SearchProvider::default_endpoint`].
    pub endpoint: Option<String>,
    /// The key (needed by Brave and Tavily).
    pub key: Option<SearchKey>,
    /// Hosts, addresses and CIDRs (optionally `:port`) the endpoint may resolve to
    /// even though they are loopback, private or otherwise refused by default (the
    /// syntax of `web_fetch`'s allowlist; a list of its own).
    pub allowlist: Vec<String>,
    /// Most results a search returns.
    pub max_results: usize,
    /// Largest answer read, in bytes.
    pub max_bytes: usize,
    /// Time limit of one search.
    pub timeout: Duration,
}

impl WebSearchSettings {
    /// Defaults for everything but the provider, endpoint and key.
    pub fn new(provider: SearchProvider, endpoint: Option<String>, key: Option<SearchKey>) -> Self {
        Self {
            provider,
            endpoint,
            key,
            allowlist: Vec::new(),
            max_results: ai_tools::builtin::DEFAULT_SEARCH_RESULTS,
            max_bytes: ai_tools::builtin::DEFAULT_SEARCH_BYTES,
            timeout: ai_tools::builtin::DEFAULT_SEARCH_TIMEOUT,
        }
    }
}

/// Searches through one provider's endpoint under `web_fetch`'s address rules.
#[derive(Debug, Clone)]
pub struct GuardedWebSearch {
    provider: SearchProvider,
    endpoint: Url,
    key: Option<SearchKey>,
    http: GuardedHttpFetch,
}

impl GuardedWebSearch {
    /// Checks the endpoint (an http or https URL without credentials; the provider's
    /// public one when `None`) and the key (Brave and Tavily need one, SearXNG takes
    /// none). The endpoint's address is checked at each search, against `allowlist`.
    pub fn new(
        provider: SearchProvider,
        endpoint: Option<&str>,
        key: Option<SearchKey>,
        allowlist: NetAllowlist,
    ) -> Result<Self, BindError> {
        let invalid = |what: String| BindError::WebSearch(what);
        let endpoint = endpoint.or(provider.default_endpoint()).ok_or_else(|| {
            invalid(format!(
                "provider `{}` needs an endpoint URL",
                provider.as_str()
            ))
        })?;
        let endpoint =
            Url::parse(endpoint).map_err(|_| invalid("the endpoint is not a URL".to_owned()))?;
        if !matches!(endpoint.scheme(), "http" | "https") || endpoint.host().is_none() {
            return Err(invalid(
                "the endpoint must be an http or https URL with a host".to_owned(),
            ));
        }
        if !endpoint.username().is_empty() || endpoint.password().is_some() {
            return Err(invalid(
                "the endpoint must not hold credentials (give the key through its variable)"
                    .to_owned(),
            ));
        }
        match (provider.needs_key(), &key) {
            (true, None) => {
                return Err(invalid(format!(
                    "provider `{}` needs an API key",
                    provider.as_str()
                )));
            }
            (false, Some(_)) => {
                return Err(invalid(format!(
                    "provider `{}` takes no API key",
                    provider.as_str()
                )));
            }
            _ => {}
        }
        Ok(Self {
            provider,
            endpoint,
            key,
            http: GuardedHttpFetch::new(allowlist),
        })
    }

    /// The adapter for `settings`.
    pub fn from_settings(settings: &WebSearchSettings) -> Result<Self, BindError> {
        Self::new(
            settings.provider,
            settings.endpoint.as_deref(),
            settings.key.clone(),
            NetAllowlist::parse(&settings.allowlist)?,
        )
    }

    /// The provider.
    pub fn provider(&self) -> SearchProvider {
        self.provider
    }

    /// The key's header value, marked sensitive; `None` for a provider without one.
    fn key_header(&self, bearer: bool) -> Result<Option<HeaderValue>, SearchError> {
        let Some(key) = &self.key else {
            return Ok(None);
        };
        let Some(value) = &key.value else {
            return Err(SearchError::MissingKey {
                env: key.env.clone(),
            });
        };
        let text = if bearer {
            format!("Bearer {value}")
        } else {
            value.clone()
        };
        let mut header = HeaderValue::from_str(&text).map_err(|_| SearchError::InvalidKey {
            env: key.env.clone(),
        })?;
        header.set_sensitive(true);
        Ok(Some(header))
    }

    async fn search_inner(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, SearchError> {
        let count = request.count.max(1).to_string();
        let mut url = self.endpoint.clone();
        let (method, body, key) = match self.provider {
            SearchProvider::Searxng => {
                url.path_segments_mut()
                    .map_err(|_| SearchError::InvalidEndpoint("the endpoint has no path"))?
                    .pop_if_empty()
                    .push("search");
                url.query_pairs_mut()
                    .append_pair("q", &request.query)
                    .append_pair("format", "json");
                (reqwest::Method::GET, None, None)
            }
            SearchProvider::Brave => {
                url.query_pairs_mut()
                    .append_pair("q", &request.query)
                    .append_pair("count", &count);
                let key = self.key_header(false)?;
                (reqwest::Method::GET, None, key)
            }
            SearchProvider::Tavily => {
                let body = serde_json::json!({
                    "query": request.query,
                    "max_results": request.count.max(1),
                });
                let key = self.key_header(true)?;
                (reqwest::Method::POST, Some(body.to_string()), key)
            }
        };
        let client = self
            .http
            .pinned_client(&url, USER_AGENT, request.timeout)
            .await
            .map_err(from_fetch)?;
        let mut builder = client
            .request(method, url)
            .header(ACCEPT, "application/json");
        if let Some(key) = key {
            let name = match self.provider {
                SearchProvider::Brave => "x-subscription-token",
                _ => AUTHORIZATION.as_str(),
            };
            builder = builder.header(name, key);
        }
        if let Some(body) = body {
            builder = builder.header(CONTENT_TYPE, "application/json").body(body);
        }
        let response = builder.send().await.map_err(|e| from_fetch(network(e)))?;
        let status = response.status();
        if status.is_redirection() {
            return Err(SearchError::Redirected {
                status: status.as_u16(),
            });
        }
        if !status.is_success() {
            let (body, _) = read_capped(response, ERROR_BODY_BYTES)
                .await
                .unwrap_or_default();
            return Err(SearchError::Status {
                status: status.as_u16(),
                excerpt: self.excerpt(&body),
            });
        }
        let (body, truncated) = read_capped(response, request.max_bytes)
            .await
            .map_err(from_fetch)?;
        if truncated {
            return Err(SearchError::TooLarge {
                limit: request.max_bytes,
            });
        }
        parse_hits(self.provider, &body)
    }

    /// The start of an error answer on one line, without the key or hidden
    /// characters.
    fn excerpt(&self, body: &[u8]) -> String {
        let mut text = String::from_utf8_lossy(body).into_owned();
        if let Some(key) = self.key.as_ref().and_then(|k| k.value.as_deref()) {
            text = text.replace(key, "[redacted]");
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        let line: String = words
            .join(" ")
            .chars()
            .filter(|c| !ai_core::text::is_hidden(*c))
            .collect();
        if line.is_empty() {
            return "(no body)".to_owned();
        }
        match line.char_indices().nth(EXCERPT_CHARS) {
            Some((at, _)) => format!("{}...", &line[..at]),
            None => line,
        }
    }
}

fn from_fetch(error: FetchError) -> SearchError {
    match error {
        FetchError::InvalidUrl(what) => SearchError::InvalidEndpoint(what),
        FetchError::Blocked(reason) => SearchError::Blocked(reason),
        FetchError::Unresolved => SearchError::Unresolved,
        FetchError::Timeout => SearchError::Timeout,
        FetchError::Cancelled => SearchError::Cancelled,
        FetchError::Network(what) => SearchError::Network(what),
        other => SearchError::Network(other.to_string()),
    }
}

fn text_of(item: &Value, key: &str) -> String {
    item.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The provider's results, in its order; markup of Brave's texts reduced to text.
pub(crate) fn parse_hits(
    provider: SearchProvider,
    body: &[u8],
) -> Result<Vec<SearchHit>, SearchError> {
    let root: Value = serde_json::from_slice(body)
        .map_err(|e| SearchError::InvalidJson(format!("not JSON ({e})")))?;
    if !root.is_object() {
        return Err(SearchError::InvalidJson("not a JSON object".to_owned()));
    }
    let (results, snippet_key, markup) = match provider {
        SearchProvider::Brave => match root.get("web") {
            // An answer without web results (only news, say) has no `web`.
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(web) => (web.get("results"), "description", true),
        },
        SearchProvider::Searxng => (root.get("results"), "content", false),
        SearchProvider::Tavily => (root.get("results"), "content", false),
    };
    let results = results
        .and_then(Value::as_array)
        .ok_or_else(|| SearchError::InvalidJson("no `results` list".to_owned()))?;
    let clean = |text: String| if markup { html_to_text(&text) } else { text };
    Ok(results
        .iter()
        .filter(|item| item.is_object())
        .map(|item| SearchHit {
            title: clean(text_of(item, "title")),
            url: text_of(item, "url"),
            snippet: clean(text_of(item, snippet_key)),
        })
        .collect())
}

impl SearchEngine for GuardedWebSearch {
    fn search(
        &self,
        request: SearchRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Vec<SearchHit>, SearchError>> {
        Box::pin(async move {
            let timeout = request.timeout.max(Duration::from_millis(1));
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(SearchError::Cancelled),
                outcome = tokio::time::timeout(timeout, self.search_inner(&request)) => {
                    outcome.unwrap_or(Err(SearchError::Timeout))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_provider_shape_is_read() {
        let searxng = br#"{"query":"q","results":[{"url":"https://a.test/","title":"A","content":"a &amp; b","engine":"x"},{"title":"no url"},7]}"#;
        let hits = parse_hits(SearchProvider::Searxng, searxng).unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].snippet, "a &amp; b", "SearXNG text is plain");
        assert_eq!(hits[1].url, "");

        let brave = br#"{"type":"search","web":{"results":[{"title":"<strong>B</strong> site","url":"https://b.test/","description":"x &amp; <strong>y</strong>"}]}}"#;
        let hits = parse_hits(SearchProvider::Brave, brave).unwrap();
        assert_eq!(hits[0].title.trim(), "B site");
        assert_eq!(hits[0].snippet.trim(), "x & y");
        assert!(
            parse_hits(SearchProvider::Brave, br#"{"type":"search"}"#)
                .unwrap()
                .is_empty()
        );

        let tavily = br#"{"query":"q","results":[{"title":"T","url":"https://t.test/","content":"c","score":0.9}],"response_time":1.0}"#;
        let hits = parse_hits(SearchProvider::Tavily, tavily).unwrap();
        assert_eq!(hits[0].snippet, "c");

        for (provider, bad) in [
            (SearchProvider::Searxng, &b"<html>"[..]),
            (SearchProvider::Searxng, b"[1]"),
            (SearchProvider::Tavily, br#"{"detail":"x"}"#),
            (SearchProvider::Brave, br#"{"web":{"results":3}}"#),
        ] {
            assert!(
                matches!(parse_hits(provider, bad), Err(SearchError::InvalidJson(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn endpoints_and_keys_are_checked_when_bound() {
        let key = || Some(SearchKey::from_env("K", Some("v".into())));
        let none = NetAllowlist::none;
        assert!(GuardedWebSearch::new(SearchProvider::Brave, None, key(), none()).is_ok());
        assert!(GuardedWebSearch::new(SearchProvider::Tavily, None, key(), none()).is_ok());
        for (provider, endpoint, key) in [
            (SearchProvider::Searxng, None, None),
            (SearchProvider::Searxng, Some("ftp://x.test/"), None),
            (SearchProvider::Searxng, Some("http://u:p@x.test/"), None),
            (SearchProvider::Searxng, Some("x.test"), None),
            (SearchProvider::Searxng, Some("https://x.test/"), key()),
            (SearchProvider::Brave, None, None),
        ] {
            let result = GuardedWebSearch::new(provider, endpoint, key, none());
            assert!(
                matches!(result, Err(BindError::WebSearch(_))),
                "{provider:?} {endpoint:?}"
            );
        }
        let key = SearchKey::from_env("BRAVE_KEY", Some("secret-value".into()));
        assert!(!format!("{key:?}").contains("secret-value"));
        assert!(!SearchKey::from_env("K", Some(String::new())).is_set());
        assert_eq!("tavily".parse(), Ok(SearchProvider::Tavily));
        assert!("google".parse::<SearchProvider>().is_err());
    }

    #[test]
    fn error_excerpts_are_short_single_lines_without_the_key() {
        let search = GuardedWebSearch::new(
            SearchProvider::Brave,
            None,
            Some(SearchKey::from_env("K", Some("sk-123".into()))),
            NetAllowlist::none(),
        )
        .unwrap();
        assert_eq!(
            search.excerpt(b"bad\n  token sk-123\x1b[31m"),
            "bad token [redacted][31m"
        );
        assert_eq!(search.excerpt(b""), "(no body)");
        let long = search.excerpt("é".repeat(500).as_bytes());
        assert_eq!(long.chars().count(), EXCERPT_CHARS + 3);
    }
}
