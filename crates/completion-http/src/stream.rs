//! The decoding half every streaming wire shares: [`SseDecoder`] frames a
//! response body as server-sent events (the `sse` framer), keeps the first error,
//! counts events and hands each one to the wire's [`Assembler`], the state
//! machine that turns events into deltas and one assembled turn.

use std::fmt;

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal, ToolCallOutcome};
use sse::{DEFAULT_MAX_EVENT_BYTES, RawSseEvent, SseError, SseFramer};

use crate::call::StreamDecoder;

/// How much of a body that is JSON instead of an event stream is kept, to read
/// the error it most likely holds.
const MAX_JSON_BODY: usize = 256 * 1024;

/// A wire's stream state machine: what it does with each server-sent event, and
/// the turn it has assembled at the end. [`SseDecoder`] does the rest.
pub trait Assembler: Sized + Send + 'static {
    /// What an assembler starts from ([`Assembler::start`]); `()` when nothing.
    type Options: Default;
    /// Why an event could not be taken. The session ends at the first one, and
    /// feeding after it returns it again.
    type Error: Clone + fmt::Display + From<SseError> + Into<CompletionError> + Send + 'static;
    /// Where the deltas of an event go: `Vec<CompletionDelta>`, or a sink of the
    /// wire's own that takes them borrowed (and that a vector stands in for).
    type Sink<'s>: ?Sized + FromDeltas;

    /// Whether a body that is not an event stream is told apart: one that starts
    /// with `{` or `[` is kept whole and ends in [`Assembler::json_body_error`], one
    /// that starts with `<` and completes no event is an HTML page. Off by
    /// default: every body is framed as an event stream.
    const TELLS_NON_STREAM_BODIES: bool = false;

    /// A new session.
    fn start(options: Self::Options) -> Self;

    /// Upper bound of one line or one event's data, in bytes.
    fn max_event_bytes(&self) -> usize {
        DEFAULT_MAX_EVENT_BYTES
    }

    /// Takes one event; the deltas it completes go to `out`.
    fn on_event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut Self::Sink<'_>,
    ) -> Result<(), Self::Error>;

    /// Whether the stream said it is complete (later bytes are not read).
    fn is_done(&self) -> bool;

    /// The assembled turn, at the end of the stream (also a cut one): the deltas
    /// still pending go to `out`; a stream that ended before it was complete is
    /// [`CompletionError::TruncatedStream`] with what was assembled.
    fn into_final(self, out: &mut Self::Sink<'_>) -> Result<CompletionFinal, CompletionError>;

    /// Whether `error`, raised by an event left pending at the end of the stream
    /// (no blank line after it), is a frame a cut connection halved, read as a
    /// truncation rather than an error. No by default.
    fn cut_tail_is_truncation(_error: &Self::Error) -> bool {
        false
    }

    /// What a body that is JSON instead of an event stream ends in (with
    /// [`Assembler::TELLS_NON_STREAM_BODIES`]): by default a protocol error.
    fn json_body_error(_body: &[u8]) -> CompletionError {
        CompletionError::Protocol {
            message: "the response body is JSON, not a server-sent event stream".into(),
        }
    }
}

/// A delta sink that a vector of owned deltas stands in for (it appends them
/// to the vector): what [`SseDecoder::feed`] and [`SseDecoder::finish_into`]
/// hand an [`Assembler`] whose sink is its own.
pub trait FromDeltas {
    /// The sink that appends owned deltas to `out`.
    fn from_deltas(out: &mut Vec<CompletionDelta>) -> &mut Self;
}

impl FromDeltas for Vec<CompletionDelta> {
    fn from_deltas(out: &mut Vec<CompletionDelta>) -> &mut Self {
        out
    }
}

/// The common kind of [`Assembler`]: one that starts from its `Default` and
/// hands its deltas out owned, so it says only what it does with an event, when
/// the stream is complete and what it assembled. Every such type is an
/// [`Assembler`]; a stream that ends before it is complete ends in
/// [`CompletionError::TruncatedStream`] holding what was assembled.
pub trait SimpleAssembler: Default + Send + 'static {
    /// Why an event could not be taken ([`Assembler::Error`]).
    type Error: Clone + fmt::Display + From<SseError> + Into<CompletionError> + Send + 'static;

    /// Takes one event; the deltas it completes go to `out`.
    fn on_event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), Self::Error>;

    /// Whether the stream said it is complete (later bytes are not read).
    fn is_done(&self) -> bool;

    /// The turn as assembled, complete or not.
    fn into_turn(self) -> CompletionFinal;
}

impl<T: SimpleAssembler> Assembler for T {
    type Options = ();
    type Error = <T as SimpleAssembler>::Error;
    type Sink<'s> = Vec<CompletionDelta>;

    fn start((): ()) -> Self {
        T::default()
    }

    fn on_event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), Self::Error> {
        SimpleAssembler::on_event(self, event, out)
    }

    fn is_done(&self) -> bool {
        SimpleAssembler::is_done(self)
    }

    fn into_final(
        self,
        _out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        if SimpleAssembler::is_done(&self) {
            Ok(self.into_turn())
        } else {
            Err(CompletionError::TruncatedStream {
                partial: Box::new(self.into_turn()),
            })
        }
    }
}

/// A sans-IO decoder of one streamed response: feed it the body in chunks cut
/// anywhere; it frames them, counts events, stops at the first error (and repeats
/// it) and leaves the meaning of each event to its [`Assembler`].
pub struct SseDecoder<A: Assembler> {
    framer: SseFramer,
    assembler: A,
    /// Events the framer completed.
    events: u64,
    failed: Option<A::Error>,
    /// The first non-whitespace byte fed (see [`Assembler::TELLS_NON_STREAM_BODIES`]).
    first_byte: Option<u8>,
    /// A body that is JSON, not an event stream: its first bytes, unframed.
    json_body: Option<Vec<u8>>,
}

impl<A: Assembler> fmt::Debug for SseDecoder<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseDecoder")
            .field("events", &self.events)
            .field("done", &self.assembler.is_done())
            .field("failed", &self.failed.as_ref().map(ToString::to_string))
            .finish_non_exhaustive()
    }
}

impl<A: Assembler> Default for SseDecoder<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Assembler> SseDecoder<A> {
    /// A decoder whose assembler starts from default options.
    pub fn new() -> Self {
        Self::with_options(A::Options::default())
    }

    /// A decoder whose assembler starts from `options`.
    pub fn with_options(options: A::Options) -> Self {
        Self::from_assembler(A::start(options))
    }

    /// A decoder around an assembler already made.
    pub fn from_assembler(assembler: A) -> Self {
        Self {
            framer: SseFramer::with_max_event_bytes(assembler.max_event_bytes()),
            assembler,
            events: 0,
            failed: None,
            first_byte: None,
            json_body: None,
        }
    }

    /// Feeds a chunk of the body, of any size and cut anywhere; the deltas of the
    /// events it completes are appended to `out` (not cleared first).
    ///
    /// After an error the session is over: later calls return the same error.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<CompletionDelta>) -> Result<(), A::Error> {
        self.feed_with(chunk, <A::Sink<'_>>::from_deltas(out))
    }

    /// [`SseDecoder::feed`] handing the deltas to the assembler's own sink.
    pub fn feed_with(&mut self, chunk: &[u8], out: &mut A::Sink<'_>) -> Result<(), A::Error> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        let Some(chunk) = self.unless_json_body(chunk) else {
            return Ok(());
        };
        let Self {
            framer,
            assembler,
            events,
            ..
        } = self;
        let result = framer.feed_raw(chunk, |event| {
            *events += 1;
            assembler.on_event(event, out)
        });
        if let Err(error) = &result {
            self.failed = Some(error.clone());
        }
        result
    }

    /// `chunk` from its first byte that belongs to an event stream, or `None`
    /// when the body is JSON (then the chunk is kept, up to a bound).
    fn unless_json_body<'c>(&mut self, chunk: &'c [u8]) -> Option<&'c [u8]> {
        if !A::TELLS_NON_STREAM_BODIES {
            return Some(chunk);
        }
        let mut chunk = chunk;
        if self.first_byte.is_none()
            && let Some(at) = chunk.iter().position(|b| !b.is_ascii_whitespace())
        {
            self.first_byte = Some(chunk[at]);
            if matches!(chunk[at], b'{' | b'[') {
                self.json_body = Some(Vec::new());
                chunk = &chunk[at..];
            }
        }
        let Some(body) = &mut self.json_body else {
            return Some(chunk);
        };
        let room = MAX_JSON_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        None
    }

    /// The assembler, as far as it got.
    pub fn assembler(&self) -> &A {
        &self.assembler
    }

    /// Whether the stream said it is complete; bytes fed later are ignored.
    pub fn is_done(&self) -> bool {
        self.assembler.is_done()
    }

    /// Server-sent events completed so far (keepalive comments are none).
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Ends the session: the assembled turn, the feed's error, or
    /// [`CompletionError::TruncatedStream`] (holding what was assembled) when the
    /// stream ended before it was complete. Deltas of a last event that had no
    /// blank line after it are dropped; see [`SseDecoder::finish_into`].
    pub fn finish(self) -> Result<CompletionFinal, CompletionError> {
        self.finish_into(&mut Vec::new())
    }

    /// [`SseDecoder::finish`], appending the deltas of a last event that had no
    /// blank line after it (and any the assembler still held) to `out`.
    pub fn finish_into(
        self,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        self.finish_with(<A::Sink<'_>>::from_deltas(out))
    }

    /// Decodes a whole body at once (tests, fixtures): every delta, the ones of a
    /// last event with no blank line after it included, and the turn.
    pub fn decode_whole(
        self,
        body: &[u8],
    ) -> Result<(Vec<CompletionDelta>, CompletionFinal), CompletionError> {
        let (deltas, turn) = self.decode_pieces([body]);
        Ok((deltas, turn?))
    }

    /// Decodes a body that arrives in `pieces` (cut anywhere): every delta (also
    /// those before an error), and the turn or the error that ended the stream.
    pub fn decode_pieces<'b>(
        mut self,
        pieces: impl IntoIterator<Item = &'b [u8]>,
    ) -> (
        Vec<CompletionDelta>,
        Result<CompletionFinal, CompletionError>,
    ) {
        let mut deltas = Vec::new();
        for piece in pieces {
            if let Err(error) = self.feed(piece, &mut deltas) {
                return (deltas, Err(error.into()));
            }
        }
        let turn = self.finish_into(&mut deltas);
        (deltas, turn)
    }

    /// [`SseDecoder::finish_into`] handing the deltas to the assembler's own sink.
    pub fn finish_with(self, out: &mut A::Sink<'_>) -> Result<CompletionFinal, CompletionError> {
        let Self {
            mut framer,
            mut assembler,
            mut events,
            failed,
            first_byte,
            json_body,
        } = self;
        if let Some(error) = failed {
            return Err(error.into());
        }
        if let Some(body) = json_body {
            return Err(A::json_body_error(&body));
        }
        if !assembler.is_done() {
            let tail = framer.finish_raw(|event| {
                events += 1;
                assembler.on_event(event, out)
            });
            if let Err(error) = tail {
                if !A::cut_tail_is_truncation(&error) {
                    return Err(error.into());
                }
                tracing::debug!(%error, "ignoring an incomplete last stream event");
            }
        }
        if A::TELLS_NON_STREAM_BODIES && events == 0 && first_byte == Some(b'<') {
            return Err(CompletionError::Protocol {
                message: "the response body is HTML, not a server-sent event stream".into(),
            });
        }
        assembler.into_final(out)
    }
}

impl<A: Assembler> StreamDecoder for SseDecoder<A> {
    fn feed(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), CompletionError> {
        SseDecoder::feed(self, chunk, out).map_err(Into::into)
    }

    fn events(&self) -> u64 {
        self.events
    }

    fn is_done(&self) -> bool {
        self.assembler.is_done()
    }

    fn finish(self, out: &mut Vec<CompletionDelta>) -> Result<CompletionFinal, CompletionError> {
        self.finish_into(out)
    }
}

/// Why a stream of JSON events could not be read: what an assembler whose
/// events are typed by a JSON field fails with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The framing broke (an event over the size limit).
    #[error("server-sent events: {0}")]
    Sse(#[from] SseError),
    /// An event's data is not the JSON its type needs.
    #[error("malformed {event} event: {message}")]
    Malformed {
        /// The event type.
        event: String,
        /// What was wrong.
        message: String,
    },
    /// The provider reported an error in the stream.
    #[error("provider error ({code}): {message}")]
    Provider {
        /// The provider's error code or type (`overloaded_error`,
        /// `server_error`, ...).
        code: String,
        /// The provider's message.
        message: String,
    },
}

impl From<StreamError> for CompletionError {
    fn from(error: StreamError) -> Self {
        match error {
            StreamError::Provider { code, message } => Self::Provider {
                code: Some(code),
                message,
            },
            other => Self::Protocol {
                message: other.to_string(),
            },
        }
    }
}

/// A tool call's argument text as the turn reports it, with its outcome: no
/// text at all is `{}`; a call still open when the stream was cut (`cut_open`)
/// is truncated, whatever its text; otherwise complete when the text is one JSON
/// value, else invalid.
pub fn settle_arguments(arguments: String, cut_open: bool) -> (String, ToolCallOutcome) {
    let arguments = if arguments.trim().is_empty() {
        "{}".to_owned()
    } else {
        arguments
    };
    let outcome = if cut_open {
        ToolCallOutcome::Truncated
    } else if serde_json::from_str::<serde::de::IgnoredAny>(&arguments).is_ok() {
        ToolCallOutcome::Complete
    } else {
        ToolCallOutcome::InvalidJson
    };
    (arguments, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text deltas from each event's data; `end` completes the stream, `bad`
    /// fails it.
    #[derive(Default)]
    struct Echo {
        done: bool,
        text: String,
    }

    impl SimpleAssembler for Echo {
        type Error = StreamError;

        fn on_event(
            &mut self,
            event: RawSseEvent<'_>,
            out: &mut Vec<CompletionDelta>,
        ) -> Result<(), StreamError> {
            match event.data {
                b"end" => self.done = true,
                b"bad" => {
                    return Err(StreamError::Malformed {
                        event: "message".into(),
                        message: "bad".into(),
                    });
                }
                data => {
                    let text = String::from_utf8_lossy(data).into_owned();
                    ai_core::text::append(&mut self.text, &text);
                    out.push(CompletionDelta::Text(text));
                }
            }
            Ok(())
        }

        fn is_done(&self) -> bool {
            self.done
        }

        fn into_turn(self) -> CompletionFinal {
            CompletionFinal {
                text: self.text,
                ..CompletionFinal::default()
            }
        }
    }

    #[test]
    fn events_split_anywhere_reach_the_assembler_and_are_counted() {
        let stream = b"data: he\n\n: ping\n\ndata: llo\r\n\r\ndata: end\n\n";
        for size in 1..stream.len() {
            let mut decoder = SseDecoder::<Echo>::new();
            let mut out = Vec::new();
            for chunk in stream.chunks(size) {
                decoder.feed(chunk, &mut out).unwrap();
            }
            assert_eq!(decoder.events(), 3, "comments are no events");
            assert!(decoder.is_done());
            assert_eq!(decoder.finish().unwrap().text, "hello");
            assert_eq!(out.len(), 2);
        }
    }

    #[test]
    fn the_first_error_sticks_and_a_cut_stream_is_truncated() {
        let mut decoder = SseDecoder::<Echo>::new();
        let mut out = Vec::new();
        let error = decoder.feed(b"data: bad\n\n", &mut out).unwrap_err();
        assert_eq!(decoder.feed(b"data: x\n\n", &mut out), Err(error.clone()));
        assert_eq!(decoder.finish(), Err(error.into()));

        let mut decoder = SseDecoder::<Echo>::new();
        decoder.feed(b"data: part\n\ndata: last", &mut out).unwrap();
        let mut tail = Vec::new();
        match decoder.finish_into(&mut tail) {
            Err(CompletionError::TruncatedStream { partial }) => {
                assert_eq!(partial.text, "partlast");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(tail, [CompletionDelta::Text("last".into())]);
    }

    #[test]
    fn bodies_are_framed_as_streams_unless_the_assembler_tells_them_apart() {
        let mut decoder = SseDecoder::<Echo>::new();
        let mut out = Vec::new();
        decoder.feed(b"{\"error\": 1}", &mut out).unwrap();
        assert!(matches!(
            decoder.finish(),
            Err(CompletionError::TruncatedStream { .. })
        ));
    }

    #[test]
    fn arguments_settle() {
        assert_eq!(
            settle_arguments(" ".into(), false),
            ("{}".into(), ToolCallOutcome::Complete)
        );
        assert_eq!(
            settle_arguments("{\"a\":1}".into(), false).1,
            ToolCallOutcome::Complete
        );
        assert_eq!(
            settle_arguments("{\"a\":1}".into(), true).1,
            ToolCallOutcome::Truncated
        );
        assert_eq!(
            settle_arguments("{a".into(), false).1,
            ToolCallOutcome::InvalidJson
        );
    }
}
