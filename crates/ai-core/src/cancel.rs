//! Waiting for a [`CancellationToken`] beside work that wakes a task far more
//! often than a cancellation ever comes (a model's deltas, a response's frames).
//!
//! `token.cancelled()` in a `select!` is polled again on every wake of the task,
//! and each poll takes the token's lock and the waiter list's lock. [`Cancelled`]
//! polls the token only when the token itself woke the task (or the task's waker
//! changed): every other poll is one atomic swap.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Resolves once its token is cancelled; cheap to poll again while it is not
/// (see the [module docs](self)).
pub struct Cancelled {
    wait: Pin<Box<WaitForCancellationFutureOwned>>,
    /// The waker the token's waiter holds: it notes the wake, then wakes the
    /// task it was made for. `None` until the first poll.
    relay: Option<Arc<Relay>>,
}

impl std::fmt::Debug for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancelled").finish_non_exhaustive()
    }
}

/// Notes that the token woke the task, and wakes it.
struct Relay {
    woken: AtomicBool,
    task: Waker,
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake_by_ref();
    }
}

impl Cancelled {
    /// Waits for `token` to be cancelled.
    pub fn new(token: CancellationToken) -> Self {
        Self {
            wait: Box::pin(token.cancelled_owned()),
            relay: None,
        }
    }
}

impl Future for Cancelled {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let due = match &this.relay {
            Some(relay) if relay.task.will_wake(cx.waker()) => {
                relay.woken.swap(false, Ordering::AcqRel)
            }
            _ => {
                #[cfg(test)]
                tests::RELAYS.fetch_add(1, Ordering::Relaxed);
                this.relay = Some(Arc::new(Relay {
                    woken: AtomicBool::new(false),
                    task: cx.waker().clone(),
                }));
                true
            }
        };
        if !due {
            return Poll::Pending;
        }
        let Some(relay) = &this.relay else {
            return Poll::Pending;
        };
        let waker = Waker::from(Arc::clone(relay));
        this.wait.as_mut().poll(&mut Context::from_waker(&waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Relays made, in all (a test counts the ones its task makes).
    pub(super) static RELAYS: std::sync::atomic::AtomicUsize =
        std::sync::atomic::AtomicUsize::new(0);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_polling_it_again_and_again_makes_one_relay() {
        let token = CancellationToken::new();
        let task = tokio::spawn(async move {
            let mut cancelled = Cancelled::new(token);
            let before = RELAYS.load(Ordering::Relaxed);
            for _ in 0..100 {
                let polled = std::future::poll_fn(|cx| {
                    Poll::Ready(Pin::new(&mut cancelled).poll(cx).is_pending())
                })
                .await;
                assert!(polled);
                tokio::task::yield_now().await;
            }
            RELAYS.load(Ordering::Relaxed) - before
        });
        // Other tests may make relays meanwhile: at most a few, never one per poll.
        let made = task.await.unwrap();
        assert!(made < 10, "{made} relays for 100 polls");
    }

    #[tokio::test]
    async fn resolves_when_cancelled_before_or_while_waiting() {
        let token = CancellationToken::new();
        token.cancel();
        Cancelled::new(token).await;
        let token = CancellationToken::new();
        let later = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            later.cancel();
        });
        Cancelled::new(token).await;
    }

    #[tokio::test]
    async fn other_wakes_leave_it_pending_and_a_cancel_among_them_is_seen() {
        let token = CancellationToken::new();
        let mut cancelled = std::pin::pin!(Cancelled::new(token.clone()));
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
        let sender = tokio::spawn(async move {
            for i in 0..100 {
                if tx.send(i).await.is_err() {
                    return;
                }
            }
        });
        let mut seen = 0;
        loop {
            tokio::select! {
                biased;
                () = &mut cancelled => break,
                item = rx.recv() => match item {
                    Some(_) => {
                        seen += 1;
                        if seen == 50 {
                            token.cancel();
                        }
                    }
                    None => panic!("the channel ended before the cancel was seen"),
                },
            }
        }
        assert_eq!(seen, 50, "the cancel is seen at the first poll after it");
        drop(rx);
        let _ = sender.await;
    }

    #[test]
    fn a_poll_with_another_waker_polls_the_token_again() {
        let token = CancellationToken::new();
        let mut cancelled = Box::pin(Cancelled::new(token.clone()));
        let noop = Waker::noop();
        assert!(
            cancelled
                .as_mut()
                .poll(&mut Context::from_waker(noop))
                .is_pending()
        );
        token.cancel();
        let other = Waker::from(Arc::new(Relay {
            woken: AtomicBool::new(false),
            task: noop.clone(),
        }));
        assert!(
            cancelled
                .as_mut()
                .poll(&mut Context::from_waker(&other))
                .is_ready()
        );
    }
}
