//! Who may call the endpoint: `Host` and `Origin` checks (DNS-rebinding protection)
//! and bearer tokens, the per-process [`ServerSecret`] of `agent serve` among them.
//!
//! Loopback is not authentication: every local account, every container sharing the
//! network namespace and every browser extension can reach `127.0.0.1`. So an
//! [`Access`] refuses every API request (`401`) until it holds at least one token;
//! running without one is the explicit [`Access::without_auth`], honoured only
//! together with loopback host checks.
//!
//! The page (`/` and its assets) is served on the host checks alone: it holds
//! nothing secret. It finds the token in its address's fragment (`/#token=...`,
//! never sent to a server), keeps it in this origin's storage, removes it from the
//! address bar and sends it as `Authorization: Bearer` with every API call.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::server::refuse;

/// Largest request body by default.
///
/// Room for a request's attached files at their default limits (base64 adds a
/// third) besides its history. Bodies are read only after the token check.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Most responses streaming at once by default.
pub const DEFAULT_MAX_STREAMS: usize = 256;
/// The share of [`Access::max_streams`] one client address may hold, in percent, by
/// default.
pub const DEFAULT_CLIENT_STREAM_SHARE: u8 = 50;
/// How long a request body may take to arrive by default.
pub const DEFAULT_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// [`Access::heartbeat`] by default.
pub const DEFAULT_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a stream waits for its client to read by default
/// ([`Access::write_timeout`]): 10 s.
pub const DEFAULT_WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a run outlives its client by default ([`Access::detach_grace`]):
/// long enough for a page to reload and reattach.
pub const DEFAULT_DETACH_GRACE: std::time::Duration = std::time::Duration::from_secs(15);

/// Who may call the endpoint, and the per-request limits.
#[derive(Debug, Clone)]
pub struct Access {
    /// `Host` values accepted (and `Origin`s, as `http://<host>`); empty: any. On
    /// loopback these are `127.0.0.1:<port>`, `localhost:<port>` and `[::1]:<port>`
    /// (DNS-rebinding protection).
    pub hosts: Vec<String>,
    /// SHA-256 of the accepted bearer tokens. With none, every API request is
    /// refused, unless [`Access::no_auth`] is set on a loopback access.
    pub tokens_sha256: Vec<[u8; 32]>,
    /// No credential needed. Honoured only when [`Access::hosts`] is not empty (a
    /// loopback access): every local user and process may then run and approve
    /// tool calls as the user who serves.
    pub no_auth: bool,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// How long a request body may take to arrive (a client that drips its body
    /// holds a connection, not the process).
    pub body_timeout: std::time::Duration,
    /// Most responses streaming at once (more get 503).
    pub max_streams: usize,
    /// The share of [`Access::max_streams`], in percent (1-100), that one client
    /// address (an IPv6 client: its /64) may hold at once; more get 503. Needs the
    /// peer address, which [`crate::serve`] provides (as axum's
    /// `ConnectInfo<SocketAddr>`); without it only the overall cap applies.
    pub client_stream_share: u8,
    /// How often an idle UI message stream gets an SSE comment. The comment is
    /// ignored by parsers; writing it is how a client that went away is noticed
    /// (and its run cancelled) while the run is busy (a long tool call, a slow
    /// model). The data stream has no comment syntax and gets none.
    pub heartbeat: std::time::Duration,
    /// Origins of pages elsewhere (a dev server, an app) that may call the API
    /// from a browser: exact `scheme://host[:port]`, compared case-insensitively.
    /// Their preflight is answered and their responses carry CORS headers; they
    /// still need a token. Empty by default: only the server's own page.
    pub allowed_origins: Vec<String>,
    /// Tokens of named accounts (SHA-256, account name): a request with one is
    /// that account, whose stored chats no other account can read, list, resume
    /// or delete. [`Access::tokens_sha256`] (and the per-process secret) are the
    /// [`Account::LOCAL`] account.
    pub accounts: Vec<([u8; 32], String)>,
    /// How long a run goes on after its client went away (a reload, a dropped
    /// connection), for the client to reattach with `GET /api/chat/{id}/stream`
    /// (the AI SDK's `resume: true`); then, with no client reading, it is
    /// cancelled. Zero cancels at once. `POST /api/chat/{id}/stop` cancels a
    /// run whatever this says.
    pub detach_grace: std::time::Duration,
    /// How long a stream waits for its client to take a frame: a client that
    /// reads nothing for this long is treated as gone (its stream slot freed,
    /// the run going on for [`Access::detach_grace`], as for a disconnect).
    pub write_timeout: std::time::Duration,
}

/// The account a request acts for, set by the API layer from its token (a
/// request extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account(pub String);

impl Account {
    /// The account of the server's own tokens.
    pub const LOCAL: &str = "local";

    /// The name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl Access {
    /// Loopback on `port`: the loopback host names. Add a token
    /// ([`Access::with_token`]) before serving: without one every API request is
    /// refused.
    pub fn loopback(port: u16) -> Self {
        Self {
            hosts: ["127.0.0.1", "localhost", "[::1]"]
                .iter()
                .map(|h| format!("{h}:{port}"))
                .collect(),
            ..Self::tokens(Vec::new())
        }
    }

    /// Any host, with these tokens' hashes required.
    pub fn tokens(tokens_sha256: Vec<[u8; 32]>) -> Self {
        Self {
            hosts: Vec::new(),
            tokens_sha256,
            no_auth: false,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_streams: DEFAULT_MAX_STREAMS,
            client_stream_share: DEFAULT_CLIENT_STREAM_SHARE,
            heartbeat: DEFAULT_HEARTBEAT,
            allowed_origins: Vec::new(),
            accounts: Vec::new(),
            detach_grace: DEFAULT_DETACH_GRACE,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
        }
    }

    /// Also accepts `token` as a bearer token (only its SHA-256 is kept).
    pub fn with_token(mut self, token: &str) -> Self {
        self.tokens_sha256
            .push(Sha256::digest(token.as_bytes()).into());
        self
    }

    /// Also accepts the token whose SHA-256 is `token_sha256`, as `account`.
    pub fn with_account(mut self, account: impl Into<String>, token_sha256: [u8; 32]) -> Self {
        self.accounts.push((token_sha256, account.into()));
        self
    }

    /// Needs no credential (see [`Access::no_auth`]); has no effect on an access
    /// without host checks.
    pub fn without_auth(mut self) -> Self {
        self.no_auth = true;
        self
    }

    /// Most streams one client address may hold: [`Access::client_stream_share`]
    /// percent of [`Access::max_streams`], at least one.
    pub fn max_streams_per_client(&self) -> usize {
        let share = usize::from(self.client_stream_share.clamp(1, 100));
        (self.max_streams.max(1) * share / 100).max(1)
    }

    /// The `Host` and `Origin` checks (DNS rebinding).
    pub(crate) fn check_host(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if self.hosts.is_empty() {
            return Ok(());
        }
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            let ok = self.hosts.iter().any(|h| {
                origin
                    .strip_prefix("http://")
                    .is_some_and(|o| o.eq_ignore_ascii_case(h))
            });
            if !ok && self.allowed_origin(headers).is_none() {
                return Err(Refusal::Origin);
            }
        }
        Ok(())
    }

    /// The request's `Origin` when it is one of [`Access::allowed_origins`].
    pub(crate) fn allowed_origin<'h>(&self, headers: &'h HeaderMap) -> Option<&'h HeaderValue> {
        let value = headers.get(header::ORIGIN)?;
        let origin = value.to_str().ok()?;
        self.allowed_origins
            .iter()
            .any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(origin))
            .then_some(value)
    }

    /// The bearer token (see the module docs).
    pub(crate) fn check_token(&self, headers: &HeaderMap) -> Result<Account, Refusal> {
        if self.no_auth && !self.hosts.is_empty() {
            return Ok(Account(Account::LOCAL.into()));
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(bearer_token);
        let Some(token) = token else {
            return Err(Refusal::Token);
        };
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Every configured hash is compared, in constant time each.
        let mut found = subtle::Choice::from(0);
        for expected in &self.tokens_sha256 {
            found |= digest.ct_eq(expected);
        }
        let mut named = None;
        for (expected, account) in &self.accounts {
            if bool::from(digest.ct_eq(expected)) {
                named = Some(account);
            }
        }
        match named {
            Some(account) => Ok(Account(account.clone())),
            None if bool::from(found) => Ok(Account(Account::LOCAL.into())),
            None => Err(Refusal::Token),
        }
    }
}

/// What a request without a valid bearer token is told.
const TOKEN_REQUIRED: &str = "a valid bearer token is required (open the address `agent serve` printed: it carries the token)";

/// Why an [`Authenticate`] hook refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No valid credential: `401` with `WWW-Authenticate: Bearer`.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// A valid credential that may not use this endpoint: `403`.
    #[error("forbidden: {0}")]
    Forbidden(String),
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        match self {
            Self::Unauthorized(message) => {
                let mut response = refuse(StatusCode::UNAUTHORIZED, "unauthorized", &message);
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
            Self::Forbidden(message) => refuse(StatusCode::FORBIDDEN, "forbidden", &message),
        }
    }
}

/// Maps a request (its method, URI and headers; the body is not read yet) to
/// the account it acts for, or refuses it: the authentication of every `/api`
/// route of [`crate::ChatService::router_with_auth`].
///
/// [`Access`] is one implementation (its bearer tokens); a service with its own
/// sessions or API keys implements this, or wraps a closure with [`auth_fn`].
/// The account scopes everything stored: one account never reaches another's
/// chats.
pub trait Authenticate: Send + Sync + 'static {
    /// The account `parts` acts for, or why it is refused.
    fn authenticate<'a>(
        &'a self,
        parts: &'a axum::http::request::Parts,
    ) -> futures::future::BoxFuture<'a, Result<Account, AuthError>>;
}

impl Authenticate for Access {
    fn authenticate<'a>(
        &'a self,
        parts: &'a axum::http::request::Parts,
    ) -> futures::future::BoxFuture<'a, Result<Account, AuthError>> {
        let checked = self
            .check_token(&parts.headers)
            .map_err(|_| AuthError::Unauthorized(TOKEN_REQUIRED.into()));
        Box::pin(std::future::ready(checked))
    }
}

/// An [`Authenticate`] from a closure over the request's parts.
///
/// ```
/// use agent_server::access::{Account, AuthError, auth_fn};
/// let auth = auth_fn(|parts| match parts.headers.get("x-api-key") {
///     Some(key) if key == "k-alice" => Ok(Account("alice".into())),
///     _ => Err(AuthError::Unauthorized("an API key is required".into())),
/// });
/// # drop(auth);
/// ```
pub fn auth_fn<F>(check: F) -> AuthFn<F>
where
    F: Fn(&axum::http::request::Parts) -> Result<Account, AuthError> + Send + Sync + 'static,
{
    AuthFn(check)
}

/// A closure as an [`Authenticate`] hook (see [`auth_fn`]).
#[derive(Clone)]
pub struct AuthFn<F>(F);

impl<F> std::fmt::Debug for AuthFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthFn(..)")
    }
}

impl<F> Authenticate for AuthFn<F>
where
    F: Fn(&axum::http::request::Parts) -> Result<Account, AuthError> + Send + Sync + 'static,
{
    fn authenticate<'a>(
        &'a self,
        parts: &'a axum::http::request::Parts,
    ) -> futures::future::BoxFuture<'a, Result<Account, AuthError>> {
        Box::pin(std::future::ready((self.0)(parts)))
    }
}

/// The checks of the `/api` routes: the host checks of an [`Access`], then
/// its hook (the access's own tokens when none was given).
pub(crate) struct ApiGuard {
    pub(crate) access: std::sync::Arc<Access>,
    pub(crate) auth: std::sync::Arc<dyn Authenticate>,
}

/// Why a request was refused before it reached a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The `Host` header names no host this server answers to.
    Host,
    /// The `Origin` header names another origin.
    Origin,
    /// No valid bearer token.
    Token,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Self::Host => refuse(
                StatusCode::FORBIDDEN,
                "host_not_allowed",
                "the Host header is not one this server answers to",
            ),
            Self::Origin => refuse(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                "requests from this origin are not accepted",
            ),
            Self::Token => {
                let mut response = refuse(StatusCode::UNAUTHORIZED, "unauthorized", TOKEN_REQUIRED);
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is matched
/// case-insensitively (RFC 9110, section 11.1); spaces around the token are
/// ignored; an empty token is none.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The checks of the page and its assets: the host only (see the module docs).
pub(crate) async fn page_layer(
    State(access): State<std::sync::Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    match access.check_host(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

/// The headers a browser may send cross-origin, and those it may read back.
const CORS_ALLOW_HEADERS: &str = "authorization, content-type";
const CORS_EXPOSE_HEADERS: &str = "x-vercel-ai-ui-message-stream, x-vercel-ai-data-stream";

/// CORS for [`Access::allowed_origins`], outside every other `/api` check: a
/// preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed
/// origin is answered `204` (from any other, `403`); every response to an allowed
/// origin, refusals included, carries `Access-Control-Allow-Origin` so the page
/// can read it. The host and token checks are unchanged.
pub(crate) async fn cors_layer(
    State(access): State<std::sync::Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    let allowed = access.allowed_origin(request.headers()).cloned();
    let preflight = request.method() == axum::http::Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let Some(origin) = allowed else {
            return Refusal::Origin.into_response();
        };
        if let Err(refused) = access.check_host(request.headers()) {
            return refused.into_response();
        }
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        crate::page::insert_static(
            headers,
            &[
                (header::ACCESS_CONTROL_ALLOW_METHODS, "GET, POST"),
                (header::ACCESS_CONTROL_ALLOW_HEADERS, CORS_ALLOW_HEADERS),
                (header::ACCESS_CONTROL_MAX_AGE, "600"),
                (header::VARY, "Origin"),
            ],
        );
        return response;
    }
    let mut response = next.run(request).await;
    if let Some(origin) = allowed {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(CORS_EXPOSE_HEADERS),
        );
        headers.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    response
}

/// The checks of every `/api` route: the host, then the hook.
pub(crate) async fn api_layer(
    State(guard): State<std::sync::Arc<ApiGuard>>,
    request: Request,
    next: Next,
) -> Response {
    if let Err(refused) = guard.access.check_host(request.headers()) {
        return refused.into_response();
    }
    let (parts, body) = request.into_parts();
    let account = match guard.auth.authenticate(&parts).await {
        Ok(account) => account,
        Err(refused) => return refused.into_response(),
    };
    let request = Request::from_parts(parts, body);
    // The connection now counts against this account, not among the
    // unauthenticated ones (see `crate::listener`).
    let promoted = request
        .extensions()
        .get::<crate::listener::ConnectionTicket>()
        .is_none_or(|ticket| ticket.promote(account.name()));
    if !promoted {
        return crate::server::refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "this account holds too many open connections; try again",
        );
    }
    let mut request = request;
    request.extensions_mut().insert(account);
    next.run(request).await
}

/// A random secret for one server process: the bearer token of its page and API.
/// Its `Debug` form hides it.
#[derive(Clone)]
pub struct ServerSecret(String);

impl std::fmt::Debug for ServerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerSecret(..)")
    }
}

impl ServerSecret {
    /// 256 random bits from the operating system, as 64 lower-case hex digits.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Self(hex::encode(bytes))
    }

    /// The token.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The page's address carrying the token in its fragment:
    /// `http://<authority>/#token=<secret>`.
    pub fn page_url(&self, authority: &str) -> String {
        format!("http://{authority}/#token={}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_scheme_is_case_insensitive_and_the_token_is_required() {
        for (value, token) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("BEARER  abc ", Some("abc")),
            ("  Bearer abc", Some("abc")),
            ("Bearer", None),
            ("Bearer ", None),
            ("Basic abc", None),
            ("Bearerabc", None),
            ("", None),
        ] {
            assert_eq!(bearer_token(value), token, "{value:?}");
        }
    }

    #[test]
    fn no_token_refuses_everything_and_no_auth_needs_host_checks() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:1"));
        assert!(Access::loopback(1).check_token(&headers).is_err());
        assert!(
            Access::loopback(1)
                .without_auth()
                .check_token(&headers)
                .is_ok()
        );
        assert!(
            Access::tokens(Vec::new())
                .without_auth()
                .check_token(&headers)
                .is_err()
        );
        let access = Access::loopback(1).with_token("s3cret");
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer s3cret"),
        );
        assert!(access.check_token(&headers).is_ok());
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cre"),
        );
        assert!(access.check_token(&headers).is_err());
    }

    #[test]
    fn stream_share_is_a_percentage_of_the_cap() {
        let mut access = Access::loopback(1);
        assert_eq!(access.max_streams_per_client(), 128);
        access.client_stream_share = 100;
        assert_eq!(access.max_streams_per_client(), 256);
        access.client_stream_share = 0;
        access.max_streams = 10;
        assert_eq!(access.max_streams_per_client(), 1);
    }

    #[test]
    fn secrets_are_random_hex_and_hidden_from_debug() {
        let (a, b) = (ServerSecret::generate(), ServerSecret::generate());
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.expose().len(), 64);
        assert!(a.expose().bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(!format!("{a:?}").contains(a.expose()));
        assert_eq!(
            a.page_url("127.0.0.1:8787"),
            format!("http://127.0.0.1:8787/#token={}", a.expose())
        );
    }
}
