//! A throwaway Postgres server for tests: Debian's `postgresql` binaries, a fresh
//! cluster in a temporary folder, listening on a free loopback port, run as a
//! non-root user (uid 65534 through `setpriv` when the tests run as root, since
//! Postgres refuses to run as root), stopped and removed on drop.
//!
//! The binaries are taken from `$AGENT_TEST_PG_BINDIR`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's layout). Authentication is `trust` for
//! the one user `agent`: the server is reachable from this host only.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::log_file;

/// The unprivileged account the server runs as when the tests run as root.
const NOBODY: u32 = 65_534;

/// A running test server (see the module docs).
pub struct TestPostgres {
    dir: tempfile::TempDir,
    bindir: PathBuf,
    port: u16,
    server: Child,
    as_nobody: bool,
}

impl std::fmt::Debug for TestPostgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPostgres")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

/// The folder of Debian's Postgres binaries.
fn bindir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("AGENT_TEST_PG_BINDIR") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "no Postgres server binaries: install Debian's `postgresql` package (CI installs it) \
         or set AGENT_TEST_PG_BINDIR"
            .to_owned()
    })
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            Some(line.split_whitespace().nth(1)? == "0")
        })
        .unwrap_or(false)
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

impl TestPostgres {
    /// Creates a cluster and starts the server; waits until it accepts
    /// connections (at most 30 s).
    pub fn start() -> Result<Self, String> {
        let bindir = bindir()?;
        let dir = tempfile::tempdir().map_err(|e| format!("no temporary folder: {e}"))?;
        let as_nobody = running_as_root();
        if as_nobody {
            std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY))
                .map_err(|e| format!("cannot give the cluster folder to uid {NOBODY}: {e}"))?;
        }
        let data = dir.path().join("data");
        let log = dir.path().join("initdb.log");
        let status = Self::command(&bindir, as_nobody, "initdb")
            .args([
                "-U",
                "agent",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .stdout(log_file(&log)?)
            .stderr(log_file(&log)?)
            .status()
            .map_err(|e| format!("cannot run initdb: {e}"))?;
        if !status.success() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!("initdb failed ({status}): {text}"));
        }
        let port = free_port()?;
        let log = dir.path().join("server.log");
        let server = Self::command(&bindir, as_nobody, "postgres")
            .arg("-D")
            .arg(&data)
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-k"])
            .arg(dir.path())
            .args([
                "-F",
                "-c",
                "max_connections=200",
                "-c",
                "full_page_writes=off",
            ])
            .stdin(Stdio::null())
            .stdout(log_file(&log)?)
            .stderr(log_file(&log)?)
            .spawn()
            .map_err(|e| format!("cannot start postgres: {e}"))?;
        let mut postgres = Self {
            dir,
            bindir,
            port,
            server,
            as_nobody,
        };
        postgres.wait_ready()?;
        Ok(postgres)
    }

    /// `bindir/program`, through `setpriv` to uid 65534 when running as root.
    fn command(bindir: &Path, as_nobody: bool, program: &str) -> Command {
        let program = bindir.join(program);
        if !as_nobody {
            return Command::new(program);
        }
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(program)
            .env("HOME", "/");
        command
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = self.server.try_wait() {
                return Err(format!("postgres exited ({status}): {}", self.log()));
            }
            let ready = Command::new(self.bindir.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(());
            }
            if Instant::now() >= until {
                return Err(format!("postgres did not start: {}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Creates database `name` (letters, digits and `_`).
    pub fn create_database(&self, name: &str) -> Result<(), String> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("not a plain database name: {name:?}"));
        }
        self.client("createdb", &[name]).map(drop)
    }

    /// Runs `sql` in database `db` with `psql` (stops at the first error); its
    /// output, unaligned and without headers.
    pub fn execute(&self, db: &str, sql: &str) -> Result<String, String> {
        let args = [
            "-d",
            db,
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ];
        self.client("psql", &args)
    }

    /// Runs client `program` of the server's binaries against it, as `agent`,
    /// with `args`; its trimmed output.
    fn client(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let port = self.port.to_string();
        let output = Command::new(self.bindir.join(program))
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "agent"])
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(format!(
                "{program} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    /// The URL of database `name` (`postgres` exists from the start).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://agent@127.0.0.1:{}/{name}", self.port)
    }

    /// Whether the server runs as uid 65534 (the tests run as root).
    pub fn runs_as_nobody(&self) -> bool {
        self.as_nobody
    }
}

impl Drop for TestPostgres {
    /// A fast shutdown (SIGINT), then SIGKILL after 10 s.
    fn drop(&mut self) {
        let pid = self.server.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.server.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}
