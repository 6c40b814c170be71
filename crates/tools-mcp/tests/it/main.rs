//! Integration tests against real MCP servers: the Python test server
//! (`tests/servers/testserver.py`, official `mcp` SDK) over stdio and streamable
//! HTTP, as child processes of the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod http;
mod stdio;
mod support;
