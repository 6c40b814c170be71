//! Fan-out of run events to several consumers, each with its own queue.
//!
//! Publishing never waits: a slow subscriber never blocks the run or the other
//! subscribers. Two kinds of subscriber:
//! - **lossless** ([`Fanout::subscribe_lossless`]), for billing and history: gets every
//!   event (every `usage_report`, `assistant_final`, `error` and `done` among them).
//!   Its memory stays bounded while it is behind because consecutive `text_delta`s
//!   (and `reasoning_delta`s) are merged into one queued event; the concatenated text
//!   is unchanged.
//! - **lossy** ([`Fanout::subscribe`]), for UIs: holds at most `capacity` events. When
//!   full it drops further events (merging deltas first, and never dropping
//!   `assistant_final`, `error` or `done`), and the subscriber receives one
//!   [`SubscriberItem::Lagged`] at the place of each gap, counting the events it
//!   missed there.

use std::future::poll_fn;
use std::sync::Arc;

use ai_core::AiEvent;
use futures::{Stream, StreamExt};

use crate::run::{Queue, Slot};

/// Delivers each event to every subscriber's own queue.
#[derive(Default)]
pub struct Fanout {
    slots: Vec<Arc<Queue>>,
}

impl std::fmt::Debug for Fanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fanout")
            .field("subscribers", &self.slots.len())
            .finish()
    }
}

// tidy: exhaustive: an item is an event or the mark of a gap; nothing else.
/// What a subscriber receives.
#[derive(Debug, Clone, PartialEq)]
// Almost every item is an event; boxing it would cost an allocation per event to
// shrink the rare gap marker.
#[allow(clippy::large_enum_variant)]
pub enum SubscriberItem {
    /// The next event (consecutive text or reasoning deltas the subscriber was behind
    /// on arrive merged into one).
    Event(AiEvent),
    /// This many events were dropped here, between the items before and after this
    /// one, because this (lossy) subscriber's queue was full.
    Lagged(u64),
}

/// One consumer's end of a [`Fanout`]. Dropping it unsubscribes.
pub struct Subscriber {
    queue: Arc<Queue>,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("pending", &self.queue.len())
            .finish()
    }
}

impl Subscriber {
    /// The next item, in stream order: an event, or a lag notice where events were
    /// dropped. `None` once the fan-out is finished and the queue is drained.
    pub async fn recv(&mut self) -> Option<SubscriberItem> {
        let slot = poll_fn(|cx| self.queue.poll_pop(cx)).await?;
        Some(match slot {
            Slot::Event(event) => SubscriberItem::Event(event),
            Slot::Gap(missed) => SubscriberItem::Lagged(missed),
        })
    }

    /// Items waiting in this subscriber's queue (events and lag notices): how far
    /// behind it is, for metrics and tests.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.queue.receiver_gone();
    }
}

impl Fanout {
    /// A fan-out with no subscribers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a lossy subscriber (a UI) whose queue holds at most `capacity` events (at
    /// least 1); see the module docs.
    pub fn subscribe(&mut self, capacity: usize) -> Subscriber {
        self.add(Queue::lossy(capacity))
    }

    /// Adds a lossless subscriber (billing, history) that receives every event; see
    /// the module docs.
    pub fn subscribe_lossless(&mut self) -> Subscriber {
        self.add(Queue::lossless())
    }

    fn add(&mut self, queue: Queue) -> Subscriber {
        let queue = Arc::new(queue);
        self.slots.push(Arc::clone(&queue));
        Subscriber { queue }
    }

    /// Delivers one event to every live subscriber without waiting.
    pub fn publish(&mut self, event: &AiEvent) {
        self.slots.retain(|queue| queue.push(event.clone()));
    }

    /// Publishes every event of `events` until it ends, then closes all queues.
    pub async fn pump(mut self, events: impl Stream<Item = AiEvent>) {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            self.publish(&event);
        }
    }
}

impl Drop for Fanout {
    /// Subscribers receive what is queued, then the end.
    fn drop(&mut self) {
        for queue in &self.slots {
            queue.close();
        }
    }
}
