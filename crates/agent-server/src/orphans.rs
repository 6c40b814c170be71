//! Runs that stopped servers left: a run whose owner's lease ran out is taken
//! over by one server (under the next generation) and goes on from its
//! journal, with no client (a client attaches with `GET
//! /api/chat/{id}/stream`); with take-over off, it is marked interrupted.

use std::sync::Arc;
use std::time::Duration;

use agent_durable::{RunSpec, SavedStart};
use agent_store::{Orphan, RunStatus, StoreError};
use chat_protocol::StreamEncoder;

use crate::relay::{Live, Relay};
use crate::server::{ChatRef, ChatService, answer_id, scope};

/// Whether `orphan` is a server's run (not an `agent chat`'s: those are the
/// command line's to resume).
fn of_server(orphan: &Orphan) -> bool {
    match orphan.kind.as_deref() {
        Some(kind) => kind == "serve",
        None => orphan.owner.starts_with("serve:"),
    }
}

impl ChatService {
    /// The runs stopped servers left (their owner's lease ran out): gone on
    /// with here when this server takes runs over, else marked interrupted;
    /// returns how many it settled.
    pub async fn settle_orphans(self: &Arc<Self>) -> Result<usize, StoreError> {
        let Some(runs) = self.runs() else {
            return Ok(0);
        };
        let store = runs.store().clone();
        let now = agent_store::recorder::now_ms();
        let mut settled = 0;
        for orphan in store
            .orphaned_runs(now)
            .await?
            .iter()
            .filter(|o| of_server(o))
        {
            let done = if self.takes_over() {
                self.resume_orphan(orphan).await?
            } else {
                let error = "the server running it stopped during the run";
                store.interrupt_orphan(orphan, error, now).await?
            };
            if done {
                settled += 1;
            }
        }
        Ok(settled)
    }

    /// Looks for runs stopped servers left, every lease renewal interval, and
    /// settles them ([`ChatService::settle_orphans`]), and for runs a durable
    /// engine never acknowledged (`agent_durable::Runs::resubmit`), while the
    /// service lives (a server with a store).
    pub fn watch_orphans(self: &Arc<Self>) {
        let Some(every) = self.runs().map(|r| r.instance().timing().renew_every) else {
            return;
        };
        let service = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(service) = service.upgrade() else {
                    return;
                };
                match service.settle_orphans().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(runs = n, "settled runs a stopped server left"),
                    Err(error) => {
                        tracing::warn!(%error, "could not look for runs stopped servers left");
                    }
                }
                let resubmitted = match service.runs() {
                    Some(runs) => runs.resubmit().await,
                    None => Ok(0),
                };
                if let Err(error) = resubmitted {
                    tracing::warn!(%error, "could not look for runs the durable engine never took");
                }
            }
        });
    }

    /// Takes `orphan` over and starts it again; `false` when it was not taken
    /// (another server took it first, or it cannot go on and was marked
    /// interrupted).
    async fn resume_orphan(self: &Arc<Self>, orphan: &Orphan) -> Result<bool, StoreError> {
        let Some(runs) = self.runs() else {
            return Ok(false);
        };
        let store = runs.store();
        let now = agent_store::recorder::now_ms();
        let (saved, graph) = match self.startable(orphan) {
            Ok(found) => found,
            Err(error) => {
                let message = format!("the run cannot go on: {error}");
                if store.interrupt_orphan(orphan, &message, now).await? {
                    tracing::error!(run_id = %orphan.run_id, %error, "a run a stopped server left cannot start again; marked interrupted");
                }
                return Ok(false);
            }
        };
        let key = (orphan.account_id.as_str(), orphan.run_id.as_str());
        let instance = runs.instance();
        let Some(fence) = store
            .claim_run(key, &orphan.fence(), &instance.id(), now)
            .await?
        else {
            return Ok(false);
        };
        let lease = instance.taken(&fence);
        let journal =
            agent_durable::StoreJournal::new(store.clone(), orphan.account_id.clone(), None)
                .with_lease(lease.clone());
        let rows = store.account(orphan.account_id.clone());
        let handle = match graph.durable(
            saved.start.clone(),
            Arc::clone(self.model()),
            Arc::clone(self.runner()),
            Arc::new(journal),
        ) {
            Ok(handle) => handle,
            Err(error) => {
                let message = format!("the run cannot go on: {error}");
                rows.set_run_status(&orphan.run_id, RunStatus::Interrupted, Some(&message), now)
                    .await?;
                return Ok(false);
            }
        };
        rows.clear_events(&orphan.run_id).await?;
        let Some(record) = rows.run(&orphan.run_id).await? else {
            return Ok(false);
        };
        let chat_id = orphan.thread_id.clone().unwrap_or_default();
        let spec = RunSpec::new(
            orphan.account_id.clone(),
            (
                saved.graph.clone(),
                saved.model.clone(),
                saved.prompt_hash.clone(),
            ),
        )
        .with_answer_id(
            saved
                .answer_id
                .clone()
                .unwrap_or_else(|| answer_id(&orphan.run_id)),
        );
        let cancel = handle.cancel_token();
        let live = runs.go_on(spec, (handle, &record.run), (Some(lease), saved.kept));
        let chat = ChatRef {
            scoped: scope(&orphan.account_id, &chat_id),
            id: chat_id,
            account: orphan.account_id.clone(),
            title: String::new(),
        };
        let encoder: Box<dyn StreamEncoder> = Box::new(
            chat_protocol::ui_stream::UiStreamEncoder::new(answer_id(&orphan.run_id)),
        );
        let replay = self
            .active()
            .open(&chat.scoped, encoder.headers(), cancel.clone());
        let relay = Relay {
            heartbeat: crate::DEFAULT_HEARTBEAT,
            detach_grace: Duration::ZERO,
            write_timeout: crate::DEFAULT_WRITE_TIMEOUT,
            replay,
            stop: cancel,
        };
        tracing::info!(run_id = %orphan.run_id, "a durable run of a stopped server goes on here");
        let service = Arc::clone(self);
        tokio::spawn(async move {
            service
                .respond(chat, Live::Recorded(Box::new(live)), encoder, None, relay)
                .await;
        });
        Ok(true)
    }

    /// What `orphan` starts again from, and the graph it runs; why not, when
    /// it cannot.
    fn startable(&self, orphan: &Orphan) -> Result<(SavedStart, Arc<agent_graph::Graph>), String> {
        let text = orphan.start.as_deref().ok_or("it has no saved start")?;
        let saved: SavedStart = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let graph = self
            .graph_named(&saved.graph)
            .ok_or_else(|| format!("this server has no graph `{}`", saved.graph))?;
        Ok((saved, graph))
    }
}
