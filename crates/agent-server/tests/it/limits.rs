//! The server's resource limits against abusive clients over real loopback
//! connections: slow request heads, connection floods from many addresses, one
//! account holding every stream slot. On loopback every local account can use
//! any 127.x address, so nothing here tells clients apart by address: a client
//! with a token is told apart by its account.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use agent_server::{Access, ConnectionLimits};
use agent_testing::{ScriptedModel, Turn};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{TOKEN, body, start, start_with, user};

async fn connect_from(source: [u8; 4], server: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((source, 0))).unwrap();
    socket.connect(server).await.unwrap()
}

/// A client bound to `source`, sending the test token.
fn client_from(source: [u8; 4]) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .local_address(IpAddr::from(source))
        .default_headers(
            [(
                reqwest::header::AUTHORIZATION,
                format!("Bearer {TOKEN}").parse().unwrap(),
            )]
            .into_iter()
            .collect(),
        )
        .build()
        .unwrap()
}

/// Whether the server has closed (or refused) `stream`: end of file, a reset, or
/// the `503` written before closing. Waits at most `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buffer = [0u8; 512];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(n)) => {
                if String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 503") {
                    return true;
                }
            }
        }
    }
}

/// A few hundred connections drip their request heads a byte at a time and
/// never send a token: past the unauthenticated pool the oldest are closed to
/// make room, and every one is closed once its time to authenticate is over,
/// although bytes keep coming; a client with a token is served all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dripping_unauthenticated_connections_are_cut_off_and_never_crowd_out_a_token() {
    let limits = ConnectionLimits {
        max_connections: 1000,
        max_connections_per_client: 200,
        max_unauthenticated: 200,
        unauthenticated_timeout: Duration::from_millis(1500),
        header_read_timeout: Duration::from_secs(10),
    };
    let live = start_with(ScriptedModel::new([]), Access::loopback, limits).await;
    let mut flood = Vec::new();
    for _ in 0..300 {
        let mut stream = connect_from([127, 0, 0, 1], live.addr).await;
        stream
            .write_all(b"GET /api/tools HTTP/1.1\r\nHo")
            .await
            .unwrap();
        flood.push(stream);
    }
    // The oldest hundred made room for the newest.
    let mut closed = 0;
    for stream in &mut flood[..100] {
        if closed_within(stream, Duration::from_millis(500)).await {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 100,
        "the oldest unauthenticated connections are closed"
    );
    let mut flood: Vec<TcpStream> = flood.into_iter().skip(100).collect();
    // Meanwhile a client with the token is served, from the same address.
    let other = client_from([127, 0, 0, 1])
        .get(live.url("/api/tools"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status().as_u16(), 200);
    // Keep dripping: one byte per connection every 200 ms, past the timeout.
    let started = tokio::time::Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        for stream in &mut flood {
            let _ = stream.write_all(b"s").await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut still_open = 0;
    for stream in &mut flood {
        if !closed_within(stream, Duration::from_millis(1000)).await {
            still_open += 1;
        }
    }
    assert_eq!(still_open, 0, "every dripping connection was closed");
}

/// Finding of the local-attacker review: idle connections from six 127.x
/// addresses, held open and opened again as they are closed, took most of a
/// victim's requests to `503` (the per-address cap does not separate local
/// users, and the overall cap filled with connections nobody could use). Now
/// the victim's 18 requests are all served while the flood goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_from_many_local_addresses_do_not_lock_out_a_token() {
    let limits = ConnectionLimits {
        max_connections: 120,
        max_connections_per_client: 100,
        max_unauthenticated: 100,
        unauthenticated_timeout: Duration::from_secs(2),
        header_read_timeout: Duration::from_secs(10),
    };
    let live = start_with(ScriptedModel::new([]), Access::loopback, limits).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooder = tokio::spawn({
        let (stop, addr) = (std::sync::Arc::clone(&stop), live.addr);
        async move {
            let mut held = Vec::new();
            let mut opened = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && opened < 20_000 {
                let source = [127, 0, 0, 10 + (opened % 6) as u8];
                let socket = TcpSocket::new_v4().unwrap();
                socket.bind(SocketAddr::from((source, 0))).unwrap();
                if let Ok(stream) = socket.connect(addr).await {
                    held.push(stream);
                }
                opened += 1;
                if held.len() > 400 {
                    held.drain(..200);
                }
                if opened.is_multiple_of(50) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            opened
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let victim = client_from([127, 0, 0, 1]);
    let mut refused = 0;
    for _ in 0..18 {
        let status = victim
            .get(live.url("/api/tools"))
            .send()
            .await
            .map(|r| r.status().as_u16())
            .ok();
        if status != Some(200) {
            refused += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let opened = flooder.await.unwrap();
    assert!(
        opened > 200,
        "the flood filled the caps: {opened} connections"
    );
    assert_eq!(refused, 0, "the victim's requests were refused");
}

/// A connection that opens and sends nothing is closed once its time to
/// authenticate is over, before the header-read timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_when_its_time_to_authenticate_is_over() {
    let limits = ConnectionLimits {
        unauthenticated_timeout: Duration::from_millis(400),
        header_read_timeout: Duration::from_secs(30),
        ..ConnectionLimits::default()
    };
    let live = start_with(ScriptedModel::new([]), Access::loopback, limits).await;
    let mut stream = connect_from([127, 0, 0, 1], live.addr).await;
    assert!(closed_within(&mut stream, Duration::from_secs(3)).await);
}

/// An idle keep-alive connection is closed by the same clock: a client that
/// sent one request and then nothing does not keep its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed() {
    let limits = ConnectionLimits {
        header_read_timeout: Duration::from_millis(500),
        ..ConnectionLimits::default()
    };
    let live = start_with(ScriptedModel::new([]), Access::loopback, limits).await;
    let mut stream = connect_from([127, 0, 0, 1], live.addr).await;
    let request = format!(
        "GET /api/tools HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n",
        live.addr
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buffer = [0u8; 4096];
    let n = stream.read(&mut buffer).await.unwrap();
    assert!(String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 200"));
    // Drain the rest of the response, then wait for the close.
    assert!(
        closed_within(&mut stream, Duration::from_secs(3)).await,
        "the idle connection stayed open"
    );
}

/// Every stream of these tests waits in a tool until its client goes away.
fn waiting_turns(n: usize) -> Vec<Turn> {
    (0..n)
        .map(|i| Turn::new().tool_call(format!("x{i}"), "app__wait", json!({})))
        .collect()
}

/// One account may hold its share of the stream slots, not all of them,
/// whatever addresses its requests come from; another account still gets one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_account_holds_at_most_its_share_of_the_streams() {
    use sha2::Digest;
    const BOB: &str = "bob-token-0123456789";
    let live = start(ScriptedModel::new(waiting_turns(8)), |port| {
        Access {
            max_streams: 4,
            client_stream_share: 50,
            ..Access::loopback(port)
        }
        .with_account("bob", sha2::Sha256::digest(BOB.as_bytes()).into())
    })
    .await;
    let post = |client: &reqwest::Client, chat: &str| {
        let mut request_body = body(vec![user("wait")]);
        request_body["id"] = json!(chat);
        client
            .post(live.url("/api/chat"))
            .json(&request_body)
            .send()
    };
    let first = post(&client_from([127, 0, 0, 1]), "c1").await.unwrap();
    let second = post(&client_from([127, 0, 0, 2]), "c2").await.unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = post(&client_from([127, 0, 0, 3]), "c3").await.unwrap();
    assert_eq!(third.status().as_u16(), 503, "over this account's share");
    let bob = reqwest::Client::builder()
        .default_headers(
            [(
                reqwest::header::AUTHORIZATION,
                format!("Bearer {BOB}").parse().unwrap(),
            )]
            .into_iter()
            .collect(),
        )
        .build()
        .unwrap();
    let theirs = post(&bob, "c4").await.unwrap();
    assert_eq!(
        theirs.status().as_u16(),
        200,
        "another account still gets a slot"
    );
    drop((first, second, theirs));
}
