"""Benchmark: how long the event loop stalls while an MCP server floods one answer over stdio.

Run on demand (not collected by pytest; it starts a real server process per size and transport):

    .venv/bin/python tests/benchmarks/bench_mcp_flood.py [--sizes 1,8,32,128] [--transport both]

For each size the hostile test server (``tests/helpers/hostile_mcp_server.py``) answers one
``flood`` call of that many MB on one line (and writes as much to stderr, which the app's
``StderrTail`` thread soaks up); ``--values`` adds a ``flood_values`` answer of that many
thousand tiny objects (few bytes, costly to parse). A heartbeat task sleeps 5 ms at a time and
records how late each wake-up is; the longest pause is what a person would feel in the window,
which shares this loop.
The baseline, measured in the same run, is the MCP SDK's own stdio transport; Kestrel's is
``app.mcp.stdio_transport``, with the per-message limit ``max_result_chars = 20000`` gives (8 MiB).
Each call is given ``--timeout`` seconds, like the app's own per-call deadline; what happens in the
loop after that (a transport still reading the abandoned answer) is measured for ``--after``
seconds more.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from mcp import Client, StdioServerParameters  # noqa: E402

from app.config.mcp import McpServerSettings  # noqa: E402
from app.mcp.servers import StderrTail  # noqa: E402
from tests.helpers.heartbeat import BEAT_S, Heartbeat  # noqa: E402

HOSTILE = str(REPO / "tests" / "helpers" / "hostile_mcp_server.py")


@dataclass
class Outcome:
    transport: str
    megabytes: int
    pause_call_ms: float
    pause_after_ms: float
    seconds: float
    close_s: float
    said: str


def _transport(kind: str, tail: StderrTail) -> Any:
    params = StdioServerParameters(command=sys.executable, args=[HOSTILE, "--mode", "transport"],
                                   encoding_error_handler="replace")
    if kind == "sdk":
        from mcp.client.stdio import stdio_client

        return stdio_client(params, errlog=tail.writer)
    from app.mcp.stdio_transport import stdio_client as kestrel_stdio_client

    limit = McpServerSettings(command="x").max_message_bytes
    return kestrel_stdio_client(params, errlog=tail.writer, max_message_bytes=limit)


async def one(kind: str, tool: str, amount: int, deadline_s: float, after: float) -> Outcome:
    tail = StderrTail()
    closing = 0.0
    try:
        async with Client(_transport(kind, tail), cache=None) as client:
            await client.session.call_tool("echo", {"text": "warm up"})
            with Heartbeat() as beat:
                await asyncio.sleep(0.05)
                beat.reset()
                started = time.perf_counter()
                try:
                    async with asyncio.timeout(deadline_s):
                        result = await client.session.call_tool(tool, {
                            "megabytes" if tool == "flood" else "thousands": amount})
                    said = ("answered, " + (f"{len(result.content[0].text):,} chars" if
                            result.content else f"{len(result.structured_content['rows']):,} rows"))
                except TimeoutError:
                    said = f"no answer within {deadline_s:g} s"
                except Exception as exc:  # the outcome is what is being measured
                    said = f"error: {str(exc)[:90]}"
                seconds = time.perf_counter() - started
                during = beat.longest
                beat.reset()
                await asyncio.sleep(after)
                later = beat.longest
            closing = time.perf_counter()
        closing = time.perf_counter() - closing
    finally:
        tail.close_writer()
    return Outcome(kind, amount, during * 1000, later * 1000, seconds, closing, said)


async def run(
    sizes: list[int], values: int, kinds: list[str], deadline_s: float, after: float
) -> None:
    print(f"heartbeat every {BEAT_S * 1000:g} ms; call deadline {deadline_s:g} s; then {after:g} s "
          "more watched")
    print(f"{'flood':>9} {'transport':<9} {'longest pause':>14} {'after':>9} {'vs sdk':>7} "
          f"{'time':>7} {'close':>6}  outcome")
    runs = [("flood", size, f"{size} MB") for size in sizes]
    if values:
        runs.append(("flood_values", values, f"{values}k obj"))
    for tool, amount, label in runs:
        baseline: Outcome | None = None
        for kind in kinds:
            outcome = await one(kind, tool, amount, deadline_s, after)
            if kind == "sdk":
                baseline = outcome
            ratio = (f"{outcome.pause_call_ms / baseline.pause_call_ms:6.3f}x"
                     if baseline is not None and baseline.pause_call_ms > 0 else "      -")
            print(f"{label:>9} {kind:<9} {outcome.pause_call_ms:11.1f} ms "
                  f"{outcome.pause_after_ms:6.1f} ms {ratio} {outcome.seconds:6.2f}s "
                  f"{outcome.close_s:5.2f}s  {outcome.said}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,8,32,128", help="flood sizes in MB, comma-separated")
    parser.add_argument("--values", type=int, default=1000,
                        help="thousands of objects in the flood_values answer (0: none)")
    parser.add_argument("--transport", choices=["both", "sdk", "kestrel"], default="both")
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline of one call (s)")
    parser.add_argument("--after", type=float, default=3.0,
                        help="seconds the loop is watched after the call ended")
    options = parser.parse_args()
    kinds = ["sdk", "kestrel"] if options.transport == "both" else [options.transport]
    sizes = [int(s) for s in options.sizes.split(",")]
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(sizes, options.values, kinds, options.timeout, options.after))


if __name__ == "__main__":
    main()
