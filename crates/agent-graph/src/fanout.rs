//! Fan-out of run events to several consumers, each with its own bounded queue.
//!
//! A slow subscriber never blocks the run or the other subscribers: when its queue is
//! full, new events are dropped for it alone and it is told how many it missed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ai_core::AiEvent;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

struct Slot {
    tx: mpsc::Sender<AiEvent>,
    lagged: Arc<AtomicU64>,
}

/// Delivers each event to every subscriber's own bounded queue.
#[derive(Default)]
pub struct Fanout {
    slots: Vec<Slot>,
}

/// What a subscriber receives.
#[derive(Debug, Clone, PartialEq)]
pub enum SubscriberItem {
    /// The next event.
    Event(AiEvent),
    /// This many events were dropped for this subscriber because its queue was full.
    Lagged(u64),
}

/// One consumer's end of a [`Fanout`].
pub struct Subscriber {
    rx: mpsc::Receiver<AiEvent>,
    lagged: Arc<AtomicU64>,
}

impl Subscriber {
    /// The next item: a lag notice first if events were dropped, else the next event.
    /// `None` once the fan-out is finished and the queue is drained.
    pub async fn recv(&mut self) -> Option<SubscriberItem> {
        let missed = self.lagged.swap(0, Ordering::AcqRel);
        if missed > 0 {
            return Some(SubscriberItem::Lagged(missed));
        }
        match self.rx.recv().await {
            Some(event) => Some(SubscriberItem::Event(event)),
            None => {
                let missed = self.lagged.swap(0, Ordering::AcqRel);
                (missed > 0).then_some(SubscriberItem::Lagged(missed))
            }
        }
    }
}

impl Fanout {
    /// A fan-out with no subscribers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a subscriber whose queue holds at most `capacity` events (at least 1).
    pub fn subscribe(&mut self, capacity: usize) -> Subscriber {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let lagged = Arc::new(AtomicU64::new(0));
        self.slots.push(Slot {
            tx,
            lagged: Arc::clone(&lagged),
        });
        Subscriber { rx, lagged }
    }

    /// Delivers one event to every live subscriber without waiting.
    pub fn publish(&mut self, event: &AiEvent) {
        self.slots
            .retain(|slot| match slot.tx.try_send(event.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    slot.lagged.fetch_add(1, Ordering::AcqRel);
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            });
    }

    /// Publishes every event of `events` until it ends, then closes all queues.
    pub async fn pump(mut self, events: impl Stream<Item = AiEvent>) {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            self.publish(&event);
        }
    }
}
