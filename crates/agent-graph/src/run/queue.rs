//! The one event queue behind a run's [`EventStream`](super::EventStream) and every
//! [`Subscriber`](crate::fanout::Subscriber) of a [`Fanout`](crate::fanout::Fanout).
//!
//! Pushing never waits (a slow or absent consumer cannot stall a run), and memory
//! stays bounded without dropping what matters:
//! - while the consumer is behind (at least [`COALESCE_AFTER`] events queued, or a
//!   lossy queue's capacity if smaller), a `text_delta` (or `reasoning_delta`) that
//!   continues the last queued event is merged into it ([`AiEvent::absorb`]: same
//!   kind, same run and subagent), so a stalled consumer holds one growing text per
//!   gap instead of one event per token (the concatenated text is unchanged); a
//!   consumer that keeps up sees the deltas as they came;
//! - a lossless queue keeps every other event;
//! - a lossy queue holds at most `capacity` events: beyond that it drops events, except
//!   `assistant_final`, `error` and `done`, and marks each gap with one
//!   [`Slot::Gap`] at its place in the stream, counting the dropped events.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use ai_core::{AiEvent, event::AiEventKind};

/// One queued item.
#[derive(Debug)]
// Almost every item is an event; boxing it would cost an allocation per event to
// shrink the rare gap marker.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Slot {
    /// An event (possibly several coalesced deltas).
    Event(AiEvent),
    /// This many events were dropped here.
    Gap(u64),
}

/// Queued events past which consecutive deltas are merged.
pub(crate) const COALESCE_AFTER: usize = 64;

/// Slots a drained queue keeps (see [`Queue::poll_pop`]): one, as a consumer
/// that keeps up takes each event as it comes (a `VecDeque` of events grows to
/// four slots, 1.1 KiB, at its first push; every open stream kept them).
const KEPT_ROOM: usize = 1;

#[derive(Debug, Default)]
struct State {
    items: VecDeque<Slot>,
    /// Events (not gaps) in `items`.
    events: usize,
    waker: Option<Waker>,
    /// No more events will be pushed.
    closed: bool,
    /// The consumer is gone: pushes are discarded.
    receiver_gone: bool,
    /// Deltas merged into an already queued delta, in total.
    coalesced: u64,
}

/// A single-consumer event queue; see the module docs.
#[derive(Debug)]
pub(crate) struct Queue {
    /// `None`: lossless.
    capacity: Option<usize>,
    /// Queued events from which deltas are merged.
    coalesce_after: usize,
    state: Mutex<State>,
}

/// Events a lossy queue never drops: how the run ended.
fn is_terminal(event: &AiEvent) -> bool {
    matches!(
        event.kind,
        AiEventKind::AssistantFinal { .. } | AiEventKind::Error { .. } | AiEventKind::Done
    )
}

impl Queue {
    /// A queue that keeps every event.
    pub(crate) fn lossless() -> Self {
        Self {
            capacity: None,
            coalesce_after: COALESCE_AFTER,
            state: Mutex::default(),
        }
    }

    /// A queue that holds at most `capacity` events (at least 1).
    pub(crate) fn lossy(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity: Some(capacity),
            // Merging beats dropping: a full lossy queue merges deltas first.
            coalesce_after: COALESCE_AFTER.min(capacity),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `event` without waiting. Returns `false` once the consumer is gone.
    pub(crate) fn push(&self, event: AiEvent) -> bool {
        let waker = {
            let mut state = self.lock();
            if state.receiver_gone {
                return false;
            }
            if state.closed {
                return true;
            }
            let behind = state.events >= self.coalesce_after;
            if let Some(Slot::Event(back)) = state.items.back_mut()
                && behind
                && back.absorb(&event)
            {
                state.coalesced += 1;
                return true; // the consumer was already woken for `back`
            }
            let full = self
                .capacity
                .is_some_and(|capacity| state.events >= capacity);
            if full && !is_terminal(&event) {
                match state.items.back_mut() {
                    Some(Slot::Gap(dropped)) => *dropped += 1,
                    _ => state.items.push_back(Slot::Gap(1)),
                }
            } else {
                state.items.push_back(Slot::Event(event));
                state.events += 1;
            }
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        true
    }

    /// Ends the queue: the consumer gets what is queued, then the end.
    pub(crate) fn close(&self) {
        let waker = {
            let mut state = self.lock();
            state.closed = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The consumer is gone: drops what is queued and discards later pushes.
    pub(crate) fn receiver_gone(&self) {
        let mut state = self.lock();
        state.receiver_gone = true;
        state.items = VecDeque::new();
        state.events = 0;
        state.waker = None;
    }

    /// The next item, `None` once closed and drained.
    pub(crate) fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<Slot>> {
        let mut state = self.lock();
        if let Some(item) = state.items.pop_front() {
            if matches!(item, Slot::Event(_)) {
                state.events -= 1;
            }
            // A burst (a run's start, a tool turn) leaves room for many events;
            // a consumer that caught up needs room for a few. The room is given
            // back once drained, not kept for the rest of a long stream.
            if state.items.is_empty() && state.items.capacity() > KEPT_ROOM {
                state.items.shrink_to(KEPT_ROOM);
            }
            return Poll::Ready(Some(item));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Items waiting (events and gap marks).
    pub(crate) fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Deltas merged into an already queued delta so far.
    pub(crate) fn coalesced(&self) -> u64 {
        self.lock().coalesced
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ai_core::RunContext;
    use futures::task::noop_waker_ref;

    fn event(kind: AiEventKind) -> AiEvent {
        AiEvent::new(&RunContext::new("r", "t"), kind)
    }

    fn text(delta: &str) -> AiEvent {
        event(AiEventKind::TextDelta {
            delta: delta.into(),
        })
    }

    fn drain(queue: &Queue) -> Vec<Slot> {
        let mut cx = Context::from_waker(noop_waker_ref());
        let mut out = Vec::new();
        while let Poll::Ready(Some(item)) = queue.poll_pop(&mut cx) {
            out.push(item);
        }
        out
    }

    #[test]
    fn deltas_coalesce_only_with_a_queued_delta_of_their_kind_and_run() {
        let queue = Queue::lossy(1);
        queue.push(text("a"));
        queue.push(text("b"));
        queue.push(event(AiEventKind::ReasoningDelta { delta: "r".into() }));
        queue.push(event(AiEventKind::ReasoningDelta { delta: "s".into() }));
        queue.push(text("c"));
        let other = AiEvent::new(
            &RunContext::new("other", "t"),
            AiEventKind::TextDelta { delta: "d".into() },
        );
        queue.push(other);
        queue.push(event(AiEventKind::Done));
        assert_eq!(queue.coalesced(), 1);
        let items: Vec<String> = drain(&queue)
            .into_iter()
            .map(|slot| match slot {
                Slot::Event(e) => format!("{:?}", e.kind),
                Slot::Gap(n) => format!("gap {n}"),
            })
            .collect();
        // Full at one event: "b" merges, everything else but `done` is dropped, each
        // gap marked where it happened.
        assert_eq!(
            items,
            vec![
                format!("{:?}", AiEventKind::TextDelta { delta: "ab".into() }),
                "gap 4".to_owned(),
                format!("{:?}", AiEventKind::Done),
            ]
        );
        // Once drained, a new delta is queued on its own.
        queue.push(text("e"));
        assert_eq!(queue.coalesced(), 1);
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn a_drained_queue_gives_back_the_room_of_a_burst() {
        let queue = Queue::lossless();
        for i in 0..40 {
            queue.push(event(AiEventKind::ToolWithheld {
                tool_name: format!("t{i}"),
                reason: String::new(),
            }));
        }
        assert!(queue.lock().items.capacity() >= 40);
        assert_eq!(drain(&queue).len(), 40);
        let room = queue.lock().items.capacity();
        assert!(
            (1..=KEPT_ROOM).contains(&room),
            "kept room for {room} slots"
        );
        // A stream that keeps up then pushes and pops without growing it.
        let mut cx = Context::from_waker(noop_waker_ref());
        for _ in 0..10 {
            queue.push(text("x"));
            assert!(matches!(queue.poll_pop(&mut cx), Poll::Ready(Some(_))));
        }
        assert_eq!(queue.lock().items.capacity(), room);
    }

    #[test]
    fn a_lossless_queue_merges_only_past_its_slack() {
        let queue = Queue::lossless();
        for i in 0..COALESCE_AFTER {
            queue.push(text(&i.to_string()));
        }
        assert_eq!((queue.len(), queue.coalesced()), (COALESCE_AFTER, 0));
        queue.push(text("x"));
        queue.push(event(AiEventKind::ReasoningDelta { delta: "r".into() }));
        queue.push(event(AiEventKind::ReasoningDelta { delta: "s".into() }));
        queue.push(text("y"));
        assert_eq!((queue.len(), queue.coalesced()), (COALESCE_AFTER + 2, 2));
        let slots = drain(&queue);
        let kinds: Vec<&AiEventKind> = slots
            .iter()
            .map(|slot| match slot {
                Slot::Event(e) => &e.kind,
                Slot::Gap(n) => panic!("lossless queue dropped {n}"),
            })
            .collect();
        assert_eq!(
            kinds[COALESCE_AFTER - 1..],
            [
                &AiEventKind::TextDelta {
                    delta: format!("{}x", COALESCE_AFTER - 1)
                },
                &AiEventKind::ReasoningDelta { delta: "rs".into() },
                &AiEventKind::TextDelta { delta: "y".into() },
            ]
        );
    }

    #[test]
    fn a_gone_receiver_frees_the_queue_and_refuses_pushes() {
        let queue = Queue::lossless();
        assert!(queue.push(text("a")));
        queue.receiver_gone();
        assert_eq!(queue.len(), 0);
        assert!(!queue.push(event(AiEventKind::Done)));
    }
}
