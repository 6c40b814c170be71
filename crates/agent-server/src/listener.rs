//! Serving a router with limits that hold before a request is read: a cap on open
//! connections overall, per client address and per account, and timeouts.
//!
//! `axum::serve` has none of this, so one client could hold every file
//! descriptor of the process with half-open connections (the model connection
//! of a live chat then fails) or keep a connection by dripping one header byte
//! at a time. And on loopback every local account shares the same addresses
//! (any of 127.0.0.0/8), so a cap per address does not keep one local user from
//! crowding out another. Here:
//!
//! - A connection is unauthenticated until a request on it passes the token
//!   check ([`ConnectionTicket::promote`], called by the API layer): until then it
//!   counts in a small pool of its own ([`ConnectionLimits::max_unauthenticated`])
//!   and is closed when it has not authenticated within
//!   [`ConnectionLimits::unauthenticated_timeout`] (the page's assets load well
//!   within it). When that pool, or the overall cap, is full, a new connection
//!   makes room by closing the oldest unauthenticated one instead of being
//!   refused: idle connections nobody can use never lock out a client that sends
//!   its token at once.
//! - An authenticated connection counts against its account
//!   ([`ConnectionLimits::max_connections_per_client`]), whatever address it
//!   comes from: a token gets its own share, however many local users there are.
//! - A connection refused (the overall cap held by authenticated connections, or
//!   its account's share used up) is answered `503` and closed at once.
//! - hyper's header-read timeout closes a connection that has not sent a complete
//!   request head within [`ConnectionLimits::header_read_timeout`] of opening or of
//!   its previous response ending, so it also bounds idle keep-alive connections;
//! - the overall cap is lowered to what the process's file-descriptor limit leaves
//!   room for (with [`FD_RESERVE`] kept for models, tools and MCP servers);
//! - HTTP/1.1 only (browsers speak it to `http://` addresses; no h2c).
//!
//! The peer address reaches handlers as axum's `ConnectInfo<SocketAddr>`, and
//! the connection's [`ConnectionTicket`] as a request extension.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

/// File descriptors kept free of connections for everything else the process does.
pub const FD_RESERVE: usize = 256;

/// Limits of [`serve`], enforced before a request is read.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Most connections open at once (lowered to the descriptor limit, see the
    /// module docs). When unauthenticated connections hold the cap, the oldest
    /// of them is closed for a new one; else more are answered `503` and closed.
    pub max_connections: usize,
    /// Most authenticated connections open at once for one account (the
    /// account of their token), from any address. More are answered `503`.
    pub max_connections_per_client: usize,
    /// Most connections open at once that have not authenticated yet; a new
    /// one past it closes the oldest.
    pub max_unauthenticated: usize,
    /// How long a connection may stay open without a request that passes the
    /// token check.
    pub unauthenticated_timeout: Duration,
    /// How long a client may take to send a complete request head, counted from
    /// when the connection opened or its previous response ended.
    pub header_read_timeout: Duration,
}

impl Default for ConnectionLimits {
    /// 4,096 connections, 1,024 per account, 256 unauthenticated ones for at
    /// most 5 s, 10 s to send a request head.
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_connections_per_client: 1024,
            max_unauthenticated: 256,
            unauthenticated_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

/// Whom a stream slot counts against: the request's account, from whatever
/// address its requests come.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey(String);

impl ClientKey {
    /// The slots of `account`.
    pub(crate) fn account(account: &str) -> Self {
        Self(account.to_owned())
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
    /// Open while the slot is held (see [`crate::traffic`]).
    _span: tracing::Span,
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
        if let Some(key) = &client {
            let held = per.entry(key.clone()).or_insert(0);
            if *held >= self.per_client {
                return None;
            }
            *held += 1;
        }
        *total += 1;
        Some(Slot {
            slots: Arc::clone(self),
            client,
            _span: crate::traffic::stream_span(),
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
        if let Some(key) = &self.client
            && let Some(held) = per.get_mut(key)
        {
            *held -= 1;
            if *held == 0 {
                per.remove(key);
            }
        }
    }
}

/// The open connections: the unauthenticated ones oldest first (each with the
/// token that closes it), and the authenticated ones counted per account.
#[derive(Debug)]
struct Pools {
    max: usize,
    per_account: usize,
    max_unauthenticated: usize,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    next_id: u64,
    unauthenticated: BTreeMap<u64, CancellationToken>,
    accounts: HashMap<String, usize>,
    authenticated: usize,
}

impl PoolState {
    fn total(&self) -> usize {
        self.unauthenticated.len() + self.authenticated
    }

    /// Closes the oldest unauthenticated connection; `false` when there is none.
    fn evict_oldest(&mut self) -> bool {
        match self.unauthenticated.pop_first() {
            Some((_, close)) => {
                close.cancel();
                true
            }
            None => false,
        }
    }
}

/// One accepted connection's place in the pools; freed when dropped.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionTicket(Arc<TicketInner>);

#[derive(Debug)]
struct TicketInner {
    pools: Arc<Pools>,
    id: u64,
    /// Cancelled to close the connection (evicted, or never authenticated).
    close: CancellationToken,
    /// The account it authenticated as, once it did.
    account: Mutex<Option<String>>,
    /// Told when it authenticates.
    promoted: tokio::sync::Notify,
}

impl ConnectionTicket {
    /// Counts the connection against `account` from now on (it passed the
    /// token check). `false` when that account already holds its share: the
    /// request is refused. A connection already counted for an account stays
    /// where it is.
    pub(crate) fn promote(&self, account: &str) -> bool {
        let inner = &self.0;
        let mut mine = inner.account.lock().unwrap_or_else(PoisonError::into_inner);
        if mine.is_some() {
            return true;
        }
        let mut state = inner
            .pools
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let held = state.accounts.get(account).copied().unwrap_or(0);
        if held >= inner.pools.per_account {
            return false;
        }
        if state.unauthenticated.remove(&inner.id).is_none() {
            // Evicted meanwhile: it is closing.
            return false;
        }
        *state.accounts.entry(account.to_owned()).or_insert(0) += 1;
        state.authenticated += 1;
        *mine = Some(account.to_owned());
        inner.promoted.notify_one();
        true
    }
}

impl Drop for TicketInner {
    fn drop(&mut self) {
        let mut state = self
            .pools
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let account = self
            .account
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match account {
            Some(account) => {
                state.authenticated = state.authenticated.saturating_sub(1);
                if let Some(held) = state.accounts.get_mut(&account) {
                    *held -= 1;
                    if *held == 0 {
                        state.accounts.remove(&account);
                    }
                }
            }
            None => {
                state.unauthenticated.remove(&self.id);
            }
        }
    }
}

impl Pools {
    fn new(limits: &ConnectionLimits, max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            per_account: limits.max_connections_per_client.max(1),
            max_unauthenticated: limits.max_unauthenticated.max(1),
            state: Mutex::new(PoolState::default()),
        })
    }

    /// A place for a new, unauthenticated connection: room is made by closing
    /// the oldest unauthenticated one when a cap is reached; `None` when the
    /// overall cap is held by authenticated connections alone.
    fn admit(self: &Arc<Self>) -> Option<ConnectionTicket> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.unauthenticated.len() >= self.max_unauthenticated {
            state.evict_oldest();
        }
        if state.total() >= self.max && !state.evict_oldest() {
            return None;
        }
        let id = state.next_id;
        state.next_id += 1;
        let close = CancellationToken::new();
        state.unauthenticated.insert(id, close.clone());
        Some(ConnectionTicket(Arc::new(TicketInner {
            pools: Arc::clone(self),
            id,
            close,
            account: Mutex::new(None),
            promoted: tokio::sync::Notify::new(),
        })))
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
    let pools = Pools::new(&limits, effective_max_connections(&limits));
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
        let Some(ticket) = pools.admit() else {
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
            &limits,
            stop.clone(),
            ticket,
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

/// Serves one connection until it closes, until it is closed for another
/// (evicted, or not authenticated in time), or until shutdown lets its open
/// responses finish.
fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: &ConnectionLimits,
    stop: tokio_util::sync::CancellationToken,
    ticket: ConnectionTicket,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let header_read_timeout = limits.header_read_timeout;
    let unauthenticated_timeout = limits.unauthenticated_timeout;
    async move {
        let close = ticket.0.close.clone();
        let watched = Arc::clone(&ticket.0);
        let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.extensions_mut().insert(ticket.clone());
            let mut router = router.clone();
            // A `Router` is always ready.
            async move { router.call(request).await }
        });
        // The builder is dropped once it made the connection: it is not kept
        // in the state of every open connection.
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), service);
        let mut conn = std::pin::pin!(conn);
        // Closed when it has not authenticated in time.
        let unauthenticated = async {
            let promoted = watched.promoted.notified();
            tokio::select! {
                () = promoted => std::future::pending::<()>().await,
                () = tokio::time::sleep(unauthenticated_timeout) => {}
            }
        };
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, peer = %peer, "connection ended with an error");
                }
            }
            () = close.cancelled() => {
                tracing::debug!(peer = %peer, "unauthenticated connection closed to make room");
            }
            () = unauthenticated, if watched.account.lock().unwrap_or_else(PoisonError::into_inner).is_none() => {
                tracing::debug!(peer = %peer, "connection closed: no authenticated request in time");
            }
            () = stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_overall_and_per_client_and_free_on_drop() {
        let slots = ClientSlots::new(3, 2);
        let a = Some(ClientKey::account("alice"));
        let b = Some(ClientKey::account("bob"));
        let a1 = slots.try_acquire(a.clone()).unwrap();
        let _a2 = slots.try_acquire(a.clone()).unwrap();
        assert!(slots.try_acquire(a).is_none(), "per-client cap");
        let _b1 = slots.try_acquire(b.clone()).unwrap();
        assert!(slots.try_acquire(b.clone()).is_none(), "overall cap");
        drop(a1);
        assert!(slots.try_acquire(b).is_some());
    }

    fn limits(max: usize, per_account: usize, unauthenticated: usize) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: max,
            max_connections_per_client: per_account,
            max_unauthenticated: unauthenticated,
            ..ConnectionLimits::default()
        }
    }

    #[test]
    fn unauthenticated_connections_make_room_by_closing_the_oldest() {
        let pools = Pools::new(&limits(10, 10, 3), 10);
        let first = pools.admit().unwrap();
        let held: Vec<ConnectionTicket> = (0..2).map(|_| pools.admit().unwrap()).collect();
        assert!(!first.0.close.is_cancelled());
        let newest = pools.admit().unwrap();
        assert!(first.0.close.is_cancelled(), "the oldest made room");
        assert!(held.iter().all(|t| !t.0.close.is_cancelled()));
        assert!(newest.promote("victim"), "the new one authenticates");
        assert!(!first.promote("victim"), "an evicted one cannot");
    }

    #[test]
    fn authenticated_connections_count_per_account_and_hold_their_place() {
        let pools = Pools::new(&limits(4, 2, 4), 4);
        let tickets: Vec<ConnectionTicket> = (0..4).map(|_| pools.admit().unwrap()).collect();
        assert!(tickets[0].promote("alice") && tickets[1].promote("alice"));
        assert!(!tickets[2].promote("alice"), "alice's share is used up");
        assert!(tickets[3].promote("bob"), "bob has his own share");
        // Two unauthenticated places left of four: a new one closes the
        // oldest unauthenticated (tickets[2]); the authenticated stay.
        let fresh = pools.admit().unwrap();
        assert!(tickets[2].0.close.is_cancelled());
        assert!(!tickets[0].0.close.is_cancelled() && !tickets[3].0.close.is_cancelled());
        drop(tickets);
        assert!(
            fresh.promote("alice"),
            "closed connections free their share"
        );
    }

    #[test]
    fn when_authenticated_connections_hold_every_place_a_new_one_is_refused() {
        let pools = Pools::new(&limits(2, 2, 2), 2);
        let a = pools.admit().unwrap();
        let b = pools.admit().unwrap();
        assert!(a.promote("alice") && b.promote("bob"));
        assert!(pools.admit().is_none());
    }

    #[test]
    fn the_busy_answer_is_a_complete_response() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }
}
