//! One model call: send, then decode the response as it arrives.

use std::collections::VecDeque;
use std::sync::Arc;

use ai_core::CancellationToken;
use ai_core::completion::{
    CompletionDelta, CompletionError, CompletionFinal, CompletionItem, CompletionStream,
};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header;
use tokio::time::Instant;
use tracing::Instrument;

use crate::transport::{HttpTransport, ReadError, after};

/// A wire's streaming decoder, fed the body chunk by chunk (cut anywhere).
pub trait StreamDecoder: Send + 'static {
    /// Feeds a chunk; appends the deltas it completes to `out`.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<CompletionDelta>)
    -> Result<(), CompletionError>;
    /// Server-sent events completed so far (an event resets the idle limit).
    fn events(&self) -> u64;
    /// Whether the stream said it is complete (later bytes are not read).
    fn is_done(&self) -> bool;
    /// Ends the stream (also when the connection was cut): the assembled turn, or
    /// the error that ended it (a truncated stream keeps what was assembled).
    fn finish(self, out: &mut Vec<CompletionDelta>) -> Result<CompletionFinal, CompletionError>;
}

/// What one call needs from its wire besides the encoded body.
pub trait Wire: Send + 'static {
    /// The decoder of a streamed response.
    type Decoder: StreamDecoder;
    /// Whether the request asked for a stream.
    fn streams(&self) -> bool;
    /// A decoder for a streamed response.
    fn decoder(&self) -> Self::Decoder;
    /// Decodes a whole JSON response (a non-streaming call, or a server that
    /// answered a streaming request with JSON).
    fn decode_body(
        &self,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError>;
    /// Last changes to the assembled turn before it is passed on.
    fn finish_turn(&self, _turn: &mut CompletionFinal) {}
    /// The call's own path and query, when it depends on the request (a path
    /// that names the model), in place of the configured path; `None` by default.
    fn path(&self) -> Option<&str> {
        None
    }
    /// The W3C trace headers the request carries (`traceparent`, and
    /// `tracestate` when the caller sent one); none by default.
    fn trace(&self) -> Option<&TraceHeaders> {
        None
    }
}

/// A request's W3C trace context: `traceparent` and the caller's `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeaders {
    /// The `traceparent` value.
    pub parent: String,
    /// The `tracestate` value, when there is one.
    pub state: Option<String>,
}

/// The response header in which LiteLLM's proxy reports what a call cost, in
/// US dollars (on whole responses; a stream carries it as `usage.cost` when
/// the proxy is set to).
const COST_HEADER: &str = "x-litellm-response-cost";

impl HttpTransport {
    /// Sends an encoded body (or ends at once with the error that kept the
    /// request from being encoded) and streams the response through its wire's
    /// decoder, inside `span`.
    pub fn complete<W: Wire>(
        self: &Arc<Self>,
        prepared: Result<(Bytes, W), CompletionError>,
        cancel: CancellationToken,
        span: tracing::Span,
    ) -> CompletionStream {
        let call = Call {
            transport: Arc::clone(self),
            wire: None,
            cancel,
            deadline: None,
            phase: Phase::Start(prepared),
            queue: VecDeque::new(),
            scratch: Vec::new(),
            terminal: false,
            reported_cost: None,
        };
        futures::stream::unfold(call, move |mut call| {
            let span = span.clone();
            async move {
                let item = call.next().await?;
                Some((item, call))
            }
            .instrument(span)
        })
        .boxed()
    }
}

enum Phase<W: Wire> {
    /// Not sent yet (or the request could not be encoded).
    Start(Result<(Bytes, W), CompletionError>),
    /// Reading a streamed body.
    Streaming {
        body: BoxStream<'static, reqwest::Result<Bytes>>,
        decoder: Box<W::Decoder>,
        /// When the idle limit expires unless an event arrives first.
        idle: Instant,
    },
    /// Nothing more to read; drain the queue.
    Finished,
}

/// One model call in progress.
struct Call<W: Wire> {
    transport: Arc<HttpTransport>,
    /// The wire's half of the call, once it is sent.
    wire: Option<W>,
    cancel: CancellationToken,
    /// The total deadline, set when the request is first sent.
    deadline: Option<Instant>,
    phase: Phase<W>,
    queue: VecDeque<Result<CompletionItem, CompletionError>>,
    scratch: Vec<CompletionDelta>,
    /// A final or an error was queued.
    terminal: bool,
    /// The call's cost from the response's `x-litellm-response-cost` header.
    reported_cost: Option<i64>,
}

impl<W: Wire> Call<W> {
    async fn next(&mut self) -> Option<Result<CompletionItem, CompletionError>> {
        loop {
            if !self.terminal && self.cancel.is_cancelled() {
                return Some(self.fail(CompletionError::Cancelled));
            }
            if let Some(item) = self.queue.pop_front() {
                return Some(item);
            }
            match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Start(prepared) => {
                    let result = match prepared {
                        Ok((body, wire)) => self.start(body, wire).await,
                        Err(error) => Err(error),
                    };
                    if let Err(error) = result {
                        return Some(self.fail(error));
                    }
                }
                Phase::Streaming {
                    body,
                    decoder,
                    idle,
                } => {
                    if let Err(error) = self.read(body, decoder, idle).await {
                        return Some(self.fail(error));
                    }
                }
            }
        }
    }

    /// Reads the next chunk of a streamed body into the decoder.
    async fn read(
        &mut self,
        mut body: BoxStream<'static, reqwest::Result<Bytes>>,
        mut decoder: Box<W::Decoder>,
        idle: Instant,
    ) -> Result<(), CompletionError> {
        let transport = Arc::clone(&self.transport);
        let chunk = transport
            .read_chunk(&self.cancel, &mut body, idle, self.deadline)
            .await;
        match chunk {
            Ok(Some(chunk)) => {
                let events = decoder.events();
                let fed = decoder.feed(&chunk, &mut self.scratch);
                // Only a completed event resets the idle limit, so keepalive
                // comments cannot hold a stalled stream open.
                let idle = if decoder.events() > events {
                    after(transport.config.timeouts.between_chunks)
                } else {
                    idle
                };
                self.queue_deltas();
                match fed {
                    Ok(()) if decoder.is_done() => self.finish(*decoder),
                    Ok(()) => {
                        self.phase = Phase::Streaming {
                            body,
                            decoder,
                            idle,
                        }
                    }
                    Err(error) => self.queue_error(self.scrub_error(error)),
                }
            }
            Ok(None) => self.finish(*decoder),
            Err(ReadError::Completion(error)) => return Err(error),
            Err(ReadError::Body(message)) => {
                tracing::warn!(
                    message = %transport.scrub(&message),
                    "connection lost in the middle of the stream"
                );
                self.finish(*decoder);
            }
        }
        Ok(())
    }

    /// Sends (with retries) and sets up reading the response.
    async fn start(&mut self, body: Bytes, wire: W) -> Result<(), CompletionError> {
        let transport = Arc::clone(&self.transport);
        self.deadline = transport.config.timeouts.total.map(after);
        let response = transport
            .send(
                &self.cancel,
                body,
                self.deadline,
                (wire.path(), wire.trace()),
            )
            .await?;
        self.reported_cost = response
            .headers()
            .get(COST_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .and_then(ai_core::event::UsageFact::micros_from_usd);
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));
        let wire = self.wire.insert(wire);
        if wire.streams() && !is_json {
            self.phase = Phase::Streaming {
                body: crate::transport::body_chunks(response),
                decoder: Box::new(wire.decoder()),
                idle: after(transport.config.timeouts.between_chunks),
            };
            return Ok(());
        }
        let bytes = transport
            .read_body(&self.cancel, response, self.deadline)
            .await?;
        let decoded = wire.decode_body(&bytes, &mut self.scratch);
        self.queue_deltas();
        match decoded {
            Ok(turn) => self.queue_final(turn),
            Err(error) => self.queue_error(self.scrub_error(error)),
        }
        Ok(())
    }

    fn finish(&mut self, decoder: W::Decoder) {
        let result = decoder.finish(&mut self.scratch);
        self.queue_deltas();
        match result {
            Ok(turn) => self.queue_final(turn),
            Err(error) => self.queue_error(self.scrub_error(error)),
        }
    }

    fn queue_deltas(&mut self) {
        self.queue.extend(
            self.scratch
                .drain(..)
                .map(|delta| Ok(CompletionItem::Delta(delta))),
        );
    }

    fn queue_final(&mut self, mut turn: CompletionFinal) {
        if let Some(wire) = &self.wire {
            wire.finish_turn(&mut turn);
        }
        if let Some(usage) = &mut turn.usage {
            usage.cost_micros = usage.cost_micros.or(self.reported_cost);
        }
        tracing::debug!(
            finish_reason = ?turn.finish_reason,
            tool_calls = turn.tool_calls.len(),
            "completion finished"
        );
        self.terminal = true;
        self.phase = Phase::Finished;
        self.queue.push_back(Ok(CompletionItem::Final(turn)));
    }

    fn queue_error(&mut self, error: CompletionError) {
        tracing::debug!(code = error.code(), "completion failed");
        self.terminal = true;
        self.phase = Phase::Finished;
        self.queue.push_back(Err(error));
    }

    /// Ends the stream now with `error` (queued deltas are dropped).
    fn fail(&mut self, error: CompletionError) -> Result<CompletionItem, CompletionError> {
        tracing::debug!(code = error.code(), "completion failed");
        self.terminal = true;
        self.phase = Phase::Finished;
        self.queue.clear();
        Err(error)
    }

    fn scrub_error(&self, error: CompletionError) -> CompletionError {
        match error {
            CompletionError::Provider { code, message } => CompletionError::Provider {
                code,
                message: self.transport.scrub(&message),
            },
            CompletionError::Protocol { message } => CompletionError::Protocol {
                message: self.transport.scrub(&message),
            },
            other => other,
        }
    }
}
