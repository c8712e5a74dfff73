"""Round trips rebuilt from fills, and the buy-and-hold baseline."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from app.backtest.trades import buy_and_hold, round_trips
from app.domain.trading import Fill, Side

HOUR = 3_600_000
BARS = {"BTC/USDT": HOUR, "ETH/USDT": HOUR}


def _fill(n: int, side: Side, qty: str, price: str, fee: str, t: int,
          symbol: str = "BTC/USDT", fee_currency: str = "USDT") -> Fill:
    return Fill(f"F{n}", f"P{n}", "a", symbol, side, Decimal(qty), Decimal(price), Decimal(fee),
                fee_currency, t * HOUR)


def test_buy_then_sell_is_one_round_trip_with_both_fees_in_its_pnl() -> None:
    fills = [_fill(1, Side.BUY, "2", "100", "0.2", 1), _fill(2, Side.SELL, "2", "110", "0.22", 4)]
    [trip] = round_trips(fills, BARS, {"BTC/USDT": 120.0}, 10 * HOUR)
    assert (trip.entry_price, trip.exit_price, trip.quantity) == (100.0, 110.0, 2.0)
    assert trip.pnl == pytest.approx(20.0 - 0.42)
    assert trip.fees == pytest.approx(0.42)
    assert trip.bars_held == 3 and not trip.open
    assert trip.return_pct == pytest.approx((20.0 - 0.42) / 200.0 * 100)


def test_scaling_in_and_out_closes_when_the_position_is_flat() -> None:
    fills = [
        _fill(1, Side.BUY, "1", "100", "0", 1),
        _fill(2, Side.BUY, "1", "120", "0", 2),
        _fill(3, Side.SELL, "1.5", "130", "0", 3),
        _fill(4, Side.SELL, "0.5", "90", "0", 5),
    ]
    [trip] = round_trips(fills, BARS, {"BTC/USDT": 1.0}, 9 * HOUR)
    assert trip.entry_price == pytest.approx(110.0)
    assert trip.exit_price == pytest.approx((1.5 * 130 + 0.5 * 90) / 2)
    assert trip.pnl == pytest.approx(1.5 * 130 + 0.5 * 90 - 220)
    assert trip.exit_time_ms == 5 * HOUR


def test_a_position_still_open_at_the_end_is_valued_at_the_last_close() -> None:
    fills = [_fill(1, Side.BUY, "1", "100", "0.1", 2)]
    [trip] = round_trips(fills, BARS, {"BTC/USDT": 150.0}, 7 * HOUR)
    assert trip.open and trip.exit_price == 150.0 and trip.pnl == pytest.approx(49.9)
    assert trip.bars_held == 5


def test_fees_paid_in_the_base_currency_are_valued_at_the_fill_price() -> None:
    fills = [
        _fill(1, Side.BUY, "1", "100", "0.001", 1, fee_currency="BTC"),
        _fill(2, Side.SELL, "0.999", "100", "0.1", 2),
    ]
    [trip] = round_trips(fills, BARS, {"BTC/USDT": 100.0}, 3 * HOUR)
    assert trip.fees == pytest.approx(0.2)


def test_symbols_are_tracked_separately() -> None:
    fills = [
        _fill(1, Side.BUY, "1", "100", "0", 1),
        _fill(2, Side.BUY, "10", "5", "0", 1, symbol="ETH/USDT"),
        _fill(3, Side.SELL, "1", "90", "0", 2),
    ]
    trips = round_trips(fills, BARS, {"BTC/USDT": 1.0, "ETH/USDT": 6.0}, 4 * HOUR)
    assert [(t.symbol, t.open) for t in trips] == [("BTC/USDT", False), ("ETH/USDT", True)]


def test_buy_and_hold_splits_cash_and_pays_the_entry_fee() -> None:
    times = np.arange(4) * HOUR
    closes = {
        "BTC/USDT": np.array([100.0, 110.0, 120.0, 130.0]),
        "ETH/USDT": np.array([np.nan, 10.0, 5.0, 20.0]),
    }
    equity, trips = buy_and_hold(times, closes, 1000.0, 0.001)
    btc_qty = 500 / (100 * 1.001)
    eth_qty = 500 / (10 * 1.001)
    assert equity[0] == pytest.approx(btc_qty * 100 + 500 - btc_qty * 100 * 1.001 + 500)
    assert equity[-1] == pytest.approx(btc_qty * 130 + eth_qty * 20)
    assert [t.entry_time_ms for t in trips] == [0, HOUR]
    assert all(t.open for t in trips)


def test_buy_and_hold_keeps_cash_for_a_symbol_never_visible() -> None:
    equity, trips = buy_and_hold(np.arange(2) * HOUR, {"X/Y": np.array([np.nan, np.nan])},
                                 100.0, 0.0)
    assert equity.tolist() == [100.0, 100.0] and trips == []
