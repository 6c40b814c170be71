//! Cross-crate integration tests of the workspace.
//!
//! This crate holds no product code and is never published; it may depend on any
//! project crate (layer-lint knows it as test-only), and no crate depends on it.
//! README.md's library example is compiled and run here as a doctest.

#[doc = include_str!("../README.md")]
mod readme {}
