"""Parity with backtesting.py: the same SMA cross, the same trades, final equity within 0.5%.

Kestrel runs ``sma_cross`` through its full tool path (XML -> executor -> Risk Guard -> PaperBroker
-> SQLite ledger); backtesting.py runs the same rules on the same candles.

Aligned conventions (documented here because the comparison depends on them):
- Fills: both decide on a bar's close and fill market orders at the next bar's open
  (backtesting.py ``trade_on_close=False``, its default; Kestrel always).
- Signal: backtesting.py's ``crossover`` (strict on both bars), long only, buy when flat, close when
  long; the first cross is checked on the bar after the slow SMA's first value in both.
- Sizing: all-in with the fee included (Kestrel ``quote_amount`` = cash; backtesting.py
  ``buy()`` sizes by ``cash // (price * (1 + commission))``). backtesting.py trades whole units,
  so ``FractionalBacktest`` with ``fractional_unit`` = Kestrel's amount step (1e-6) makes units
  the same size on both sides.
- Costs: commission 0.1% per side in both; Kestrel's slippage set to 0 (backtesting.py has none).
- Prices: backtesting.py gets the candles rounded to the precision Kestrel's tools publish.
- An open trade at the end is left open by both (backtesting.py ``finalize_trades=False``); the
  final equity counts it at the last close in both.
"""

from __future__ import annotations

import warnings
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from app.backtest.sma_cross import SmaCross
from app.config import PaperSettings
from app.market.csv_loader import load_csv
from app.runtime.strategy_backtest import RunOptions, run_backtest
from tests.helpers.paths import BTC_USD_1H, BTC_USD_1M

FAST, SLOW = 10, 30
CASH = 10_000.0
FEE = 0.001
STEP = 1e-6  # Kestrel's default amount step (app.domain.market_rules.MarketRules.step)


def _peer_trades(path: Path) -> tuple[list[tuple[int, int]], float, bool]:
    """Run backtesting.py; return closed trades as (entry bar, exit bar), final equity, open?"""
    from backtesting import Strategy
    from backtesting.lib import FractionalBacktest, crossover

    loaded = load_csv(path)
    s = loaded.series
    data = pd.DataFrame(
        {"Open": s.open, "High": s.high, "Low": s.low, "Close": s.close, "Volume": s.volume},
        index=pd.to_datetime(s.timestamp_ms, unit="ms"),
    ).round(loaded.price_decimals)

    def sma(values: np.ndarray, n: int) -> np.ndarray:
        return pd.Series(values).rolling(n).mean().to_numpy()

    class SmaCrossPeer(Strategy):
        fast = FAST
        slow = SLOW

        def init(self) -> None:
            self.f = self.I(sma, self.data.Close, self.fast)
            self.s = self.I(sma, self.data.Close, self.slow)

        def next(self) -> None:
            if crossover(self.f, self.s):
                if not self.position:
                    self.buy()
            elif crossover(self.s, self.f) and self.position:
                self.position.close()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = FractionalBacktest(data, SmaCrossPeer, cash=CASH, commission=FEE,
                                trade_on_close=False, fractional_unit=STEP,
                                finalize_trades=False)
        stats = bt.run()
    trades = stats["_trades"]
    pairs = [(int(e), int(x)) for e, x in zip(trades["EntryBar"], trades["ExitBar"], strict=True)]
    still_open = bool(stats["_strategy"].position)
    return pairs, float(stats["Equity Final [$]"]), still_open


def _kestrel_trades(path: Path) -> tuple[list[tuple[int, int]], float, bool]:
    result = run_backtest(
        [path],
        SmaCross(fast=FAST, slow=SLOW),
        RunOptions(paper=PaperSettings(initial_cash=Decimal(int(CASH)), fee_rate=Decimal(str(FEE)),
                                         slippage_bps=Decimal(0))),
    )
    stamps = load_csv(path).series.timestamp_ms
    def bar(ms: int) -> int:
        return int(np.searchsorted(stamps, ms))

    closed = [(bar(t.entry_time_ms), bar(t.exit_time_ms or 0)) for t in result.trades
              if not t.open]
    return closed, result.metrics.final_equity, any(t.open for t in result.trades)


def _slice(source: Path, rows: int, target: Path) -> Path:
    lines = source.read_text().splitlines()
    target.write_text("\n".join([lines[0], *lines[-rows:]]) + "\n")
    return target


@pytest.mark.slow
@pytest.mark.parametrize("dataset", [BTC_USD_1H, BTC_USD_1M], ids=lambda p: p.name)
def test_sma_cross_matches_backtesting_py_trade_for_trade(dataset: Path, tmp_path: Path) -> None:
    path = dataset
    if dataset == BTC_USD_1H:  # the last 4,000 hours keep the test quick
        path = _slice(dataset, 4000, tmp_path / "BTC-USD_1h_slice.csv")
    ours, our_equity, ours_open = _kestrel_trades(path)
    theirs, their_equity, theirs_open = _peer_trades(path)
    assert len(ours) >= 20, "the dataset must produce enough trades to compare"
    assert ours == theirs
    assert ours_open == theirs_open
    assert abs(our_equity - their_equity) / their_equity < 0.005, (our_equity, their_equity)
