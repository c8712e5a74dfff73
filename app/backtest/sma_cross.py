"""``sma_cross``: long when the fast SMA of closes crosses above the slow one, flat below it.

It sees the market only through ``get_historical_klines`` and trades only through
``get_open_positions``, ``get_account_balance``, ``create_order`` (``quote_amount``) and
``close_position``, all sent as XML through the executor, so every step pays the full tool path.

Why klines and not ``calculate_technical_indicator``: an SMA only needs the newest close, so the
strategy asks for the newest candle at each step where its symbol closed one (the whole window on
the first call) and keeps the window itself; an indicator call would compute or slice a whole
series per step for the same number. The window sum uses ``math.fsum`` over the last ``slow``
closes, so the values are the exact rolling means the peers compute, and a cross is decided on the
same numbers.

A cross is strict on both bars, as in backtesting.py's ``crossover``: fast[t-1] < slow[t-1] and
fast[t] > slow[t]. All-in: cash is split equally among the symbols that are flat at the moment of
the signal; all-out: the whole position is closed.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from itertools import islice
from xml.sax.saxutils import escape

from app.backtest.strategy import BarContext, StrategyError
from app.tools.protocol.render import ToolResult


@lru_cache(maxsize=256)
def _klines_request(symbol: str, interval: str, limit: int) -> str:
    """The strategy's own request text: the same few strings every bar, so written once each."""
    return (
        f"<get_historical_klines><symbol>{escape(symbol)}</symbol>"
        f"<interval>{escape(interval)}</interval><limit>{limit}</limit>"
        "</get_historical_klines>"
    )


@dataclass
class _SymbolState:
    closes: deque[float]
    last_ms: int = -1
    prev_fast: float | None = None
    prev_slow: float | None = None


@dataclass
class SmaCross:
    """Fast/slow simple moving average crossover, all-in / all-out, long only."""

    fast: int = 10
    slow: int = 30
    name: str = "sma_cross"
    failures: list[str] = field(default_factory=list, init=False, repr=False)
    _state: dict[str, _SymbolState] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.fast < self.slow:
            raise ValueError(
                f"sma_cross needs 1 <= fast < slow, got fast={self.fast}, slow={self.slow}"
            )
        if self.slow > 999:
            raise ValueError(f"sma_cross slow period must be at most 999, got {self.slow}")

    def parameters(self) -> dict[str, object]:
        return {"fast": self.fast, "slow": self.slow}

    async def on_bar(self, ctx: BarContext) -> None:
        for symbol in ctx.closed:
            signal = await self._update(ctx, symbol)
            if signal is not None:
                await self._act(ctx, symbol, signal)

    async def _update(self, ctx: BarContext, symbol: str) -> str | None:
        state = self._state.get(symbol)
        first = state is None
        if state is None:
            state = self._state[symbol] = _SymbolState(closes=deque(maxlen=self.slow))
        limit = self.slow + 1 if first else 1
        result = await ctx.call(_klines_request(symbol, ctx.intervals[symbol], limit))
        if not result.ok:
            self.failures.append(result.message)
            return None
        signal = None
        for kline in result.data[0].children:
            stamp = int(kline.attr("timestamp_ms") or -1)
            if stamp <= state.last_ms:
                continue
            state.last_ms = stamp
            state.closes.append(float(kline.attr("close") or "nan"))
            signal = self._cross(state)
        return signal

    def _cross(self, state: _SymbolState) -> str | None:
        closes = state.closes
        if len(closes) < self.slow:
            return None
        slow = math.fsum(closes) / self.slow
        fast = math.fsum(islice(closes, self.slow - self.fast, None)) / self.fast
        prev_fast, prev_slow = state.prev_fast, state.prev_slow
        state.prev_fast, state.prev_slow = fast, slow
        if prev_fast is None or prev_slow is None:
            return None
        if prev_fast < prev_slow and fast > slow:
            return "buy"
        if prev_fast > prev_slow and fast < slow:
            return "sell"
        return None

    async def _act(self, ctx: BarContext, symbol: str, signal: str) -> None:
        held = await self._held_symbols(ctx)
        if signal == "sell":
            if symbol in held:
                self._check(await ctx.call(
                    f"<close_position><symbol>{escape(symbol)}</symbol></close_position>"
                ))
            return
        if symbol in held:
            return
        balance = await ctx.call("<get_account_balance></get_account_balance>")
        if not self._check(balance):
            return
        cash = Decimal(balance.data[0].attr("cash") or "0")
        flat = max(len([s for s in ctx.symbols if s not in held]), 1)
        spend = cash / flat
        if spend <= 0:
            return
        self._check(await ctx.call(
            f"<create_order><symbol>{escape(symbol)}</symbol><side>BUY</side>"
            f"<order_type>MARKET</order_type><quote_amount>{spend:f}</quote_amount>"
            f"<reason>SMA {self.fast} crossed above SMA {self.slow}</reason></create_order>"
        ))

    async def _held_symbols(self, ctx: BarContext) -> set[str]:
        result = await ctx.call("<get_open_positions></get_open_positions>")
        if not self._check(result):
            raise StrategyError(f"cannot read positions: {result.message}")
        return {
            p.attr("symbol") or ""
            for p in result.data[0].children
            if Decimal(p.attr("size") or "0") != 0
        }

    def _check(self, result: ToolResult) -> bool:
        if not result.ok:
            self.failures.append(f"{result.tool_name}: {result.status}: {result.message}")
        return result.ok
