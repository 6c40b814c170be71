//! `GuardedHttpFetch`: the real [`HttpFetch`], with SSRF defenses.
//!
//! For each hop: the URL is parsed the WHATWG way (so `http://2130706433/` and
//! `http://0177.0.0.1/` become `127.0.0.1`), only `http`/`https` without embedded
//! credentials pass, `localhost` names are refused before resolution, the host is
//! resolved once and every address is checked with
//! [`check_address`](ai_tools::capability::check_address); the request then goes to
//! the checked address (`ClientBuilder::resolve`: no second lookup, so DNS rebinding
//! cannot swap the address). Redirects are not followed by the client: each
//! `Location` is re-checked the same way, at most [`MAX_REDIRECTS`] times. Proxies
//! from the environment are ignored. Bodies are capped; errors never echo the URL.
//!
//! `web_search`'s adapter ([`crate::GuardedWebSearch`]) connects through the same
//! check and pinned client ([`GuardedHttpFetch::pinned_client`]) and reads through
//! the same capped reader.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use ai_core::CancellationToken;
use ai_tools::capability::{
    BlockReason, FetchError, FetchRequest, FetchResponse, HttpFetch, NetAllowlist, check_address,
    is_localhost_name,
};
use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, LOCATION};
use reqwest::redirect::Policy;
use url::Host;

/// Most redirects followed.
pub const MAX_REDIRECTS: u32 = 5;

/// Fetches http(s) URLs, refusing non-public addresses unless allowlisted.
#[derive(Debug, Clone, Default)]
pub struct GuardedHttpFetch {
    allowlist: NetAllowlist,
}

impl GuardedHttpFetch {
    /// A fetcher that lets through refused addresses only when `allowlist` names them.
    pub fn new(allowlist: NetAllowlist) -> Self {
        Self { allowlist }
    }

    /// Checks one URL and returns the address to connect to, with the domain to pin
    /// it to (none for an IP literal).
    pub async fn check_url(&self, url: &Url) -> Result<(SocketAddr, Option<String>), FetchError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(FetchError::InvalidUrl(
                "only http and https URLs are allowed",
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(FetchError::InvalidUrl(
                "credentials in URLs are not allowed",
            ));
        }
        let port = url
            .port_or_known_default()
            .ok_or(FetchError::InvalidUrl("no port"))?;
        let host_text = url.host_str().unwrap_or_default().to_owned();
        let blocked = |reason| {
            tracing::warn!(
                reason = BlockReason::as_str(reason),
                "outbound HTTP: destination refused"
            );
            FetchError::Blocked(reason)
        };
        match url.host() {
            Some(Host::Ipv4(ip)) => {
                let addr = SocketAddr::new(IpAddr::V4(ip), port);
                check_address(&host_text, addr, &self.allowlist).map_err(blocked)?;
                Ok((addr, None))
            }
            Some(Host::Ipv6(ip)) => {
                let addr = SocketAddr::new(IpAddr::V6(ip), port);
                check_address(&host_text, addr, &self.allowlist).map_err(blocked)?;
                Ok((addr, None))
            }
            Some(Host::Domain(domain)) => {
                if is_localhost_name(domain) {
                    let loopback = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
                    if !self.allowlist.allows(domain, loopback) {
                        return Err(blocked(BlockReason::Loopback));
                    }
                }
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host((domain, port))
                    .await
                    .map_err(|_| FetchError::Unresolved)?
                    .collect();
                let first = *addrs.first().ok_or(FetchError::Unresolved)?;
                for addr in &addrs {
                    check_address(domain, *addr, &self.allowlist).map_err(blocked)?;
                }
                Ok((first, Some(domain.to_owned())))
            }
            None => Err(FetchError::InvalidUrl("the URL has no host")),
        }
    }

    /// Checks `url` ([`GuardedHttpFetch::check_url`]) and builds a client pinned to
    /// the checked address: no second lookup, no redirects followed, no proxy.
    pub(crate) async fn pinned_client(
        &self,
        url: &Url,
        user_agent: &'static str,
        connect_timeout: Duration,
    ) -> Result<reqwest::Client, FetchError> {
        let (addr, domain) = self.check_url(url).await?;
        let tls = client_tls::client_config().map_err(|e| FetchError::Network(e.to_string()))?;
        let mut builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .redirect(Policy::none())
            .no_proxy()
            .user_agent(user_agent)
            .connect_timeout(connect_timeout);
        if let Some(domain) = &domain {
            builder = builder.resolve(domain, addr);
        }
        builder
            .build()
            .map_err(|_| FetchError::Network("could not build the HTTP client".to_owned()))
    }

    async fn fetch_inner(&self, request: &FetchRequest) -> Result<FetchResponse, FetchError> {
        let mut url =
            Url::parse(&request.url).map_err(|_| FetchError::InvalidUrl("malformed URL"))?;
        for redirects in 0..=MAX_REDIRECTS {
            let client = self
                .pinned_client(&url, "agent-web-fetch/0.1", request.timeout)
                .await?;
            let response = client.get(url.clone()).send().await.map_err(network)?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                let location = location
                    .to_str()
                    .map_err(|_| FetchError::InvalidUrl("redirect location is not text"))?;
                url = url
                    .join(location)
                    .map_err(|_| FetchError::InvalidUrl("malformed redirect location"))?;
                if redirects == MAX_REDIRECTS {
                    return Err(FetchError::TooManyRedirects);
                }
                continue;
            }
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let final_url = response.url().to_string();
            let (body, truncated) = read_capped(response, request.max_bytes).await?;
            return Ok(FetchResponse {
                final_url,
                status: status.as_u16(),
                content_type,
                body,
                truncated,
                redirects,
            });
        }
        Err(FetchError::TooManyRedirects)
    }
}

/// Reads at most `max_bytes` of `response`'s body; whether more was left unread.
pub(crate) async fn read_capped(
    response: reqwest::Response,
    max_bytes: usize,
) -> Result<(Vec<u8>, bool), FetchError> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(network)?;
        let room = max_bytes.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// Describes a client error without its URL.
pub(crate) fn network(error: reqwest::Error) -> FetchError {
    if error.is_timeout() {
        FetchError::Timeout
    } else if error.is_connect() {
        FetchError::Network("could not connect".to_owned())
    } else if error.is_body() || error.is_decode() {
        FetchError::Network("the response body could not be read".to_owned())
    } else {
        FetchError::Network("the request failed".to_owned())
    }
}

impl HttpFetch for GuardedHttpFetch {
    fn fetch(
        &self,
        request: FetchRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<FetchResponse, FetchError>> {
        Box::pin(async move {
            let timeout = request.timeout.max(Duration::from_millis(1));
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(FetchError::Cancelled),
                outcome = tokio::time::timeout(timeout, self.fetch_inner(&request)) => {
                    outcome.unwrap_or(Err(FetchError::Timeout))
                }
            }
        })
    }
}
