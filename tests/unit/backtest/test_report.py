"""The report files: undefined metrics are JSON null and "n/a", never NaN, inf or a crash."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from app.backtest.metrics import RoundTrip, compute_metrics
from app.backtest.report import BacktestResult, summary_table, write_report

HOUR = 3_600_000


def _flat_result() -> BacktestResult:
    times = 1_700_000_000_000 + np.arange(24) * HOUR
    equity = np.full(24, 10_000.0)
    exposed = np.zeros(24, dtype=bool)
    metrics = compute_metrics(times, equity, HOUR, [], exposed, 0.0)
    base = np.linspace(10_000.0, 11_000.0, 24)
    trip = RoundTrip("BTC/USDT", int(times[0]), None, 1.0, 10_000.0, 11_000.0, 1000.0, 10.0,
                     0.0, 23, True)
    baseline = compute_metrics(times, base, HOUR, [trip], np.ones(24, dtype=bool), 0.0)
    return BacktestResult(times, equity, base, exposed, [], metrics, baseline,
                          settings={"strategy": "sma_cross"})


def test_a_run_without_trades_writes_null_for_undefined_metrics(tmp_path: Path) -> None:
    paths = write_report(_flat_result(), tmp_path)
    summary = json.loads(paths["summary"].read_text())
    assert summary["strategy"]["sharpe"] is None
    assert summary["strategy"]["win_rate_pct"] is None
    assert summary["strategy"]["profit_factor"] is None
    assert summary["buy_and_hold"]["total_return_pct"] == 10.0
    assert summary["bars"] == 24 and summary["start_iso"] == "2023-11-14T22:13:20Z"
    with paths["trades"].open() as handle:
        assert list(csv.reader(handle))[1:] == []
    with paths["equity"].open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 24 and rows[-1]["buy_hold_equity"] == "11000.00000000"
    assert paths["chart"].read_bytes()[:4] == b"\x89PNG"


def test_summary_table_shows_na_for_undefined_values() -> None:
    table = summary_table(_flat_result())
    assert "Win rate %" in table and "n/a" in table
    assert "buy & hold" in table.splitlines()[0]
