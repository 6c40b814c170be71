//! A library user's program: a closure tool, the `Agent` builder and the
//! OpenAI-compatible client, streaming events from a loopback server that plays a
//! tool call and then an answer. Exits non-zero if anything is off.

use agent_graph::Agent;
use agent_testing::server::{OpenAiServer, Reply};
use ai_core::{ToolEffect, event::AiEventKind};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use wire_openai::client::{ClientConfig, OpenAiClient};

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = OpenAiServer::start([
        Reply::tool_calls(&[("call_1", "app__add", json!({"a": 2, "b": 40}))]),
        Reply::text("2 + 40 = 42"),
    ])
    .await?;

    let add = ai_tools::tool_fn(
        "add",
        "Add two integers.",
        ToolEffect::ReadOnly,
        |args: AddArgs| async move {
            Ok(Sum {
                sum: args.a + args.b,
            })
        },
    )?;
    let client =
        OpenAiClient::new(ClientConfig::new(server.base_url()).with_api_key("sk-external"))?;
    let agent = Agent::builder(client)
        .model_name("gpt-4o-mini")
        .system("You add numbers.")
        .tool(add)
        .build()?;

    let (mut events, outcome) = agent.run("What is 2 + 40?").into_parts();
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        println!("{}", serde_json::to_string(&event)?);
        seen.push(event.kind);
    }
    let output = outcome.await?;
    assert_eq!(output.content, "2 + 40 = 42");
    assert!(
        seen.iter()
            .any(|k| matches!(k, AiEventKind::ToolCallResult { ok: true, .. }))
    );
    let second = &server.requests()[1].body;
    let tool_message = second["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .ok_or("no tool message in the second request")?;
    assert_eq!(tool_message["content"], r#"{"sum":42}"#);
    println!("external crate: ok");
    Ok(())
}
