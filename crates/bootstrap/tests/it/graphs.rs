//! `[graphs]`, `agent graphs` and `agent chat --graph` end to end: a `main` graph
//! calling the `researcher` subagent against a loopback scripted server.
//!
//! The config is a project `agent.toml` in the workspace that nobody trusted: graphs
//! and subagents loosen nothing (policy still decides every tool call), so it is used
//! as it is.

use agent_testing::server::{OpenAiServer, Reply};
use serde_json::{Value, json};

use crate::support::{Home, json_lines, tool_message};

const CONFIG: &str = r#"
[graphs.main]
description = "Answers, asking the researcher."
system = "You are main. Delegate lookups to the researcher."
subagents = ["researcher"]

[graphs.researcher]
description = "Looks up the time."
system = "You are the researcher."
tools = ["core__get_current_time"]

[graphs.researcher.budget]
max_model_requests = 4
"#;

const PARENT_CALL: &str = "call_parent_1";
const CHILD_CALL: &str = "call_child_1";

/// A fresh home whose workspace holds `config` as its `agent.toml`.
fn home(config: &str) -> Home {
    let home = Home::new("sk-graphs-e2e");
    home.write_config(config);
    home
}

fn tool_names(request: &Value) -> Vec<String> {
    let mut names: Vec<String> = request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_graph_main_calls_the_researcher_subagent_with_one_done_and_tagged_events() {
    let server = OpenAiServer::start([
        // Parent turn 1: ask the researcher.
        Reply::tool_calls(&[(
            PARENT_CALL,
            "graph__researcher",
            json!({"task": "What time is it?"}),
        )]),
        // Child turn 1: look it up; child turn 2: answer.
        Reply::tool_calls(&[(CHILD_CALL, "core__get_current_time", json!({}))]),
        Reply::text("It is noon UTC."),
        // Parent turn 2: the answer.
        Reply::text("The researcher says it is noon UTC."),
    ])
    .await
    .unwrap();
    let home = home(CONFIG);
    let base_url = server.base_url();
    let (code, stdout, stderr) = home
        .run(
            Some(&base_url),
            &["chat", "--json", "--graph", "main", "What time is it?"],
        )
        .await;
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    assert_eq!(server.remaining(), 0, "every scripted turn was used");
    let events = json_lines(&stdout);
    let count = |kind: &str| events.iter().filter(|e| e["type"] == kind).count();
    assert_eq!(count("done"), 1, "{stdout}");
    assert_eq!(count("error"), 0, "{stdout}");
    assert_eq!(count("assistant_final"), 1, "{stdout}");
    assert_eq!(events.last().unwrap()["type"], "done");

    // The one final is the parent's, with the run's prompt hash.
    let last_final = events
        .iter()
        .find(|e| e["type"] == "assistant_final")
        .unwrap();
    assert_eq!(last_final["content"], "The researcher says it is noon UTC.");
    assert!(last_final.get("parent_tool_call_id").is_none());
    let hash = last_final["prompt_hash"].as_str().unwrap();
    assert!(hash.starts_with("sha256:"), "{hash}");

    // The child's events: tagged with the parent's call and the child graph, between
    // the parent's start and result of `graph__researcher`, with no final or done.
    let child: Vec<&Value> = events
        .iter()
        .filter(|e| e.get("parent_tool_call_id").is_some())
        .collect();
    let mut child_kinds: Vec<&str> = child.iter().map(|e| e["type"].as_str().unwrap()).collect();
    child_kinds.dedup();
    assert_eq!(
        child_kinds,
        [
            "usage_report",
            "tool_call_start",
            "tool_call_result",
            "text_delta",
            "usage_report"
        ],
        "{stdout}"
    );
    for event in &child {
        assert_eq!(event["parent_tool_call_id"], PARENT_CALL);
        assert_eq!(event["graph"], "researcher");
        assert_eq!(event["run_id"], events[0]["run_id"]);
    }
    let child_result = child
        .iter()
        .find(|e| e["type"] == "tool_call_result")
        .unwrap();
    assert_eq!(child_result["tool_name"], "core__get_current_time");
    assert_eq!(child_result["ok"], true, "{child_result}");
    // The child's usage carries the child's prompt hash, not the parent's.
    let child_hash = child[0]["prompt_hash"].as_str().unwrap();
    assert!(child_hash.starts_with("sha256:") && child_hash != hash);

    let position = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred).unwrap();
    let start = position(&|e| e["type"] == "tool_call_start" && e["tool_call_id"] == PARENT_CALL);
    let result = position(&|e| e["type"] == "tool_call_result" && e["tool_call_id"] == PARENT_CALL);
    let first_child = position(&|e| e.get("parent_tool_call_id").is_some());
    let last_child = events
        .iter()
        .rposition(|e| e.get("parent_tool_call_id").is_some())
        .unwrap();
    assert!(start < first_child && last_child < result, "{stdout}");

    // The parent's result: ok, with the child's answer.
    let parent_result = &events[result];
    assert_eq!(parent_result["tool_name"], "graph__researcher");
    assert_eq!(parent_result["ok"], true, "{parent_result}");
    assert!(parent_result.get("parent_tool_call_id").is_none());
    assert_eq!(parent_result["result"]["answer"], "It is noon UTC.");
    assert_eq!(parent_result["result"]["graph"], "researcher");
    // The parent's own usage reports carry the parent's hash.
    for event in events
        .iter()
        .filter(|e| e["type"] == "usage_report" && e.get("parent_tool_call_id").is_none())
    {
        assert_eq!(event["prompt_hash"], hash);
    }

    // What the model saw: the parent had its system prompt and the subagent tool;
    // the child had its own system prompt, the task and only its one tool.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let system = |i: usize| requests[i].body["messages"][0]["content"].clone();
    assert_eq!(
        system(0),
        "You are main. Delegate lookups to the researcher."
    );
    assert!(tool_names(&requests[0].body).contains(&"graph__researcher".to_owned()));
    assert!(tool_names(&requests[0].body).contains(&"core__get_current_time".to_owned()));
    assert_eq!(system(1), "You are the researcher.");
    assert_eq!(
        requests[1].body["messages"][1]["content"],
        "What time is it?"
    );
    assert_eq!(tool_names(&requests[1].body), ["core__get_current_time"]);
    assert_eq!(tool_names(&requests[2].body), ["core__get_current_time"]);
    // The parent's second turn sees the child's answer as the tool result.
    let tool_message = tool_message(&requests[3]);
    assert_eq!(tool_message["tool_call_id"], PARENT_CALL);
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("It is noon UTC."),
        "{tool_message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_graphs_lists_the_builtin_and_configured_graphs() {
    let home = home(CONFIG);
    let (code, stdout, stderr) = home.run(None, &["graphs", "--json"]).await;
    assert_eq!(code, 0, "stderr: {stderr}");
    let graphs = json_lines(&stdout);
    let names: Vec<&str> = graphs.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["chat", "main", "researcher"]);
    assert_eq!(
        graphs[1],
        json!({"name": "main", "description": "Answers, asking the researcher.",
               "tools": ["*"], "subagents": ["researcher"]})
    );
    assert_eq!(
        graphs[2],
        json!({"name": "researcher", "description": "Looks up the time.",
               "tools": ["core__get_current_time"], "subagents": []})
    );

    let (code, stdout, _) = home.run(None, &["graphs"]).await;
    assert_eq!(code, 0);
    assert!(stdout.contains("researcher"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("main ") && l.contains("researcher")),
        "the main graph's row names its subagent: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_graph_configs_exit_2_naming_the_problem() {
    for (config, needle) in [
        (
            "[graphs.main]\nsubagents = [\"nobody\"]\n",
            "unknown subagent `nobody`",
        ),
        ("[graphs.main]\nsubagents = [\"main\"]\n", "lists itself"),
        (
            "[graphs.a]\nsubagents = [\"b\"]\n[graphs.b]\nsubagents = [\"c\"]\n[graphs.c]\n",
            "at most one level deep",
        ),
        ("[graphs.main]\nsubagent = [\"x\"]\n", "line 2, column 1"),
    ] {
        let home = home(config);
        let (code, _, stderr) = home.run(None, &["graphs"]).await;
        assert_eq!(code, 2, "{config}: {stderr}");
        assert!(stderr.contains(needle), "{config}: {stderr}");
    }
    let home = home(CONFIG);
    let (code, _, stderr) = home
        .run(None, &["chat", "--graph", "nope", "--json", "hi"])
        .await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("unknown graph `nope`"), "{stderr}");
}
