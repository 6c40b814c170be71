//! Capabilities and bound tools that several test files share.

use std::sync::Arc;

use ai_core::{CancellationToken, tool::RegisteredTool};
use ai_tools::builtin::{MemoryWrite, MemoryWriteCapabilities, WebFetch};
use ai_tools::capability::{
    BlockReason, FetchError, FetchRequest, FetchResponse, FixedClock, HttpFetch, MemoryStore,
};
use futures::future::BoxFuture;

/// A fetcher that answers every URL with the HTML page `page`, but for the
/// URLs in `blocked`, which it refuses as private addresses.
struct PageFetch {
    page: String,
    blocked: &'static [&'static str],
}

impl HttpFetch for PageFetch {
    fn fetch(
        &self,
        request: FetchRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<FetchResponse, FetchError>> {
        let blocked = self.blocked.contains(&request.url.as_str());
        let page = self.page.clone().into_bytes();
        Box::pin(async move {
            if blocked {
                return Err(FetchError::Blocked(BlockReason::Private));
            }
            Ok(FetchResponse {
                final_url: request.url,
                status: 200,
                content_type: Some("text/html".into()),
                body: page,
                truncated: false,
                redirects: 0,
            })
        })
    }
}

/// `web_fetch` over a fetcher that serves the HTML page `page` for every URL
/// but those in `blocked`, which it refuses as private addresses.
pub(crate) fn web_fetch(
    page: impl Into<String>,
    blocked: &'static [&'static str],
) -> RegisteredTool {
    let page = page.into();
    let fetch: Arc<dyn HttpFetch> = Arc::new(PageFetch { page, blocked });
    ai_tools::bind(WebFetch::default(), fetch).unwrap()
}

/// `memory_write` over `store`, its clock fixed at `second` (Unix time).
pub(crate) fn memory_write(store: &Arc<dyn MemoryStore>, second: i64) -> RegisteredTool {
    let clock = Arc::new(FixedClock(jiff::Timestamp::from_second(second).unwrap()));
    let store = Arc::clone(store);
    ai_tools::bind(MemoryWrite, MemoryWriteCapabilities { store, clock }).unwrap()
}
