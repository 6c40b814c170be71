//! Server-sent events framing (WHATWG event-stream rules), sans-IO and byte-oriented:
//! the framing every streaming wire reads its provider's stream with, through
//! completion-http's decoder shell.
//!
//! The framer turns arbitrary byte chunks into [`SseEvent`]s. It knows nothing about
//! any provider: it does not look inside `data`, and does no IO. It depends on no
//! project crate and on nothing that speaks HTTP.
//!
//! Rules implemented (HTML Living Standard, "Interpreting an event stream"):
//! - lines end with LF, CRLF or CR, also when the CR and the LF arrive in different
//!   chunks;
//! - a leading UTF-8 byte order mark is skipped;
//! - lines starting with `:` are comments (keepalives) and are ignored;
//! - `field: value` with at most one space stripped after the colon; a line without a
//!   colon is a field with an empty value;
//! - `data` lines append to the data buffer with a line feed in between (multi-line
//!   data); `event` sets the event type; `id` sets the last event id (kept across
//!   events, ignored when it contains NUL); `retry` is kept when it is all ASCII digits;
//! - an empty line dispatches the event; an event whose data buffer is empty is not
//!   dispatched;
//! - bytes are kept until a line is complete, so a UTF-8 character split across chunks
//!   is never corrupted. Invalid UTF-8 is replaced with U+FFFD, as the standard's
//!   decoder does.
//!
//! One deliberate extension: [`SseFramer::finish`] dispatches an event that the
//! stream left pending at its end (no final empty line, possibly no final line end).
//! The standard discards it; a chat-completions decoder would rather see it, so it
//! can keep a last frame such as `data: [DONE]` without a trailing newline or report
//! a truncated stream precisely.

use std::borrow::Cow;

/// Default upper bound of one event's bytes (one line or the data of one event).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched server-sent event, borrowing from the framer's buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The event type; `message` when the stream named none.
    pub event: Cow<'a, str>,
    /// The data, with the lines of multi-line data joined by `\n`.
    pub data: Cow<'a, str>,
    /// The last event id seen on the stream (empty when none).
    pub id: Cow<'a, str>,
    /// The `retry` field of this event, in milliseconds, when it had a valid one.
    pub retry: Option<u64>,
}

impl SseEvent<'_> {
    /// An owned copy of the event.
    pub fn to_owned_event(&self) -> OwnedSseEvent {
        OwnedSseEvent {
            event: self.event.clone().into_owned(),
            data: self.data.clone().into_owned(),
            id: self.id.clone().into_owned(),
            retry: self.retry,
        }
    }
}

/// An event as the framer holds it: bytes, not yet checked as UTF-8 (the decoder
/// checks only what it has not seen before).
#[derive(Debug, Clone, Copy)]
pub struct RawSseEvent<'a> {
    /// The event type; empty for the default `message`.
    pub event: &'a [u8],
    /// The data, lines joined by `\n`.
    pub data: &'a [u8],
    /// The last event id seen on the stream.
    pub id: &'a [u8],
    /// The `retry` field of this event, when valid.
    pub retry: Option<u64>,
}

impl<'a> RawSseEvent<'a> {
    /// Whether the event type is the default `message`.
    pub fn is_message(&self) -> bool {
        self.event.is_empty() || self.event == b"message"
    }

    fn decode(self) -> SseEvent<'a> {
        SseEvent {
            event: if self.event.is_empty() {
                Cow::Borrowed("message")
            } else {
                utf8(self.event)
            },
            data: utf8(self.data),
            id: utf8(self.id),
            retry: self.retry,
        }
    }
}

/// An owned [`SseEvent`], for callers that keep events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedSseEvent {
    /// The event type; `message` when the stream named none.
    pub event: String,
    /// The data.
    pub data: String,
    /// The last event id seen on the stream.
    pub id: String,
    /// The `retry` field of this event, in milliseconds.
    pub retry: Option<u64>,
}

/// Why framing failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SseError {
    /// A line or an event's data grew beyond the configured limit.
    #[error("server-sent event larger than {limit} bytes")]
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

/// A sans-IO server-sent events framer. Feed it byte chunks of any size; it calls
/// back once per complete event.
///
/// ```
/// use sse::SseFramer;
///
/// let mut framer = SseFramer::new();
/// let mut seen = Vec::new();
/// for chunk in [&b"data: he"[..], b"llo\r", b"\n\r\n: keepalive\n"] {
///     framer
///         .feed(chunk, |event| {
///             seen.push(event.data.into_owned());
///             Ok::<(), sse::SseError>(())
///         })
///         .unwrap();
/// }
/// assert_eq!(seen, ["hello"]);
/// ```
#[derive(Debug)]
pub struct SseFramer {
    /// Bytes of the current, not yet complete line.
    line: Vec<u8>,
    /// The data buffer of the current event.
    data: Vec<u8>,
    /// The event type buffer.
    event_type: Vec<u8>,
    /// The last event id buffer (persists across events).
    last_id: Vec<u8>,
    /// `retry` of the current event.
    retry: Option<u64>,
    /// The previous chunk ended with CR: skip one LF at the start of the next.
    skip_lf: bool,
    /// No line has been processed yet (a BOM may lead it).
    at_start: bool,
    max_event_bytes: usize,
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::new()
    }
}

impl SseFramer {
    /// A framer with the default size limit ([`DEFAULT_MAX_EVENT_BYTES`]).
    pub fn new() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A framer that fails with [`SseError::EventTooLarge`] when a line or an event's
    /// data exceeds `limit` bytes.
    pub fn with_max_event_bytes(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            data: Vec::new(),
            event_type: Vec::new(),
            last_id: Vec::new(),
            retry: None,
            skip_lf: false,
            at_start: true,
            max_event_bytes: limit,
        }
    }

    /// Feeds a chunk; `on_event` is called for every event completed by it, in order.
    /// The first error (from the framer or from `on_event`) stops the feed.
    pub fn feed<E, F>(&mut self, chunk: &[u8], mut on_event: F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(SseEvent<'_>) -> Result<(), E>,
    {
        self.feed_raw(chunk, |event| on_event(event.decode()))
    }

    /// [`SseFramer::feed`] with events as bytes (not yet checked as UTF-8).
    pub fn feed_raw<E, F>(&mut self, chunk: &[u8], mut on_event: F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(RawSseEvent<'_>) -> Result<(), E>,
    {
        let mut rest = chunk;
        if self.skip_lf
            && let Some((&first, tail)) = rest.split_first()
        {
            self.skip_lf = false;
            if first == b'\n' {
                rest = tail;
            }
        }
        // Fast path: the value of a lone `data:` line still in `chunk`. It is only
        // copied into the data buffer if the event does not end within this chunk.
        let mut pending: Option<&[u8]> = None;
        let result = self.feed_lines(&mut rest, &mut pending, &mut on_event);
        if let Some(value) = pending {
            self.append_data(value)?;
        }
        result?;
        if !rest.is_empty() {
            if self.line.len() + rest.len() > self.max_event_bytes {
                return Err(SseError::EventTooLarge {
                    limit: self.max_event_bytes,
                }
                .into());
            }
            self.line.extend_from_slice(rest);
        }
        Ok(())
    }

    fn feed_lines<'c, E, F>(
        &mut self,
        rest: &mut &'c [u8],
        pending: &mut Option<&'c [u8]>,
        on_event: &mut F,
    ) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(RawSseEvent<'_>) -> Result<(), E>,
    {
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) {
            let line: &'c [u8] = &rest[..pos];
            if !self.line.is_empty() {
                self.line.extend_from_slice(line);
                let line = std::mem::take(&mut self.line);
                let result = self.process_line(&line, on_event);
                self.line = line;
                self.line.clear();
                result?;
            } else if line.is_empty() && pending.is_some() {
                if let Some(value) = pending.take() {
                    self.dispatch_borrowed(value, on_event)?;
                }
            } else if let Some(value) = line
                .strip_prefix(b"data:")
                .filter(|_| pending.is_none() && self.data.is_empty() && !self.at_start)
            {
                if value.len() >= self.max_event_bytes {
                    return Err(SseError::EventTooLarge {
                        limit: self.max_event_bytes,
                    }
                    .into());
                }
                *pending = Some(value.strip_prefix(b" ").unwrap_or(value));
            } else {
                if let Some(value) = pending.take() {
                    self.append_data(value)?;
                }
                self.process_line(line, on_event)?;
            }
            let ended_with_cr = rest[pos] == b'\r';
            *rest = &rest[pos + 1..];
            if ended_with_cr {
                match rest.first() {
                    Some(b'\n') => *rest = &rest[1..],
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
        }
        Ok(())
    }

    fn append_data<E: From<SseError>>(&mut self, value: &[u8]) -> Result<(), E> {
        if self.data.len() + value.len() + 1 > self.max_event_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            }
            .into());
        }
        self.data.extend_from_slice(value);
        self.data.push(b'\n');
        Ok(())
    }

    /// Dispatches an event whose whole data is `value` (the data buffer is empty).
    fn dispatch_borrowed<E, F>(&mut self, value: &[u8], on_event: &mut F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(RawSseEvent<'_>) -> Result<(), E>,
    {
        let retry = self.retry.take();
        let event = RawSseEvent {
            event: &self.event_type,
            data: value,
            id: &self.last_id,
            retry,
        };
        let result = on_event(event);
        self.event_type.clear();
        result
    }

    /// Ends the stream: a pending last line is processed and a pending event is
    /// dispatched (see the module docs for why this deviates from the standard).
    pub fn finish<E, F>(&mut self, mut on_event: F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(SseEvent<'_>) -> Result<(), E>,
    {
        self.finish_raw(|event| on_event(event.decode()))
    }

    /// [`SseFramer::finish`] with events as bytes.
    pub fn finish_raw<E, F>(&mut self, mut on_event: F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(RawSseEvent<'_>) -> Result<(), E>,
    {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, &mut on_event)?;
        }
        self.dispatch(&mut on_event)
    }

    /// Whether bytes of an unfinished line or event are buffered.
    pub fn has_pending(&self) -> bool {
        !self.line.is_empty() || !self.data.is_empty()
    }

    /// Feeds a chunk and returns owned copies of the events it completed.
    pub fn feed_owned(&mut self, chunk: &[u8]) -> Result<Vec<OwnedSseEvent>, SseError> {
        let mut out = Vec::new();
        self.feed(chunk, |event| {
            out.push(event.to_owned_event());
            Ok::<(), SseError>(())
        })?;
        Ok(out)
    }

    fn process_line<E, F>(&mut self, mut line: &[u8], on_event: &mut F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(RawSseEvent<'_>) -> Result<(), E>,
    {
        if self.at_start {
            self.at_start = false;
            if let Some(tail) = line.strip_prefix(b"\xEF\xBB\xBF") {
                line = tail;
            }
        }
        if line.len() > self.max_event_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_event_bytes,
            }
            .into());
        }
        let Some((&first, _)) = line.split_first() else {
            return self.dispatch(on_event);
        };
        if first == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => self.append_data(value)?,
            b"event" => {
                self.event_type.clear();
                self.event_type.extend_from_slice(value);
            }
            b"id" if memchr::memchr(0, value).is_none() => {
                self.last_id.clear();
                self.last_id.extend_from_slice(value);
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Saturate absurdly long digit strings instead of failing.
                self.retry = Some(value.iter().fold(0u64, |acc, digit| {
                    acc.saturating_mul(10)
                        .saturating_add(u64::from(digit - b'0'))
                }));
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch<E, F>(&mut self, on_event: &mut F) -> Result<(), E>
    where
        E: From<SseError>,
        F: FnMut(RawSseEvent<'_>) -> Result<(), E>,
    {
        let retry = self.retry.take();
        if self.data.is_empty() {
            self.event_type.clear();
            return Ok(());
        }
        let data_len = self.data.len() - usize::from(self.data.last() == Some(&b'\n'));
        let event = RawSseEvent {
            event: &self.event_type,
            data: &self.data[..data_len],
            id: &self.last_id,
            retry,
        };
        let result = on_event(event);
        self.data.clear();
        self.event_type.clear();
        result
    }
}

/// UTF-8 with U+FFFD for invalid sequences; the validating fast path first
/// (`from_utf8_lossy` alone is several times slower on valid input).
pub fn utf8(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(chunks: &[&[u8]]) -> Vec<OwnedSseEvent> {
        let mut framer = SseFramer::new();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(framer.feed_owned(chunk).unwrap());
        }
        out
    }

    fn data(events: &[OwnedSseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn line_ends_lf_crlf_cr_and_split_crlf() {
        assert_eq!(
            data(&frame(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\r"])),
            ["a", "b", "c"]
        );
        // CR at the end of one chunk, LF at the start of the next: one line end.
        assert_eq!(
            data(&frame(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"])),
            ["a\nb"]
        );
        // CR then a non-LF byte in the next chunk.
        assert_eq!(data(&frame(&[b"data: a\r", b"\rdata: b\n\n"])), ["a", "b"]);
    }

    #[test]
    fn multi_line_data_comments_event_names_ids_and_retry() {
        let events = frame(&[
            b": keepalive\n\nevent: update\nid: 7\nretry: 1500\ndata: x\ndata:y\ndata\n\n",
            b"data: z\n\n",
        ]);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].event, "update");
        assert_eq!(events[0].data, "x\ny\n");
        assert_eq!(events[0].id, "7");
        assert_eq!(events[0].retry, Some(1500));
        assert_eq!(events[1].event, "message");
        assert_eq!(events[1].id, "7", "the last event id persists");
        assert_eq!(events[1].retry, None);
    }

    #[test]
    fn utf8_split_across_chunks_and_bom() {
        let bytes = "\u{feff}data: héllo → 🦀\n\n".as_bytes();
        for split in 0..bytes.len() {
            let events = frame(&[&bytes[..split], &bytes[split..]]);
            assert_eq!(data(&events), ["héllo → 🦀"], "split at {split}");
        }
    }

    #[test]
    fn empty_data_is_not_dispatched_and_resets_event_type() {
        let events = frame(&[b"event: a\n\ndata: x\n\n"]);
        assert_eq!(events[0].event, "message");
    }

    #[test]
    fn finish_dispatches_a_pending_event() {
        let mut framer = SseFramer::new();
        assert!(framer.feed_owned(b"data: [DONE]").unwrap().is_empty());
        assert!(framer.has_pending());
        let mut out = Vec::new();
        framer
            .finish(|e| {
                out.push(e.to_owned_event());
                Ok::<(), SseError>(())
            })
            .unwrap();
        assert_eq!(data(&out), ["[DONE]"]);
    }

    #[test]
    fn size_limit() {
        let mut framer = SseFramer::with_max_event_bytes(8);
        assert_eq!(
            framer.feed_owned(b"data: 0123456789"),
            Err(SseError::EventTooLarge { limit: 8 })
        );
        let mut framer = SseFramer::with_max_event_bytes(8);
        assert!(framer.feed_owned(b"data: 0123\ndata: 4567\n").is_err());
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let events = frame(&[b"data: a\xffb\n\n"]);
        assert_eq!(data(&events), ["a\u{fffd}b"]);
    }
}
