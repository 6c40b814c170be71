//! Tools from an MCP server on stdio, in one call: `agent::mcp::stdio(command,
//! args)` starts the child (it inherits `PATH` and a few other variables),
//! lists its tools and pins their definitions in a file.
//!
//! ```sh
//! cargo run -p toolwright --example mcp_stdio --features mcp,testing
//! ```
//!
//! To stay offline, the example is its own MCP server: started with
//! `--serve-mcp`, it answers MCP's JSON-RPC on stdin and stdout with one
//! `lookup` tool. Any stdio server (`npx ...`, `uvx ...`) is started the same
//! way.

use std::io::{BufRead, Write};

use agent::mcp::ToolConfig;
use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::serde_json::{Value, json};
use agent::testing::{OpenAiServer, Reply};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("--serve-mcp") {
        return serve_mcp();
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("agent-mcp-stdio-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let pins = dir.join("mcp.lock");
    let me = std::env::current_exe()?;
    let notes = agent::mcp::stdio(me.to_string_lossy(), ["--serve-mcp"])
        .id("notes")
        .pins_file(&pins)
        .tool(
            "lookup",
            ToolConfig {
                effect: Some(ToolEffect::ReadOnly),
                show_args: vec!["topic".into()],
                ..ToolConfig::default()
            },
        )
        .start()
        .await?;
    let model = OpenAiServer::start([
        Reply::tool_calls(&[("m1", "mcp__notes__lookup", json!({"topic": "milk"}))]),
        Reply::text("Your notes say: buy milk."),
    ])
    .await?;
    let client = OpenAiClient::new(ClientConfig::new(model.base_url()))?;
    let agent = Agent::builder(client).tools(notes.tools()).build()?;
    let output = agent
        .prompt_output("What do my notes say about milk?")
        .await;
    notes.shutdown().await;
    let pinned = std::fs::read_to_string(&pins).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let output = output?;
    println!("{}", output.content);
    assert_eq!(output.records[0].error, None, "{:?}", output.records);
    let result = &model.requests()[1].body["messages"];
    assert!(result.to_string().contains("buy milk"), "{result}");
    assert!(
        pinned.contains("lookup"),
        "the definition is pinned: {pinned}"
    );
    Ok(())
}

/// A minimal MCP server on stdin and stdout: one `lookup` tool.
fn serve_mcp() -> Result<(), Box<dyn std::error::Error>> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        let request: Value = agent::serde_json::from_str(&line?)?;
        let Some(id) = request.get("id").cloned() else {
            continue; // a notification
        };
        let result = match request["method"].as_str().unwrap_or_default() {
            "initialize" => json!({
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "notes", "version": "1.0.0"},
            }),
            "tools/list" => json!({"tools": [{
                "name": "lookup",
                "description": "Look a topic up in the user's notes.",
                "inputSchema": {"type": "object",
                                "properties": {"topic": {"type": "string"}},
                                "required": ["topic"]},
            }]}),
            "tools/call" => {
                let topic = request["params"]["arguments"]["topic"]
                    .as_str()
                    .unwrap_or("");
                json!({"content": [{"type": "text", "text": format!("notes on {topic}: buy milk")}],
                       "isError": false})
            }
            _ => json!({}),
        };
        let response = json!({"jsonrpc": "2.0", "id": id, "result": result});
        writeln!(stdout, "{response}")?;
        stdout.flush()?;
    }
    Ok(())
}
