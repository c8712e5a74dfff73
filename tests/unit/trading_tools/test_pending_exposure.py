"""The Risk Guard counts what is pending: orders open at the broker and orders just accepted.

Issue 14's cases, through the real tools, paper broker and guard: three 19% market buys placed
within one bar used to end at 58% of equity under a 20% weight limit, and 11 positions opened the
same way under a limit of 10. Orders accepted in the same moment on a venue that is slow to answer
must add up as well.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from app.config.risk import MaxOpenPositionsConfig, RiskConfig
from app.exchange.paper import PaperBroker
from app.risk.config import build_guard
from app.risk.guard import MemoryDecisionRecorder, RiskGuard
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.protocol.render import ToolResult
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext
from app.tools.trade_tools import TradeTools
from app.trading.port import OrderRequest
from tests.helpers.orders import order_entry
from tests.helpers.scripted_market import make_scripted_broker, next_bar

D = Decimal


def _buy(symbol: str, quote: str) -> str:
    return (f"<create_order><symbol>{symbol}</symbol><side>BUY</side>"
            f"<quote_amount>{quote}</quote_amount></create_order>")


def _executor(broker: Any, guard: RiskGuard) -> ToolExecutor:
    tools = TradeTools(order_entry(broker, guard)).specs()
    return ToolExecutor(ToolRegistry(tools), MemoryRecorder())


def _run(executor: ToolExecutor, xml: str, agent: str = "trader-1") -> ToolResult:
    result = asyncio.run(executor.execute_text(AgentContext(agent), xml))
    assert result is not None
    return result


def test_three_19pct_market_buys_in_one_bar_stop_at_the_weight_limit() -> None:
    broker, market, _ = make_scripted_broker({"BTC/USDT": D(40_000)})
    executor = _executor(broker, build_guard(RiskConfig(), MemoryDecisionRecorder()))
    results = [_run(executor, _buy("BTC/USDT", "19000")) for _ in range(3)]
    assert [r.status for r in results] == ["success", "rejected", "rejected"]
    assert results[1].rule == "max_position_weight"
    assert "38.0% > limit 20.0%" in results[1].message
    next_bar(market, broker)
    [position] = asyncio.run(broker.positions())
    assert position.weight_pct <= 20


def test_eleven_buys_in_one_bar_open_no_more_than_ten_positions() -> None:
    symbols = {f"C{i:02d}/USDT": D(100) for i in range(11)}
    broker, market, _ = make_scripted_broker(symbols)
    executor = _executor(broker, build_guard(RiskConfig(), MemoryDecisionRecorder()))
    results = [_run(executor, _buy(symbol, "1000")) for symbol in symbols]
    assert [r.status for r in results] == ["success"] * 10 + ["rejected"]
    assert results[-1].rule == "max_open_positions"
    assert "11 open positions > limit 10 (0 held, counting 10 with open buy orders)" in (
        results[-1].message
    )
    next_bar(market, broker)
    assert len(asyncio.run(broker.positions())) == 10


class SlowVenue:
    """A paper broker behind a venue that answers an order only after ``answer`` is set, as a
    real exchange's acknowledgement arrives some time after the request."""

    def __init__(self, broker: PaperBroker) -> None:
        self._broker = broker
        self.answer: asyncio.Event | None = None  # made inside the loop that waits on it
        self.waiting = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    async def create_order(self, req: OrderRequest) -> Any:
        self.waiting += 1
        assert self.answer is not None
        await self.answer.wait()
        return await self._broker.create_order(req)


def test_orders_accepted_in_the_same_moment_add_up_before_the_venue_answers() -> None:
    broker, _, _ = make_scripted_broker(
        {f"C{i}/USDT": D(100) for i in range(3)} | {"BTC/USDT": D(40_000)}
    )
    venue = SlowVenue(broker)
    config = RiskConfig(max_open_positions=MaxOpenPositionsConfig(limit=2))
    executor = _executor(venue, build_guard(config, MemoryDecisionRecorder()))

    async def burst(calls: list[tuple[str, str]]) -> list[ToolResult]:
        venue.answer = asyncio.Event()
        tasks = [
            asyncio.create_task(executor.execute_text(AgentContext(agent), xml))
            for agent, xml in calls
        ]
        for _ in range(50):  # loop turns enough for every call to be refused or reach the venue
            await asyncio.sleep(0)
        assert venue.waiting + sum(t.done() for t in tasks) == len(tasks)
        venue.waiting = 0
        venue.answer.set()
        return [r for r in await asyncio.gather(*tasks) if r is not None]

    two_agents = asyncio.run(burst([
        ("trader-1", _buy("BTC/USDT", "15000")), ("trader-2", _buy("BTC/USDT", "15000")),
    ]))
    assert [r.status for r in two_agents] == ["success", "rejected"]
    assert two_agents[1].rule == "max_position_weight"
    assert len(asyncio.run(broker.open_orders())) == 1

    three_symbols = asyncio.run(burst([
        ("trader-1", _buy(f"C{i}/USDT", "1000")) for i in range(3)
    ]))
    assert [r.status for r in three_symbols] == ["success", "rejected", "rejected"]
    assert {r.rule for r in three_symbols[1:]} == {"max_open_positions"}
