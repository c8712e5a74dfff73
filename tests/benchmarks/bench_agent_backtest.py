"""Benchmark: the agent backtest (rule engine) against the strategy backtest, on the same real data.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_agent_backtest.py [--bars N] [--profile]

or ``pytest tests/benchmarks/bench_agent_backtest.py -s`` (the full run, asserting flat memory).

The data is the bundled Coinbase BTC/USD hourly file (20,111 candles, Apache-2.0) with 9 hours
deleted here, spread over the file, because real exchange files miss candles and the agent
backtest once crashed on them: 20,102 candles, 9 gaps. Both backtests run on it with gaps allowed,
each in its own fresh subprocess, so each peak resident set is that run's own:

* baseline: ``kestrel backtest --strategy sma_cross`` (the strategy backtest: one XML tool call
  path per bar, ledger in memory), timed over its replay;
* agents: ``kestrel backtest --agents AnalystAgent_Trend_v1 TraderAgent_Default_v1`` on the
  built-in rule engine (every bar: the analyst's one model turn and about 9 tool calls, 7 of
  them gathering the task's data and 2 writing its answer's blocks, the trader's turns on each
  signal, all stored in the run's SQLite workspace and memory folder, the recall index written
  every 256 bars), timed from the first bar after the 60-bar warm-up to the last, report
  included.

It prints bars/s and peak RSS of each, their ratio, and the agents' resident set and speed sampled
along the run, so growth shows (target: flat, and >= 500 bars/s for the agents). The speed is also
given per CPU second, which other work on a shared machine disturbs far less than the wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

SOURCE = REPO / "resources" / "sample_data" / "BTC-USD_1h_20170701-20191017_coinbase.csv"
DELETED_ROWS = 9  # hours taken out of the file, evenly spread
TEMPLATES = ["AnalystAgent_Trend_v1", "TraderAgent_Default_v1"]
WARMUP = 60
TARGET_BARS_PER_S = 500
FLAT_MB_PER_1000_BARS = 5.0  # growth over the second half of the run that still counts as flat


def with_missing_hours(source: Path, target: Path) -> tuple[Path, int]:
    """``source`` with ``DELETED_ROWS`` candles removed, evenly spread; returns path, rows."""
    lines = source.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    step = len(rows) // (DELETED_ROWS + 1)
    deleted = {step * (i + 1) for i in range(DELETED_ROWS)}
    kept = [row for i, row in enumerate(rows) if i not in deleted]
    target.write_text("\n".join([header, *kept]) + "\n", encoding="utf-8")
    return target, len(kept)


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_strategy(path: Path, _bars: int | None, _profile: bool) -> dict[str, Any]:
    from app.backtest.sma_cross import SmaCross
    from app.runtime.strategy_backtest import RunOptions, run_backtest

    cpu = _cpu_s()
    result = run_backtest([path], SmaCross(fast=10, slow=30), RunOptions(allow_gaps=True))
    seconds = float(result.stats["seconds"])
    return {"bars": int(result.time_ms.size), "seconds": seconds, "cpu_s": _cpu_s() - cpu,
            "trades": result.metrics.trades, "final_equity": result.metrics.final_equity,
            "missing_candles": result.stats["missing_candles"], "samples": []}


def run_agents(path: Path, bars: int | None, profile: bool) -> dict[str, Any]:
    from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest

    samples: list[tuple[int, float, float, float]] = []
    began, cpu_began = time.perf_counter(), _cpu_s()

    def progress(done: int, total: int) -> None:
        if done % max(1, total // 20) == 0 or done == total:
            samples.append(
                (done, _rss_mb(), time.perf_counter() - began, _cpu_s() - cpu_began)
            )

    options = AgentBacktestOptions(
        templates=TEMPLATES, cash=Decimal(10_000), warmup_bars=WARMUP, bars=bars,
        progress=progress, allow_gaps=True,
    )
    with tempfile.TemporaryDirectory() as out:
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        cpu, started = _cpu_s(), time.perf_counter()
        outcome = asyncio.run(run_agent_backtest([path], options, Path(out)))
        seconds, cpu = time.perf_counter() - started, _cpu_s() - cpu
        if profiler is not None:
            import pstats

            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    return {"bars": int(outcome.result.time_ms.size) - 1, "seconds": seconds, "cpu_s": cpu,
            "trades": outcome.result.metrics.trades, "tool_calls": outcome.tool_calls,
            "final_equity": outcome.result.metrics.final_equity,
            "missing_candles": outcome.result.stats["missing_candles"], "samples": samples}


RUNS = {"strategy": run_strategy, "agents": run_agents}


def child(kind: str, path: Path, bars: int | None, profile: bool) -> None:
    result = RUNS[kind](path, bars, profile)
    result["peak_rss_mb"] = _peak_mb()
    print(json.dumps(result))


def measure(bars: int | None = None, profile: bool = False) -> dict[str, dict[str, Any]]:
    """Both runs, each in its own process, on the same derived file."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path, rows = with_missing_hours(SOURCE, Path(tmp) / "BTC-USD_1h_missing-hours.csv")
        print(f"data: {SOURCE.name} with {DELETED_ROWS} hours deleted: {rows:,} candles")
        for kind in RUNS:
            cmd = [sys.executable, __file__, "--run", kind, "--data", str(path)]
            if bars is not None:
                cmd += ["--bars", str(bars)]
            if profile and kind == "agents":
                cmd.append("--profile")
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"the {kind} run failed:\n{done.stderr[-3000:]}")
            if profile and kind == "agents":
                print(done.stderr, file=sys.stderr)
            results[kind] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def growth_mb_per_1000_bars(samples: list[list[float]]) -> float:
    """Resident-set growth over the second half of the run, per 1,000 bars."""
    if len(samples) < 4:
        return float("nan")
    half = [s for s in samples if s[0] >= samples[-1][0] / 2]
    (b0, m0, *_), (b1, m1, *_) = half[0], half[-1]
    return (m1 - m0) / max(b1 - b0, 1) * 1000


def rates(samples: list[list[float]], column: int = 2) -> list[tuple[int, float]]:
    """Bars per second (wall clock, or CPU with ``column=3``) between consecutive samples, by
    the bar reached: a rate that falls along the run means work that grows with history."""
    out, last_bar, last_s = [], 0.0, 0.0
    for sample in samples:
        done, seconds = sample[0], sample[column]
        if done > last_bar and seconds > last_s:
            out.append((int(done), (done - last_bar) / (seconds - last_s)))
        last_bar, last_s = done, seconds
    return out


def report(results: dict[str, dict[str, Any]]) -> dict[str, bool]:
    for kind, r in results.items():
        r["bars_per_s"] = r["bars"] / r["seconds"]
        print(f"{kind:>9}: {r['bars']:>6,} bars in {r['seconds']:7.1f} s = "
              f"{r['bars_per_s']:>8,.1f} bars/s (CPU {r['cpu_s']:.1f} s, "
              f"{r['bars'] / max(r['cpu_s'], 1e-9):,.1f} bars per CPU s); peak RSS "
              f"{r['peak_rss_mb']:.0f} MB; {r['trades']} trades, final equity "
              f"{r['final_equity']:,.2f}; missing candles {r['missing_candles']}")
    agents, strategy = results["agents"], results["strategy"]
    print(f"ratio agents / strategy: {agents['bars_per_s'] / strategy['bars_per_s']:.4f} in "
          f"bars/s, {agents['peak_rss_mb'] / strategy['peak_rss_mb']:.2f} in peak RSS")
    trail = ", ".join(f"{done:,}: {mb:.0f}" for done, mb, *_ in agents["samples"])
    growth = growth_mb_per_1000_bars(agents["samples"])
    print(f"agents' resident set (MB) along the run, by bar: {trail}")
    speed = ", ".join(f"{done:,}: {rate:.0f}" for done, rate in rates(agents["samples"]))
    print(f"agents' bars/s along the run, by bar: {speed}")
    cpu = ", ".join(f"{done:,}: {rate:.0f}" for done, rate in rates(agents["samples"], 3))
    print(f"agents' bars per CPU second along the run, by bar: {cpu}")
    print(f"agents' growth over the second half: {growth:.1f} MB per 1,000 bars")
    targets = {
        f"agents >= {TARGET_BARS_PER_S} bars/s": agents["bars_per_s"] >= TARGET_BARS_PER_S,
        f"agents' memory flat (< {FLAT_MB_PER_1000_BARS} MB per 1,000 bars)":
            growth < FLAT_MB_PER_1000_BARS,
    }
    for name, met in targets.items():
        print(f"target {name}: {'met' if met else 'NOT met'}")
    return targets


def test_agent_backtest_memory_stays_flat_over_the_whole_hourly_file() -> None:
    targets = report(measure())
    assert targets[f"agents' memory flat (< {FLAT_MB_PER_1000_BARS} MB per 1,000 bars)"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, help="agent bars after the warm-up (default: all)")
    parser.add_argument("--profile", action="store_true", help="cProfile the agents' run")
    parser.add_argument("--run", choices=sorted(RUNS), help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        child(args.run, args.data, args.bars, args.profile)
        return 0
    report(measure(args.bars, args.profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
