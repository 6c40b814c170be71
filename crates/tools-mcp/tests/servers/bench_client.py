"""Latency baseline: the official MCP Python client calling testserver.py over stdio.

Spawns testserver.py with this same interpreter, performs the initialize
handshake, makes --warmup untimed calls and then --calls timed, sequential
`tools/call` requests of `echo` with {"text": "hello"}. Prints one JSON line
to stdout:

    {"client": "python-mcp", "calls": N, "mean_us": ..., "p50_us": ..., "p99_us": ...}

Usage:
    target/test-venv/bin/python crates/tools-mcp/tests/servers/bench_client.py --calls 1000 --warmup 100
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

SERVER = Path(__file__).resolve().parent / "testserver.py"


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


async def run(calls: int, warmup: int) -> dict[str, object]:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            # The client fetches tools/list on the first call of a tool it has not
            # seen listed (to learn its output schema); list up front so that
            # round trip never lands in a timed call.
            await session.list_tools()
            for _ in range(warmup):
                await call_echo(session)
            samples_us: list[float] = []
            for _ in range(calls):
                start = time.perf_counter_ns()
                await call_echo(session)
                samples_us.append((time.perf_counter_ns() - start) / 1000)
    samples_us.sort()
    return {
        "client": "python-mcp",
        "calls": calls,
        "mean_us": round(sum(samples_us) / len(samples_us), 1),
        "p50_us": round(percentile(samples_us, 50), 1),
        "p99_us": round(percentile(samples_us, 99), 1),
    }


async def call_echo(session: ClientSession) -> None:
    result = await session.call_tool("echo", {"text": "hello"})
    if result.is_error:
        raise RuntimeError(f"echo failed: {result.content}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Time sequential echo calls with the official MCP Python client.")
    parser.add_argument("--calls", type=int, default=1000, help="timed calls (default 1000)")
    parser.add_argument("--warmup", type=int, default=100, help="untimed calls first (default 100)")
    args = parser.parse_args()
    if args.calls < 1 or args.warmup < 0:
        parser.error("--calls must be at least 1 and --warmup at least 0")
    print(json.dumps(anyio.run(run, args.calls, args.warmup), separators=(",", ":")))


if __name__ == "__main__":
    main()
