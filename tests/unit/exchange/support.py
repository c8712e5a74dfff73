"""Shared set-up for broker tests: real BTC/USDT daily candles of 2020 behind a replay clock.

The first rows of the file, used for hand-checked numbers (open, high, low, close):
    bar 0  2020-01-01  7195.24  7255     7175.15  7200.85
    bar 1  2020-01-02  7200.77  7212.5   6924.74  6965.71
    bar 2  2020-01-03  6965.49  7405     6871.04  7344.96
    bar 3  2020-01-04  7345     7404     7272.21  7354.11
    bar 4  2020-01-05  7354.19  7495     7318     7358.75
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.domain.clock import ReplayClock
from app.exchange.paper import PaperBroker
from app.market.csv_loader import load_csv
from app.market.replay import ReplayMarketData
from app.store.ledger import Ledger
from tests.helpers.paths import BTC_USDT_1D

DATA = BTC_USDT_1D
DAY = 86_400_000
BAR0_OPEN = 1577836800000
SYMBOL = "BTC/USDT"


@dataclass
class Rig:
    broker: PaperBroker
    clock: ReplayClock
    market: ReplayMarketData
    ledger: Ledger

    def show_bars(self, count: int) -> None:
        """Move the cursor so that bars 0 .. count-1 are visible (cursor at bar count-1's close)."""
        self.clock.advance_to(BAR0_OPEN + count * DAY)

    def step(self, count: int = 1) -> list[Any]:
        """Advance ``count`` bars, settling after each, and return all fills."""
        fills = []
        for _ in range(count):
            self.clock.advance_to(self.clock.now_ms() + DAY)
            fills.extend(self.broker.settle())
        return fills


_LOADED = {}


def loaded():
    if "file" not in _LOADED:
        _LOADED["file"] = load_csv(DATA)
    return _LOADED["file"]


def make_rig(
    db: Path | str = ":memory:", visible: int = 1, cash: str = "10000", **kwargs: Any
) -> Rig:
    clock = ReplayClock(BAR0_OPEN + visible * DAY)
    market = ReplayMarketData(clock, [loaded()])
    ledger = Ledger(db)
    broker = PaperBroker(market, clock, ledger, initial_cash=Decimal(cash), **kwargs)
    return Rig(broker, clock, market, ledger)
