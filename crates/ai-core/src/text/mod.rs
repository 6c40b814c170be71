//! Text that leaves a run: bounded for the model ([`bound_value`], [`bound_text`]),
//! safe for logs ([`log_field`]) and for a terminal or a page ([`printable`]: the one
//! list of hidden characters the CLI and the chat page escape); and text that
//! grows while it streams ([`append`]).

mod bound;
mod display;

pub use bound::{
    BoundedValue, MAX_FAILURE_MESSAGE_BYTES, MAX_LOG_FIELD_CHARS, MIN_RESULT_BUDGET,
    TRUNCATION_MARKER, bound_text, bound_value, log_field,
};
pub use display::{has_hidden, is_hidden, printable};

/// Appends `more` to `text`, growing it (when it must grow) by [`growth`]
/// rather than doubling it.
///
/// A streamed answer is assembled whole while it streams (by a decoder for its
/// final turn, by an event that absorbs its deltas), and every open stream holds
/// it: doubling leaves up to half of each such buffer unused, an eighth at most
/// a ninth. The cost is a few more reallocations over a long answer.
///
/// ```
/// let mut text = String::new();
/// for _ in 0..1_000 {
///     ai_core::text::append(&mut text, "twenty-two bytes each ");
/// }
/// assert_eq!(text.len(), 22_000);
/// assert!(text.capacity() <= 22_000 + 22_000 / 8);
/// ```
pub fn append(text: &mut String, more: &str) {
    let free = text.capacity() - text.len();
    if free < more.len() {
        text.reserve_exact(growth(text.len(), more.len()));
    }
    text.push_str(more);
}

/// How many bytes a buffer of streamed text holding `kept` bytes reserves when
/// `more` do not fit: `more`, or an eighth of `kept` when that is larger.
///
/// The one growth rule of the buffers every open stream holds whole ([`append`]'s
/// text, a server's replay of the frames it sent): right after a growth their
/// slack is at most an eighth of what they hold, a ninth of the buffer. An
/// eighth rather than a quarter saves about 0.9 KiB per open stream at 200
/// deltas of 22 bytes (the relay bench), for twice the reallocations (about 45
/// instead of 23 over such a stream), each copying what is kept.
///
/// ```
/// assert_eq!(ai_core::text::growth(800, 10), 100);
/// assert_eq!(ai_core::text::growth(800, 300), 300);
/// ```
pub fn growth(kept: usize, more: usize) -> usize {
    more.max(kept / 8)
}
