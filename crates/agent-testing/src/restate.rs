//! A throwaway Restate server (the durable execution engine) for tests: the binary of
//! the npm package pinned in `tests/restate` (`cargo xtask test-env` installs it), a
//! fresh base folder in a temporary folder, three free loopback ports (ingress, admin
//! API, node-to-node fabric), killed and removed on drop.
//!
//! The binary is `$AGENT_TEST_RESTATE_SERVER`, else the platform package's
//! `tests/restate/node_modules/@restatedev/restate-server-<os>-<arch>/bin/restate-server`.
//! Not `node_modules/.bin/restate-server`: that is a Node shim that spawns the
//! binary as its child, and a SIGKILL of the shim (what [`TestRestate::kill`]
//! sends, to simulate a crash) leaves the real server running, holding the ports
//! and the data folder's locks.
//!
//! The server is configured through its environment (`RESTATE_*` variables, `__`
//! separating nested keys): one node that provisions its own cluster, TCP only (no
//! Unix sockets in the base folder), no telemetry, and a small footprint (4
//! partitions and 256 MB of RocksDB memory instead of 24 and 2 GiB, which halves
//! its memory and start time). Inherited `RESTATE_*` variables are removed, so a
//! developer's own configuration does not leak into the tests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::log_file;

/// How long [`TestRestate::start`] and [`TestRestate::restart`] wait for the server.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long one admin or ingress request may take (a deployment's discovery
/// included).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one readiness probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The node's name (its data lives in `<base dir>/<node name>`).
const NODE_NAME: &str = "agent-test";

/// The query over every partition whose steady success means the partitions are
/// up. The admin API's `/health` answers before they are: right after a (re)start
/// queries fail for a few hundred milliseconds ("node lookup for partition 0
/// failed", "expecting a partition store", then "node N1:<an earlier generation>
/// was shut down or removed" while the partition routing catches up), and can
/// succeed once in the middle of that.
const READY_QUERY: &str = "SELECT count(*) AS n FROM sys_invocation";

/// How long every probe must succeed in a row before the server counts as ready
/// (the spurious successes seen last about 30 ms; the whole settling about 100 ms).
const SETTLE: Duration = Duration::from_millis(500);

/// A running test server (see the module docs).
pub struct TestRestate {
    dir: tempfile::TempDir,
    binary: PathBuf,
    ingress_port: u16,
    admin_port: u16,
    fabric_port: u16,
    server: Option<Child>,
    /// The private key it signs requests to services with, when it does.
    identity: Option<PathBuf>,
}

impl std::fmt::Debug for TestRestate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestRestate")
            .field("ingress_port", &self.ingress_port)
            .field("admin_port", &self.admin_port)
            .field("fabric_port", &self.fabric_port)
            .field("running", &self.server.is_some())
            .finish_non_exhaustive()
    }
}

/// The server binary (see the module docs).
fn binary() -> Result<PathBuf, String> {
    let path = crate::peers::restate_server();
    if path.exists() || std::env::var_os("AGENT_TEST_RESTATE_SERVER").is_some() {
        Ok(path)
    } else {
        Err(format!(
            "no Restate server at {}: run `cargo xtask test-env` (npm ci in tests/restate) \
             or set AGENT_TEST_RESTATE_SERVER",
            path.display()
        ))
    }
}

/// Three distinct free loopback ports (the listeners are held until all three are
/// chosen, so the kernel cannot hand out the same port twice).
fn free_ports() -> Result<[u16; 3], String> {
    let bind =
        || std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"));
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener
            .local_addr()
            .map_err(|e| format!("no free port: {e}"))?
            .port();
    }
    Ok(ports)
}

impl TestRestate {
    /// Starts a server in a fresh temporary base folder on three free loopback
    /// ports; waits (at most 60 s) until the admin API and the ingress answer their
    /// health checks and a query over every partition succeeds, steadily for half a
    /// second.
    pub fn start() -> Result<Self, String> {
        Self::start_signing(None)
    }

    /// [`TestRestate::start`], signing every request it sends a service with
    /// the request identity private key `pem` (PKCS#8 PEM text), as a
    /// production server configured with `request-identity-private-key-pem-file`
    /// does.
    pub fn start_signing(pem: Option<&str>) -> Result<Self, String> {
        let binary = binary()?;
        let dir = tempfile::tempdir().map_err(|e| format!("no temporary folder: {e}"))?;
        let [ingress_port, admin_port, fabric_port] = free_ports()?;
        let identity = match pem {
            Some(pem) => {
                let path = dir.path().join("identity.pem");
                std::fs::write(&path, pem)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                Some(path)
            }
            None => None,
        };
        let mut restate = Self {
            dir,
            binary,
            ingress_port,
            admin_port,
            fabric_port,
            server: None,
            identity,
        };
        restate.spawn()?;
        Ok(restate)
    }

    /// Starts the server process on the base folder and ports, then waits for it.
    fn spawn(&mut self) -> Result<(), String> {
        let log = self.log_path();
        let mut command = Command::new(&self.binary);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("RESTATE_") {
                command.env_remove(key);
            }
        }
        let at = |port: u16| format!("127.0.0.1:{port}");
        command
            .arg("--base-dir")
            .arg(self.dir.path())
            .arg("--no-logo")
            .env("RESTATE_NODE_NAME", NODE_NAME)
            .env("RESTATE_AUTO_PROVISION", "true")
            .env("RESTATE_LISTEN_MODE", "tcp")
            .env("RESTATE_BIND_IP", "127.0.0.1")
            .env("RESTATE_ADVERTISED_HOST", "127.0.0.1")
            // `bind-address` overrides `bind-ip` + the default port of each listener.
            .env("RESTATE_BIND_ADDRESS", at(self.fabric_port))
            .env("RESTATE_INGRESS__BIND_ADDRESS", at(self.ingress_port))
            .env("RESTATE_ADMIN__BIND_ADDRESS", at(self.admin_port))
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            .env("RESTATE_DEFAULT_NUM_PARTITIONS", "4")
            .env("RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE", "256MB")
            .env("RESTATE_LOG_DISABLE_ANSI_CODES", "true");
        if let Some(identity) = &self.identity {
            command.env(
                "RESTATE_WORKER__INVOKER__REQUEST_IDENTITY_PRIVATE_KEY_PEM_FILE",
                identity,
            );
        }
        command
            .stdin(Stdio::null())
            .stdout(log_file(&log)?)
            .stderr(log_file(&log)?);
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        self.server = Some(child);
        self.wait_ready()
    }

    /// Polls until the server is ready (see [`TestRestate::start`] and [`SETTLE`]).
    fn wait_ready(&mut self) -> Result<(), String> {
        let until = Instant::now() + READY_TIMEOUT;
        let mut ready_since: Option<Instant> = None;
        loop {
            if let Some(server) = self.server.as_mut()
                && let Ok(Some(status)) = server.try_wait()
            {
                self.server = None;
                return Err(format!("restate-server exited ({status}): {}", self.log()));
            }
            if self.ready() {
                let since = *ready_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= SETTLE {
                    return Ok(());
                }
            } else {
                ready_since = None;
            }
            if Instant::now() >= until {
                return Err(format!(
                    "restate-server not ready after {READY_TIMEOUT:?}: {}",
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the admin API and the ingress are healthy and the partitions answer.
    fn ready(&self) -> bool {
        let ok = |port: u16, path: &str| {
            http(port, "GET", path, None, PROBE_TIMEOUT).is_ok_and(|r| r.status == 200)
        };
        ok(self.admin_port, "/health")
            && ok(self.ingress_port, "/restate/health")
            && query_body(READY_QUERY)
                .and_then(|body| {
                    http(
                        self.admin_port,
                        "POST",
                        "/query",
                        Some(&body),
                        PROBE_TIMEOUT,
                    )
                })
                .is_ok_and(|r| r.status == 200)
    }

    /// The ingress, where services are invoked: `http://127.0.0.1:PORT`.
    pub fn ingress_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.ingress_port)
    }

    /// The admin API: `http://127.0.0.1:PORT`.
    pub fn admin_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.admin_port)
    }

    /// The server's base folder (its data is in the `agent-test` folder inside; the
    /// log is `restate.log`).
    pub fn base_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The process id of the running server, if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(Child::id)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("restate.log")
    }

    /// The server's log so far, every run of it (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Kills the server with SIGKILL (a crash: nothing is flushed on purpose) and
    /// waits for it to be gone. Does nothing when it is not running.
    pub fn kill(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
    }

    /// Starts the server again on the same base folder and ports (its state
    /// survives), killing it first if it runs; waits as [`TestRestate::start`] does.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn()
    }

    /// Registers the deployment (a service endpoint) at `deployment_uri` through
    /// `POST /deployments`, overriding an earlier registration of the same URI
    /// (`force`); the server discovers its services during the call.
    pub fn register(&self, deployment_uri: &str) -> Result<(), String> {
        let body = serde_json::json!({ "uri": deployment_uri, "force": true }).to_string();
        let response = http(
            self.admin_port,
            "POST",
            "/deployments",
            Some(&body),
            REQUEST_TIMEOUT,
        )
        .map_err(|e| format!("registering {deployment_uri}: {e}"))?;
        if (200..300).contains(&response.status) {
            Ok(())
        } else {
            Err(format!(
                "registering {deployment_uri}: HTTP {}: {}",
                response.status,
                String::from_utf8_lossy(&response.body)
            ))
        }
    }

    /// Runs the SQL `query` over the server's introspection tables (`sys_invocation`,
    /// `sys_journal`, `sys_deployment`, ...) through `POST /query`; the JSON answer,
    /// `{"rows": [{column: value, ...}, ...]}`.
    pub fn sql(&self, query: &str) -> Result<serde_json::Value, String> {
        let response = http(
            self.admin_port,
            "POST",
            "/query",
            Some(&query_body(query)?),
            REQUEST_TIMEOUT,
        )
        .map_err(|e| format!("query {query:?}: {e}"))?;
        if response.status != 200 {
            return Err(format!(
                "query {query:?}: HTTP {}: {}",
                response.status,
                String::from_utf8_lossy(&response.body)
            ));
        }
        serde_json::from_slice(&response.body)
            .map_err(|e| format!("query {query:?}: the answer is not JSON: {e}"))
    }
}

impl Drop for TestRestate {
    /// Kills the server; the temporary folder is removed afterwards.
    fn drop(&mut self) {
        self.kill();
    }
}

/// The body of `POST /query`.
fn query_body(query: &str) -> Result<String, String> {
    serde_json::to_string(&serde_json::json!({ "query": query }))
        .map_err(|e| format!("cannot encode the query: {e}"))
}

/// An HTTP answer.
struct Response {
    status: u16,
    body: Vec<u8>,
}

/// One HTTP/1.1 request to `127.0.0.1:port`, `body` sent as JSON, the answer read to
/// the end (`connection: close`) and de-chunked.
///
/// Hand-written on a `TcpStream` on purpose: health probes and a few admin calls do
/// not justify an HTTP client crate (and an async runtime) in agent-testing.
/// `accept: application/json` matters: without it `/query` answers in Arrow's IPC
/// format.
fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> Result<Response, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let fail = |e: std::io::Error| format!("{method} {addr}{path}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(fail)?;
    stream.set_read_timeout(Some(timeout)).map_err(fail)?;
    stream.set_write_timeout(Some(timeout)).map_err(fail)?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: application/json\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(fail)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(fail)?;
    parse_response(&raw).map_err(|e| format!("{method} {addr}{path}: {e}"))
}

/// Splits an HTTP/1.1 answer read to the end into its status and body.
fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers in the answer")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| format!("not an HTTP status line: {head:?}"))?;
    let chunked = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Ok(Response { status, body })
}

/// Decodes a chunked body (extensions and trailers ignored).
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|e| format!("bad chunk size {size_text:?}: {e}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        let chunk = rest.get(..size).ok_or("truncated chunk")?;
        body.extend_from_slice(chunk);
        rest = rest.get(size + 2..).ok_or("truncated chunk")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_answers() {
        let plain = parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((plain.status, plain.body.as_slice()), (200, &b"{}"[..]));
        let chunked = parse_response(
            b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n\
              4\r\n{\"a\"\r\n9;x=y\r\n:[1,2,3]}\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(chunked.status, 500);
        assert_eq!(chunked.body, b"{\"a\":[1,2,3]}");
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}
