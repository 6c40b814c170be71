//! The same agent over OpenAI's Responses API and Gemini's own API (features
//! `responses` and `gemini`): a tool call, then a typed answer asked for the
//! way each provider takes it (Responses' strict `text.format`, Gemini's
//! `responseSchema`).
//!
//! ```sh
//! cargo run -p toolwright --example other_wires --features responses,gemini,testing
//! ```
//!
//! Both models are one loopback server playing the two APIs' streams.

use agent::gemini::{GeminiClient, GeminiConfig};
use agent::prelude::*;
use agent::responses::{ResponsesClient, ResponsesConfig};
use agent::serde_json::json;
use agent::testing::{OpenAiServer, Reply};

#[derive(Deserialize, JsonSchema)]
struct City {
    /// The city's name.
    name: String,
}

/// The typed answer.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Forecast {
    /// Where.
    city: String,
    /// Degrees Celsius.
    celsius: i32,
    /// A remark, if any.
    note: Option<String>,
}

/// The weather tool both agents share.
fn weather() -> Result<agent::tools::ToolFn<City, String>, agent::tools::ContractError> {
    tool_fn(
        "weather",
        "The weather in a city.",
        ToolEffect::ReadOnly,
        |city: City| async move { Ok(format!("sunny, 21 C in {}", city.name)) },
    )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let answer = r#"{"city": "Oslo", "celsius": 21, "note": null}"#;
    let server = OpenAiServer::start([
        Reply::responses_function_calls(&[("call_1", "app__weather", json!({"name": "Oslo"}))]),
        Reply::responses_text("Sunny and 21 C in Oslo."),
        Reply::responses_text(answer),
        Reply::gemini_function_calls(&[("g1", "app__weather", json!({"name": "Oslo"}))]),
        Reply::gemini_text("Sunny and 21 C in Oslo."),
        Reply::gemini_text(answer),
    ])
    .await?;

    let responses = ResponsesClient::new(ResponsesConfig::new(server.base_url()))?;
    let gemini = GeminiClient::new(GeminiConfig::new(server.gemini_base_url()))?;
    let agents = [
        Agent::builder(responses)
            .model_name("gpt-5-mini")
            .tool(weather()?)
            .build()?,
        Agent::builder(gemini)
            .model_name("gemini-2.5-flash")
            .tool(weather()?)
            .build()?,
    ];
    for agent in &agents {
        let output = agent.prompt_output("Weather in Oslo?").await?;
        println!("{}: {}", agent.model_name(), output.content);
        assert_eq!(output.records.len(), 1, "one tool call");
        assert_eq!(output.records[0].error, None);
        let forecast: Forecast = agent
            .prompt_typed("The forecast for Oslo, as data.")
            .await?;
        println!("{}: {forecast:?}", agent.model_name());
        assert_eq!(
            forecast,
            Forecast {
                city: "Oslo".into(),
                celsius: 21,
                note: None
            }
        );
    }
    // How each asked for the typed answer.
    let requests = server.requests();
    let format = &requests[2].body["text"]["format"];
    assert_eq!(
        (format["type"].as_str(), format["strict"].as_bool()),
        (Some("json_schema"), Some(true))
    );
    assert!(requests[2].path.ends_with("/responses"));
    let config = &requests[5].body["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(
        config["responseSchema"]["properties"]["note"]["nullable"],
        true
    );
    assert!(
        requests[5]
            .path
            .contains("gemini-2.5-flash:streamGenerateContent")
    );
    Ok(())
}
