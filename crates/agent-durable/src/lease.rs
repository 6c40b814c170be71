//! Who runs a run: this process, under a lease it renews in the run store.
//!
//! A process that runs recorded runs (a server, a worker, an `agent chat`) is
//! an [`Instance`]: a random id drawn at start (never its host name or process
//! id, which say nothing across PID namespaces and restarts), renewed in the
//! store every [`LeaseTiming::renew_every`] for [`LeaseTiming::lease`]. A run it
//! starts is owned by that id; a run whose owner's lease ran out is an orphan
//! that any process on the store may take over ([`agent_store::Store::claim_run`]),
//! which raises the run's generation.
//!
//! Fencing: a step of a run is recorded only under the owner and generation its
//! writer holds, checked in the transaction that records it (see
//! [`agent_store::AccountStore::record_step`]), so a process that lost a run
//! records nothing more of it, and so runs none of its calls that act. A
//! process also knows on its own clock until when its lease holds: once it is
//! past that (it was paused, or could not reach the store), the current
//! [`Epoch`] is lost: its runs are cancelled before anything else, a step they
//! record is refused, and the process goes on under a new id (its old runs are
//! orphans then, taken over from their journals by whichever process comes
//! first, this one included).

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use agent_store::{Fence, Store, StoreError};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a lease lasts and how often it is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseTiming {
    /// How long a renewal holds: another process takes a run over this long
    /// after its owner's last renewal at the soonest.
    pub lease: Duration,
    /// How often the lease is renewed (well within [`LeaseTiming::lease`]).
    pub renew_every: Duration,
}

impl Default for LeaseTiming {
    /// A 10 s lease renewed every 2 s.
    fn default() -> Self {
        Self::new(Duration::from_secs(10))
    }
}

impl LeaseTiming {
    /// A lease of `lease` (at least a second), renewed five times within it.
    pub fn new(lease: Duration) -> Self {
        let lease = lease.max(Duration::from_secs(1));
        Self {
            lease,
            renew_every: lease / 5,
        }
    }

    /// How long before the lease's end in the store this process stops
    /// counting on it: one renewal interval, so a process that holds a run by
    /// its own clock holds it in the store too, clocks of a few seconds apart
    /// included.
    fn margin(&self) -> Duration {
        self.renew_every
    }
}

/// One lease of this process: its id in the store while it holds.
#[derive(Debug)]
pub struct Epoch {
    id: String,
    /// Until when the lease holds, on this process's monotonic clock.
    valid_until: Mutex<Instant>,
    lost: CancellationToken,
}

impl Epoch {
    /// The id this process's runs are owned by under this lease.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the lease still holds now, by this process's own clock.
    pub fn holds(&self) -> bool {
        !self.lost.is_cancelled()
            && Instant::now()
                < *self
                    .valid_until
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancelled when the lease is lost: every run owned under it stops.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// The fence of a run held at `generation` under this lease.
    pub fn fence(&self, generation: i64) -> Fence {
        Fence {
            owner: self.id.clone(),
            generation,
        }
    }
}

/// A run held by this process: the lease it is held under and its generation.
#[derive(Debug, Clone)]
pub struct RunLease {
    /// The lease.
    pub epoch: Arc<Epoch>,
    /// The run's generation.
    pub generation: i64,
}

impl RunLease {
    /// The fence the store checks.
    pub fn fence(&self) -> Fence {
        self.epoch.fence(self.generation)
    }
}

/// This process as an owner of runs (see the module docs).
#[derive(Debug)]
pub struct Instance {
    store: Store,
    kind: String,
    timing: LeaseTiming,
    epoch: Mutex<Arc<Epoch>>,
    stop: CancellationToken,
}

impl Instance {
    /// Takes a lease in `store` for a process of `kind` (`serve`, `worker`,
    /// `cli`) and keeps renewing it in the background until
    /// [`Instance::release`] or the last handle is dropped.
    pub async fn start(
        store: Store,
        kind: &str,
        timing: LeaseTiming,
    ) -> Result<Arc<Self>, StoreError> {
        let epoch = Arc::new(new_epoch(kind));
        let instance = Arc::new(Self {
            store,
            kind: kind.to_owned(),
            timing,
            epoch: Mutex::new(Arc::clone(&epoch)),
            stop: CancellationToken::new(),
        });
        instance.renew(&epoch).await?;
        tokio::spawn(renewing(Arc::downgrade(&instance), instance.stop.clone()));
        Ok(instance)
    }

    /// The current lease.
    pub fn epoch(&self) -> Arc<Epoch> {
        Arc::clone(&self.epoch.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The current lease's id (a run this process starts now is owned by it).
    pub fn id(&self) -> String {
        self.epoch().id.clone()
    }

    /// The lease of a run this process starts now: generation 0.
    pub fn new_run(&self) -> RunLease {
        RunLease {
            epoch: self.epoch(),
            generation: 0,
        }
    }

    /// The lease of a run taken over under `fence` (which names the current
    /// lease).
    pub fn taken(&self, fence: &Fence) -> RunLease {
        RunLease {
            epoch: self.epoch(),
            generation: fence.generation,
        }
    }

    /// The timing.
    pub fn timing(&self) -> LeaseTiming {
        self.timing
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Ends the lease now (a clean stop): the runs still owned are orphans at
    /// once, for the next process to take over.
    pub async fn release(&self) {
        self.stop.cancel();
        let epoch = self.epoch();
        epoch.lost.cancel();
        if let Err(error) = self.store.release_instance(&epoch.id).await {
            tracing::warn!(%error, "the run store did not take this process's release");
        }
    }

    /// Renews `epoch` in the store; on success it holds until now plus the
    /// lease, less the margin.
    async fn renew(&self, epoch: &Epoch) -> Result<(), StoreError> {
        let asked = Instant::now();
        let lease_ms = i64::try_from(self.timing.lease.as_millis()).unwrap_or(i64::MAX);
        let now = agent_store::recorder::now_ms();
        self.store
            .renew_instance(&epoch.id, &self.kind, now.saturating_add(lease_ms), now)
            .await?;
        let until = asked + self.timing.lease.saturating_sub(self.timing.margin());
        *epoch
            .valid_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = until;
        Ok(())
    }

    /// One renewal: the current lease renewed, or, when it already ran out by
    /// this process's clock, given up (its runs cancelled) for a new one.
    async fn tick(&self) {
        let epoch = self.epoch();
        if !epoch.holds() {
            tracing::warn!(
                instance = %epoch.id,
                "this process's lease on its runs ran out (it was paused, or the run store was unreachable); its runs stop and are taken over from their journals"
            );
            epoch.lost.cancel();
            let fresh = Arc::new(new_epoch(&self.kind));
            *self.epoch.lock().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&fresh);
            if let Err(error) = self.renew(&fresh).await {
                tracing::warn!(%error, "the run store did not take this process's new lease");
            }
            return;
        }
        if let Err(error) = self.renew(&epoch).await {
            tracing::warn!(%error, "the run store did not take this process's lease renewal");
        }
    }
}

/// Renews the lease of `instance` until it stops or is dropped.
async fn renewing(instance: Weak<Instance>, stop: CancellationToken) {
    let every = match instance.upgrade() {
        Some(instance) => instance.timing.renew_every,
        None => return,
    };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(instance) = instance.upgrade() else {
            return;
        };
        instance.tick().await;
    }
}

/// A lease with a fresh random id (`KIND:` and 32 hex digits).
fn new_epoch(kind: &str) -> Epoch {
    Epoch {
        id: format!("{kind}:{}", uuid::Uuid::new_v4().simple()),
        valid_until: Mutex::new(Instant::now()),
        lost: CancellationToken::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_renews_five_times_a_lease_and_never_below_a_second() {
        let timing = LeaseTiming::new(Duration::from_millis(10));
        assert_eq!(timing.lease, Duration::from_secs(1));
        assert_eq!(timing.renew_every, Duration::from_millis(200));
        assert_eq!(LeaseTiming::default().renew_every, Duration::from_secs(2));
    }

    #[test]
    fn ids_are_random_and_name_their_kind() {
        let (a, b) = (new_epoch("serve"), new_epoch("serve"));
        assert_ne!(a.id, b.id);
        assert!(a.id.starts_with("serve:") && a.id.len() == "serve:".len() + 32);
        assert!(!a.holds(), "a lease holds only once the store took it");
    }
}
