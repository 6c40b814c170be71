//! A typed answer: the type's JSON schema is sent as a strict response format,
//! and the answer is checked against it and read as the type.
//!
//! ```sh
//! cargo run -p toolwright --example typed_output --features testing
//! ```

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::testing::{OpenAiServer, Reply};

/// What the model must answer with.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Order {
    /// The order's number.
    id: u32,
    /// Where it is.
    status: String,
    /// Anything to add.
    note: Option<String>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server =
        OpenAiServer::start([Reply::text(r#"{"id":7,"status":"shipped","note":null}"#)]).await?;
    let client = OpenAiClient::new(ClientConfig::new(server.base_url()))?;
    let agent = Agent::builder(client).build()?;
    let order: Order = agent.prompt_typed("Where is order 7?").await?;
    println!("{order:?}");
    assert_eq!(
        order,
        Order {
            id: 7,
            status: "shipped".into(),
            note: None
        }
    );
    // The schema went out strict: every field required, nothing else allowed.
    let requests = server.requests();
    let format = &requests.first().ok_or("no request")?.body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_eq!(
        format["json_schema"]["schema"]["additionalProperties"],
        false
    );
    Ok(())
}
