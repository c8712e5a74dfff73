"""Real exchange files miss candles: both kinds of backtest step over a missing candle, keep equity,
exposure and metrics on the bars that exist, and say how many candles were missing.

The daily Coinbase file is real data with a real gap: it jumps from 2019-03-19 to 2019-04-01
(12 days missing). No hourly file under a permissive licence has gaps, so the hourly cases delete
hours from the bundled BTC/USDT hourly file here, in the test (``hourly_with_missing_hours``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from app.backtest.sma_cross import SmaCross
from app.domain.errors import DataFileError
from app.market.csv_loader import load_csv
from app.runtime.agent_backtest import AgentBacktestOptions, AgentBacktestResult, run_agent_backtest
from app.runtime.strategy_backtest import RunOptions, run_backtest
from tests.helpers.paths import BTC_USD_1D, BTC_USDT_1H

TREND, TRADER = "AnalystAgent_Trend_v1", "TraderAgent_Default_v1"
DAY = 86_400_000
HOUR = 3_600_000
GAP_ROW = 1570  # index of 2019-04-01, the first candle after the 12 missing days
REMOVED_HOURS = (75, 76, 120, 170)  # rows deleted from the hourly slice, after the warm-up


def closes_of(path: Path) -> np.ndarray:
    loaded = load_csv(path)
    return loaded.series.timestamp_ms + loaded.bar_ms


def hourly_with_missing_hours(tmp_path: Path) -> Path:
    """The last 200 hours of the bundled BTC/USDT file with ``REMOVED_HOURS`` deleted."""
    lines = BTC_USDT_1H.read_text(encoding="utf-8").splitlines()
    kept = [row for i, row in enumerate(lines[-200:]) if i not in REMOVED_HOURS]
    path = tmp_path / "BTC-USDT_1h_missing-hours.csv"
    path.write_text("\n".join([lines[0], *kept]) + "\n", encoding="utf-8")
    return path


def run_agents(data: Path, out: Path, **options: object) -> AgentBacktestResult:
    opts = AgentBacktestOptions(templates=[TREND, TRADER], allow_gaps=True, **options)  # type: ignore[arg-type]
    return asyncio.run(run_agent_backtest([data], opts, out))


def test_an_agent_backtest_steps_over_the_missing_days_of_real_daily_data(tmp_path: Path) -> None:
    out = tmp_path / "out"
    outcome = run_agents(BTC_USD_1D, out, warmup_bars=GAP_ROW - 40, bars=80)
    expected = closes_of(BTC_USD_1D)[GAP_ROW - 40:GAP_ROW + 41]
    result = outcome.result
    assert result.time_ms.tolist() == expected.tolist()  # every step is a candle that exists
    assert np.isfinite(result.equity).all() and result.equity.size == expected.size
    assert result.exposed.size == expected.size
    assert result.stats["missing_candles"] == {"BTC/USD": 12}
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["bars"] == expected.size
    assert summary["stats"]["missing_candles"] == {"BTC/USD": 12}
    # the analyst's daily job fired once for every bar, the first one after the gap included
    db = sqlite3.connect(out / "workspace" / "kestrel.db")
    try:
        times = [json.loads(p)["scheduled_time"] for (p,) in db.execute(
            "SELECT payload_json FROM tasks WHERE task_type='RUN_ANALYSIS' ORDER BY seq")]
    finally:
        db.close()
    assert len(times) == expected.size - 1
    assert "2019-04-02T00:00:00Z" in times  # the close of 2019-04-01, right after the gap


def test_an_agent_backtest_on_hourly_data_with_missing_hours_reaches_its_last_candle(
    tmp_path: Path,
) -> None:
    data = hourly_with_missing_hours(tmp_path)
    outcome = run_agents(data, tmp_path / "out", bars=3000)  # more bars than the data has
    closes = closes_of(data)
    result = outcome.result
    assert result.time_ms.tolist() == closes[60:].tolist()
    assert result.stats["missing_candles"] == {"BTC/USDT": len(REMOVED_HOURS)}
    assert np.isfinite(result.equity).all()
    assert (tmp_path / "out" / "summary.json").is_file()


def test_an_agent_backtest_refuses_data_with_gaps_unless_allowed(tmp_path: Path) -> None:
    options = AgentBacktestOptions(templates=[TREND, TRADER])
    with pytest.raises(DataFileError, match="row 1572, field timestamp_ms: gap of 13 bars"):
        asyncio.run(run_agent_backtest([BTC_USD_1D], options, tmp_path / "out"))


def test_a_strategy_backtest_steps_over_the_same_gaps_and_counts_them(tmp_path: Path) -> None:
    daily = run_backtest([BTC_USD_1D], SmaCross(fast=10, slow=30), RunOptions(allow_gaps=True))
    assert daily.time_ms.tolist() == closes_of(BTC_USD_1D).tolist()
    assert daily.stats["missing_candles"] == {"BTC/USD": 12}
    assert np.isfinite(daily.equity).all()
    hourly_data = hourly_with_missing_hours(tmp_path)
    hourly = run_backtest([hourly_data], SmaCross(fast=5, slow=12), RunOptions(allow_gaps=True))
    assert hourly.stats["missing_candles"] == {"BTC/USDT": len(REMOVED_HOURS)}
    assert hourly.time_ms.size == 200 - len(REMOVED_HOURS)


def test_bars_held_counts_only_the_candles_that_exist(tmp_path: Path) -> None:
    result = run_backtest([BTC_USD_1D], SmaCross(fast=3, slow=8), RunOptions(allow_gaps=True))
    closes = closes_of(BTC_USD_1D)
    gap_close = int(closes[GAP_ROW])
    across = [t for t in result.trades
              if t.entry_time_ms < gap_close and (t.exit_time_ms or 0) >= gap_close]
    assert across, "a trade must be open across the gap for this test to mean anything"
    for trade in across:
        assert trade.exit_time_ms is not None
        existing = int(np.sum((closes > trade.entry_time_ms) & (closes <= trade.exit_time_ms)))
        assert trade.bars_held == existing
        assert trade.bars_held < (trade.exit_time_ms - trade.entry_time_ms) // DAY
