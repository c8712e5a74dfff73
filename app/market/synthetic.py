"""A synthetic order book derived from visible candles, for the offline market.

Deterministic (same candles, same book), centred on the last close with a spread and level spacing
taken from recent volatility and sizes from recent volume, so best bid <= last <= best ask always
holds and a chart of it moves with the market. It is labelled synthetic wherever it is shown.
"""

from __future__ import annotations

import random
import zlib
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal

import numpy as np

from app.domain.market import BookLevel, OrderBook
from app.market.series import KlineSeries

QUANTITY_DECIMALS = 6


def _round(value: float, tick: Decimal, rounding: str) -> Decimal:
    return (Decimal(repr(value)) / tick).to_integral_value(rounding=rounding) * tick


def synthetic_order_book(
    *,
    symbol: str,
    series: KlineSeries,
    limit: int,
    price_decimals: int,
    now_ms: int,
) -> OrderBook:
    """Build ``limit`` levels a side around the last close of ``series``."""
    tick = Decimal(1).scaleb(-price_decimals)
    recent = series.tail(50)
    last = float(recent.close[-1])
    ranges = (recent.high - recent.low) / np.maximum(recent.close, 1e-12)
    volatility = float(np.median(ranges)) if len(ranges) else 0.001
    volatility = min(max(volatility, 0.0002), 0.2)
    half_spread = max(float(tick), last * min(volatility * 0.02, 0.001))
    step = max(float(tick), last * volatility * 0.05)
    mean_volume = float(recent.volume.mean()) if len(recent) else 1.0
    base_qty = max(mean_volume / 200.0, 10.0**-QUANTITY_DECIMALS * 10)
    seed = zlib.crc32(f"{symbol}|{int(series.timestamp_ms[-1])}".encode())
    rng = random.Random(seed)  # noqa: S311 - a deterministic book shape, not security
    qty_quant = Decimal(1).scaleb(-QUANTITY_DECIMALS)

    def level_qty(k: int) -> Decimal:
        size = base_qty * (1 + 0.15 * k) * (0.6 + 0.8 * rng.random())
        return max(Decimal(repr(size)).quantize(qty_quant), qty_quant)

    bids: list[BookLevel] = []
    asks: list[BookLevel] = []
    for k in range(limit):
        bid = _round(last - half_spread - k * step, tick, ROUND_FLOOR)
        ask = _round(last + half_spread + k * step, tick, ROUND_CEILING)
        if bids and bid >= bids[-1].price:
            bid = bids[-1].price - tick
        if asks and ask <= asks[-1].price:
            ask = asks[-1].price + tick
        if bid > 0:
            bids.append(BookLevel(bid, level_qty(k)))
        asks.append(BookLevel(ask, level_qty(k)))
    return OrderBook(symbol=symbol, timestamp_ms=now_ms, bids=tuple(bids), asks=tuple(asks),
                     synthetic=True)
