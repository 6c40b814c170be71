//! Integration tests of the chat endpoint: the stream encoders' golden responses,
//! the endpoint over real HTTP, and the real AI SDK parsers against it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browser;
mod encode;
mod http;
mod js;
mod support;
