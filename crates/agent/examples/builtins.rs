//! Embedding the sandboxed built-in tools in an application.
//!
//! ```sh
//! cargo run -p toolwright --example builtins --features host,testing
//! ```
//!
//! Binds every built-in tool to the real adapters over a temporary workspace, lets a
//! policy allow only the read-only ones, and drives the loop with a scripted model
//! that lists the folder, reads a file and then tries to escape the sandbox.

use agent::host::{BuiltinConfig, bind_builtin_tools};
use agent::prelude::*;
use agent::run::RunContext;
use agent::serde_json::json;
use agent::testing::{ScriptedModel, Turn};
use agent::tools::ToolPolicy;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let workspace = tempfile::tempdir()?;
    std::fs::write(workspace.path().join("notes.txt"), "buy milk\ncall Ada\n")?;
    let config = BuiltinConfig::new(workspace.path(), workspace.path().join(".agent/memory.db"));
    let tools = bind_builtin_tools(&config)?;

    // Deny by default: only these ids exist for the model; nothing needs approval.
    let policy = ToolPolicy::allowing([
        "core__list_directory",
        "core__read_file",
        "core__get_current_time",
    ]);
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("call_1", "core__list_directory", json!({"path": "."}))
            .tool_call("call_2", "core__read_file", json!({"path": "notes.txt"}))
            .tool_call(
                "call_3",
                "core__read_file",
                json!({"path": "../../etc/passwd"}),
            ),
        Turn::new().tool_call("call_4", "core__exec_shell", json!({"command": "id"})),
        Turn::text("Your notes say: buy milk, call Ada."),
    ]);
    let agent = Agent::builder(model).tools(tools).policy(policy).build()?;
    let offered: Vec<String> = agent
        .catalog(&RunContext::generate())
        .specs()
        .iter()
        .map(|s| s.id.to_string())
        .collect();
    println!("offered to the model: {}", offered.join(", "));

    let mut run = agent.run("What do my notes say?");
    while let Some(event) = run.next().await {
        if let AiEventKind::ToolCallResult {
            tool_name,
            ok,
            result,
            error_code,
            message,
            ..
        } = event.kind
        {
            match (ok, result, error_code) {
                (true, Some(result), _) => println!("{tool_name}: {result}"),
                (_, _, Some(code)) => println!(
                    "{tool_name}: refused ({}): {}",
                    code.as_str(),
                    message.unwrap_or_default()
                ),
                _ => println!("{tool_name}: ok"),
            }
        }
    }
    let output = run.into_outcome().await?;
    println!("answer: {}", output.content);
    Ok(())
}
