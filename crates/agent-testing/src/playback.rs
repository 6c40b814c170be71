//! Turns a planned model turn into a cancellable [`CompletionStream`] (shared by the
//! test models).

use std::time::Duration;

use ai_core::{
    completion::{
        AssembledToolCall, CompletionDelta, CompletionError, CompletionFinal, CompletionItem,
        CompletionStream, FinishReason, ToolCallOutcome,
    },
    event::UsageFact,
};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// Default size, in bytes, of one streamed tool-call argument fragment.
pub(super) const DEFAULT_ARG_CHUNK: usize = 7;

/// Splits text into word-sized deltas: each piece is a word plus the whitespace that
/// follows it, so the pieces concatenate back to `text`.
pub(super) fn text_pieces(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut prev_ws = false;
    for (i, c) in text.char_indices() {
        let ws = c.is_whitespace();
        if prev_ws && !ws && i > start {
            pieces.push(&text[start..i]);
            start = i;
        }
        prev_ws = ws;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Splits text into fragments of about `chunk` bytes, never inside a UTF-8 character
/// (a character longer than `chunk` forms a fragment on its own).
pub(super) fn byte_pieces(text: &str, chunk: usize) -> Vec<&str> {
    let chunk = chunk.max(1);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        pieces.push(&text[start..end]);
        start = end;
    }
    pieces
}

/// Collects a turn's deltas and, from exactly the same parts, its assembled final.
#[derive(Debug, Default)]
pub(super) struct TurnBuilder {
    deltas: Vec<CompletionDelta>,
    text: String,
    reasoning: Option<String>,
    refusal: Option<String>,
    calls: Vec<AssembledToolCall>,
}

impl TurnBuilder {
    /// Streams `text` as word-sized text deltas.
    pub(super) fn text(&mut self, text: &str) {
        for piece in text_pieces(text) {
            self.deltas.push(CompletionDelta::Text(piece.to_owned()));
        }
        self.text.push_str(text);
    }

    /// Streams `text` as word-sized reasoning deltas (assembled into the final's
    /// `reasoning`).
    pub(super) fn reasoning(&mut self, text: &str) {
        for piece in text_pieces(text) {
            self.deltas
                .push(CompletionDelta::Reasoning(piece.to_owned()));
        }
        self.reasoning.get_or_insert_default().push_str(text);
    }

    /// Streams `text` as word-sized refusal deltas (assembled into the final's
    /// `refusal`).
    pub(super) fn refusal(&mut self, text: &str) {
        for piece in text_pieces(text) {
            self.deltas.push(CompletionDelta::Refusal(piece.to_owned()));
        }
        self.refusal.get_or_insert_default().push_str(text);
    }

    /// Streams one tool call: a start delta, then argument fragments of `chunk` bytes.
    pub(super) fn tool_call(
        &mut self,
        id: &str,
        name: &str,
        arguments: &str,
        outcome: ToolCallOutcome,
        chunk: usize,
    ) {
        let index = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
        self.deltas.push(CompletionDelta::ToolCallStart {
            index,
            id: id.to_owned(),
            name: name.to_owned(),
        });
        for fragment in byte_pieces(arguments, chunk) {
            self.deltas.push(CompletionDelta::ToolCallArgs {
                index,
                fragment: fragment.to_owned(),
            });
        }
        self.calls.push(AssembledToolCall {
            index,
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
            outcome,
            raw: None,
        });
    }

    /// Ends the turn: streams the usage (when given) as the last delta, and assembles
    /// the final. `finish` defaults to `ToolCalls` when calls exist, else `Stop`.
    pub(super) fn finish(
        mut self,
        finish: Option<FinishReason>,
        usage: Option<UsageFact>,
    ) -> (Vec<CompletionDelta>, CompletionFinal) {
        if let Some(usage) = &usage {
            self.deltas.push(CompletionDelta::Usage(usage.clone()));
        }
        let finish_reason = finish.unwrap_or(if self.calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        let last = CompletionFinal {
            blocks: Vec::new(),
            text: self.text,
            reasoning: self.reasoning,
            refusal: self.refusal,
            tool_calls: self.calls,
            finish_reason,
            raw_finish_reason: None,
            response_id: None,
            usage,
        };
        (self.deltas, last)
    }
}

/// How a planned turn ends after its deltas.
#[derive(Debug)]
pub(super) enum Ending {
    /// With the assembled turn.
    Final(Box<CompletionFinal>),
    /// With an error.
    Error(CompletionError),
    /// Never on its own: waits for cancellation, then ends with `Cancelled`.
    Pending,
}

/// A whole planned turn and its pacing.
#[derive(Debug)]
pub(super) struct Plan {
    /// Deltas, in stream order.
    pub(super) deltas: Vec<CompletionDelta>,
    /// What follows the deltas.
    pub(super) ending: Ending,
    /// Wait before the first item.
    pub(super) first_delay: Duration,
    /// Wait before each delta after the first item.
    pub(super) between: Duration,
}

struct Playback {
    deltas: std::vec::IntoIter<CompletionDelta>,
    ending: Option<Ending>,
    first_delay: Duration,
    between: Duration,
    started: bool,
    finished: bool,
    cancel: CancellationToken,
}

/// Sleeps for `delay` unless `cancel` fires first; returns whether it slept fully.
async fn wait(cancel: &CancellationToken, delay: Duration) -> bool {
    if delay.is_zero() {
        return true;
    }
    tokio::select! {
        biased;
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(delay) => true,
    }
}

impl Playback {
    async fn next_item(&mut self) -> Option<Result<CompletionItem, CompletionError>> {
        if self.finished {
            return None;
        }
        if self.cancel.is_cancelled() {
            return self.cancelled();
        }
        let delay = if !self.started {
            self.first_delay
        } else if !self.deltas.as_slice().is_empty() {
            self.between
        } else {
            Duration::ZERO
        };
        self.started = true;
        if !wait(&self.cancel, delay).await {
            return self.cancelled();
        }
        if let Some(delta) = self.deltas.next() {
            return Some(Ok(CompletionItem::Delta(delta)));
        }
        self.finished = true;
        match self.ending.take()? {
            Ending::Final(last) => Some(Ok(CompletionItem::Final(*last))),
            Ending::Error(error) => Some(Err(error)),
            Ending::Pending => {
                self.cancel.cancelled().await;
                Some(Err(CompletionError::Cancelled))
            }
        }
    }

    fn cancelled(&mut self) -> Option<Result<CompletionItem, CompletionError>> {
        self.finished = true;
        Some(Err(CompletionError::Cancelled))
    }
}

/// Plays `plan` lazily as a stream that ends with `Cancelled` as soon as `cancel`
/// fires, and does no work once dropped.
pub(super) fn play(plan: Plan, cancel: CancellationToken) -> CompletionStream {
    let playback = Playback {
        deltas: plan.deltas.into_iter(),
        ending: Some(plan.ending),
        first_delay: plan.first_delay,
        between: plan.between,
        started: false,
        finished: false,
        cancel,
    };
    futures::stream::unfold(playback, |mut playback| async move {
        let item = playback.next_item().await?;
        Some((item, playback))
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_pieces_split_after_whitespace_and_rejoin() {
        assert_eq!(text_pieces("Hello, world!"), vec!["Hello, ", "world!"]);
        assert_eq!(text_pieces("  a b\n\nc "), vec!["  ", "a ", "b\n\n", "c "]);
        assert!(text_pieces("").is_empty());
        let text = "héllo  wörld ✓ done";
        assert_eq!(text_pieces(text).concat(), text);
    }

    #[test]
    fn byte_pieces_never_split_a_character() {
        let text = "{\"q\":\"日本語✓é\"}";
        for chunk in 0..12 {
            let pieces = byte_pieces(text, chunk);
            assert_eq!(pieces.concat(), text);
            assert!(pieces.iter().all(|p| !p.is_empty()));
        }
        assert_eq!(byte_pieces("abcdefghij", 7), vec!["abcdefg", "hij"]);
        // A 3-byte character with a 1-byte chunk is kept whole.
        assert_eq!(byte_pieces("a日b", 1), vec!["a", "日", "b"]);
    }
}
