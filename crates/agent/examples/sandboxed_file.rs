//! A sandboxed file tool: the built-in `core__read_file` bound to one folder.
//! A read inside it works; an escape through `..` is refused by the kernel.
//!
//! ```sh
//! cargo run -p toolwright --example sandboxed_file --features host,testing
//! ```

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::serde_json::json;
use agent::testing::{OpenAiServer, Reply};
use agent::tools::{ToolErrorCode, builtin::ReadFile};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("agent-sandboxed-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("notes.txt"), "Buy milk.\n")?;
    let server = OpenAiServer::start([
        Reply::tool_calls(&[
            ("f1", "core__read_file", json!({"path": "notes.txt"})),
            ("f2", "core__read_file", json!({"path": "../../etc/passwd"})),
        ]),
        Reply::text("Your note says: Buy milk."),
    ])
    .await?;
    let client = OpenAiClient::new(ClientConfig::new(server.base_url()))?;
    let agent = Agent::builder(client)
        .tool(agent::host::bind_in_dir(ReadFile::default(), &dir)?)
        .build()?;
    let output = agent.prompt_output("What do my notes say?").await;
    std::fs::remove_dir_all(&dir)?;
    let output = output?;
    for record in &output.records {
        println!("{} -> {:?}", record.tool_call_id, record.error);
    }
    println!("{}", output.content);
    assert_eq!(output.records[0].error, None);
    // The file's text reached the model as the tool message answering f1.
    let requests = server.requests();
    let second = &requests.get(1).ok_or("no second request")?.body;
    assert!(second.to_string().contains("Buy milk."));
    assert_eq!(
        output.records[1].error,
        Some(ToolErrorCode::PermissionDenied)
    );
    Ok(())
}
