//! Integration tests of the agent loop: event-sequence conformance, tool scheduling,
//! approvals, limits, cancellation and teardown, backpressure, fan-out, tracing spans,
//! the offline `TestModel` over the built-in tools, and the graph registry.
//!
//! Every run is checked by one structural checker (`support::check_invariants`):
//! exactly one `done` and it is last; one `assistant_final` on success and none on
//! error; every `tool_call_start` has exactly one matching `tool_call_result`; every
//! event carries the request's run, trace and ingress request ids.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod approval;
mod backpressure;
mod builtins;
mod conformance;
mod deferred;
mod fanout_graph;
mod fidelity;
mod front_door;
mod journal;
mod lifecycle;
mod prompt;
mod resume;
mod spans;
mod subagent;
mod support;
