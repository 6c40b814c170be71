//! Streaming an answer to the terminal as it arrives: text deltas printed
//! without a newline, a tool call shown when it starts, usage at the end.
//!
//! ```sh
//! cargo run -p toolwright --example streaming --features testing
//! ```

use std::io::Write;

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::serde_json::json;
use agent::testing::{OpenAiServer, Reply};

#[derive(Deserialize, JsonSchema)]
struct City {
    /// The city.
    name: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = OpenAiServer::start([
        Reply::tool_calls(&[("c1", "app__weather", json!({"name": "Oslo"}))]),
        Reply::text("It is sunny in Oslo today, with a light breeze from the fjord."),
    ])
    .await?;
    let weather = tool_fn(
        "weather",
        "The weather in a city.",
        ToolEffect::ReadOnly,
        |city: City| async move { Ok(format!("sunny in {}", city.name)) },
    )?
    .show_args(["name"])?;
    let client = OpenAiClient::new(ClientConfig::new(server.base_url()))?;
    let agent = Agent::builder(client).tool(weather).build()?;
    let mut run = agent.run("Weather in Oslo?");
    let mut stdout = std::io::stdout();
    let mut streamed = String::new();
    while let Some(event) = run.next().await {
        match &event.kind {
            AiEventKind::TextDelta { delta } => {
                streamed.push_str(delta);
                write!(stdout, "{delta}")?;
                stdout.flush()?;
            }
            AiEventKind::ToolCallStart { tool_name, .. } => println!("[calling {tool_name}]"),
            _ => {}
        }
    }
    println!();
    let output = run.into_outcome().await?;
    let usage = output.total_usage();
    println!(
        "[{} prompt + {} completion tokens]",
        usage.prompt_tokens, usage.completion_tokens
    );
    assert_eq!(streamed, output.content);
    Ok(())
}
