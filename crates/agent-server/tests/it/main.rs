//! Integration tests of the chat endpoint: the stream encoders' golden responses,
//! the endpoint over real HTTP, its resource limits under abusive clients, and the
//! real AI SDK parsers and the page in a real browser against it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browser;
mod encode;
mod graphs;
mod http;
mod js;
mod limits;
mod own_app;
mod stock_client;
mod stored;
mod support;
