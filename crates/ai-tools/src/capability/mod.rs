//! Capability traits: the only doors from a tool to the outside world.
//!
//! Each trait is small and object-safe. Real adapters live in `bootstrap`; in-memory
//! doubles for tests live here beside the traits.

mod clock;

pub use clock::{Clock, FixedClock};
