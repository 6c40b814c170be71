//! The built-in tools (ids `core__*`).

mod time;

pub use time::{CurrentTime, GetCurrentTime, GetCurrentTimeArgs};
