//! Consuming a run's events for a UI: streaming text, one card per tool call with a
//! live state, usage, and errors, built from `AiEvent`s alone.
//!
//! ```sh
//! cargo run -p toolwright --example ui_events --features testing
//! ```
//!
//! The model is a `ScriptedModel`, so this runs offline; swap in any
//! model (e.g. `agent::openai::OpenAiClient`).

use std::collections::BTreeMap;
use std::time::Duration;

use agent::prelude::*;
use agent::serde_json::{self, json};
use agent::testing::{ScriptedModel, Turn};

#[derive(Deserialize, JsonSchema)]
struct WeatherArgs {
    /// City name.
    city: String,
}

#[derive(Serialize, JsonSchema)]
struct Weather {
    city: String,
    celsius: i32,
}

/// What a chat UI shows for one answer.
#[derive(Debug, Default)]
struct AnswerView {
    text: String,
    /// Tool cards by call id (a UI keeps them in call order; ids sort the same here).
    cards: BTreeMap<String, Card>,
    tokens: u64,
    error: Option<String>,
    finished: bool,
}

#[derive(Debug)]
struct Card {
    tool: String,
    state: &'static str,
    detail: String,
}

impl AnswerView {
    /// Applies one event; a UI re-renders after each.
    fn apply(&mut self, event: &AiEvent) {
        match &event.kind {
            AiEventKind::TextDelta { delta } => self.text.push_str(delta),
            AiEventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.cards.insert(
                    tool_call_id.clone(),
                    Card {
                        tool: tool_name.clone(),
                        state: "running",
                        detail: args.to_string(),
                    },
                );
            }
            AiEventKind::ToolCallResult {
                tool_call_id,
                ok,
                result,
                error_code,
                message,
                duration_ms,
                ..
            } => {
                if let Some(card) = self.cards.get_mut(tool_call_id) {
                    card.state = if *ok { "done" } else { "error" };
                    card.detail = match (result, error_code, message) {
                        (Some(result), _, _) => format!("{result} in {duration_ms} ms"),
                        (None, Some(code), Some(message)) => format!("{code:?}: {message}"),
                        _ => String::new(),
                    };
                }
            }
            AiEventKind::UsageReport { total_tokens, .. } => self.tokens += total_tokens,
            AiEventKind::Error { message, .. } => self.error = Some(message.clone()),
            AiEventKind::Done => self.finished = true,
            _ => {}
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("call_1", "app__weather", json!({"city": "Lisbon"}))
            .tool_call("call_2", "app__weather", json!({"city": "Oslo"}))
            .usage(40, 12),
        Turn::text("Lisbon is warmer (21 C) than Oslo (4 C).")
            .usage(80, 14)
            .delay_between(Duration::from_millis(20)),
    ]);
    let weather = tool_fn(
        "weather",
        "Current temperature in a city.",
        ToolEffect::ReadOnly,
        |args: WeatherArgs| async move {
            let celsius = if args.city == "Oslo" { 4 } else { 21 };
            Ok(Weather {
                city: args.city,
                celsius,
            })
        },
    )?
    // Let the city and the temperature reach events (and so the UI).
    .show_args(["city"])?
    .show_output(["city", "celsius"])?;
    let agent = Agent::builder(model).tool(weather).build()?;

    let mut view = AnswerView::default();
    let mut run = agent.run("Which is warmer, Lisbon or Oslo?");
    while let Some(event) = run.next().await {
        view.apply(&event);
        let cards: Vec<String> = view
            .cards
            .values()
            .map(|c| format!("[{} {}: {}]", c.tool, c.state, c.detail))
            .collect();
        println!(
            "{:<16} | {} | {}",
            label(&event),
            cards.join(" "),
            view.text
        );
    }
    run.into_outcome().await?;
    println!(
        "finished={} tokens={} error={:?}",
        view.finished, view.tokens, view.error
    );
    Ok(())
}

fn label(event: &AiEvent) -> String {
    serde_json::to_value(event)
        .ok()
        .and_then(|v| v["type"].as_str().map(str::to_owned))
        .unwrap_or_default()
}
