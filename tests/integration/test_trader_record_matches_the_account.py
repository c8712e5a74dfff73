"""What the rule-engine Trader records of its trades is what the account made of them.

The Trader keeps each closed trade's realised P&L (from the fill the venue reports) in
``trades.yaml`` and sums them into ``performance_summary.yaml``, which it reads before taking
the next signal and which the person reads in the memory browser. On paper the buy's fee was
left out, so over 2017-2019 the summary said +423 where the account had lost 81.
"""

from __future__ import annotations

import asyncio
import csv
from decimal import Decimal
from pathlib import Path

from app.memory.roles import (
    PerformanceSummary,
    TradesFile,
    load_yaml,
    performance_path,
    trades_path,
)
from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest
from tests.helpers.paths import BTC_USD_1H

SYMBOL = "BTC/USD"


def test_the_traders_record_of_each_trade_and_its_summary_match_the_account(
    tmp_path: Path,
) -> None:
    options = AgentBacktestOptions(
        templates=("AnalystAgent_Trend_v1", "TraderAgent_Default_v1"), cash=Decimal(10_000),
        warmup_bars=60, bars=400,
    )
    outcome = asyncio.run(run_agent_backtest([BTC_USD_1H], options, tmp_path))
    (trader,) = [a for a in outcome.agents if a.template == "TraderAgent_Default_v1"]
    folder = tmp_path / "workspace" / "memory" / trader.agent_id
    record = load_yaml(TradesFile, (folder / trades_path(SYMBOL)).read_text(encoding="utf-8"))
    with (tmp_path / "trades.csv").open(encoding="utf-8") as handle:
        report = [row for row in csv.DictReader(handle) if row["open"] == "0"]
    closed = [t for t in record.trades if t.realized_pnl is not None]
    assert record.archived is None and len(closed) == len(report) >= 2
    for trade, row in zip(closed, report, strict=True):
        assert trade.entry_price == Decimal(row["entry_price"])
        assert trade.fees == Decimal(row["fees"])  # both fills' fees
        assert abs(trade.realized_pnl - Decimal(row["pnl"])) < Decimal("0.0001"), trade.trade_id
    summary = load_yaml(PerformanceSummary,
                        (folder / performance_path(SYMBOL)).read_text(encoding="utf-8"))
    account = sum((Decimal(row["pnl"]) for row in report), Decimal(0))
    assert abs(summary.net_pnl - account) < Decimal("0.001")
