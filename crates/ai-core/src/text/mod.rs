//! Text that leaves a run: bounded for the model ([`bound_value`], [`bound_text`]),
//! safe for logs ([`log_field`]) and for a terminal or a page ([`printable`]: the one
//! list of hidden characters the CLI and the chat page escape).

mod bound;
mod display;

pub use bound::{
    BoundedValue, MAX_FAILURE_MESSAGE_BYTES, MAX_LOG_FIELD_CHARS, MIN_RESULT_BUDGET,
    TRUNCATION_MARKER, bound_text, bound_value, log_field,
};
pub use display::{has_hidden, is_hidden, printable};
