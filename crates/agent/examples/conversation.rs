//! A three-turn conversation: each turn sees the ones before it, and the
//! system prompt is sent once per request.
//!
//! ```sh
//! cargo run -p toolwright --example conversation --features testing
//! ```

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::testing::{OpenAiServer, Reply};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = OpenAiServer::start([
        Reply::text("Hello Ada."),
        Reply::text("Paris."),
        Reply::text("You are Ada, and you asked about France."),
    ])
    .await?;
    let client = OpenAiClient::new(ClientConfig::new(server.base_url()))?;
    let agent = Agent::builder(client).system("Be brief.").build()?;
    let mut conversation = Conversation::new();
    for prompt in [
        "I am Ada.",
        "What is the capital of France?",
        "Who am I, and what did I ask?",
    ] {
        let output = agent.chat(&mut conversation, prompt).await?;
        println!("> {prompt}\n{}", output.content);
    }
    // The third request carried the whole history: three user messages.
    let requests = server.requests();
    let last = requests.last().ok_or("no request")?;
    let users = last.body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "user").count());
    assert_eq!(users, 3);
    // The system prompt goes once per request, however long the history.
    for request in &requests {
        let messages = request.body["messages"].as_array().ok_or("no messages")?;
        let systems = messages.iter().filter(|m| m["role"] == "system").count();
        assert_eq!(systems, 1, "{messages:?}");
    }
    assert_eq!(conversation.len(), 6, "three turns of two messages");
    Ok(())
}
