"""The person's controls on both brokers: the same calls, through the same trade tools and Risk
Guard, work on the paper broker and on CcxtBroker against the fake Binance (offline): the person
cancels an agent's order, buys, closes (straight after the fill, which a live broker's cached
balances have not seen yet), and the closed trade is theirs."""

from __future__ import annotations

from decimal import Decimal

from app.config.risk import RiskConfig
from app.domain.agents import PERSON_ID
from app.risk.config import build_guard
from app.risk.guard import MemoryDecisionRecorder
from app.runtime.controls import PersonControls
from app.runtime.ticket import read_ticket
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.registry import ToolRegistry
from app.tools.trade_tools import TradeTools
from app.trading.closed_trades import closed_trades
from tests.helpers.orders import order_entry
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)
from tests.integration.test_broker_contract import (  # noqa: F401 - the fixture
    SYMBOL,
    ContractVenue,
    go_fixture,
)


def test_the_person_cancels_buys_and_closes_on_either_broker(go) -> None:
    async def scenario(venue: ContractVenue) -> None:
        broker = venue.broker
        decisions = MemoryDecisionRecorder()
        guard = build_guard(RiskConfig(), decisions)
        calls = MemoryRecorder()
        orders = order_entry(broker, guard)
        executor = ToolExecutor(ToolRegistry(TradeTools(orders).specs()), calls)
        person = PersonControls(executor, orders)

        agents_order = await broker.create_order(await venue.limit_far_below("agent-1"))
        cancelled = await person.cancel(agents_order)
        assert cancelled.ok, cancelled.text
        assert agents_order.order_id not in {o.order_id for o in await broker.open_orders()}

        bought = await person.submit(read_ticket({
            "symbol": SYMBOL, "side": "BUY", "kind": "MARKET", "amount": "0.01",
            "unit": "base"}))
        assert bought.ok, bought.text
        await venue.advance()
        # closed at once, nothing read in between: a live broker's cached balances have not
        # seen the fill yet, and the close must still find the position
        closed = await person.close(SYMBOL)
        assert closed.ok, closed.text
        await venue.advance()
        assert await broker.positions(SYMBOL) == []

        assert {c.agent_id for c in calls.entries} == {PERSON_ID}
        # where exits share the coins (paper) the close is a market sell that leaves them
        # resting until it fills; where they lock the coins, close_position cancels them first
        close = "create_order" if person.keeps_exits_while_closing(SYMBOL) else "close_position"
        assert [c.tool_name for c in calls.entries] == ["cancel_order", "create_order", close]
        assert all(d.agent_id == PERSON_ID and d.accepted for d in decisions.decisions)
        (trade,) = closed_trades(await broker.trades(None, None))
        assert trade.opened_by == PERSON_ID and trade.closed_by == (PERSON_ID,)
        assert trade.quantity == Decimal("0.01")

    go(scenario)
