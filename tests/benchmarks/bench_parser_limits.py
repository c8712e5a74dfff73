"""Benchmark: ``parse_response`` on adversarial shapes at the response size limit.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_parser_limits.py [--size 1990000] [--only NAME]

Every shape is built to ``--size`` characters (default: just under ``MAX_RESPONSE_CHARS``), so the
numbers are the worst an agent's answer can cost the event loop. The baseline, measured in the same
run, is a call of the same size whose one parameter holds plain text: the cheapest input of that
size (the regular-expression fast path). Each shape prints its time (best of three) and its ratio to
the baseline; the issue's budget is under 100 ms for every shape at the limit.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from app.tools.protocol.parser import MAX_RESPONSE_CHARS, parse_response  # noqa: E402

KNOWN = ("create_order", "get_order_book", "update_agent_settings")


def _fill(
    head: str, unit: Callable[[int], str], tail: str, size: int, count: int | None = None
) -> str:
    """``head`` + ``unit(0)`` + ``unit(1)`` + ... + ``tail``: as many units as fit in ``size``,
    or at most ``count``."""
    parts = [head]
    used = len(head) + len(tail)
    i = 0
    while count is None or i < count:
        piece = unit(i)
        if used + len(piece) > size:
            break
        parts.append(piece)
        used += len(piece)
        i += 1
    parts.append(tail)
    return "".join(parts)


def shapes(size: int) -> dict[str, str]:
    """The adversarial inputs, each ``size`` characters at most."""
    half = size // 2
    depth = size // 7
    return {
        "attribute flood on the call (distinct names)": _fill(
            "<create_order", lambda i: f' a{i}="1"', "><symbol>x</symbol></create_order>", size
        ),
        "attribute flood on a parameter": _fill(
            "<create_order><symbol", lambda i: f' a{i}="1"', ">x</symbol></create_order>", size
        ),
        "attribute flood on a list item": _fill(
            "<update_agent_settings><settings><setting", lambda i: f' n{i}=""',
            ">v</setting></settings></update_agent_settings>", size,
        ),
        "32 attributes (the limit) on each of 4,000 elements": _fill(
            "<update_agent_settings><settings>",
            lambda i: "<setting" + "".join(f' k{j}="{i}"' for j in range(32)) + ">v</setting>",
            "</settings></update_agent_settings>", size, count=4_000,
        ),
        "one attribute on each of 100,000 tags": _fill(
            "<create_order>", lambda i: f'<a n="{i}"/>', "</create_order>", size
        ),
        "attribute-like text inside a value (legal)": _fill(
            "<create_order><reason>", lambda i: f' a{i}="1"', "</reason></create_order>", size
        ),
        "nesting flood (well-formed)": "<create_order>" + "<a>" * depth + "</a>" * depth
        + "</create_order>",
        "nesting flood (never closed)": "<create_order>" + "<a>" * (size // 3 - 10),
        "nesting at the lxml limit, then text": "<create_order>" + "<a>" * 250
        + "x" * (size - 2_100) + "</a>" * 250 + "</create_order>",
        "many siblings": _fill("<create_order>", lambda i: "<a/>", "</create_order>", size),
        "many list items under the element budget": _fill(
            "<get_order_book><symbols>", lambda i: "<symbol>BTC/USDT" + "x" * 380 + "</symbol>",
            "</symbols></get_order_book>", size, count=4_990,
        ),
        "long text, fast path": "<create_order><reason>" + "x" * (size - 50)
        + "</reason></create_order>",
        "long text of escaped entities": _fill(
            "<create_order><reason>", lambda i: "&amp;", "</reason></create_order>", size
        ),
        "long text of numeric references": _fill(
            "<create_order><reason>", lambda i: "&#65;", "</reason></create_order>", size
        ),
        "entity lookalikes (undefined names)": _fill(
            "<create_order><reason>", lambda i: f"&e{i % 10};", "</reason></create_order>", size
        ),
        "entity lookalikes (no semicolon)": _fill(
            "<create_order><reason>", lambda i: "&amp", "</reason></create_order>", size
        ),
        "entity references in attribute values": _fill(
            "<create_order", lambda i: f' a{i}="&amp;&lt;"', "/>", size
        ),
        "one huge attribute value": "<create_order><symbol a=\"" + "x" * (size - 60)
        + "\">x</symbol></create_order>",
        "half text, half attributes": _fill(
            "<create_order><reason>" + "y" * half + "</reason><symbol",
            lambda i: f' b{i}="2"', ">x</symbol></create_order>", size,
        ),
    }


def best_of(fn: Callable[[], object], tries: int = 3) -> float:
    best = float("inf")
    for _ in range(tries):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=MAX_RESPONSE_CHARS - 10_000,
                        help="characters per input (default: just under the limit)")
    parser.add_argument("--only", default="", help="run only shapes whose name contains this")
    parser.add_argument("--tries", type=int, default=3, help="runs per shape; the best counts")
    options = parser.parse_args()
    size = options.size
    baseline_text = "<create_order><reason>" + "x" * (size - 50) + "</reason></create_order>"
    baseline = best_of(lambda: parse_response(baseline_text, KNOWN), options.tries)
    print(f"inputs of up to {size:,} characters (limit {MAX_RESPONSE_CHARS:,}); best of "
          f"{options.tries}")
    print(f"{'baseline: plain-text call of the same size':<50} {baseline * 1000:9.1f} ms    1.0x")
    worst = ("", 0.0)
    for name, text in shapes(size).items():
        if options.only and options.only not in name:
            continue
        assert len(text) <= MAX_RESPONSE_CHARS, (name, len(text))
        elapsed = best_of(lambda text=text: parse_response(text, KNOWN), options.tries)
        outcome = parse_response(text, KNOWN)
        said = "call" if outcome.call else "text" if outcome.text else "error"
        print(f"{name:<50} {elapsed * 1000:9.1f} ms {elapsed / baseline:6.1f}x  {said}")
        if elapsed > worst[1]:
            worst = (name, elapsed)
    print(f"worst: {worst[0]} at {worst[1] * 1000:.1f} ms "
          f"({'within' if worst[1] < 0.1 else 'OVER'} the 100 ms budget)")


if __name__ == "__main__":
    main()
