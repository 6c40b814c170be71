//! The endpoint on a run store, where the store holds what another server
//! wrote: a run of a server whose lease on it ran out.

use std::time::Duration;

use agent_store::{NewRun, Thread};
use agent_testing::ScriptedModel;

use crate::support::{chunks, client, start_stored};

/// A run `running` on another server whose lease ran out (it died, wherever
/// it ran: no host name or process id is asked): a client resuming its chat
/// gets what the run wrote (in the message its server started: `msg-<run
/// id>`) and a clear end, at once, instead of waiting for a run nobody runs;
/// the run, which has no saved start, is marked interrupted. A run whose owner
/// still holds its lease is followed as running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_owners_lease_ran_out_ends_its_followers() {
    let (live, dir) = start_stored(ScriptedModel::new([])).await;
    let store = dir.open().await;
    let rows = store.account("local");
    let now = agent_store::recorder::now_ms();
    for (chat, lease_left_ms) in [("gone", -60_000), ("beating", 600_000)] {
        rows.create_thread(&Thread {
            id: chat.into(),
            title: chat.into(),
            graph: "test".into(),
            created_ms: now,
            updated_ms: now,
        })
        .await
        .unwrap();
        let owner = format!("serve:{chat}0123456789abcdef");
        store
            .renew_instance(&owner, "serve", now + lease_left_ms, now - 120_000)
            .await
            .unwrap();
        rows.start_run(&NewRun {
            id: format!("run-{chat}"),
            thread_id: Some(chat.into()),
            graph: "test".into(),
            model: "m".into(),
            prompt_hash: None,
            owner: owner.clone(),
            started_ms: now - 60_000,
        })
        .await
        .unwrap();
        let delta = ai_core::AiEvent::new(
            &ai_core::RunContext::new(format!("run-{chat}"), "t"),
            ai_core::event::AiEventKind::TextDelta {
                delta: "Half an ans".into(),
            },
        );
        rows.append_events(&format!("run-{chat}"), 0, &[delta], now)
            .await
            .unwrap();
    }
    let response = tokio::time::timeout(
        Duration::from_secs(10),
        client().get(live.url("/api/chat/gone/stream")).send(),
    )
    .await
    .expect("answered")
    .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let text = tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stream ends at once")
        .unwrap();
    let got = chunks(&text);
    // The message the run's own server streamed has this id too.
    assert_eq!(got[0]["messageId"], "msg-run-gone", "{text}");
    assert!(
        got.iter()
            .any(|c| c["type"] == "text-delta" && c["delta"] == "Half an ans"),
        "{text}"
    );
    assert!(
        got.iter().any(|c| c["type"] == "error"
            && c["errorText"]
                .as_str()
                .is_some_and(|t| t.contains("stopped"))),
        "{text}"
    );
    let gone = rows.run("run-gone").await.unwrap().unwrap();
    assert_eq!(gone.status, agent_store::RunStatus::Interrupted);
    // The run whose owner holds its lease is followed: its stream stays open.
    let response = client()
        .get(live.url("/api/chat/beating/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let still_open = tokio::time::timeout(Duration::from_millis(1500), response.text()).await;
    assert!(still_open.is_err(), "a beating run's stream is still open");
    let beating = rows.run("run-beating").await.unwrap().unwrap();
    assert_eq!(beating.status, agent_store::RunStatus::Running);
}
