//! `TestRestate` against the real server: start, query the system tables, crash
//! (SIGKILL), restart on the same data, query again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_testing::restate::TestRestate;
use std::time::Instant;

/// `value`, or a panic with `what`, the error and the server's log.
fn ok<T>(restate: &TestRestate, what: &str, value: Result<T, String>) -> T {
    value.unwrap_or_else(|e| panic!("{what}: {e}\n--- restate.log ---\n{}", restate.log()))
}

/// `SELECT count(*) AS n FROM sys_invocation`'s count.
fn invocations(restate: &TestRestate) -> u64 {
    let answer = ok(
        restate,
        "count",
        restate.sql("SELECT count(*) AS n FROM sys_invocation"),
    );
    answer["rows"][0]["n"]
        .as_u64()
        .unwrap_or_else(|| panic!("no count in {answer}"))
}

/// The resident memory of process `pid`, in MiB (Linux).
fn rss_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? / 1024)
}

#[test]
fn starts_answers_sql_and_survives_a_kill() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Restate) else {
        return;
    };
    let started = Instant::now();
    let mut restate = TestRestate::start().unwrap();
    eprintln!(
        "restate ready in {:?} (admin {}, ingress {}), rss {:?} MiB",
        started.elapsed(),
        restate.admin_url(),
        restate.ingress_url(),
        restate.pid().and_then(rss_mib)
    );
    assert_eq!(invocations(&restate), 0);
    assert!(restate.base_dir().join("agent-test").is_dir());
    let err = restate.sql("SELECT nope FROM nowhere").unwrap_err();
    assert!(err.contains("HTTP 500"), "{err}");
    // Discovery of a deployment that is not there fails, with the server's reason.
    let err = restate.register("http://127.0.0.1:9/").unwrap_err();
    assert!(err.contains("HTTP 500"), "{err}");

    let pid = restate.pid().unwrap();
    restate.kill();
    assert!(restate.pid().is_none());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert!(restate.sql("SELECT 1").is_err());

    let restarted = Instant::now();
    if let Err(e) = restate.restart() {
        panic!("restart: {e}\n--- restate.log ---\n{}", restate.log());
    }
    eprintln!(
        "restate restarted in {:?}, rss {:?} MiB",
        restarted.elapsed(),
        restate.pid().and_then(rss_mib)
    );
    assert_eq!(invocations(&restate), 0);
    let base_dir = restate.base_dir().to_owned();
    drop(restate);
    assert!(!base_dir.exists());
}
