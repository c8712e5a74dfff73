"""Benchmark: ``kestrel eval`` with its windows side by side against one after another.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_eval_concurrency.py [--latency 2] [--bars 3]

The model is ``PromptRuleModel`` behind the fake OpenAI-compatible server, which answers every
call only after ``--latency`` seconds, as a model that takes that long to think. The three
standard windows (``--bars`` bars each) are evaluated twice, in the same sitting: with
``--concurrency 1`` (one after another, the baseline) and with ``--concurrency 3``. It prints each
wall time, the ratio (target: at most 0.45 at 2 s a call), how many calls the server had under
way at once, and whether the two reports are the same figure for figure (latency apart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.config import LLMSettings  # noqa: E402
from app.runtime.evaluation import STANDARD_WINDOWS, EvalOptions, run_eval  # noqa: E402
from tests.helpers.fake_llm_servers import FakeOpenAIServer  # noqa: E402
from tests.helpers.prompt_rule_model import PromptRuleModel  # noqa: E402

TARGET_RATIO = 0.45
WALL_TIME = {"latency_ms_mean", "latency_ms_p95"}


def _figures(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _figures(v) for k, v in data.items() if k not in WALL_TIME}
    if isinstance(data, list):
        return [_figures(v) for v in data]
    return data


def timed(server: FakeOpenAIServer, out: Path, bars: int, concurrency: int
          ) -> tuple[float, int, Any]:
    """One eval: wall seconds, the most calls the server had under way at once, the report."""
    server.max_in_flight = 0
    subject = LLMSettings(provider="openai-compatible", base_url=server.base_url,
                          model="gpt-4o-mini", max_retries=0)
    options = EvalOptions(subject=subject, out_dir=out, concurrency=concurrency,
                          windows=[replace(w, bars=bars) for w in STANDARD_WINDOWS])
    started = time.perf_counter()
    asyncio.run(run_eval(options))
    seconds = time.perf_counter() - started
    return seconds, server.max_in_flight, json.loads(
        (out / "eval.json").read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per model call")
    parser.add_argument("--bars", type=int, default=3, help="bars per window")
    args = parser.parse_args(argv)
    with (tempfile.TemporaryDirectory(prefix="bench-eval-concurrency-") as folder,
          FakeOpenAIServer(default=PromptRuleModel(), latency_s=args.latency) as server):
        out = Path(folder)  # one server for both: the report names its address
        one_s, one_most, one = timed(server, out / "sequential", args.bars, 1)
        side_s, side_most, side = timed(server, out / "concurrent", args.bars, 3)
    calls = one["total"]["figures"]["model_calls"]
    ratio = side_s / one_s
    same = _figures(one) == _figures(side)
    print(f"3 windows x {args.bars} bars, {calls} model calls at {args.latency:g} s each")
    print(f"one after another (--concurrency 1): {one_s:.1f} s, at most {one_most} calls at once")
    print(f"side by side      (--concurrency 3): {side_s:.1f} s, at most {side_most} calls at once")
    print(f"ratio side by side / one after another: {ratio:.3f} (target <= {TARGET_RATIO}: "
          f"{'met' if ratio <= TARGET_RATIO else 'NOT met'}); same report: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
