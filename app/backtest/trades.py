"""Round-trip trades rebuilt from the broker's fills, and the buy-and-hold baseline curve.

The broker reports fills; a report wants trades (flat -> long -> flat). Rebuilding them from fills
here keeps the broker simple and works the same for any broker that reports fills. Fees paid in
the base currency are valued at the fill price so that every pnl is in the quote currency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from app.backtest.metrics import Floats, RoundTrip, Times
from app.domain.trading import Fill, Side

EPSILON = 1e-12


@dataclass
class _Open:
    entry_time_ms: int
    quantity: float = 0.0
    bought_qty: float = 0.0
    cost: float = 0.0
    sold_qty: float = 0.0
    proceeds: float = 0.0
    fees: float = 0.0


def _fee_in_quote(fill: Fill) -> float:
    base = fill.symbol.split("/", 1)[0]
    fee = float(fill.fee)
    return fee * float(fill.price) if fill.fee_currency == base else fee


def round_trips(
    fills: Sequence[Fill],
    bar_ms: Mapping[str, int],
    last_price: Mapping[str, float],
    end_ms: int,
    close_ms: Mapping[str, Times] | None = None,
) -> list[RoundTrip]:
    """Group fills, oldest first, into long round trips per symbol.

    Args:
        bar_ms: bar length per symbol, for ``bars_held`` when ``close_ms`` does not give it.
        last_price: the final close per symbol; a position still open is valued at it.
        end_ms: the end of the run, the "exit" time of a still-open trade.
        close_ms: per symbol, the close time of every candle its data has: ``bars_held`` then
            counts the candles that closed while the trade was open, so a missing candle is not
            counted as a bar held.
    """
    trips: list[RoundTrip] = []
    book: dict[str, _Open] = {}
    for fill in sorted(fills, key=lambda f: f.time_ms):
        qty, price = float(fill.quantity), float(fill.price)
        current = book.get(fill.symbol)
        if fill.side is Side.BUY:
            if current is None:
                current = book[fill.symbol] = _Open(entry_time_ms=fill.time_ms)
            current.quantity += qty
            current.bought_qty += qty
            current.cost += qty * price
            current.fees += _fee_in_quote(fill)
            continue
        if current is None:
            continue  # a short sale is outside this long-only report
        current.quantity -= qty
        current.sold_qty += qty
        current.proceeds += qty * price
        current.fees += _fee_in_quote(fill)
        if current.quantity <= EPSILON * max(current.bought_qty, 1.0):
            held = _bars_held(fill.symbol, current.entry_time_ms, fill.time_ms, bar_ms, close_ms)
            trips.append(_finish(fill.symbol, current, fill.time_ms, held, False))
            del book[fill.symbol]
    for symbol, current in book.items():
        valued = _Open(**{**current.__dict__})
        valued.proceeds += current.quantity * last_price[symbol]
        valued.sold_qty += current.quantity
        held = _bars_held(symbol, current.entry_time_ms, end_ms, bar_ms, close_ms)
        trips.append(_finish(symbol, valued, end_ms, held, True))
    trips.sort(key=lambda t: (t.entry_time_ms, t.symbol))
    return trips


def _bars_held(
    symbol: str, entry_ms: int, exit_ms: int, bar_ms: Mapping[str, int],
    close_ms: Mapping[str, Times] | None,
) -> int:
    closes = close_ms.get(symbol) if close_ms is not None else None
    if closes is None:
        return int((exit_ms - entry_ms) // bar_ms[symbol])
    after_entry, at_exit = np.searchsorted(closes, [entry_ms, exit_ms], side="right")
    return int(at_exit - after_entry)


def _finish(symbol: str, trade: _Open, exit_ms: int, bars_held: int,
            still_open: bool) -> RoundTrip:
    entry_price = trade.cost / trade.bought_qty if trade.bought_qty else 0.0
    exit_price = trade.proceeds / trade.sold_qty if trade.sold_qty else None
    pnl = trade.proceeds - trade.cost - trade.fees
    return RoundTrip(
        symbol=symbol,
        entry_time_ms=trade.entry_time_ms,
        exit_time_ms=exit_ms,
        quantity=trade.bought_qty,
        entry_price=entry_price,
        exit_price=exit_price,
        pnl=pnl,
        return_pct=pnl / trade.cost * 100.0 if trade.cost else 0.0,
        fees=trade.fees,
        bars_held=bars_held,
        open=still_open,
    )


def buy_and_hold(
    time_ms: Times,
    closes: Mapping[str, Floats],
    cash: float,
    fee_rate: float,
) -> tuple[Floats, list[RoundTrip]]:
    """Equity of splitting ``cash`` equally over the symbols, bought at their first visible close.

    Args:
        time_ms: the time of each step of the run.
        closes: per symbol, its last visible close at each step of the run (NaN before its first
            bar), all arrays the length of the equity curve.
        fee_rate: the taker fee charged on the purchase, as the strategy pays it.

    Returns:
        The baseline equity per step and its (open) positions as round trips without exit.
    """
    if not closes:
        raise ValueError("buy-and-hold needs at least one symbol")
    steps = len(time_ms)
    share = cash / len(closes)
    equity = np.zeros(steps)
    trips: list[RoundTrip] = []
    for symbol, close in closes.items():
        seen = np.flatnonzero(~np.isnan(close))
        if seen.size == 0:
            equity += share  # never visible: the share stays in cash
            continue
        first = int(seen[0])
        price = float(close[first])
        quantity = share / (price * (1.0 + fee_rate))
        fee = quantity * price * fee_rate
        held = np.where(np.arange(steps) >= first, quantity * np.nan_to_num(close), 0.0)
        leftover = np.where(np.arange(steps) >= first, share - quantity * price - fee, share)
        equity += held + leftover
        last = float(close[seen[-1]])
        pnl = quantity * (last - price) - fee
        trips.append(
            RoundTrip(symbol=symbol, entry_time_ms=int(time_ms[first]), exit_time_ms=None,
                      quantity=quantity, entry_price=price, exit_price=last, pnl=pnl,
                      return_pct=pnl / (quantity * price) * 100.0, fees=fee,
                      bars_held=steps - 1 - first, open=True)
        )
    return equity, trips
