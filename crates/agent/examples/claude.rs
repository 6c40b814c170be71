//! Claude through Anthropic's Messages API (feature `anthropic`): the same
//! agent and tools, the Anthropic wire (tool use blocks, usage with cache
//! tokens, thinking signatures kept when thinking is on), and a typed answer
//! through Anthropic's structured outputs.
//!
//! ```sh
//! cargo run -p toolwright --example claude --features anthropic,testing
//! ```
//!
//! With `ANTHROPIC_API_KEY` set it talks to Anthropic; otherwise to a loopback
//! server playing the Messages API.

use agent::anthropic::{AnthropicClient, AnthropicConfig};
use agent::prelude::*;
use agent::serde_json::json;
use agent::testing::{OpenAiServer, Reply};

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// First addend.
    a: i64,
    /// Second addend.
    b: i64,
}

/// A typed answer: a list, which goes out wrapped as `{"value": [...]}`.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Step {
    /// What to do.
    action: String,
    /// For how many minutes.
    minutes: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut _loopback = None;
    let config = match std::env::var("ANTHROPIC_API_KEY") {
        Ok(key) => AnthropicConfig::new("https://api.anthropic.com").with_api_key(key),
        Err(_) => {
            eprintln!("ANTHROPIC_API_KEY is not set: using a loopback Messages API server");
            let server = OpenAiServer::start([
                Reply::anthropic_tool_uses(&[("toolu_1", "app__add", json!({"a": 2, "b": 40}))]),
                Reply::anthropic_text("2 + 40 = 42."),
                Reply::anthropic_text(r#"{"value": [{"action": "boil water", "minutes": 5}]}"#),
            ])
            .await?;
            let config =
                AnthropicConfig::new(server.anthropic_base_url()).with_api_key("sk-ant-test");
            _loopback = Some(server);
            config
        }
    };
    let add = tool_fn(
        "add",
        "Add two integers.",
        ToolEffect::ReadOnly,
        |args: AddArgs| async move { Ok(args.a + args.b) },
    )?;
    let agent = Agent::builder(AnthropicClient::new(config)?)
        .model_name("claude-sonnet-4-5")
        .tool(add)
        .build()?;
    let output = agent.prompt_output("What is 2 + 40? Use the tool.").await?;
    println!("{}", output.content);
    let usage = output.total_usage();
    println!(
        "{} prompt + {} completion tokens",
        usage.prompt_tokens, usage.completion_tokens
    );
    // A typed answer: the schema of `Vec<Step>` goes out as structured output.
    let steps: Vec<Step> = agent.prompt_typed("How do I make tea? One step.").await?;
    println!("{steps:?}");
    if let Some(server) = &_loopback {
        assert_eq!(output.content, "2 + 40 = 42.");
        assert_eq!(output.records[0].error, None);
        let requests = server.requests();
        assert_eq!(requests[0].path, "/v1/messages");
        assert_eq!(
            steps,
            [Step {
                action: "boil water".into(),
                minutes: 5
            }]
        );
        let format = &requests.last().ok_or("no request")?.body["output_config"]["format"];
        assert_eq!(format["type"], "json_schema");
        let wrapped = &format["schema"]["properties"]["value"];
        assert_eq!(wrapped["type"], "array");
        // `minimum` (from `u32`) is not in the grammar: removed, checked on read.
        assert_eq!(
            wrapped["items"]["properties"]["minutes"].get("minimum"),
            None
        );
    }
    Ok(())
}
