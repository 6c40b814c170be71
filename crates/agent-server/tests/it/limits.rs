//! The server's resource limits against abusive clients over real loopback
//! connections: slow request heads, connection floods from one address, one client
//! holding every stream slot. Each test failed on the server before these limits
//! (`axum::serve` kept dripping connections open indefinitely and had no
//! per-client caps). A second client is told apart by its source address:
//! 127.0.0.2 is loopback too.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use agent_server::{Access, ConnectionLimits};
use agent_testing::{ScriptedModel, Turn};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::{TOKEN, body, start, start_with, user};

const OTHER: [u8; 4] = [127, 0, 0, 2];

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

/// A few hundred connections from one address drip their request heads a byte
/// at a time: those over the per-client cap are refused at once, the rest are
/// closed by the header-read timeout although bytes keep coming, and a second
/// client is served all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dripping_request_heads_are_cut_off_and_one_address_cannot_take_every_connection() {
    let limits = ConnectionLimits {
        max_connections: 1000,
        max_connections_per_client: 200,
        header_read_timeout: Duration::from_millis(1500),
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
    // Over the cap: answered 503 or closed right away.
    let mut refused = 0;
    for stream in &mut flood[200..] {
        if closed_within(stream, Duration::from_millis(500)).await {
            refused += 1;
        }
    }
    assert_eq!(
        refused, 100,
        "connections over the per-client cap are refused"
    );
    let mut flood: Vec<TcpStream> = flood.into_iter().take(200).collect();
    // Meanwhile another client is served.
    let other = client_from(OTHER)
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
    // Their slots are free again.
    let again = client_from([127, 0, 0, 1])
        .get(live.url("/api/tools"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 200);
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

/// One client may hold its share of the stream slots, not all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_holds_at_most_its_share_of_the_streams() {
    let live = start(ScriptedModel::new(waiting_turns(8)), |port| Access {
        max_streams: 4,
        client_stream_share: 50,
        ..Access::loopback(port)
    })
    .await;
    let mine = client_from([127, 0, 0, 1]);
    let post = |client: &reqwest::Client, chat: &str| {
        let mut request_body = body(vec![user("wait")]);
        request_body["id"] = json!(chat);
        client
            .post(live.url("/api/chat"))
            .json(&request_body)
            .send()
    };
    let first = post(&mine, "c1").await.unwrap();
    let second = post(&mine, "c2").await.unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = post(&mine, "c3").await.unwrap();
    assert_eq!(third.status().as_u16(), 503, "over this client's share");
    let other = client_from(OTHER);
    let theirs = post(&other, "c4").await.unwrap();
    assert_eq!(
        theirs.status().as_u16(),
        200,
        "another client still gets a slot"
    );
    drop((first, second, theirs));
}
