//! The chat page: a single-page UI built from `web/` (vite, TypeScript, the AI SDK's
//! `useChat`) into `web-dist/`, embedded in the binary. No CDN and no network at run
//! time: the page talks only to this server's `/api/chat` and `/api/tools`.
//!
//! The bundle is committed and rebuilt reproducibly with `cargo xtask web`; CI
//! rebuilds it and fails when the committed one is stale.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `index.html`.
pub const INDEX_HTML: &[u8] = include_bytes!("../web-dist/index.html");
/// The script.
pub const APP_JS: &[u8] = include_bytes!("../web-dist/assets/app.js");
/// The styles.
pub const APP_CSS: &[u8] = include_bytes!("../web-dist/assets/app.css");

/// The page's content security policy: everything from this origin only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// A response with one embedded file.
pub(crate) fn file(body: &'static [u8], content_type: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Fixed asset names: revalidate instead of caching a stale build.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
