//! Integration tests against real MCP servers: the Python test server
//! (`tests/servers/testserver.py`, official `mcp` SDK) over stdio and streamable
//! HTTP, as child processes of the test.

mod http;
mod stdio;
mod support;
