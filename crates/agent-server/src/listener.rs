//! Serving a router with limits that hold before a request is read: a cap on open
//! connections overall and per client address, and a header-read timeout.
//!
//! `axum::serve` has neither, so one client could hold every file descriptor of the
//! process with half-open connections (the model connection of a live chat then
//! fails) or keep a connection by dripping one header byte at a time. Here:
//!
//! - a connection over either cap is answered `503` and closed at once;
//! - hyper's header-read timeout closes a connection that has not sent a complete
//!   request head within [`ConnectionLimits::header_read_timeout`] of opening or of
//!   its previous response ending, so it also bounds idle keep-alive connections;
//! - the overall cap is lowered to what the process's file-descriptor limit leaves
//!   room for (with [`FD_RESERVE`] kept for models, tools and MCP servers);
//! - HTTP/1.1 only (browsers speak it to `http://` addresses; no h2c).
//!
//! The peer address reaches handlers as axum's `ConnectInfo<SocketAddr>` (the chat
//! endpoint's per-client stream share counts by it).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tower_service::Service;

/// File descriptors kept free of connections for everything else the process does.
pub const FD_RESERVE: usize = 256;

/// Limits of [`serve`], enforced before a request is read.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Most connections open at once (lowered to the descriptor limit, see the
    /// module docs). More are answered `503` and closed.
    pub max_connections: usize,
    /// Most connections open at once from one client address (an IPv6 client: its
    /// /64). More are answered `503` and closed.
    pub max_connections_per_client: usize,
    /// How long a client may take to send a complete request head, counted from
    /// when the connection opened or its previous response ended.
    pub header_read_timeout: Duration,
}

impl Default for ConnectionLimits {
    /// 4,096 connections, 1,024 per client, 10 s to send a request head.
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_connections_per_client: 1024,
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

/// Whom a slot counts against: an IPv4 address, or an IPv6 /64 (one client can
/// pick any address of its own /64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey(u128);

impl ClientKey {
    pub(crate) fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(u128::from(u32::from(v4))),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(u128::from(u32::from(v4))),
                None => Self(u128::from(v6) >> 64 | 1 << 127),
            },
        }
    }
}

/// Counted slots, overall and per client; a slot is held as long as its guard.
#[derive(Debug)]
pub(crate) struct ClientSlots {
    max: usize,
    per_client: usize,
    counts: Mutex<(usize, HashMap<ClientKey, usize>)>,
}

/// One held slot; dropping it frees it.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<ClientSlots>,
    client: Option<ClientKey>,
}

impl ClientSlots {
    pub(crate) fn new(max: usize, per_client: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            per_client: per_client.max(1),
            counts: Mutex::new((0, HashMap::new())),
        })
    }

    /// A slot for `client` (`None`: unknown, counted overall only), unless a cap is
    /// reached.
    pub(crate) fn try_acquire(self: &Arc<Self>, client: Option<ClientKey>) -> Option<Slot> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let (total, per) = &mut *counts;
        if *total >= self.max {
            return None;
        }
        if let Some(key) = client {
            let held = per.entry(key).or_insert(0);
            if *held >= self.per_client {
                return None;
            }
            *held += 1;
        }
        *total += 1;
        Some(Slot {
            slots: Arc::clone(self),
            client,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self
            .slots
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (total, per) = &mut *counts;
        *total = total.saturating_sub(1);
        if let Some(key) = self.client
            && let Some(held) = per.get_mut(&key)
        {
            *held -= 1;
            if *held == 0 {
                per.remove(&key);
            }
        }
    }
}

/// What a connection over a cap gets before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 72\r\nconnection: close\r\n\r\n{\"error\":\"busy\",\"message\":\"too many open connections; try again later.\"}";

/// The soft limit on open file descriptors, when known.
fn descriptor_limit() -> Option<usize> {
    #[cfg(unix)]
    {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        limit.current.and_then(|n| usize::try_from(n).ok())
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// [`ConnectionLimits::max_connections`], lowered to leave [`FD_RESERVE`]
/// descriptors free.
fn effective_max_connections(limits: &ConnectionLimits) -> usize {
    match descriptor_limit() {
        Some(fds) if fds.saturating_sub(FD_RESERVE) < limits.max_connections => {
            let lowered = fds.saturating_sub(FD_RESERVE).max(16);
            tracing::warn!(
                configured = limits.max_connections,
                lowered,
                descriptor_limit = fds,
                "the connection cap is above what the descriptor limit leaves room for; lowered"
            );
            lowered
        }
        _ => limits.max_connections,
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` resolves, then
/// stops accepting and waits (at most `drain`) for open connections to end.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> std::io::Result<()> {
    let slots = ClientSlots::new(
        effective_max_connections(&limits),
        limits.max_connections_per_client,
    );
    let tasks = tokio_util::task::TaskTracker::new();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors or a connection reset before accept: back
                    // off briefly instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = slots.try_acquire(Some(ClientKey::of(peer.ip()))) else {
            tracing::debug!(peer = %peer, "connection refused: over the connection cap");
            tasks.spawn(refuse_busy(stream));
            continue;
        };
        // Deltas are small writes: without TCP_NODELAY, Nagle's algorithm holds one
        // back while the previous is unacknowledged, adding tail latency to streams.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        tasks.spawn(connection(
            stream,
            peer,
            router.clone(),
            limits.header_read_timeout,
            stop.clone(),
            slot,
        ));
    }
    drop(listener);
    stop.cancel();
    tasks.close();
    if tokio::time::timeout(drain, tasks.wait()).await.is_err() {
        tracing::warn!("open connections did not end within the drain time; closing");
    }
    Ok(())
}

/// Answers `503` (best effort, never waiting on the client) and closes.
async fn refuse_busy(mut stream: tokio::net::TcpStream) {
    let _ = tokio::time::timeout(Duration::from_millis(100), stream.write_all(BUSY)).await;
}

/// Serves one connection until it closes, or until shutdown lets its open
/// responses finish.
async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    router: Router,
    header_read_timeout: Duration,
    stop: tokio_util::sync::CancellationToken,
    _slot: Slot,
) {
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut router = router.clone();
        // A `Router` is always ready.
        async move { router.call(request).await }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, peer = %peer, "connection ended with an error");
            }
        }
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_overall_and_per_client_and_free_on_drop() {
        let slots = ClientSlots::new(3, 2);
        let a = Some(ClientKey::of("10.0.0.1".parse().unwrap()));
        let b = Some(ClientKey::of("10.0.0.2".parse().unwrap()));
        let a1 = slots.try_acquire(a).unwrap();
        let _a2 = slots.try_acquire(a).unwrap();
        assert!(slots.try_acquire(a).is_none(), "per-client cap");
        let _b1 = slots.try_acquire(b).unwrap();
        assert!(slots.try_acquire(b).is_none(), "overall cap");
        drop(a1);
        assert!(slots.try_acquire(b).is_some());
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_mapped_ipv4_is_ipv4() {
        let key = |s: &str| ClientKey::of(s.parse().unwrap());
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:10.0.0.1"), key("10.0.0.1"));
        assert_ne!(key("10.0.0.1"), key("10.0.0.2"));
    }

    #[test]
    fn the_busy_answer_is_a_complete_response() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }
}
