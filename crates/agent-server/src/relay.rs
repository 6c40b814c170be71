//! A run's events to its clients: encoded in the response's protocol, kept for
//! clients that reattach ([`crate::resume`]), sent to the client that started
//! it while it reads, and ended with one terminator. The run outlives a client
//! that goes away for the detach grace; a client that reads nothing for the
//! write timeout is let go as if it had gone away.

use std::sync::Arc;
use std::time::Duration;

use agent_durable::{Ended, RecordedRun};
use agent_graph::run::{RunError, RunHandle, RunOutput};
use ai_core::approval::ApprovalBinding;
use ai_core::{AiEvent, Message};
use axum::body::Bytes;
use chat_protocol::StreamEncoder;
use chat_protocol::stream::ApprovalIssuer;
use chat_protocol::transcript::TranscriptStore;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::resume::Replay;
use crate::server::{ChatRef, ChatService};

/// A run a response streams: recorded in the run store (the service has
/// one), or not.
pub(crate) enum Live {
    /// Recorded by the run owner.
    Recorded(Box<RecordedRun>),
    /// Not recorded (a service without a store).
    Plain(
        agent_graph::run::EventStream,
        agent_graph::run::OutputFuture,
    ),
}

/// A run that ended: its outcome, and its record to write.
pub(crate) enum LiveEnd {
    Recorded(Box<Ended>),
    Plain(Result<RunOutput, RunError>),
}

impl LiveEnd {
    pub(crate) fn outcome(&self) -> &Result<RunOutput, RunError> {
        match self {
            Self::Recorded(ended) => &ended.outcome,
            Self::Plain(outcome) => outcome,
        }
    }

    /// Writes the record, when there is one.
    pub(crate) async fn record(&mut self) {
        if let Self::Recorded(ended) = self {
            ended.record().await;
        }
    }
}

impl Live {
    /// A run that is not recorded.
    pub(crate) fn plain(handle: RunHandle) -> (Self, CancellationToken) {
        let cancel = handle.cancel_token();
        let (events, outcome) = handle.into_parts();
        (Self::Plain(events, outcome), cancel)
    }

    /// The next event (recorded first when the run is recorded).
    async fn next(&mut self) -> Option<AiEvent> {
        match self {
            Self::Recorded(run) => run.next().await,
            Self::Plain(events, _) => events.next().await,
        }
    }

    /// Waits for the outcome.
    async fn end(self) -> LiveEnd {
        match self {
            Self::Recorded(run) => LiveEnd::Recorded(Box::new(run.end().await)),
            Self::Plain(events, outcome) => {
                drop(events);
                LiveEnd::Plain(outcome.await)
            }
        }
    }
}

/// How a response reaches its clients.
pub(crate) struct Relay {
    /// How often a quiet UI message stream gets a comment.
    pub(crate) heartbeat: Duration,
    /// How long the run goes on once its client went away (see
    /// [`crate::Access::detach_grace`]).
    pub(crate) detach_grace: Duration,
    /// How long a frame may wait for the client to take it (see
    /// [`crate::Access::write_timeout`]).
    pub(crate) write_timeout: Duration,
    /// Its frames, for clients that reattach.
    pub(crate) replay: Arc<Replay>,
    /// Cancels the run.
    pub(crate) stop: CancellationToken,
}

/// The client a response streams to: its frames' channel, the stream slot it
/// holds (freed with it, when it goes away or reads too slowly), and the
/// token its response body cancels when dropped.
pub(crate) struct Client {
    pub(crate) tx: futures::channel::mpsc::Sender<Bytes>,
    pub(crate) _slot: Option<crate::listener::Slot>,
    pub(crate) gone: CancellationToken,
}

impl ChatService {
    /// Streams `live`'s events through `encoder` to `client` and the replay
    /// until the run ends, then ends the response and writes the run's
    /// record (after the client's stream ended: a slow store delays the
    /// record, never the chat). Records the model-facing arguments and results
    /// of the calls it ran, and the client tool calls it handed out.
    ///
    /// A function returning its future rather than an `async fn`: an `async
    /// fn` keeps its arguments twice in its state (as passed, and moved into
    /// its body), and every open stream holds this state.
    pub(crate) fn respond(
        self: Arc<Self>,
        chat: ChatRef,
        mut live: Live,
        mut encoder: Box<dyn StreamEncoder>,
        client: Option<Client>,
        relay: Relay,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut stream = ClientStream::new(client, &relay, encoder.heartbeat());
        async move {
            let chat_id = &chat.scoped;
            loop {
                let event = tokio::select! {
                    // The run first: while it has events, nothing idle is due (a
                    // heartbeat only fills quiet time; a client that went away is
                    // also seen when a frame cannot be sent), and the idle waits
                    // are not polled per event.
                    biased;
                    event = live.next() => match event {
                        Some(event) => event,
                        None => break,
                    },
                    () = stream.idle(&relay) => continue,
                };
                // The event is encoded and gone before the frames are sent.
                let frames = self.frames(chat_id, encoder.as_mut(), event);
                stream.deliver(&relay, frames).await;
            }
            // The end's two waits are boxed: they are not part of the state a
            // response holds while it streams.
            let mut ended = Box::pin(live.end()).await;
            // From here until its record is written, a load of the chat waits
            // for it (briefly): the run ended, its end is not stored yet.
            let finishing = self.finishing(chat_id);
            if let Ok(output) = ended.outcome() {
                remember(self.transcript(), chat_id, &output.messages);
            }
            stream.deliver(&relay, encoder.end()).await;
            drop(stream);
            self.active().close(chat_id, &relay.replay);
            Box::pin(ended.record()).await;
            drop(finishing);
        }
    }

    /// `event`'s frames in `encoder`'s protocol (approvals signed for chat
    /// `chat_id`); a client tool call it hands out is remembered for the
    /// chat's next request.
    fn frames(&self, chat_id: &str, encoder: &mut dyn StreamEncoder, event: AiEvent) -> Vec<Bytes> {
        if let ai_core::event::AiEventKind::ClientToolCall {
            tool_call_id,
            tool_name,
            args,
        } = &event.kind
        {
            self.client_calls().store(
                chat_id,
                tool_call_id,
                ai_core::tool::canonical_json(args),
                tool_name.clone(),
            );
        }
        let sign = |binding: &ApprovalBinding| self.approvals().issue(binding);
        let approval = ApprovalIssuer {
            scope: chat_id,
            sign: &sign,
        };
        encoder.frames(&crate::server::shown_error(event), approval)
    }
}

/// The client side of one response: the client while it reads, the detach
/// deadline once it went away, the heartbeat clock.
struct ClientStream {
    client: Option<Client>,
    /// Resolves when the client goes away (its response body was dropped):
    /// one waiter for the response, polled only when the client's token wakes
    /// the response (not on every frame).
    gone: ai_core::cancel::Cancelled,
    /// Once the client is gone: when the run is cancelled unless a client
    /// reattached (`GET /api/chat/{id}/stream`) by then.
    detached: Option<tokio::time::Instant>,
    beat: tokio::time::Interval,
    /// The protocol's heartbeat frame, when it has one.
    heartbeat: Option<Bytes>,
}

impl ClientStream {
    fn new(client: Option<Client>, relay: &Relay, heartbeat: Option<Bytes>) -> Self {
        // Without a client, a token nothing cancels (the branch is off anyway).
        let watched = client
            .as_ref()
            .map_or_else(CancellationToken::new, |c| c.gone.clone());
        let gone = ai_core::cancel::Cancelled::new(watched);
        let mut beat = tokio::time::interval(relay.heartbeat.max(Duration::from_millis(10)));
        beat.reset();
        Self {
            client,
            gone,
            detached: None,
            beat,
            heartbeat,
        }
    }

    /// Waits for something to do between events: the client going away, the
    /// detach grace ending, a heartbeat.
    async fn idle(&mut self, relay: &Relay) {
        let grace_over = async {
            match self.detached {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = &mut self.gone, if self.client.is_some() => self.let_go(relay),
            () = grace_over => {
                self.detached = None;
                if relay.replay.readers() > 0 {
                    self.detached = detach(&relay.stop, relay.detach_grace);
                } else {
                    tracing::debug!("no client came back for the run; cancelling it");
                    relay.stop.cancel();
                }
            }
            _ = self.beat.tick(), if self.client.is_some() && self.heartbeat.is_some() => {
                if let (Some(client), Some(frame)) = (&mut self.client, &self.heartbeat)
                    && send_all(client, vec![frame.clone()], relay.write_timeout).await.is_err()
                {
                    self.let_go(relay);
                }
            }
        }
    }

    /// The client is gone (or read nothing in time): its stream and slot are
    /// let go; the run goes on for the grace.
    fn let_go(&mut self, relay: &Relay) {
        self.client = None;
        self.detached = detach(&relay.stop, relay.detach_grace);
    }

    /// Keeps `frames` for reattaching clients and sends them to the client
    /// while it is there.
    async fn deliver(&mut self, relay: &Relay, frames: Vec<Bytes>) {
        for frame in &frames {
            relay.replay.push(frame);
        }
        let Some(client) = &mut self.client else {
            return;
        };
        if send_all(client, frames, relay.write_timeout).await.is_err() {
            self.let_go(relay);
        }
    }
}

/// The client went away: the run is cancelled now when there is no grace,
/// else at the deadline returned.
fn detach(stop: &CancellationToken, grace: Duration) -> Option<tokio::time::Instant> {
    if grace.is_zero() {
        stop.cancel();
        return None;
    }
    Some(tokio::time::Instant::now() + grace)
}

/// Sends `frames` in order; `Err` when the client is gone or takes nothing
/// for `write_timeout`.
async fn send_all(
    client: &mut Client,
    frames: Vec<Bytes>,
    write_timeout: Duration,
) -> Result<(), ()> {
    let mut frames = frames.into_iter();
    // A client that keeps up has room: no timer is set, and the wait for room
    // (a timer and a send, a few hundred bytes) is boxed, out of the state
    // every open stream holds.
    while let Some(frame) = frames.next() {
        match client.tx.try_send(frame) {
            Ok(()) => {}
            Err(full) if full.is_full() => {
                let frame = full.into_inner();
                return Box::pin(wait_and_send(client, frame, frames, write_timeout)).await;
            }
            Err(_) => return Err(()),
        }
    }
    Ok(())
}

/// [`send_all`] once the client's channel is full: each frame waits for room,
/// for `write_timeout` at most.
async fn wait_and_send(
    client: &mut Client,
    first: Bytes,
    rest: std::vec::IntoIter<Bytes>,
    write_timeout: Duration,
) -> Result<(), ()> {
    for frame in std::iter::once(first).chain(rest) {
        match tokio::time::timeout(write_timeout, futures::SinkExt::send(&mut client.tx, frame))
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(()),
            Err(_) => {
                tracing::debug!("the client read nothing in time; its stream is let go");
                return Err(());
            }
        }
    }
    Ok(())
}

/// Records the model-facing arguments and results of every call in `messages`.
fn remember(transcript: &TranscriptStore, chat_id: &str, messages: &[Message]) {
    let mut arguments = std::collections::HashMap::new();
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    arguments.insert(call.id.clone(), call.arguments.clone());
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => {
                if let Some(args) = arguments.remove(tool_call_id) {
                    transcript.store(chat_id, tool_call_id, args, content.clone());
                }
            }
            _ => {}
        }
    }
}
