"""Benchmark: the XML tool protocol's cost per call, against plain lxml parsing of the same text.

Run on demand (not collected by pytest):

    /work/venv/bin/python tests/benchmarks/bench_protocol.py [--calls 5000]

A typical call is an agent's order-book request with a short <thinking> block. Stages measured, each
as the median of per-call timings in one run:

- baseline: ``lxml.etree.fromstring`` of the same text (no hardening, no checks, no data classes);
- parse: ``parse_response`` (decode, thinking, hardened chunked parse, nodes);
- parse + validate: plus coercion against the ToolSpec with defaults filled;
- parse + validate + render: plus rendering a 20-level order book in the Part A envelope;
- executor: ``ToolExecutor.execute_text`` end to end (permission, timeout scope, handler building
  the book, render, recorder), awaited inside one running event loop.

Each stage is printed with its ratio to the baseline. The issue's budget for parse + validate +
execute a cached call + render is a median under 300 µs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from lxml import etree

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from app.tools.executor import MemoryRecorder, ToolExecutor  # noqa: E402
from app.tools.protocol.parser import parse_response  # noqa: E402
from app.tools.protocol.render import Element, el, render_success  # noqa: E402
from app.tools.registry import ToolRegistry  # noqa: E402
from app.tools.spec import (  # noqa: E402
    AgentContext,
    ParamSpec,
    ParamType,
    Permission,
    ToolSpec,
    validate,
)

CALL = (
    "<thinking>Spread looks wide on BTC; check the top 20 levels before sizing.</thinking>\n"
    "<get_order_book>\n"
    "    <symbol>BTC/USDT</symbol>\n"
    "    <limit>20</limit>\n"
    "</get_order_book>"
)
MID = Decimal("25000.5")


def _book(limit: int) -> Element:
    step = Decimal("0.25")
    bids = [el("level", None, price=MID - i - 1, quantity=step * (i + 1)) for i in range(limit)]
    asks = [el("level", None, price=MID + i + 1, quantity=step * (i + 1)) for i in range(limit)]
    return el(
        "order_book_data", None, el("bids", None, *bids), el("asks", None, *asks), symbol="BTC/USDT"
    )


async def _handler(ctx: AgentContext, args: dict[str, Any]) -> Element:
    return _book(args["limit"])


SPEC = ToolSpec(
    name="get_order_book",
    group="Market Data Tools",
    description="Fetches the current order book for a symbol.",
    params=(
        ParamSpec("symbol", ParamType.STRING, "The trading symbol", required=True, max_length=40),
        ParamSpec("limit", ParamType.INTEGER, "Levels", default=10, minimum=1, maximum=100),
    ),
    permission=Permission.MARKET,
    handler=_handler,
)
KNOWN = frozenset({SPEC.name})
CTX = AgentContext(agent_id="bench")


def _median_us(fn: Callable[[], object], calls: int) -> float:
    for _ in range(min(200, calls)):  # warm-up
        fn()
    samples = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


async def _executor_median_us(calls: int) -> float:
    executor = ToolExecutor(ToolRegistry([SPEC]), MemoryRecorder(capacity=100))
    for _ in range(min(200, calls)):
        await executor.execute_text(CTX, CALL)
    samples = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        result = await executor.execute_text(CTX, CALL)
        samples.append(time.perf_counter_ns() - started)
    assert result is not None and result.status == "success"
    return statistics.median(samples) / 1000


def _parse_validate() -> dict[str, Any]:
    parsed = parse_response(CALL, KNOWN)
    assert parsed.call is not None
    return validate(SPEC, parsed.call.params)


def _parse_validate_render() -> str:
    args = _parse_validate()
    return render_success(SPEC.name, _book(args["limit"])).xml


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000, help="timed calls per stage")
    options = parser.parse_args()
    calls = options.calls
    baseline = _median_us(lambda: etree.fromstring(CALL.split("\n", 1)[1]), calls)
    stages = {
        "parse_response": _median_us(lambda: parse_response(CALL, KNOWN), calls),
        "parse + validate": _median_us(_parse_validate, calls),
        "parse + validate + render (20-level book)": _median_us(_parse_validate_render, calls),
        "render only (20-level book)": _median_us(lambda: render_success("t", _book(20)), calls),
        "executor.execute_text end to end": asyncio.run(_executor_median_us(calls)),
    }
    print(f"typical call: {len(CALL)} characters; {calls} timed calls per stage (median)")
    print(f"{'baseline: lxml.etree.fromstring of the call':<48} {baseline:9.1f} µs    1.0x")
    for name, median in stages.items():
        print(f"{name:<48} {median:9.1f} µs {median / baseline:6.1f}x")
    total = stages["executor.execute_text end to end"]
    verdict = "within" if total < 300 else "OVER"
    print(f"executor median {total:.1f} µs: {verdict} the 300 µs budget for a cached call")


if __name__ == "__main__":
    main()
