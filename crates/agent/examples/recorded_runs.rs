//! Recording runs in an embedded SQLite store from library code: each run, its
//! thread, its events and its usage recorded by the run owner (the lifecycle
//! `agent serve` and `agent chat` use), then usage queried per run, per thread
//! and per account.
//!
//! ```sh
//! cargo run -p toolwright --example recorded_runs --features store,testing
//! ```

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::store::{AgentRun, Runs, Store};
use agent::testing::{OpenAiServer, Reply};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("agent-recorded-runs-{}", std::process::id()));
    let result = record(&dir).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn record(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let model =
        OpenAiServer::start([Reply::text("Paris."), Reply::text("About 2.1 million.")]).await?;
    let client = OpenAiClient::new(ClientConfig::new(model.base_url()))?;
    let agent = Agent::builder(client).system("Be brief.").build()?;

    let store = Store::open_sqlite(&dir.join("runs.db")).await?;
    let runs = Runs::open(store.clone()).await?;
    let mut run_ids = Vec::new();
    for prompt in ["Capital of France?", "How many people live there?"] {
        let mut run = runs
            .run_agent(&agent, AgentRun::new(prompt).account("ada").thread("trip"))
            .await?;
        run_ids.push(run.run_id().to_owned());
        while let Some(event) = run.next().await {
            if let AiEventKind::TextDelta { delta } = &event.kind {
                print!("{delta}");
            }
        }
        println!();
        let output = run.finish().await?;
        println!("  used {} tokens", output.total_usage().total_tokens);
    }

    let ada = store.account("ada");
    let first = ada.usage_of_run(&run_ids[0]).await?;
    let thread = ada.usage_of_thread("trip").await?;
    let total = ada.usage_total(0).await?;
    println!(
        "run {}: {} calls; thread: {} calls, {} tokens; account: {} tokens",
        first.key,
        first.calls,
        thread.calls,
        thread.total_tokens(),
        total.total_tokens()
    );
    assert_eq!((first.calls, thread.calls), (1, 2));
    // The second run saw the first turn: the thread is the conversation.
    let second = &model.requests()[1].body["messages"];
    assert_eq!(second.as_array().map_or(0, Vec::len), 4, "{second}");
    assert_eq!(ada.messages("trip").await?.len(), 4);
    runs.instance().release().await;
    Ok(())
}
