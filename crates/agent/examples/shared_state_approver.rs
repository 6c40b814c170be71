//! Tools sharing state, behind a closure approver: two refunds asked for, the
//! small one approved and run, the large one denied without running.
//!
//! ```sh
//! cargo run -p toolwright --example shared_state_approver --features testing
//! ```
//!
//! The model is a loopback OpenAI-compatible server playing a scripted turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::serde_json::json;
use agent::testing::{OpenAiServer, Reply};
use agent::tools::ToolErrorCode;

#[derive(Deserialize, JsonSchema)]
struct Refund {
    /// The order.
    order: u32,
    /// How much to refund.
    amount: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = OpenAiServer::start([
        Reply::tool_calls(&[
            ("r1", "app__refund", json!({"order": 1, "amount": 40})),
            ("r2", "app__refund", json!({"order": 2, "amount": 250})),
        ]),
        Reply::text("Refunded order 1; order 2 needs a manager."),
    ])
    .await?;
    // The state the tool shares with the rest of the program.
    let refunded = Arc::new(AtomicU32::new(0));
    let ledger = Arc::clone(&refunded);
    let refund = tool_fn(
        "refund",
        "Refund an order.",
        ToolEffect::ExternalSideEffect,
        move |args: Refund| {
            let total = ledger.fetch_add(args.amount, Ordering::SeqCst) + args.amount;
            async move { Ok(json!({"order": args.order, "refunded_so_far": total})) }
        },
    )?
    .show_args(["order", "amount"])?;
    let client = OpenAiClient::new(ClientConfig::new(server.base_url()).with_api_key("sk-test"))?;
    let agent = Agent::builder(client)
        .tool(refund)
        .approver(approver_fn(|request| match request.args::<Refund>() {
            Ok(refund) if refund.amount <= 100 => ApprovalDecision::approve(request),
            _ => ApprovalDecision::deny("refunds over 100 need a manager"),
        }))
        .build()?;
    // Stream the run: each event is what a UI would show. The tool lets events
    // show `order` and `amount` (`show_args`); anything else would be redacted.
    let mut run = agent.run("Refund orders 1 and 2.");
    while let Some(event) = run.next().await {
        if let AiEventKind::ToolCallStart {
            tool_call_id, args, ..
        } = &event.kind
        {
            println!("{tool_call_id}: {args}");
            if tool_call_id == "r2" {
                assert_eq!(*args, json!({"order": 2, "amount": 250}));
            }
        }
    }
    let output = run.into_outcome().await?;
    for record in &output.records {
        println!("{} -> {:?}", record.tool_call_id, record.error);
    }
    println!("refunded in total: {}", refunded.load(Ordering::SeqCst));
    println!("answer: {}", output.content);
    let errors: Vec<_> = output.records.iter().map(|r| r.error).collect();
    assert_eq!(errors, [None, Some(ToolErrorCode::ApprovalDenied)]);
    assert_eq!(
        refunded.load(Ordering::SeqCst),
        40,
        "only the small refund ran"
    );
    // The model was told why: the denial is the tool message answering r2.
    let requests = server.requests();
    let second = &requests.get(1).ok_or("no second request")?.body;
    let denial = second["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["tool_call_id"] == "r2"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    assert!(denial.contains("approval_denied"), "{denial}");
    Ok(())
}
