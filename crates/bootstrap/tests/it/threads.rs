//! The run store through the `agent` binary: `agent chat --thread` and
//! `--continue` carry a conversation across processes, every run is recorded
//! (status, events, usage), and `agent threads`, `agent runs` and `agent usage`
//! read it back. The store is the default SQLite file under the temporary
//! `XDG_DATA_HOME` of each home.

use std::time::Duration;

use serde_json::Value;

use agent_testing::server::{OpenAiServer, Reply};

use crate::support::{Home, json_lines};

const KEY: &str = "sk-e2e-threads-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_continues_across_processes_and_is_recorded() {
    let server = OpenAiServer::start([Reply::text("Paris."), Reply::text("About 2.1 million.")])
        .await
        .unwrap();
    let url = server.base_url();
    let home = Home::new(KEY);
    std::fs::write(
        home.workspace.join("agent.toml"),
        "[pricing.\"e2e-model\"]\nprompt_per_million = 1.0\ncompletion_per_million = 2.0\n",
    )
    .unwrap();
    let (code, first, stderr) = home
        .run(
            Some(&url),
            &["chat", "--json", "--thread", "trip", "Capital of France?"],
        )
        .await;
    assert_eq!(code, 0, "{stderr}");
    let run_id = json_lines(&first)[0]["run_id"].as_str().unwrap().to_owned();
    let (code, _, stderr) = home
        .run(
            Some(&url),
            &[
                "chat",
                "--json",
                "--continue",
                "How many people live there?",
            ],
        )
        .await;
    assert_eq!(code, 0, "{stderr}");

    // The second request carried the first turn once, after one system prompt.
    let requests = server.requests();
    let messages = requests[1].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user"],
        "{messages:#?}"
    );
    assert_eq!(messages[1]["content"], "Capital of France?");
    assert_eq!(messages[2]["content"], "Paris.");

    let (_, listed, _) = home.run(None, &["threads", "list", "--json"]).await;
    let threads = json_lines(&listed);
    assert_eq!(threads.len(), 1);
    assert_eq!(threads[0]["id"], "trip");
    assert_eq!(threads[0]["title"], "Capital of France?");
    let (_, shown, _) = home.run(None, &["threads", "show", "trip", "--json"]).await;
    let stored: Vec<Value> = json_lines(&shown);
    let contents: Vec<&str> = stored
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        contents,
        [
            "Capital of France?",
            "Paris.",
            "How many people live there?",
            "About 2.1 million."
        ]
    );

    // The first run, its status and its whole event log.
    let (code, run, stderr) = home.run(None, &["runs", "show", &run_id, "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let lines = json_lines(&run);
    assert_eq!(lines[0]["status"], "done");
    assert_eq!(lines[0]["thread"], "trip");
    let replayed: Vec<&Value> = lines[1..].iter().collect();
    let live = json_lines(&first);
    let text = |events: &[&Value]| -> String {
        events
            .iter()
            .filter(|e| e["type"] == "text_delta")
            .filter_map(|e| e["delta"].as_str())
            .collect()
    };
    assert_eq!(text(&replayed), text(&live.iter().collect::<Vec<_>>()));
    let kinds = |events: &[&Value]| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["type"] != "text_delta")
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(kinds(&replayed), kinds(&live.iter().collect::<Vec<_>>()));

    // Usage: one call per run, the server's numbers.
    let (_, usage, _) = home.run(None, &["usage", "--by", "thread", "--json"]).await;
    let rows = json_lines(&usage);
    assert_eq!(rows.len(), 1, "{usage}");
    assert_eq!(
        (rows[0]["key"].as_str(), rows[0]["calls"].as_u64()),
        (Some("trip"), Some(2))
    );
    assert_eq!(rows[0]["prompt_tokens"], 40);
    // 20 prompt tokens at 1.0 and 5 completion tokens at 2.0 per million, twice.
    assert_eq!(rows[0]["cost_micros"], 60);
    assert_eq!(rows[0]["calls_without_cost"], 0);
    let (_, table, _) = home.run(None, &["usage"]).await;
    assert!(
        table.contains("COST") && table.contains("0.0001"),
        "{table}"
    );

    // Removing the thread keeps the billing record.
    let (code, _, _) = home.run(None, &["threads", "rm", "trip"]).await;
    assert_eq!(code, 0);
    let (_, listed, _) = home.run(None, &["threads", "list", "--json"]).await;
    assert!(listed.trim().is_empty(), "{listed}");
    let (_, usage, _) = home.run(None, &["usage", "--json"]).await;
    assert_eq!(json_lines(&usage)[0]["calls"], 2);
    let (code, _, stderr) = home.run(None, &["runs", "show", &run_id]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("no run"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_without_a_thread_is_a_usage_error() {
    let home = Home::new(KEY);
    let (code, _, stderr) = home.run(None, &["chat", "--continue", "hello"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no thread to continue"), "{stderr}");
    let (code, _, stderr) = home.run(None, &["usage", "--since", "last tuesday"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("YYYY-MM-DD"), "{stderr}");
}

/// `agent chat` killed with SIGKILL in the middle of an answer: the next `agent`
/// command marks its run `interrupted`, and the event log holds a gap-free prefix
/// of what the run had shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_chat_leaves_an_interrupted_run_with_a_contiguous_log() {
    use tokio::io::AsyncBufReadExt;
    let server = OpenAiServer::start([Reply::endless(Duration::from_millis(10), |n| {
        agent_testing::server::data(&format!(
            r#"{{"id":"c","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"w{n} "}},"finish_reason":null}}]}}"#
        ))
    })])
    .await
    .unwrap();
    let home = Home::new(KEY);
    let url = server.base_url();
    let mut child = home
        .command(
            Some(&url),
            &["chat", "--json", "--thread", "k", "Talk forever."],
        )
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut shown = Vec::new();
    // Enough deltas that the recorder has written some (it flushes every 250 ms).
    while shown.len() < 60 {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the agent streams")
            .unwrap()
            .expect("the agent is still running");
        shown.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    let run_id = shown[0]["run_id"].as_str().unwrap().to_owned();
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap()
            .success()
    );
    child.wait().await.unwrap();

    let (code, run, stderr) = home.run(None, &["runs", "show", &run_id, "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let lines = json_lines(&run);
    assert_eq!(lines[0]["status"], "interrupted", "{}", lines[0]);
    let stored: String = lines[1..]
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    let printed: String = shown
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str())
        .collect();
    assert!(!stored.is_empty(), "nothing was stored before the kill");
    assert!(
        printed.starts_with(&stored) || stored.starts_with(&printed),
        "stored {stored:?} is not a prefix of what was shown {printed:?}"
    );
    // The thread exists (created when the run started), with no half turn in it.
    let (_, shown_thread, _) = home.run(None, &["threads", "show", "k", "--json"]).await;
    assert!(shown_thread.trim().is_empty(), "{shown_thread}");
}
