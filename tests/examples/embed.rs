//! Embedding the runtime: a typed tool, a deny-by-default policy, and the loop
//! streaming events, with the offline `TestModel` standing in for a real endpoint.
//!
//! Run with `cargo run -p integration-tests --example embed`.

use std::sync::Arc;

use agent_graph::testing::TestModel;
use agent_graph::{Graph, RunDeps, RunRequest};
use ai_core::{
    AiEventKind, Redaction, RunContext, ToolCallContext, ToolEffect, ToolFailure, ToolPolicy,
    ToolRunner,
};
use ai_tools::ToolContract;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `core__word_count`; the model sees the schema derived from this type.
#[derive(Deserialize, JsonSchema)]
struct CountArgs {
    /// The text to count words in.
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Count {
    words: usize,
}

struct WordCount;

impl ToolContract for WordCount {
    type Args = CountArgs;
    type Output = Count;
    type Capabilities = ();

    fn name(&self) -> &'static str {
        "word_count"
    }
    fn description(&self) -> &'static str {
        "Count the words in a text."
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    fn redaction(&self) -> Redaction {
        // Events show the count but never the text itself.
        Redaction::new(Vec::<&str>::new(), ["words"]).unwrap_or_default()
    }
    async fn execute(
        &self,
        _: &(),
        _: &ToolCallContext,
        args: CountArgs,
    ) -> Result<Count, ToolFailure> {
        Ok(Count {
            words: args.text.split_whitespace().count(),
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tool = ai_tools::bind(WordCount, ())?;
    let runner = ToolRunner::new(vec![tool], ToolPolicy::allowing(["core__word_count"]))?;
    let context = RunContext::generate();
    let graph = Graph::chat();
    let catalog = graph.select_tools(runner.catalog(&context));
    let request = RunRequest::new(context, "test-model", graph.messages("How many words?"));
    let handle = agent_graph::run(
        request,
        RunDeps {
            model: Arc::new(TestModel::new()),
            runner: Arc::new(runner),
            catalog: Arc::new(catalog),
        },
    );
    let (mut events, outcome) = handle.into_parts();
    while let Some(event) = events.next().await {
        match event.kind {
            AiEventKind::ToolCallStart { tool_name, .. } => println!("calling {tool_name}"),
            AiEventKind::ToolCallResult { ok, result, .. } => println!("  ok={ok} {result:?}"),
            AiEventKind::AssistantFinal { content } => println!("answer: {content}"),
            _ => {}
        }
    }
    let output = outcome.await?;
    println!("{} messages in the conversation", output.messages.len());
    Ok(())
}
