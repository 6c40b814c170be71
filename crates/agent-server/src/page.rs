//! The chat page: a single-page UI built from `web/` (vite, TypeScript, the AI SDK's
//! `useChat`) into `web-dist/`, embedded in the binary. No CDN and no network at run
//! time: the page talks only to this server's `/api/...` endpoints.
//!
//! The bundle is committed and rebuilt reproducibly with `cargo xtask web`; CI
//! rebuilds it and fails when the committed one is stale.

use std::io::Write;
use std::sync::OnceLock;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `index.html`.
pub const INDEX_HTML: &[u8] = include_bytes!("../web-dist/index.html");
/// The script.
pub const APP_JS: &[u8] = include_bytes!("../web-dist/assets/app.js");
/// The styles.
pub const APP_CSS: &[u8] = include_bytes!("../web-dist/assets/app.css");
/// The code highlighter, which the script loads when an answer first shows code.
pub const HIGHLIGHT_JS: &[u8] = include_bytes!("../web-dist/assets/highlight.js");

/// The page's content security policy: everything from this origin only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Which embedded file.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Asset {
    /// `index.html`.
    Index,
    /// `assets/app.js`.
    Script,
    /// `assets/app.css`.
    Styles,
    /// `assets/highlight.js`.
    Highlight,
}

impl Asset {
    fn body(self) -> &'static [u8] {
        match self {
            Self::Index => INDEX_HTML,
            Self::Script => APP_JS,
            Self::Styles => APP_CSS,
            Self::Highlight => HIGHLIGHT_JS,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::Index => "text/html; charset=utf-8",
            Self::Script | Self::Highlight => "text/javascript; charset=utf-8",
            Self::Styles => "text/css; charset=utf-8",
        }
    }

    /// The gzip form, compressed once per process on first use (the script is
    /// 625 KB raw, 183 KB gzipped).
    fn gzipped(self) -> Option<&'static [u8]> {
        static CACHE: [OnceLock<Option<Vec<u8>>>; 4] = [
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
        ];
        let slot = &CACHE[self as usize];
        slot.get_or_init(|| {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(self.body()).ok()?;
            encoder.finish().ok()
        })
        .as_deref()
    }
}

/// Whether the client accepts gzip (`Accept-Encoding` names it without `q=0`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            parts
                .next()
                .is_some_and(|name| name.eq_ignore_ascii_case("gzip"))
                && !parts.any(|p| p.replace(' ', "") == "q=0")
        })
}

/// A response with one embedded file, gzipped when the client accepts it.
pub(crate) fn file(asset: Asset, request: &HeaderMap) -> Response {
    let gzip = accepts_gzip(request).then(|| asset.gzipped()).flatten();
    let mut response = (StatusCode::OK, gzip.unwrap_or(asset.body())).into_response();
    let headers = response.headers_mut();
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if gzip.is_some() {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    insert_static(
        headers,
        &[
            (header::CONTENT_TYPE, asset.content_type()),
            // Fixed asset names: revalidate instead of caching a stale build.
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
    );
    response
}

/// Sets each of the `fixed` headers, in order, replacing any value it had.
pub(crate) fn insert_static(headers: &mut HeaderMap, fixed: &[(HeaderName, &'static str)]) {
    for (name, value) in fixed {
        headers.insert(name.clone(), HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(accept).unwrap(),
        );
        h
    }

    #[test]
    fn gzip_only_when_accepted() {
        assert!(accepts_gzip(&headers("gzip, deflate, br")));
        assert!(accepts_gzip(&headers("br;q=1.0, GZIP;q=0.5")));
        assert!(!accepts_gzip(&headers("gzip;q=0, br")));
        assert!(!accepts_gzip(&headers("identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn the_gzipped_script_inflates_to_the_embedded_one() {
        use std::io::Read;
        let gz = Asset::Script.gzipped().unwrap();
        assert!(gz.len() < APP_JS.len() / 2);
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, APP_JS);
        let response = file(Asset::Script, &headers("gzip"));
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[header::VARY], "accept-encoding");
        let plain = file(Asset::Index, &HeaderMap::new());
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
    }
}
