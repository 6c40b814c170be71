//! Searching the web: the `SearchEngine` capability.
//!
//! The trait knows no provider and no HTTP client. The real adapter (ai-host's
//! `GuardedWebSearch`) speaks one provider's protocol to one configured endpoint,
//! under the same address rules as [`HttpFetch`](crate::capability::HttpFetch)
//! ([`check_address`](crate::capability::check_address)), and holds the provider's
//! key: neither the key nor the endpoint is ever chosen by the model.

use std::time::Duration;

use ai_core::CancellationToken;
use futures::future::BoxFuture;

use crate::capability::BlockReason;

/// One search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// What to search for.
    pub query: String,
    /// How many results to ask the provider for (the caller keeps at most this many).
    pub count: usize,
    /// Most bytes of the provider's response read; a longer response is an error.
    pub max_bytes: usize,
    /// Time limit for the whole search.
    pub timeout: Duration,
}

/// One result as the provider gave it (unbounded text; the tool bounds it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchHit {
    /// The page's title.
    pub title: String,
    /// The page's URL.
    pub url: String,
    /// The provider's excerpt of the page.
    pub snippet: String,
}

/// Why a search failed. Messages never hold the provider's key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The configured endpoint is malformed or not http/https.
    #[error("the search endpoint is not usable: {0}")]
    InvalidEndpoint(&'static str),
    /// The endpoint's host resolves to an address that policy refuses.
    #[error(
        "the search endpoint is refused: it resolves to a {} address, which is not allowed unless allowlisted",
        .0.as_str()
    )]
    Blocked(BlockReason),
    /// The endpoint's host name did not resolve.
    #[error("the search endpoint's host name could not be resolved")]
    Unresolved,
    /// The provider needs a key, and the environment variable that should hold it
    /// is not set (or empty).
    #[error(
        "the search provider needs an API key, and the environment variable `{env}` that should hold it is not set"
    )]
    MissingKey {
        /// The variable's name.
        env: String,
    },
    /// The key cannot be sent: it holds characters an HTTP header may not.
    #[error(
        "the API key in the environment variable `{env}` holds characters an HTTP header may not"
    )]
    InvalidKey {
        /// The variable's name.
        env: String,
    },
    /// The provider answered with an HTTP error status.
    #[error("the search provider answered HTTP {status}: {excerpt}")]
    Status {
        /// The status code.
        status: u16,
        /// The start of the response body, as one line of text.
        excerpt: String,
    },
    /// The provider answered with a redirect, which is not followed (the key would
    /// go along to wherever it points).
    #[error(
        "the search provider answered with a redirect (HTTP {status}), which is not followed; configure the endpoint's final URL"
    )]
    Redirected {
        /// The status code.
        status: u16,
    },
    /// The provider's answer is not the JSON its protocol promises.
    #[error("the search provider's answer could not be read: {0}")]
    InvalidJson(String),
    /// The provider's answer is larger than the cap.
    #[error("the search provider's answer is larger than {limit} bytes")]
    TooLarge {
        /// The cap, in bytes.
        limit: usize,
    },
    /// The search outlived its timeout.
    #[error("the search timed out")]
    Timeout,
    /// The call was cancelled.
    #[error("the search was cancelled")]
    Cancelled,
    /// Any other network failure (no URL in the message).
    #[error("network failure: {0}")]
    Network(String),
}

/// Searches the web through one configured provider. Object-safe.
pub trait SearchEngine: Send + Sync {
    /// Runs one search; the results in the provider's order.
    fn search(
        &self,
        request: SearchRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Vec<SearchHit>, SearchError>>;
}
