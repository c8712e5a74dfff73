"""``sma_cross`` decisions, driven through a real executor over hand-written fake tools."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest

from app.backtest.sma_cross import SmaCross
from app.backtest.strategy import BarContext, StrategyError
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.protocol.render import Element, el
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext, ParamSpec, ParamType, Permission, ToolSpec

SYMBOL = ParamSpec("symbol", ParamType.STRING, "symbol", required=True)


@dataclass
class FakeExchange:
    """Closes per symbol, revealed one per step; orders are recorded, positions follow them."""

    closes: dict[str, list[float]]
    cash: Decimal = Decimal(1000)
    step: int = 0
    held: set[str] = field(default_factory=set)
    orders: list[tuple[int, str, str, str]] = field(default_factory=list)

    def registry(self) -> ToolRegistry:
        async def klines(ctx: AgentContext, args: dict[str, Any]) -> Element:
            seen = self.closes[args["symbol"]][: self.step + 1]
            rows = seen[-args["limit"]:]
            first = len(seen) - len(rows)
            return el("klines_data", None, *(
                el("kline", None, timestamp_ms=(first + i) * 1000, close=Decimal(str(c)))
                for i, c in enumerate(rows)
            ))

        async def positions(ctx: AgentContext, args: dict[str, Any]) -> Element:
            return el("positions", None, *(el("position", None, symbol=s, size=Decimal(1))
                                           for s in sorted(self.held)))

        async def balance(ctx: AgentContext, args: dict[str, Any]) -> Element:
            return el("account_balance", None, cash=self.cash)

        async def create(ctx: AgentContext, args: dict[str, Any]) -> Element:
            self.orders.append((self.step, "BUY", args["symbol"], str(args["quote_amount"])))
            self.held.add(args["symbol"])
            return el("order_created", None, order_id="1")

        async def close(ctx: AgentContext, args: dict[str, Any]) -> Element:
            self.orders.append((self.step, "CLOSE", args["symbol"], ""))
            self.held.discard(args["symbol"])
            return el("order_created", None, order_id="2")

        def spec(name: str, handler: Any, *params: ParamSpec) -> ToolSpec:
            return ToolSpec(name, "test", name, params, Permission.MARKET, handler)

        return ToolRegistry([
            spec("get_historical_klines", klines, SYMBOL,
                 ParamSpec("interval", ParamType.STRING, "i", required=True),
                 ParamSpec("limit", ParamType.INTEGER, "n", default=100)),
            spec("get_open_positions", positions),
            spec("get_account_balance", balance),
            spec("create_order", create, SYMBOL,
                 ParamSpec("side", ParamType.STRING, "s"),
                 ParamSpec("order_type", ParamType.STRING, "t"),
                 ParamSpec("quote_amount", ParamType.DECIMAL, "q"),
                 ParamSpec("reason", ParamType.STRING, "r")),
            spec("close_position", close, SYMBOL),
        ])

    async def run(self, strategy: SmaCross) -> None:
        executor = ToolExecutor(self.registry(), MemoryRecorder())
        symbols = tuple(self.closes)
        steps = len(next(iter(self.closes.values())))
        for step in range(steps):
            self.step = step
            await strategy.on_bar(BarContext(
                now_ms=(step + 1) * 1000, step=step, closed=symbols, symbols=symbols,
                intervals={s: "1h" for s in symbols}, agent=AgentContext("t"), executor=executor,
            ))


def test_buys_on_the_bar_the_fast_sma_crosses_above_and_closes_on_the_cross_below() -> None:
    # fast=1 (the close itself), slow=3
    closes = [10, 10, 10, 9, 8, 12, 13, 14, 9, 8, 8]
    exchange = FakeExchange({"A/USDT": closes})
    asyncio.run(exchange.run(SmaCross(fast=1, slow=3)))
    assert [(s, side) for s, side, _, _ in exchange.orders] == [(5, "BUY"), (8, "CLOSE")]
    assert exchange.orders[0][3] == "1000"


def test_touching_without_crossing_is_not_a_signal() -> None:
    closes = [10, 10, 10, 10, 10, 10, 10, 10]  # fast == slow throughout
    exchange = FakeExchange({"A/USDT": closes})
    asyncio.run(exchange.run(SmaCross(fast=1, slow=3)))
    assert exchange.orders == []


def test_cash_is_split_among_the_symbols_that_are_flat() -> None:
    up = [10, 10, 10, 9, 8, 12, 13, 14]
    exchange = FakeExchange({"A/USDT": up, "B/USDT": up})
    asyncio.run(exchange.run(SmaCross(fast=1, slow=3)))
    assert [o[3] for o in exchange.orders] == ["500", "1000"]  # B sees cash split by 1 flat


def test_fast_must_be_shorter_than_slow() -> None:
    with pytest.raises(ValueError, match="fast < slow"):
        SmaCross(fast=30, slow=10)
    with pytest.raises(ValueError, match="at most 999"):
        SmaCross(fast=5, slow=1500)


def test_a_plain_text_reply_is_refused_by_the_context() -> None:
    exchange = FakeExchange({"A/USDT": [1.0]})
    ctx = BarContext(now_ms=1, step=0, closed=(), symbols=(), intervals={},
                     agent=AgentContext("t"),
                     executor=ToolExecutor(exchange.registry(), MemoryRecorder()))
    with pytest.raises(StrategyError, match="not a tool call"):
        asyncio.run(ctx.call("just words"))
