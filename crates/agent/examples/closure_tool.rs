//! An agent with a closure tool against an OpenAI-compatible endpoint.
//!
//! ```sh
//! OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... AGENT_MODEL=gpt-4o-mini \
//!   cargo run -p toolwright --example closure_tool --features testing
//! ```
//!
//! Without `OPENAI_BASE_URL` it says so and talks to a loopback server that plays a
//! tool call and an answer, through exactly the same client code.

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::testing::{OpenAiServer, Reply};

/// The arguments the model fills in; their schema is derived from this type.
#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// First addend.
    a: i64,
    /// Second addend.
    b: i64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Keep the loopback server alive for the whole run when it is used.
    let mut _loopback = None;
    let base_url = match std::env::var("OPENAI_BASE_URL") {
        Ok(url) => url,
        Err(_) => {
            eprintln!("OPENAI_BASE_URL is not set: using a loopback server with a scripted reply");
            let server = OpenAiServer::start([
                Reply::tool_calls(&[(
                    "call_1",
                    "app__add",
                    agent::serde_json::json!({"a": 2, "b": 40}),
                )]),
                Reply::text("2 + 40 = 42."),
            ])
            .await?;
            let url = server.base_url();
            _loopback = Some(server);
            url
        }
    };
    let mut config = ClientConfig::new(base_url);
    if let Ok(key) = std::env::var("OPENAI_API_KEY") {
        config = config.with_api_key(key);
    }
    let model_name = std::env::var("AGENT_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());

    let add = tool_fn(
        "add",
        "Add two integers.",
        ToolEffect::ReadOnly,
        |args: AddArgs| async move {
            Ok(Sum {
                sum: args.a + args.b,
            })
        },
    )?
    // Events show no argument or result field a tool does not list.
    .show_args(["a", "b"])?
    .show_output(["sum"])?;
    let agent = Agent::builder(OpenAiClient::new(config)?)
        .model_name(model_name)
        .system("You are a careful assistant. Use the add tool for arithmetic.")
        .tool(add)
        .build()?;

    let mut run = agent.run("What is 2 + 40?");
    while let Some(event) = run.next().await {
        match event.kind {
            AiEventKind::TextDelta { delta } => print!("{delta}"),
            AiEventKind::ToolCallStart { tool_name, .. } => eprintln!("[calling {tool_name}]"),
            AiEventKind::ToolCallResult { tool_name, ok, .. } => {
                eprintln!("[{tool_name} {}]", if ok { "done" } else { "failed" });
            }
            AiEventKind::Error { code, message } => eprintln!("[error {code}: {message}]"),
            _ => {}
        }
    }
    println!();
    let output = run.into_outcome().await?;
    eprintln!(
        "{} model calls, {} tokens",
        output.usage.len(),
        output.usage.iter().map(|u| u.total_tokens).sum::<u64>()
    );
    Ok(())
}
