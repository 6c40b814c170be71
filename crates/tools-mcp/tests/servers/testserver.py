"""MCP test server for the tools-mcp integration tests.

Built on the low-level server API of the official Python SDK (`mcp`, pinned in
requirements.txt) so that every advertised JSON Schema is sent exactly as
written here: no schema is derived from Python signatures.

Usage:
    testserver.py [--transport stdio|http] [--port N] [--state-dir DIR]
                  [--variant 1|2] [--token-env NAME] [--pages N]

Transports:
    stdio  JSON-RPC over stdin/stdout (default). Nothing but protocol ever goes
           to stdout; logs go to stderr.
    http   Streamable HTTP on 127.0.0.1:<port>, endpoint `/mcp`, stateful
           sessions (`Mcp-Session-Id`), served by uvicorn. `--port 0` picks a
           free port.

Files written to --state-dir (each one atomically: temp file, then rename):
    pid-<transport>   this process's pid, written at start-up
    port              (http) the port actually listened on, once listening
    cancelled-slow    id of a `slow` call the client cancelled
    cancelled-hang    id of a `hang` call the client cancelled
    deleted-session   (http) id of a session the client ended with DELETE

Other options:
    --variant 2       changes the description of `echo`, so a restart yields
                      a changed tool definition
    --token-env NAME  (http) every request must carry
                      `Authorization: Bearer <value of $NAME>`, else 401
    --pages N         split `tools/list` into N cursor-linked pages
    --extra-tool NAME also lists a tool NAME (answers "extra"), as a server
                      that starts listing a new tool would
    --read-only-hint true|false
                      sets the `readOnlyHint` annotation of `add`
    --ledger FILE     also lists `bump`: it appends one line to FILE per call
                      (`acted KEY`, or `seen KEY` when `dedupe` is true and a
                      line already holds the call's idempotency key, read from
                      `_meta["agent/idempotency-key"]`), then, when it
                      acted, sleeps `block_s` seconds (default 0) and
                      answers: a tool that acts, then blocks, for crash tests
    --spawn-escapee   at start-up, starts `sleep 600` in a new session
                      (`setsid`), writes its pid to `pid-escapee`, and does not
                      wait for it: a process that leaves the server's process
                      group and tree
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

logger = logging.getLogger("testserver")

# A 1x1 red RGBA PNG (70 bytes) and a 4-sample 8-bit mono 8 kHz PCM WAV (48 bytes).
TINY_PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP4z8DwHwAFAAH/VscvDQAAAABJRU5ErkJggg=="
)
TINY_WAV_BASE64 = "UklGRigAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQQAAACAoIBg"

# Input schema of the tools that take no arguments.
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}

# A JSON Schema 2020-12 document with $defs/$ref, a nullable field
# (anyOf with {"type": "null"}), const, titles and a null default.
PROFILE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "Address": {
            "type": "object",
            "title": "Address",
            "properties": {
                "city": {"type": "string"},
                "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
            "required": ["city"],
        }
    },
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "kind": {"const": "person"},
        "address": {"$ref": "#/$defs/Address"},
        "age": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
    },
    "required": ["name", "kind", "address"],
}

# A schema whose `oneOf` has no lossless draft-07 rendering without combinators.
WEIRD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "shape": {
            "oneOf": [
                {"type": "object", "properties": {"r": {"type": "number"}}, "required": ["r"]},
                {"type": "object", "properties": {"w": {"type": "number"}}, "required": ["w"]},
            ]
        }
    },
}

ADD_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"sum": {"type": "integer"}},
    "required": ["sum"],
}

Context = ServerRequestContext[Any, Any]
Handler = Callable[[Context, dict[str, Any]], Awaitable[types.CallToolResult]]


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what `tools/list` advertises, and how `tools/call` runs it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    output_schema: dict[str, Any] | None = None
    annotations: types.ToolAnnotations | None = None

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=self.output_schema,
            annotations=self.annotations,
        )


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)


class StateDir:
    """The directory through which the server reports events to a test."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def write(self, name: str, content: str) -> None:
        """Write `<dir>/<name>` atomically, so a polling reader never sees a partial file.

        Synchronous on purpose: it is also called from inside a cancelled
        scope, where any `await` would raise again at once.
        """
        if self.path is None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        final = self.path / name
        tmp = self.path / f".{name}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)


def cancel_requested_by_peer(ctx: Context) -> bool:
    """Whether the client sent `notifications/cancelled` for the request of `ctx`.

    On `notifications/cancelled` the SDK's JSON-RPC dispatcher first sets the
    request's `cancel_requested` event and then cancels the handler's anyio
    cancel scope. Its other reason to cancel a handler is the connection going
    away (stdin EOF, HTTP session end), and only the event tells the two apart.
    `mcp` 2.3.0 gives low-level handlers no public accessor for that event
    (`ServerRequestContext` does not carry the dispatch context), so it is read
    off the session's request channel. If that ever moves, this errs on the
    side of reporting the cancellation.
    """
    channel = getattr(ctx.session, "_request_outbound", None)
    event = getattr(channel, "cancel_requested", None)
    return event is None or event.is_set()


class FixtureServer:
    """Tool table, run-time state and request handlers."""

    def __init__(
        self,
        *,
        variant: int,
        pages: int,
        token: str | None,
        state_dir: StateDir,
        extra_tool: str | None = None,
        read_only_hint: bool | None = None,
        ledger: Path | None = None,
    ) -> None:
        self.variant = variant
        self.pages = pages
        self.token = token
        self.state_dir = state_dir
        self.toggled = False
        self.tools: dict[str, ToolSpec] = {}
        self._add_initial_tools(read_only_hint)
        if extra_tool is not None:
            self._register(ToolSpec(extra_tool, "A tool listed on request.", NO_ARGS, self._extra))
        self.ledger = ledger
        self.meta: dict[str, Any] = {}
        if ledger is not None:
            self._register(
                ToolSpec(
                    "bump",
                    "Appends a line to the ledger, then waits block_s seconds.",
                    {
                        "type": "object",
                        "properties": {"block_s": {"type": "number"}, "dedupe": {"type": "boolean"}},
                    },
                    self._bump,
                )
            )

    def _register(self, spec: ToolSpec) -> None:
        self.tools[spec.name] = spec

    def _add_initial_tools(self, read_only_hint: bool | None) -> None:
        echo_description = "Echoes the text back." if self.variant == 1 else "Echoes the text back, loudly."
        specs = [
            ToolSpec(
                "echo",
                echo_description,
                {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                self._echo,
            ),
            ToolSpec(
                "add",
                "Adds two integers.",
                {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
                self._add,
                output_schema=ADD_OUTPUT_SCHEMA,
                annotations=(
                    None if read_only_hint is None else types.ToolAnnotations(read_only_hint=read_only_hint)
                ),
            ),
            ToolSpec("fail", "Always fails with a tool error.", NO_ARGS, self._fail),
            ToolSpec(
                "slow",
                "Sleeps for the given number of seconds, then answers.",
                {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]},
                self._slow,
            ),
            ToolSpec("hang", "Never answers.", NO_ARGS, self._hang),
            ToolSpec("crash", "Kills the server process mid-call (exit status 3).", NO_ARGS, self._crash),
            ToolSpec("image", "Returns an image, an audio clip and a text.", NO_ARGS, self._image),
            ToolSpec("link", "Returns a link to a resource.", NO_ARGS, self._link),
            ToolSpec(
                "profile",
                "Checks a profile against a JSON Schema 2020-12 schema.",
                PROFILE_SCHEMA,
                self._profile,
            ),
            ToolSpec("weird", "Takes a shape given by oneOf alternatives.", WEIRD_SCHEMA, self._weird),
            ToolSpec("pid", "Returns the server's process id.", NO_ARGS, self._pid),
            ToolSpec("env", "Returns the names of the server's environment variables.", NO_ARGS, self._env),
            ToolSpec(
                "toggle",
                "Removes `ephemeral`, adds `newcomer`, changes the description of `add`, "
                "then notifies tools/list_changed.",
                NO_ARGS,
                self._toggle,
            ),
            ToolSpec("whoami", "Tells whether the request carried the expected bearer token.", NO_ARGS, self._whoami),
            ToolSpec(
                "ephemeral",
                "Exists until `toggle` is called; answers after `seconds` (default 0).",
                {"type": "object", "properties": {"seconds": {"type": "number"}}},
                self._ephemeral,
            ),
            ToolSpec(
                "notes.search/v2",
                "Searches notes (a tool name outside [a-zA-Z0-9_-]).",
                {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
                self._notes_search,
            ),
        ]
        for spec in specs:
            self._register(spec)

    # -- protocol handlers ---------------------------------------------------

    async def list_tools(self, ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        """`tools/list`, split into `self.pages` pages linked by opaque cursors."""
        definitions = [spec.definition() for spec in self.tools.values()]
        page_count = max(1, min(self.pages, len(definitions)))
        cursor = params.cursor if params is not None else None
        if cursor is None:
            page = 0
        else:
            page = _parse_cursor(cursor, page_count)
        start = len(definitions) * page // page_count
        end = len(definitions) * (page + 1) // page_count
        next_cursor = f"page-{page + 1}" if page + 1 < page_count else None
        return types.ListToolsResult(tools=definitions[start:end], next_cursor=next_cursor)

    async def call_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = self.tools.get(params.name)
        if spec is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        arguments = params.arguments or {}
        # Invalid arguments are a tool execution error (isError), not a protocol error.
        validator_class = validator_for(spec.input_schema, default=Draft202012Validator)
        errors = sorted(validator_class(spec.input_schema).iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            return text_result(f"invalid arguments for {spec.name}: {errors[0].message}", is_error=True)
        meta = getattr(params, "meta", None)
        self.meta = dict(meta) if isinstance(meta, dict) else (meta.model_dump() if meta is not None else {})
        return await spec.handler(ctx, arguments)

    # -- tools ---------------------------------------------------------------

    async def _echo(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result(args["text"])

    async def _add(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        structured = {"sum": args["a"] + args["b"]}
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(structured))],
            structured_content=structured,
        )

    async def _fail(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result("the widget broke", is_error=True)

    async def _slow(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        await self._until_cancelled(ctx, "slow", anyio.sleep(args["seconds"]))
        return text_result("done")

    async def _bump(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        assert self.ledger is not None
        key = str(self.meta.get("agent/idempotency-key", ""))
        lines = self.ledger.read_text(encoding="utf-8").splitlines() if self.ledger.exists() else []
        seen = any(line.split(" ", 1)[-1] == key for line in lines)
        verb = "seen" if args.get("dedupe") and seen and key else "acted"
        with open(self.ledger, "a", encoding="utf-8") as f:
            f.write(f"{verb} {key}\n")
            f.flush()
            os.fsync(f.fileno())
        if verb == "acted":
            await anyio.sleep(args.get("block_s", 0))
        acted = sum(1 for line in lines if line.startswith("acted ")) + (verb == "acted")
        return text_result(f"{verb}; acted {acted} time(s) in all")

    async def _hang(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        await self._until_cancelled(ctx, "hang", anyio.sleep_forever())
        raise AssertionError("unreachable: sleep_forever returned")

    async def _until_cancelled(self, ctx: Context, tool: str, work: Awaitable[None]) -> None:
        """Await `work`; if the client cancels the call, record it before the cancellation propagates.

        The SDK delivers a client's `notifications/cancelled` as an anyio
        cancellation of the handler's scope, so it surfaces here as the
        backend's cancellation exception. The marker file is written inside
        the `except` block, before re-raising.
        """
        try:
            await work
        except anyio.get_cancelled_exc_class():
            if cancel_requested_by_peer(ctx):
                logger.info("%s call %r cancelled by the client", tool, ctx.request_id)
                self.state_dir.write(f"cancelled-{tool}", str(ctx.request_id))
            raise

    async def _crash(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        logger.warning("crash tool called: exiting with status 3")
        os._exit(3)

    async def _image(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(
            content=[
                types.ImageContent(data=TINY_PNG_BASE64, mime_type="image/png"),
                types.AudioContent(data=TINY_WAV_BASE64, mime_type="audio/wav"),
                types.TextContent(text="see attachments"),
            ]
        )

    async def _link(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        link = types.ResourceLink(uri="file:///notes/today.txt", name="today.txt", mime_type="text/plain")
        return types.CallToolResult(content=[link])

    async def _profile(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result(f"profile ok: {args['name']}")

    async def _weird(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result("weird ok")

    async def _pid(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result(str(os.getpid()))

    async def _env(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        # Names only: what the client let through is the point, not the values.
        return text_result(" ".join(sorted(os.environ)))

    async def _toggle(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        """Change the tool list, then tell the client.

        Idempotent: a second call changes nothing more but notifies again. The
        state is per process, so on HTTP every session sees the change, while
        the notification goes to the calling session only. It is sent on the
        request's own channel (on HTTP, the POST's SSE stream), so it reaches
        the client before the `toggle` result does, whether or not the client
        has a standalone GET stream open.
        """
        if not self.toggled:
            self.toggled = True
            self.tools.pop("ephemeral", None)
            add = self.tools["add"]
            self.tools["add"] = ToolSpec(
                add.name, "Adds two integers (changed).", add.input_schema, add.handler, add.output_schema
            )
            self._register(ToolSpec("newcomer", "Appears when `toggle` is called.", NO_ARGS, self._newcomer))
        await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=ctx.request_id)
        return text_result("toggled")

    async def _whoami(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        # `ctx.request` is the Starlette request on HTTP and None on stdio.
        headers = getattr(ctx.request, "headers", None)
        authorization = headers.get("authorization") if headers is not None else None
        authorized = self.token is not None and bearer_matches(authorization, self.token)
        return text_result("authorized" if authorized else "anonymous")

    async def _ephemeral(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        # A slow call lets a test remove the tool while the call is in flight.
        await anyio.sleep(args.get("seconds", 0))
        return text_result("still here")

    async def _newcomer(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result("new")

    async def _extra(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result("extra")

    async def _notes_search(self, ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result(f"found: {args['q']}")


def _parse_cursor(cursor: str, page_count: int) -> int:
    prefix = "page-"
    if cursor.startswith(prefix) and cursor[len(prefix) :].isdigit():
        page = int(cursor[len(prefix) :])
        if 0 < page < page_count:
            return page
    raise MCPError(code=types.INVALID_PARAMS, message=f"Invalid cursor: {cursor!r}")


def bearer_matches(authorization: str | None, token: str) -> bool:
    if authorization is None or not authorization.startswith("Bearer "):
        return False
    return hmac.compare_digest(authorization[len("Bearer ") :].encode(), token.encode())


class ListChangedServer(Server[Any]):
    """A low-level `Server` that advertises `tools.listChanged: true` on every transport.

    `Server.run()` (stdio) takes explicit initialization options, but the
    streamable HTTP session manager calls `create_initialization_options()`
    with no arguments, which would advertise `listChanged: false`.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def build_server(test_server: FixtureServer) -> Server[Any]:
    return ListChangedServer(
        "tools-mcp-testserver",
        version="1.0.0",
        on_list_tools=test_server.list_tools,
        on_call_tool=test_server.call_tool,
    )


# -- HTTP --------------------------------------------------------------------


class HttpGate:
    """ASGI middleware in front of the SDK's streamable HTTP app.

    Rejects requests without the expected bearer token (when one is set) and
    records a session that the client ends with DELETE.
    """

    def __init__(self, app: Any, *, token: str | None, state_dir: StateDir) -> None:
        self.app = app
        self.token = token
        self.state_dir = state_dir

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
        if self.token is not None and not bearer_matches(headers.get("authorization"), self.token):
            await _send_unauthorized(send)
            return
        session_id = headers.get("mcp-session-id")
        if scope["method"] != "DELETE" or session_id is None:
            await self.app(scope, receive, send)
            return

        status: int | None = None

        async def watch_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch_status)
        if status is not None and 200 <= status < 300:
            logger.info("session %s deleted by the client", session_id)
            self.state_dir.write("deleted-session", session_id)


async def _send_unauthorized(send: Any) -> None:
    body = json.dumps({"error": "invalid_token", "error_description": "missing or wrong bearer token"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer error="invalid_token"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def run_http(server: Server[Any], *, port: int, token: str | None, state_dir: StateDir) -> None:
    import uvicorn

    class Uvicorn(uvicorn.Server):
        """Reports the bound port once the listening socket exists."""

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                bound = self.servers[0].sockets[0].getsockname()[1]
                logger.info("listening on http://127.0.0.1:%d/mcp", bound)
                state_dir.write("port", str(bound))

    # Stateful sessions (the default) and SSE responses; DNS-rebinding
    # protection is on for a 127.0.0.1 host and accepts 127.0.0.1/localhost.
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(
        HttpGate(app, token=token, state_dir=state_dir),
        host="127.0.0.1",
        port=port,
        log_config=None,  # keep uvicorn's loggers on the stderr handler set up in main()
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )
    Uvicorn(config).run()


# -- stdio -------------------------------------------------------------------


async def run_stdio(server: Server[Any]) -> None:
    # stdio_server() points fd 1 at stderr while serving, so stray prints
    # cannot corrupt the protocol stream.
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="MCP test server for the tools-mcp integration tests.")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=0, help="HTTP port; 0 picks a free one (default)")
    parser.add_argument("--state-dir", type=Path, default=None, help="directory for pid/port/event files")
    parser.add_argument("--variant", type=int, choices=[1, 2], default=1, help="2 changes the echo description")
    parser.add_argument("--token-env", default=None, help="HTTP: env var holding the required bearer token")
    parser.add_argument("--pages", type=int, default=1, help="number of tools/list pages (default 1)")
    parser.add_argument("--extra-tool", default=None, help="also list a tool of this name")
    parser.add_argument(
        "--read-only-hint", choices=["true", "false"], default=None, help="readOnlyHint annotation of `add`"
    )
    parser.add_argument("--ledger", type=Path, default=None, help="also list `bump`, which appends to this file")
    parser.add_argument("--spawn-escapee", action="store_true", help="start `sleep 600` in a new session")
    args = parser.parse_args(argv)
    if args.pages < 1:
        parser.error("--pages must be at least 1")
    if args.token_env is not None and args.token_env not in os.environ:
        parser.error(f"--token-env: environment variable {args.token_env} is not set")
    return args


def spawn_escapee(state_dir: StateDir) -> None:
    """Start `sleep 600` in a new session, outside this process's group; record its pid."""
    import subprocess

    child = subprocess.Popen(
        ["sleep", "600"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    state_dir.write("pid-escapee", str(child.pid))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="testserver[%(process)d] %(levelname)s %(name)s: %(message)s",
    )
    state_dir = StateDir(args.state_dir)
    state_dir.write(f"pid-{args.transport}", str(os.getpid()))

    if args.spawn_escapee:
        spawn_escapee(state_dir)
    token = os.environ[args.token_env] if args.token_env is not None else None
    test_server = FixtureServer(
        variant=args.variant,
        pages=args.pages,
        token=token,
        state_dir=state_dir,
        extra_tool=args.extra_tool,
        read_only_hint=None if args.read_only_hint is None else args.read_only_hint == "true",
        ledger=args.ledger,
    )
    server = build_server(test_server)
    if args.transport == "http":
        run_http(server, port=args.port, token=token, state_dir=state_dir)
    else:
        anyio.run(run_stdio, server)


if __name__ == "__main__":
    main()
