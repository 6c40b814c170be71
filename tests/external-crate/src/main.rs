//! A library user's program, through the `agent` facade alone, against a loopback
//! OpenAI-compatible server: the six tasks a developer embedding the crates does
//! first. Each checks what the server received; the program exits non-zero if
//! anything is off.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::serde_json::{Value, json};
use agent::testing::{OpenAiServer, Reply};
use agent::tools::{ToolErrorCode, builtin::ReadFile};

type Error = Box<dyn std::error::Error>;

fn client(server: &OpenAiServer) -> Result<OpenAiClient, Error> {
    Ok(OpenAiClient::new(
        ClientConfig::new(server.base_url()).with_api_key("sk-external"),
    )?)
}

#[derive(Deserialize, JsonSchema)]
struct Refund {
    order: u32,
    amount: u32,
}

/// 1 and 3: a stateful tool behind an approval rule, its events streamed.
async fn refunds() -> Result<(), Error> {
    let server = OpenAiServer::start([
        Reply::tool_calls(&[
            ("r1", "app__refund", json!({"order": 1, "amount": 40})),
            ("r2", "app__refund", json!({"order": 2, "amount": 250})),
        ]),
        Reply::text("Refunded order 1; order 2 needs a manager."),
    ])
    .await?;
    let total = Arc::new(AtomicU32::new(0));
    let ledger = Arc::clone(&total);
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
    let agent = Agent::builder(client(&server)?)
        .tool(refund)
        .approver(approver_fn(|request| match request.args::<Refund>() {
            Ok(refund) if refund.amount <= 100 => ApprovalDecision::approve(request),
            _ => ApprovalDecision::deny("refunds over 100 need a manager"),
        }))
        .build()?;
    let mut run = agent.run("Refund orders 1 and 2.");
    while let Some(event) = run.next().await {
        println!("{}", agent::serde_json::to_string(&event)?);
    }
    let output = run.into_outcome().await?;
    let errors: Vec<_> = output.records.iter().map(|r| r.error).collect();
    assert_eq!(errors, [None, Some(ToolErrorCode::ApprovalDenied)]);
    assert_eq!(
        total.load(Ordering::SeqCst),
        40,
        "only the small refund ran"
    );
    let denied = tool_message(&server.requests()[1].body, "r2");
    assert!(denied.contains("approval_denied"), "{denied}");
    Ok(())
}

/// 2: a multi-turn chat with a system prompt.
async fn chat() -> Result<(), Error> {
    let server = OpenAiServer::start([Reply::text("Hi Ada."), Reply::text("You are Ada.")]).await?;
    let agent = Agent::builder(client(&server)?)
        .system("Be brief.")
        .build()?;
    let mut conversation = Conversation::new();
    agent.chat(&mut conversation, "I am Ada.").await?;
    let answer = agent.chat(&mut conversation, "Who am I?").await?.content;
    assert_eq!(answer, "You are Ada.");
    for request in server.requests() {
        let messages = request.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let systems = messages.iter().filter(|m| m["role"] == "system").count();
        assert_eq!(systems, 1, "one system prompt per request: {messages:?}");
    }
    Ok(())
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Order {
    id: u32,
    status: String,
    note: Option<String>,
}

/// 4: a typed JSON answer.
async fn typed() -> Result<(), Error> {
    let server =
        OpenAiServer::start([Reply::text(r#"{"id":7,"status":"shipped","note":null}"#)]).await?;
    let agent = Agent::builder(client(&server)?).build()?;
    let order: Order = agent.prompt_typed("Where is order 7?").await?;
    assert_eq!(
        order,
        Order {
            id: 7,
            status: "shipped".into(),
            note: None
        }
    );
    let format = &server.requests()[0].body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_eq!(
        format["json_schema"]["schema"]["additionalProperties"],
        false
    );
    Ok(())
}

/// 5: a sandboxed built-in tool bound to a folder.
async fn read_a_file() -> Result<(), Error> {
    let dir = std::env::temp_dir().join(format!("external-user-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("notes.txt"), "Buy milk.\n")?;
    let server = OpenAiServer::start([
        Reply::tool_calls(&[
            ("f1", "core__read_file", json!({"path": "notes.txt"})),
            ("f2", "core__read_file", json!({"path": "../../etc/passwd"})),
        ]),
        Reply::text("Your note says: Buy milk."),
    ])
    .await?;
    let agent = Agent::builder(client(&server)?)
        .tool(agent::host::bind_in_dir(ReadFile::default(), &dir)?)
        .build()?;
    let output = agent.prompt_output("What do my notes say?").await?;
    std::fs::remove_dir_all(&dir)?;
    let second = &server.requests()[1].body;
    assert!(tool_message(second, "f1").contains("Buy milk."));
    assert_eq!(
        output.records[1].error,
        Some(ToolErrorCode::PermissionDenied)
    );
    Ok(())
}

#[derive(Deserialize, JsonSchema)]
struct Wait {
    seconds: u64,
}

/// 6: cancelling a run; the running tool sees its token.
async fn cancel() -> Result<(), Error> {
    let server = OpenAiServer::start([Reply::tool_calls(&[(
        "w1",
        "app__wait",
        json!({"seconds": 60}),
    )])])
    .await?;
    let (observed, started) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (seen, running) = (Arc::clone(&observed), Arc::clone(&started));
    let wait = tool_fn_with_context(
        "wait",
        "Wait a while.",
        ToolEffect::ReadOnly,
        move |args: Wait, cx: ToolCallContext| {
            let (seen, running) = (Arc::clone(&seen), Arc::clone(&running));
            async move {
                running.store(true, Ordering::SeqCst);
                let sleep = tokio::time::sleep(std::time::Duration::from_secs(args.seconds));
                tokio::select! {
                    _ = sleep => Ok("waited"),
                    _ = cx.cancel.cancelled() => {
                        seen.store(true, Ordering::SeqCst);
                        Err(ToolFailure::failed("stopped"))
                    }
                }
            }
        },
    )?;
    let agent = Agent::builder(client(&server)?).tool(wait).build()?;
    let run = agent.run("Wait a minute.");
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    run.cancel();
    let outcome = run.into_outcome().await;
    assert!(
        matches!(outcome, Err(agent::run::RunError::Cancelled)),
        "{outcome:?}"
    );
    assert!(
        observed.load(Ordering::SeqCst),
        "the tool observed its token"
    );
    Ok(())
}

/// The content of the tool message answering `call` in a recorded request body.
fn tool_message(body: &Value, call: &str) -> String {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let message = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call);
    message
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    refunds().await?;
    chat().await?;
    typed().await?;
    read_a_file().await?;
    cancel().await?;
    println!("external crate: ok");
    Ok(())
}
