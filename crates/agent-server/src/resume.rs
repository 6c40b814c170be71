//! Reattaching to a response that is still streaming: `GET /api/chat/{id}/stream`,
//! the reconnect of `useChat`'s `resume: true` (and of `resumeStream()`).
//!
//! While a chat's response streams, every frame it writes (not the heartbeats) is
//! also kept in a [`Replay`], up to a byte bound. A reattaching client gets the
//! frames written so far, then the live ones, until the response ends; the response
//! headers are those of the original (UI message stream or data stream). When no
//! response of that chat is running, or its replay outgrew the bound (its start is
//! gone), the answer is `204 No Content`, which the AI SDK's transport reads as
//! "nothing to resume".
//!
//! A newer request of the same chat replaces the older one's replay. Reattached
//! readers never cancel the run: only the request that started it does, by going
//! away (a reload does exactly that, so a reload of the page that started a
//! response finds nothing to resume; another tab, or a client that keeps its
//! request open, does).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use futures::Stream;
use tokio::sync::watch;

/// Bytes of frames kept per running response by default.
pub const DEFAULT_REPLAY_BYTES: usize = 1024 * 1024;

/// The frames of one running response, for reattaching clients.
#[derive(Debug)]
pub struct Replay {
    headers: &'static [(&'static str, &'static str)],
    max_bytes: usize,
    state: Mutex<ReplayState>,
    /// Bumped on every change, so readers wake up. Made by the first reader:
    /// most responses never have one, and a watch channel is about 350 bytes
    /// that every open stream would hold.
    changed: std::sync::OnceLock<watch::Sender<u64>>,
    /// Cancels the response's run (`POST /api/chat/{id}/stop`).
    stop: tokio_util::sync::CancellationToken,
}

/// The frames so far, back to back in one buffer (one allocation per response,
/// not one per frame), consecutive text deltas of one part merged into one frame
/// while no reader has read the last one: a long answer keeps about its text.
#[derive(Debug, Default)]
struct ReplayState {
    bytes: Vec<u8>,
    /// Where the last frame starts.
    last: usize,
    /// When the last frame is a delta: the lengths of the bytes before its
    /// text and after it ([`delta_parts`]), so a push parses only its own frame.
    open: Option<(usize, usize)>,
    /// How far readers have read: frames before it are never rewritten.
    sealed: usize,
    overflowed: bool,
    done: bool,
}

/// The UI message stream's delta frames: `data: {"delta":"<text>","id":"<part>",
/// "type":"text-delta"}` (keys in this order: the encoder's JSON objects sort
/// their keys). A JSON string's escaped text never holds `","id":"`.
const UI_DELTA_PREFIX: &[u8] = b"data: {\"delta\":\"";
const UI_DELTA_TAIL: &[u8] = b"\",\"id\":\"";

/// The escaped text of a delta frame and the bytes after it: a UI message stream
/// `text-delta`/`reasoning-delta`, or a data stream `0:"..."` / `g:"..."` line.
fn delta_parts(frame: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    if let Some(rest) = frame.strip_prefix(UI_DELTA_PREFIX) {
        static TAIL: std::sync::LazyLock<memchr::memmem::FinderRev<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::FinderRev::new(UI_DELTA_TAIL));
        let at = TAIL.rfind(rest)?;
        let tail = &rest[at..];
        let delta = tail.ends_with(b"-delta\"}\n\n");
        return delta.then(|| (&frame[..UI_DELTA_PREFIX.len()], &rest[..at], tail));
    }
    let code = frame.first().copied()?;
    if matches!(code, b'0' | b'g') && frame.get(1..3) == Some(b":\"") && frame.ends_with(b"\"\n") {
        return Some((
            &frame[..3],
            &frame[3..frame.len() - 2],
            &frame[frame.len() - 2..],
        ));
    }
    None
}

impl ReplayState {
    /// Appends `frame`, merged into the last frame when both are deltas of the
    /// same part and no reader has read the last one yet.
    fn append(&mut self, frame: &[u8]) {
        let parts = delta_parts(frame);
        if self.last >= self.sealed
            && let (Some((head, tail)), Some((p2, text, t2))) = (self.open, parts)
            && self.bytes.get(self.last..self.last + head) == Some(p2)
            && self.bytes.len() >= self.last + head + tail
            && self.bytes[self.bytes.len() - tail..] == *t2
        {
            // The last frame's tail is the new frame's: cut it, then the
            // text and the tail go on the end.
            self.bytes.truncate(self.bytes.len() - tail);
            self.room(text.len() + t2.len());
            self.bytes.extend_from_slice(text);
            self.bytes.extend_from_slice(t2);
            return;
        }
        self.last = self.bytes.len();
        self.open = parts.map(|(head, _, tail)| (head.len(), tail.len()));
        self.room(frame.len());
        self.bytes.extend_from_slice(frame);
    }

    /// Room for `more` bytes, growing as streamed text does
    /// ([`ai_core::text::growth`]) rather than doubling: every running
    /// response holds its replay, which then holds about its text, not up to
    /// twice it.
    fn room(&mut self, more: usize) {
        let kept = self.bytes.len();
        if self.bytes.capacity() - kept < more {
            self.bytes.reserve_exact(ai_core::text::growth(kept, more));
        }
    }
}

impl Replay {
    fn state(&self) -> std::sync::MutexGuard<'_, ReplayState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `frame` (or, past the bound, drops everything: the replay can no
    /// longer be attached to).
    pub fn push(&self, frame: &Bytes) {
        {
            let mut state = self.state();
            if state.overflowed || state.done {
                return;
            }
            if state.bytes.len().saturating_add(frame.len()) > self.max_bytes {
                state.overflowed = true;
                state.bytes = Vec::new();
            } else {
                state.append(frame);
            }
        }
        // Most responses are never reattached to: no reader, nobody to wake.
        if let Some(changed) = self.changed.get()
            && changed.receiver_count() > 0
        {
            changed.send_modify(|v| *v = v.wrapping_add(1));
        }
    }

    /// Clients reading it now (reattached with `GET /api/chat/{id}/stream`).
    pub fn readers(&self) -> usize {
        self.changed.get().map_or(0, watch::Sender::receiver_count)
    }

    /// Cancels the response's run (what Stop asks for, whoever is reading).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// The response ended: readers get what is left, then the end.
    pub fn finish(&self) {
        self.state().done = true;
        if let Some(changed) = self.changed.get() {
            changed.send_modify(|v| *v = v.wrapping_add(1));
        }
    }

    /// The response's protocol headers.
    pub fn headers(&self) -> &'static [(&'static str, &'static str)] {
        self.headers
    }

    /// Every frame from the first, then the live ones (what arrived since the
    /// last read, in one piece), until the end; `None` when the replay outgrew its
    /// bound.
    pub fn reader(self: &Arc<Self>) -> Option<impl Stream<Item = Bytes> + Send + use<>> {
        if self.state().overflowed {
            return None;
        }
        // Subscribed before the first look at the frames: a push after it
        // wakes this reader.
        let changes = self.changed.get_or_init(|| watch::channel(0).0).subscribe();
        let start = (Arc::clone(self), changes, 0usize);
        Some(futures::stream::unfold(
            start,
            |(replay, mut changes, next)| async move {
                loop {
                    {
                        let mut state = replay.state();
                        if state.overflowed {
                            return None;
                        }
                        if next < state.bytes.len() {
                            let piece = Bytes::copy_from_slice(&state.bytes[next..]);
                            let read = state.bytes.len();
                            state.sealed = read;
                            drop(state);
                            return Some((piece, (replay, changes, read)));
                        }
                        if state.done {
                            return None;
                        }
                    }
                    if changes.changed().await.is_err() {
                        return None;
                    }
                }
            },
        ))
    }
}

/// The replays of the running responses, by chat id.
#[derive(Debug)]
pub struct ActiveStreams {
    max_bytes: usize,
    by_chat: Mutex<HashMap<String, Arc<Replay>>>,
}

impl Default for ActiveStreams {
    fn default() -> Self {
        Self::new(DEFAULT_REPLAY_BYTES)
    }
}

impl ActiveStreams {
    /// Replays of at most `max_bytes` each.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            by_chat: Mutex::new(HashMap::new()),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Replay>>> {
        self.by_chat.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new replay for `chat_id`'s response (replacing an older one's), whose
    /// run `stop` cancels ([`Replay::stop`]).
    pub fn open(
        &self,
        chat_id: &str,
        headers: &'static [(&'static str, &'static str)],
        stop: tokio_util::sync::CancellationToken,
    ) -> Arc<Replay> {
        let replay = Arc::new(Replay {
            headers,
            max_bytes: self.max_bytes,
            state: Mutex::new(ReplayState::default()),
            changed: std::sync::OnceLock::new(),
            stop,
        });
        if let Some(older) = self.map().insert(chat_id.to_owned(), Arc::clone(&replay)) {
            older.finish();
        }
        replay
    }

    /// `replay` ended: finished, and forgotten unless a newer one replaced it.
    pub fn close(&self, chat_id: &str, replay: &Arc<Replay>) {
        replay.finish();
        let mut map = self.map();
        if map.get(chat_id).is_some_and(|r| Arc::ptr_eq(r, replay)) {
            map.remove(chat_id);
        }
    }

    /// The running response of `chat_id`, when there is one to attach to.
    pub fn get(&self, chat_id: &str) -> Option<Arc<Replay>> {
        self.map().get(chat_id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    const H: &[(&str, &str)] = &[("x", "y")];

    #[tokio::test]
    async fn a_reader_gets_what_was_sent_then_the_live_frames_then_the_end() {
        let streams = ActiveStreams::new(1024);
        let replay = streams.open("c", H, tokio_util::sync::CancellationToken::new());
        replay.push(&Bytes::from_static(b"a"));
        let reader = streams.get("c").unwrap().reader().unwrap();
        let collect = tokio::spawn(reader.collect::<Vec<Bytes>>());
        tokio::task::yield_now().await;
        replay.push(&Bytes::from_static(b"b"));
        streams.close("c", &replay);
        let frames = collect.await.unwrap();
        assert_eq!(frames.concat(), b"ab");
        assert!(streams.get("c").is_none());
    }

    fn ui_delta(id: &str, delta: &str) -> Bytes {
        let chunk = serde_json::json!({"type": "text-delta", "id": id, "delta": delta});
        Bytes::from(format!("data: {chunk}\n\n"))
    }

    #[tokio::test]
    async fn deltas_of_one_part_are_kept_as_one_frame_until_a_reader_has_read_it() {
        let streams = ActiveStreams::new(4096);
        let replay = streams.open("c", H, tokio_util::sync::CancellationToken::new());
        replay.push(&Bytes::from_static(
            b"data: {\"type\":\"text-start\",\"id\":\"t1\"}\n\n",
        ));
        for piece in ["Hel", "lo, \"wor", "ld\"\n"] {
            replay.push(&ui_delta("t1", piece));
        }
        replay.push(&ui_delta("t2", "other part"));
        replay.push(&Bytes::from_static(b"0:\"a\"\n"));
        replay.push(&Bytes::from_static(b"0:\"b\\n\"\n"));
        let mut reader = Box::pin(streams.get("c").unwrap().reader().unwrap());
        let first = reader.next().await.unwrap();
        let text = std::str::from_utf8(&first).unwrap();
        let frames: Vec<&str> = text.split("\n\n").collect();
        let whole = |b: Bytes| String::from_utf8(b.to_vec()).unwrap().trim_end().to_owned();
        assert_eq!(frames[1], whole(ui_delta("t1", "Hello, \"world\"\n")));
        assert_eq!(frames[2], whole(ui_delta("t2", "other part")));
        assert!(text.ends_with("0:\"ab\\n\"\n"), "{text}");
        // Read: the next delta is a frame of its own, and the reader gets it whole.
        replay.push(&Bytes::from_static(b"0:\"c\"\n"));
        assert_eq!(
            reader.next().await.unwrap(),
            Bytes::from_static(b"0:\"c\"\n")
        );
    }

    #[test]
    fn a_long_answer_keeps_about_its_text() {
        let streams = ActiveStreams::new(1 << 20);
        let replay = streams.open("c", H, tokio_util::sync::CancellationToken::new());
        for i in 0..2_000 {
            replay.push(&ui_delta("t1", &format!("t{i:020} ")));
        }
        let state = replay.state();
        let (kept, room) = (state.bytes.len(), state.bytes.capacity());
        assert!(kept > 2_000 * 22, "every delta's text is kept: {kept}");
        assert!(room <= kept + kept / 8, "{room} bytes held for {kept}");
    }

    #[test]
    fn past_its_bound_a_replay_cannot_be_attached_to() {
        let streams = ActiveStreams::new(4);
        let replay = streams.open("c", H, tokio_util::sync::CancellationToken::new());
        replay.push(&Bytes::from_static(b"abc"));
        assert!(replay.reader().is_some());
        replay.push(&Bytes::from_static(b"de"));
        assert!(replay.reader().is_none());
    }

    #[test]
    fn a_newer_response_replaces_the_older_and_the_older_close_keeps_it() {
        let streams = ActiveStreams::new(64);
        let old = streams.open("c", H, tokio_util::sync::CancellationToken::new());
        let new = streams.open("c", H, tokio_util::sync::CancellationToken::new());
        streams.close("c", &old);
        assert!(Arc::ptr_eq(&streams.get("c").unwrap(), &new));
    }
}
