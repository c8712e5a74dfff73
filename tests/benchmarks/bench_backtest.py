"""Benchmark: SMA cross over 100,000 bars, Kestrel's full tool path vs backtrader, backtesting.py.

Run on demand (not collected by pytest):

    /work/venv/bin/python tests/benchmarks/bench_backtest.py [--bars 100000] [--profile]

The data is the real Coinbase BTC/USD 1h file (20,111 candles) extended to the wanted length by
appending copies of itself with timestamps shifted to continue hourly and prices scaled so each
copy opens where the previous one closed (so the series stays continuous; no candle is invented).

Each engine runs in its own fresh subprocess, so each ``ru_maxrss`` is that engine's own peak
resident memory, and one engine's caches cannot warm another's. Timing covers the run only, not
reading the CSV. Kestrel's run is the whole agent path at every bar: the strategy sends XML, the
executor parses, validates and records the call (SQLite audit table), the Risk Guard checks every
order, the PaperBroker fills and commits each fill, cursor and equity point to its SQLite ledger
(in memory, as ``kestrel backtest`` runs it). The peers run the same rules (fast 10 / slow 30,
all-in long, close on the opposite cross, 0.1% commission, fills at the next open) in their
fastest configuration (backtrader: preload + runonce, no observers; backtesting.py: defaults);
backtrader also runs a second time with its default observers (``Cerebro()``), for reference. The
ratio target is judged against the faster of the two backtrader runs.
backtrader sizes its all-in buy at the signal bar's close with a 1% cushion (it rejects an order
that the next open makes unaffordable), so its final equity differs a little; the trades do not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "resources" / "sample_data" / "BTC-USD_1h_20170701-20191017_coinbase.csv"
FAST, SLOW, CASH, FEE = 10, 30, 10_000.0, 0.001
HOUR = 3_600_000


def extend(source: Path, bars: int, target: Path) -> Path:
    """Continue the real series with shifted, rescaled copies of itself up to ``bars`` candles."""
    frame = pd.read_csv(source)
    prices = ["open", "high", "low", "close"]
    parts, scale, start = [], 1.0, int(frame["timestamp_ms"].iloc[0])
    count = 0
    while count < bars:
        part = frame.copy()
        part[prices] = part[prices] * scale
        parts.append(part)
        count += len(part)
        scale = float(part["close"].iloc[-1]) / float(frame["open"].iloc[0])
    data = pd.concat(parts, ignore_index=True).iloc[:bars]
    data["timestamp_ms"] = start + np.arange(len(data), dtype=np.int64) * HOUR
    data[prices] = data[prices].round(2)
    data.to_csv(target, index=False)
    return target


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_kestrel(path: Path, profile: bool) -> dict[str, float]:
    from app.backtest.sma_cross import SmaCross
    from app.config import PaperSettings
    from app.runtime.strategy_backtest import load_files, open_backtest, run_strategy

    files = load_files([path])
    session = open_backtest(
        files, paper=PaperSettings(initial_cash=Decimal(int(CASH)), fee_rate=Decimal(str(FEE)),
                                              slippage_bps=Decimal(0)),
        record_tool_calls=True,
    )
    strategy = SmaCross(fast=FAST, slow=SLOW)
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
    _timeline, output, seconds = asyncio.run(run_strategy(session, strategy))
    if profile:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    fills = len(session.ledger.fills())
    calls = session.ledger.connection.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0]
    equity = float(session.ledger.equity_curve()[-1][1])
    return {"bars": output.steps, "seconds": seconds, "fills": fills, "tool_calls": calls,
            "final_equity": equity, "failures": len(strategy.failures)}


def _frame(path: Path) -> pd.DataFrame:
    raw = pd.read_csv(path)
    return pd.DataFrame(
        {"Open": raw["open"], "High": raw["high"], "Low": raw["low"], "Close": raw["close"],
         "Volume": raw["volume"]},
    ).set_index(pd.to_datetime(raw["timestamp_ms"], unit="ms"))


def run_backtesting_py(path: Path) -> dict[str, float]:
    from backtesting import Strategy
    from backtesting.lib import FractionalBacktest, crossover

    data = _frame(path)

    def sma(values: np.ndarray, n: int) -> np.ndarray:
        return pd.Series(values).rolling(n).mean().to_numpy()

    class SmaCross(Strategy):
        def init(self) -> None:
            self.f = self.I(sma, self.data.Close, FAST)
            self.s = self.I(sma, self.data.Close, SLOW)

        def next(self) -> None:
            if crossover(self.f, self.s):
                if not self.position:
                    self.buy()
            elif crossover(self.s, self.f) and self.position:
                self.position.close()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = FractionalBacktest(data, SmaCross, cash=CASH, commission=FEE,
                                fractional_unit=1e-6, finalize_trades=False)
        started = time.perf_counter()
        stats = bt.run()
        seconds = time.perf_counter() - started
    return {"bars": len(data), "seconds": seconds, "trades": int(stats["# Trades"]),
            "final_equity": float(stats["Equity Final [$]"])}


def run_backtrader(path: Path) -> dict[str, float]:
    """backtrader in its fastest configuration: no observers (``stdstats=False``)."""
    return _backtrader(path, observers=False)


def run_backtrader_observers(path: Path) -> dict[str, float]:
    """backtrader as ``Cerebro()`` runs by default: with its standard observers."""
    return _backtrader(path, observers=True)


def _backtrader(path: Path, observers: bool) -> dict[str, float]:
    import backtrader as bt

    data = _frame(path)

    class SmaCross(bt.Strategy):
        def __init__(self) -> None:
            fast = bt.indicators.SMA(self.data.close, period=FAST)
            slow = bt.indicators.SMA(self.data.close, period=SLOW)
            self.cross = bt.indicators.CrossOver(fast, slow)

        def next(self) -> None:
            if self.cross > 0 and not self.position:
                price = self.data.close[0]
                size = self.broker.getcash() / (price * (1 + FEE) * 1.01)
                self.buy(size=size)
            elif self.cross < 0 and self.position:
                self.close()

    cerebro = bt.Cerebro(stdstats=observers)
    cerebro.adddata(bt.feeds.PandasData(dataname=data))
    cerebro.addstrategy(SmaCross)
    cerebro.broker.setcash(CASH)
    cerebro.broker.setcommission(commission=FEE)
    started = time.perf_counter()
    cerebro.run()
    seconds = time.perf_counter() - started
    return {"bars": len(data), "seconds": seconds, "final_equity": cerebro.broker.getvalue()}


ENGINES = {"kestrel": run_kestrel, "backtrader": run_backtrader,
           "backtrader+observers": run_backtrader_observers,
           "backtesting.py": run_backtesting_py}


def child(engine: str, path: Path, profile: bool) -> None:
    runner = ENGINES[engine]
    result = runner(path, profile) if engine == "kestrel" else runner(path)  # type: ignore[operator]
    result["max_rss_mb"] = _rss_mb()
    print(json.dumps(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=100_000)
    parser.add_argument("--profile", action="store_true", help="cProfile Kestrel's run to stderr")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per engine, each in a fresh process; the fastest counts")
    parser.add_argument("--engine", choices=sorted(ENGINES), help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        child(args.engine, args.data, args.profile)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = extend(SOURCE, args.bars, Path(tmp) / "BTC-USD_1h_bench.csv")
        print(f"data: the real {SOURCE.name} (20,111 candles) continued to {args.bars:,} 1h "
              "bars by appending copies of itself, shifted in time and rescaled to open where "
              "the previous copy closed")
        results = {}
        for _ in range(max(args.repeat, 1)):
            for engine in ENGINES:  # interleaved, so a burst of load hits every engine alike
                cmd = [sys.executable, __file__, "--engine", engine, "--data", str(path)]
                if args.profile and engine == "kestrel":
                    cmd.append("--profile")
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(f"{engine} failed:\n{done.stderr}", file=sys.stderr)
                    return 1
                if args.profile and engine == "kestrel":
                    print(done.stderr, file=sys.stderr)
                run = json.loads(done.stdout.strip().splitlines()[-1])
                best = results.get(engine)
                if best is None or run["seconds"] < best["seconds"]:
                    results[engine] = run
    for engine, r in results.items():
        rate = r["bars"] / r["seconds"]
        r["bars_per_s"] = rate
        print(f"{engine:>20}: {rate:>10,.0f} bars/s  ({r['seconds']:.2f} s, "
              f"max RSS {r['max_rss_mb']:.0f} MB, final equity {r['final_equity']:,.2f})")
    k = results["kestrel"]
    print(f"kestrel: {k['tool_calls']:,} tool calls, {k['fills']:,} fills, "
          f"{k['failures']} failed calls; {1e6 / k['bars_per_s']:.0f} µs per bar")
    for peer in ("backtrader", "backtrader+observers", "backtesting.py"):
        print(f"ratio kestrel / {peer}: {k['bars_per_s'] / results[peer]['bars_per_s']:.2f}")
    fastest_bt = max(results["backtrader"]["bars_per_s"],
                     results["backtrader+observers"]["bars_per_s"])
    targets = {
        ">= 5,000 bars/s": k["bars_per_s"] >= 5000,
        ">= the fastest backtrader (ratio >= 1.0)": k["bars_per_s"] >= fastest_bt,
        "resident set < 500 MB": k["max_rss_mb"] < 500,
    }
    for name, met in targets.items():
        print(f"target {name}: {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
