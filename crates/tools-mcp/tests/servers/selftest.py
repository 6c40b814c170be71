"""Self-test of testserver.py, driven by the official MCP Python client.

Checks every tool of the test server over stdio and over streamable HTTP,
including pagination (--pages 3), cancellation markers, tools/list_changed
after `toggle`, bearer-token rejection (401), session DELETE, the pid and port
files, and a server killed mid-call. Run it with the test venv's interpreter:

    target/test-venv/bin/python crates/tools-mcp/tests/servers/selftest.py [--dump-tools]

--dump-tools prints the raw `tools/list` result (as sent on the wire, one tool
per line) to stdout.
Ends with a line `selftest: N passed, M failed`; exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

HERE = Path(__file__).resolve().parent
SERVER = HERE / "testserver.py"
# Schemas are compared against the server's own constants; importing it must
# not leave a __pycache__ in the source tree.
sys.dont_write_bytecode = True
sys.path.insert(0, str(HERE))
import testserver  # noqa: E402

TOKEN_ENV = "TOOLS_MCP_TESTSERVER_TOKEN"
TOKEN = "s3cret-token"

EXPECTED_TOOLS = [
    "echo",
    "add",
    "fail",
    "slow",
    "hang",
    "crash",
    "image",
    "link",
    "profile",
    "weird",
    "pid",
    "env",
    "toggle",
    "whoami",
    "ephemeral",
    "notes.search/v2",
]
TOOLS_AFTER_TOGGLE = [name for name in EXPECTED_TOOLS if name != "ephemeral"] + ["newcomer"]

# The raw JSON-RPC request that opens a session (id 1).
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "selftest", "version": "0"},
    },
}

# Upper bounds: for a marker file to appear, for a server to start (Python
# start-up alone takes seconds on a busy machine), and for a whole scenario.
FILE_WAIT = 10.0
STARTUP_WAIT = 30.0
SCENARIO_TIMEOUT = 90.0


class Checks:
    """Counts and reports individual checks; never stops at the first failure."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str, detail: Any = None) -> bool:
        if ok:
            self.passed += 1
            print(f"ok    {what}", file=sys.stderr)
        else:
            self.failed += 1
            suffix = f": {detail!r}" if detail is not None else ""
            print(f"FAIL  {what}{suffix}", file=sys.stderr)
        return ok


class Notifications:
    """Collects the server notifications a session receives."""

    def __init__(self) -> None:
        self.tools_changed = anyio.Event()

    async def __call__(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed.set()


def text_of(result: types.CallToolResult) -> str | None:
    if len(result.content) == 1 and isinstance(result.content[0], types.TextContent):
        return result.content[0].text
    return None


async def wait_for_file(path: Path, timeout: float = FILE_WAIT) -> str | None:
    """Poll for `path`; return its content, or None if it did not appear in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        await anyio.sleep(0.02)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def png_is_valid(data: bytes) -> bool:
    """Walk the PNG chunks, checking each CRC and that the image data inflates."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return False
    offset, kinds, idat = 8, [], b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        if zlib.crc32(kind + body) != crc:
            return False
        kinds.append(kind)
        if kind == b"IDAT":
            idat += body
        offset += 12 + length
    return kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and len(zlib.decompress(idat)) > 0


# -- client sessions ---------------------------------------------------------


@asynccontextmanager
async def stdio_session(state_dir: Path, *extra: str) -> AsyncIterator[tuple[ClientSession, Notifications]]:
    params = StdioServerParameters(
        command=sys.executable, args=[str(SERVER), "--state-dir", str(state_dir), *extra]
    )
    notifications = Notifications()
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / "stderr.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, message_handler=notifications) as session:
                await session.initialize()
                yield session, notifications


@asynccontextmanager
async def http_session(
    url: str, token: str | None, *, terminate_on_close: bool = True
) -> AsyncIterator[tuple[ClientSession, Notifications]]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    notifications = Notifications()
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        async with streamable_http_client(url, http_client=http, terminate_on_close=terminate_on_close) as (
            read,
            write,
        ):
            async with ClientSession(read, write, message_handler=notifications) as session:
                await session.initialize()
                yield session, notifications


class HttpServer:
    """A testserver.py process on streamable HTTP, spawned and reaped by the self-test."""

    def __init__(self, state_dir: Path, *extra: str, port: int = 0, env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.stdout = open(state_dir / "stdout.log", "wb")
        self.stderr = open(state_dir / "stderr.log", "wb")
        args = ["--transport", "http", "--port", str(port), "--state-dir", str(state_dir), *extra]
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), *args],
            stdin=subprocess.DEVNULL,
            stdout=self.stdout,
            stderr=self.stderr,
            env={**os.environ, **(env or {})},
        )
        self.port: int | None = None

    async def wait_listening(self) -> int:
        content = await wait_for_file(self.state_dir / "port", timeout=STARTUP_WAIT)
        if content is None:
            raise RuntimeError(f"HTTP server did not report a port; stderr: {self.stderr_text()}")
        self.port = int(content)
        return self.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stderr_text(self) -> str:
        return (self.state_dir / "stderr.log").read_text(errors="replace")

    async def wait_exit(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (code := self.process.poll()) is not None:
                return code
            await anyio.sleep(0.02)
        return None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.stdout.close()
        self.stderr.close()


# -- shared tool checks ----------------------------------------------------------


async def list_all_tools(session: ClientSession) -> tuple[list[types.Tool], int]:
    """Follow `nextCursor` to the end; return all tools and the number of pages."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        result = await session.list_tools(params=params)
        tools.extend(result.tools)
        pages += 1
        cursor = result.next_cursor
        if cursor is None or pages > 50:
            return tools, pages


async def check_listing(t: Checks, label: str, session: ClientSession, *, pages: int, variant: int) -> None:
    caps = session.server_capabilities
    t.check(
        caps is not None and caps.tools is not None and caps.tools.list_changed is True,
        f"{label}: capabilities.tools.listChanged is true",
        caps,
    )
    tools, page_count = await list_all_tools(session)
    t.check(page_count == pages, f"{label}: tools/list spans {pages} page(s)", page_count)
    names = [tool.name for tool in tools]
    t.check(names == EXPECTED_TOOLS, f"{label}: tool names and order", names)
    by_name = {tool.name: tool for tool in tools}
    expected_echo = "Echoes the text back." if variant == 1 else "Echoes the text back, loudly."
    echo = by_name.get("echo")
    t.check(echo is not None and echo.description == expected_echo, f"{label}: echo description (variant {variant})")
    add = by_name.get("add")
    t.check(
        add is not None and add.output_schema == testserver.ADD_OUTPUT_SCHEMA,
        f"{label}: add advertises its outputSchema",
        add.output_schema if add else None,
    )
    for name, schema in (("profile", testserver.PROFILE_SCHEMA), ("weird", testserver.WEIRD_SCHEMA)):
        tool = by_name.get(name)
        t.check(
            tool is not None and tool.input_schema == schema,
            f"{label}: {name} inputSchema arrives unchanged",
            tool.input_schema if tool else None,
        )


async def check_tool_calls(
    t: Checks, label: str, session: ClientSession, state_dir: Path, *, whoami: str
) -> None:
    """Calls every tool except `crash` and `toggle` (which end or change the server)."""
    result = await session.call_tool("echo", {"text": "hello"})
    t.check(not result.is_error and text_of(result) == "hello", f"{label}: echo", result)

    result = await session.call_tool("add", {"a": 2, "b": 3})
    t.check(
        not result.is_error
        and result.structured_content == {"sum": 5}
        and text_of(result) is not None
        and json.loads(text_of(result) or "null") == {"sum": 5},
        f"{label}: add returns structuredContent and its JSON as text",
        result,
    )

    result = await session.call_tool("add", {"a": "two", "b": 3})
    t.check(result.is_error is True, f"{label}: add rejects a non-integer argument as a tool error", result)

    result = await session.call_tool("fail", {})
    t.check(result.is_error is True and text_of(result) == "the widget broke", f"{label}: fail", result)

    result = await session.call_tool("slow", {"seconds": 0.05})
    t.check(not result.is_error and text_of(result) == "done", f"{label}: slow answers", result)

    await check_cancellation(t, label, session, state_dir, "slow", {"seconds": 30})
    await check_cancellation(t, label, session, state_dir, "hang", {})

    result = await session.call_tool("image", {})
    kinds = [block.type for block in result.content]
    t.check(kinds == ["image", "audio", "text"], f"{label}: image returns image, audio and text", kinds)
    if kinds == ["image", "audio", "text"]:
        image, audio, text = result.content
        assert isinstance(image, types.ImageContent) and isinstance(audio, types.AudioContent)
        t.check(
            image.mime_type == "image/png" and png_is_valid(base64.b64decode(image.data)),
            f"{label}: image is a valid PNG",
        )
        wav = base64.b64decode(audio.data)
        t.check(
            audio.mime_type == "audio/wav" and wav[:4] == b"RIFF" and wav[8:12] == b"WAVE",
            f"{label}: audio is a WAV",
        )
        t.check(isinstance(text, types.TextContent) and text.text == "see attachments", f"{label}: image text")

    result = await session.call_tool("link", {})
    link = result.content[0] if len(result.content) == 1 else None
    t.check(
        isinstance(link, types.ResourceLink)
        and str(link.uri) == "file:///notes/today.txt"
        and link.name == "today.txt"
        and link.mime_type == "text/markdown",
        f"{label}: link returns a resource_link",
        result.content,
    )

    profile = {"name": "Ada", "kind": "person", "address": {"city": "London", "zip": None}, "age": None}
    result = await session.call_tool("profile", profile)
    t.check(not result.is_error and text_of(result) == "profile ok: Ada", f"{label}: profile", result)
    result = await session.call_tool("profile", {**profile, "kind": "robot"})
    t.check(result.is_error is True, f"{label}: profile enforces const", result)
    result = await session.call_tool("profile", {"name": "Ada", "kind": "person", "address": {}})
    t.check(result.is_error is True, f"{label}: profile enforces $ref'd required fields", result)

    result = await session.call_tool("weird", {"shape": {"r": 1.5}})
    t.check(not result.is_error and text_of(result) == "weird ok", f"{label}: weird", result)
    result = await session.call_tool("weird", {"shape": {"r": 1, "w": 2}})
    t.check(result.is_error is True, f"{label}: weird enforces oneOf", result)

    result = await session.call_tool("notes.search/v2", {"q": "cats"})
    t.check(not result.is_error and text_of(result) == "found: cats", f"{label}: notes.search/v2", result)

    result = await session.call_tool("whoami", {})
    t.check(text_of(result) == whoami, f"{label}: whoami says {whoami}", result)

    result = await session.call_tool("ephemeral", {})
    t.check(text_of(result) == "still here", f"{label}: ephemeral before toggle", result)

    await check_unknown_tool(t, session, "no-such-tool", f"{label}: unknown tool is a protocol error")


async def check_unknown_tool(t: Checks, session: ClientSession, name: str, what: str) -> None:
    """A call of tool `name`, which the server does not have, is an invalid-params protocol error."""
    try:
        await session.call_tool(name, {})
        t.check(False, what)
    except MCPError as e:
        t.check(e.code == types.INVALID_PARAMS, what, e.error)


async def check_cancellation(
    t: Checks, label: str, session: ClientSession, state_dir: Path, tool: str, args: dict[str, Any]
) -> None:
    """Cancel a running call; the client library then sends notifications/cancelled."""
    marker = state_dir / f"cancelled-{tool}"
    with anyio.move_on_after(0.5) as scope:
        await session.call_tool(tool, args)
    t.check(scope.cancelled_caught, f"{label}: {tool} is still running after 0.5 s")
    content = await wait_for_file(marker)
    t.check(
        content is not None and content.strip().isdigit(),
        f"{label}: cancelling {tool} writes {marker.name} with the request id",
        content,
    )
    result = await session.call_tool("echo", {"text": "still alive"})
    t.check(text_of(result) == "still alive", f"{label}: session usable after cancelling {tool}", result)


async def check_toggle(t: Checks, label: str, session: ClientSession, notifications: Notifications) -> None:
    result = await session.call_tool("toggle", {})
    t.check(text_of(result) == "toggled", f"{label}: toggle", result)
    with anyio.move_on_after(FILE_WAIT):
        await notifications.tools_changed.wait()
    t.check(notifications.tools_changed.is_set(), f"{label}: notifications/tools/list_changed received")
    tools, _ = await list_all_tools(session)
    names = [tool.name for tool in tools]
    t.check(names == TOOLS_AFTER_TOGGLE, f"{label}: ephemeral removed, newcomer added", names)
    add = next((tool for tool in tools if tool.name == "add"), None)
    t.check(
        add is not None and add.description == "Adds two integers (changed).",
        f"{label}: add description changed",
        add.description if add else None,
    )
    result = await session.call_tool("newcomer", {})
    t.check(text_of(result) == "new", f"{label}: newcomer", result)
    await check_unknown_tool(t, session, "ephemeral", f"{label}: ephemeral is gone")


# -- scenarios -----------------------------------------------------------------


async def scenario_stdio(t: Checks, base: Path) -> None:
    """Every tool over stdio, tools/list in 3 pages."""
    label = "stdio"
    state_dir = base / "stdio"
    async with stdio_session(state_dir, "--pages", "3") as (session, notifications):
        await check_listing(t, label, session, pages=3, variant=1)
        pid_file = await wait_for_file(state_dir / "pid-stdio")
        result = await session.call_tool("pid", {})
        t.check(pid_file is not None and text_of(result) == pid_file, f"{label}: pid matches pid-stdio", result)
        await check_tool_calls(t, label, session, state_dir, whoami="anonymous")
        await check_toggle(t, label, session, notifications)


async def scenario_stdio_crash(t: Checks, base: Path) -> None:
    """`crash` kills the server mid-call; the pending call fails instead of hanging."""
    label = "stdio crash"
    state_dir = base / "stdio-crash"
    async with stdio_session(state_dir) as (session, _):
        pid = int((state_dir / "pid-stdio").read_text())
        try:
            with anyio.fail_after(10):
                result = await session.call_tool("crash", {})
            t.check(False, f"{label}: crash call fails", result)
        except MCPError as e:
            t.check(e.code == types.CONNECTION_CLOSED, f"{label}: crash call fails as connection closed", e.error)
    try:
        os.kill(pid, 0)
        t.check(False, f"{label}: server process is gone")
    except ProcessLookupError:
        t.check(True, f"{label}: server process is gone")


async def scenario_stdio_raw(t: Checks, base: Path, dump_tools: bool) -> None:
    """Raw JSON-RPC over pipes: stdout carries protocol only, a hand-written
    notifications/cancelled names the request id, and a client that just closes
    stdin mid-call is not mistaken for a cancellation."""
    label = "stdio raw"
    state_dir = base / "stdio-raw"
    state_dir.mkdir()
    with open(state_dir / "stderr.log", "wb") as errlog:
        process = await anyio.open_process(
            [sys.executable, str(SERVER), "--state-dir", str(state_dir)], stderr=errlog
        )
    async with process:
        assert process.stdin is not None and process.stdout is not None
        messages = [
            INITIALIZE,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "hang", "arguments": {}}},
        ]
        await process.stdin.send(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        buffer = b""
        lines: list[bytes] = []
        with anyio.move_on_after(STARTUP_WAIT):
            while len(lines) < 2:
                buffer += await process.stdout.receive()
                *complete, buffer = buffer.split(b"\n")
                lines.extend(complete)
        responses = [json.loads(line) for line in lines]
        t.check([r.get("id") for r in responses] == [1, 2], f"{label}: initialize and tools/list answered", lines)
        if dump_tools and len(responses) == 2:
            # One wire-form tool per line, exactly as the server sent it.
            for tool in responses[1]["result"]["tools"]:
                print(json.dumps(tool, separators=(",", ":")))
        # Start a slow call and cancel it by hand: the marker names its id.
        slow = {
            "jsonrpc": "2.0",
            "id": "slow-4",
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 30}},
        }
        await process.stdin.send(json.dumps(slow).encode() + b"\n")
        await anyio.sleep(0.3)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-4"}}
        await process.stdin.send(json.dumps(cancel).encode() + b"\n")
        content = await wait_for_file(state_dir / "cancelled-slow")
        t.check(content == "slow-4", f"{label}: notifications/cancelled -> cancelled-slow holds its id", content)
        # The hang call (id 3) is still running: hang up without cancelling it.
        await process.stdin.aclose()
        rest = b""
        with anyio.move_on_after(FILE_WAIT):
            async for chunk in process.stdout:
                rest += chunk
        code = await process.wait()
        t.check(code == 0, f"{label}: server exits cleanly on stdin EOF", code)
        for line in (buffer + rest).splitlines():
            try:
                ok = json.loads(line).get("jsonrpc") == "2.0"
            except ValueError:
                ok = False
            t.check(ok, f"{label}: stdout line is JSON-RPC", line)
        t.check(
            not (state_dir / "cancelled-hang").exists(),
            f"{label}: no cancelled-hang marker when the client just goes away",
        )


async def scenario_http_token(t: Checks, base: Path) -> None:
    """Every tool over streamable HTTP with a bearer token, --port 0, 3 pages."""
    label = "http"
    state_dir = base / "http"
    state_dir.mkdir()
    server = HttpServer(state_dir, "--token-env", TOKEN_ENV, "--pages", "3", env={TOKEN_ENV: TOKEN})
    try:
        port = await server.wait_listening()
        t.check(port > 0, f"{label}: --port 0 writes the bound port", port)
        pid_file = (state_dir / "pid-http").read_text()
        t.check(pid_file == str(server.process.pid), f"{label}: pid-http holds the server's pid", pid_file)

        await check_http_auth_and_delete(t, label, server)

        async with http_session(server.url, TOKEN) as (session, notifications):
            await check_listing(t, label, session, pages=3, variant=1)
            result = await session.call_tool("pid", {})
            t.check(text_of(result) == pid_file, f"{label}: pid", result)
            await check_tool_calls(t, label, session, state_dir, whoami="authorized")
            await check_toggle(t, label, session, notifications)
            before_close = (state_dir / "deleted-session").read_text()
        # Leaving the client DELETEs its session.
        deadline = time.monotonic() + FILE_WAIT
        while time.monotonic() < deadline and (state_dir / "deleted-session").read_text() == before_close:
            await anyio.sleep(0.02)
        after_close = (state_dir / "deleted-session").read_text()
        t.check(after_close != before_close, f"{label}: closing the client deletes its session", after_close)

        # Kill the server mid-call (no DELETE afterwards: there is nobody left to answer it).
        async with http_session(server.url, TOKEN, terminate_on_close=False) as (session, _):
            try:
                with anyio.fail_after(10):
                    result = await session.call_tool("crash", {})
                t.check(False, f"{label}: crash call fails", result)
            except MCPError as e:
                t.check(True, f"{label}: crash call fails ({e.error.message})")
            code = await server.wait_exit(FILE_WAIT)
            t.check(code == 3, f"{label}: crash exits with status 3", code)
        t.check(
            (state_dir / "stdout.log").read_bytes() == b"",
            f"{label}: nothing written to stdout",
            (state_dir / "stdout.log").read_bytes()[:200],
        )
    finally:
        server.close()


async def check_http_auth_and_delete(t: Checks, label: str, server: HttpServer) -> None:
    """Raw HTTP: 401 without or with a wrong token, Mcp-Session-Id on initialize, DELETE."""
    base_headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(server.url, json=INITIALIZE, headers=base_headers)
        t.check(response.status_code == 401, f"{label}: no token -> 401", response.status_code)
        t.check(
            response.headers.get("www-authenticate", "").startswith("Bearer"),
            f"{label}: 401 carries WWW-Authenticate: Bearer",
            response.headers.get("www-authenticate"),
        )
        response = await http.post(server.url, json=INITIALIZE, headers={**base_headers, "Authorization": "Bearer wrong"})
        t.check(response.status_code == 401, f"{label}: wrong token -> 401", response.status_code)

        authorized = {**base_headers, "Authorization": f"Bearer {TOKEN}"}
        response = await http.post(server.url, json=INITIALIZE, headers=authorized)
        session_id = response.headers.get("mcp-session-id")
        t.check(response.status_code == 200 and bool(session_id), f"{label}: initialize returns Mcp-Session-Id")
        if not session_id:
            return
        session_headers = {**authorized, "Mcp-Session-Id": session_id, "Mcp-Protocol-Version": "2025-06-18"}
        response = await http.request("DELETE", server.url, headers=session_headers)
        t.check(response.status_code == 200, f"{label}: DELETE session -> 200", response.status_code)
        content = await wait_for_file(server.state_dir / "deleted-session")
        t.check(content == session_id, f"{label}: DELETE writes deleted-session with the session id", content)


async def scenario_http_anonymous(t: Checks, base: Path) -> None:
    """HTTP without a token, on an explicit port, with --variant 2."""
    label = "http anonymous"
    state_dir = base / "http-anonymous"
    state_dir.mkdir()
    port = free_port()
    server = HttpServer(state_dir, "--variant", "2", port=port)
    try:
        listening = await server.wait_listening()
        t.check(listening == port, f"{label}: listens on the requested --port", listening)
        async with http_session(server.url, None) as (session, _):
            await check_listing(t, label, session, pages=1, variant=2)
            result = await session.call_tool("whoami", {})
            t.check(text_of(result) == "anonymous", f"{label}: whoami says anonymous", result)
            result = await session.call_tool("echo", {"text": "hi"})
            t.check(text_of(result) == "hi", f"{label}: echo", result)
    finally:
        server.close()


async def main(dump_tools: bool) -> int:
    t = Checks()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tools-mcp-selftest-") as tmp:
        base = Path(tmp)
        scenarios = [
            scenario_stdio(t, base),
            scenario_stdio_crash(t, base),
            scenario_stdio_raw(t, base, dump_tools),
            scenario_http_token(t, base),
            scenario_http_anonymous(t, base),
        ]
        # Each scenario has its own server process, so they run concurrently.
        async with anyio.create_task_group() as tg:
            for scenario in scenarios:
                tg.start_soon(run_scenario, t, scenario)
    print(f"selftest took {time.monotonic() - started:.1f} s", file=sys.stderr)
    print(f"selftest: {t.passed} passed, {t.failed} failed", file=sys.stderr)
    return 1 if t.failed else 0


async def run_scenario(t: Checks, scenario: Any) -> None:
    name = scenario.__name__
    try:
        with anyio.fail_after(SCENARIO_TIMEOUT):
            await scenario
    except Exception as e:  # a broken scenario is a failure, not a crash of the whole run
        t.check(False, f"{name} raised", f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump-tools", action="store_true", help="print the raw tools/list result to stdout")
    sys.exit(anyio.run(main, parser.parse_args().dump_tools))
