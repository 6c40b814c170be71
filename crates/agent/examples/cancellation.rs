//! Cancelling a run: the tool that is running sees its cancellation token and
//! stops, and the run ends `Cancelled`.
//!
//! ```sh
//! cargo run -p toolwright --example cancellation --features testing
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::serde_json::json;
use agent::testing::{OpenAiServer, Reply};

#[derive(Deserialize, JsonSchema)]
struct Wait {
    /// How long to wait.
    seconds: u64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = OpenAiServer::start([Reply::tool_calls(&[(
        "w1",
        "app__wait",
        json!({"seconds": 60}),
    )])])
    .await?;
    let (started, observed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (running, seen) = (Arc::clone(&started), Arc::clone(&observed));
    let wait = tool_fn(
        "wait",
        "Wait a while.",
        ToolEffect::ReadOnly,
        move |args: Wait, cx: ToolCallContext| {
            let (running, seen) = (Arc::clone(&running), Arc::clone(&seen));
            async move {
                running.store(true, Ordering::SeqCst);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(args.seconds)) => Ok("waited"),
                    _ = cx.cancel.cancelled() => {
                        println!("the tool saw the cancellation");
                        seen.store(true, Ordering::SeqCst);
                        Err(ToolFailure::failed("stopped"))
                    }
                }
            }
        },
    )?;
    let client = OpenAiClient::new(ClientConfig::new(server.base_url()))?;
    let agent = Agent::builder(client).tool(wait).build()?;
    let run = agent.run("Wait a minute.");
    println!("run {}", run.run_id());
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run.cancel();
    let outcome = run.into_outcome().await;
    println!("{outcome:?}");
    assert!(matches!(outcome, Err(agent::run::RunError::Cancelled)));
    assert!(observed.load(Ordering::SeqCst), "the tool saw its token");
    Ok(())
}
