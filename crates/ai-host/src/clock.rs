//! `SystemClock`: the real [`Clock`], the system's wall clock.

use ai_tools::capability::Clock;

/// The system wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }
}
