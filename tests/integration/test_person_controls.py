"""The person's controls on a real workspace (SQLite, paper broker on the bundled replay): the
person's order goes through the Risk Guard and is recorded with the person as actor; Cancel and
Close act on any agent's order and position; Flatten all leaves nothing open; while the kill
switch is tripped new exposure is refused but closing still works."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal

import pytest

from app.domain.agents import PERSON_ID
from app.domain.clock import parse_time
from app.domain.kill_switch import TripCause
from app.domain.trading import OrderStatus
from app.events import EventBus
from app.runtime.controls import PersonControls
from app.runtime.ticket import read_ticket
from app.runtime.world import World
from app.tools.spec import AgentContext
from app.trading.agent_pnl import PnLTracker
from app.trading.closed_trades import closed_trades, totals_by_actor
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.helpers.eventually import eventually

HOUR_MS = 3_600_000


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def world(tmp_path, bus) -> Iterator[World]:
    rt = tool_world(Workspace(tmp_path), at_ms=parse_time("2019-10-10T00:00:00Z"), bus=bus)
    yield rt
    rt.close()


def controls(world: World, bus: EventBus) -> PersonControls:
    return PersonControls(world.executor, world.orders, bus)


async def agent_call(world: World, xml: str, agent: str = "trader-1") -> str:
    result = await world.executor.execute_text(AgentContext(agent), xml)
    assert result is not None and result.ok, result.xml
    return result.data[0].attr("order_id") or ""


def next_bar(world: World, hours: int = 1) -> None:
    world.venue.clock.advance_to(world.venue.clock.now_ms() + hours * HOUR_MS)
    world.venue.broker.settle()


async def limit_below(world: World, pct: str = "0.97") -> Decimal:
    last = await world.venue.broker.last_price("BTC/USD")
    return (last * Decimal(pct)).quantize(Decimal("0.01"))


def test_the_persons_order_passes_the_guard_and_is_recorded_as_the_persons(world, bus) -> None:
    async def scenario() -> None:
        person = controls(world, bus)
        price = await limit_below(world)
        ticket = read_ticket({"symbol": "BTC/USD", "side": "BUY", "kind": "LIMIT",
                              "amount": "0.01", "unit": "base", "price": str(price)})
        preview = await person.preview(ticket)
        assert preview.passes and any("Holds back" in line for line in preview.lines)
        before = len(world.ledger.risk_decisions())
        assert len(world.ledger.risk_decisions()) == before  # a preview records nothing
        outcome = await person.submit(ticket)
        assert outcome.ok and outcome.order_status == "SUBMITTED", outcome.text
        (order,) = await world.venue.broker.open_orders()
        assert order.agent_id == PERSON_ID and order.price == price
        (call,) = [c for c in world.ledger.tool_calls() if c["tool_name"] == "create_order"]
        assert call["agent_id"] == PERSON_ID and call["status"] == "success"
        decision = world.ledger.risk_decisions()[-1]
        assert decision["agent_id"] == PERSON_ID and decision["accepted"]

    asyncio.run(scenario())


def test_the_guard_refuses_the_persons_order_as_an_agents_with_its_reason(world, bus) -> None:
    async def scenario() -> None:
        person = controls(world, bus)
        # far more than max_order_notional allows (the default risk settings)
        ticket = read_ticket({"symbol": "BTC/USD", "side": "BUY", "kind": "MARKET",
                              "amount": "9000", "unit": "quote"})
        preview = await person.preview(ticket)
        assert preview.rule is not None and preview.refusal
        outcome = await person.submit(ticket)
        assert outcome.status == "rejected" and preview.rule in outcome.text
        assert await world.venue.broker.open_orders() == []
        decision = world.ledger.risk_decisions()[-1]
        assert decision["agent_id"] == PERSON_ID and not decision["accepted"]
        assert decision["rule"] == preview.rule

    asyncio.run(scenario())


def test_the_person_cancels_an_agents_order_and_the_audit_names_the_person(world, bus) -> None:
    async def scenario() -> None:
        person = controls(world, bus)
        price = await limit_below(world)
        order_id = await agent_call(
            world, "<create_order><symbol>BTC/USD</symbol><side>BUY</side><order_type>LIMIT"
            f"</order_type><price>{price}</price><quantity>0.01</quantity></create_order>")
        (order,) = await world.venue.broker.open_orders()
        outcome = await person.cancel(order)
        assert outcome.ok and outcome.order_id == order_id, outcome.text
        assert await world.venue.broker.open_orders() == []
        call = [c for c in world.ledger.tool_calls() if c["tool_name"] == "cancel_order"][-1]
        assert call["agent_id"] == PERSON_ID
        # an agent still may not cancel another agent's order
        again = await agent_call(
            world, "<create_order><symbol>BTC/USD</symbol><side>BUY</side><order_type>LIMIT"
            f"</order_type><price>{price}</price><quantity>0.01</quantity></create_order>")
        result = await world.executor.execute_text(
            AgentContext("analyst-1"),
            f"<cancel_order><symbol>BTC/USD</symbol><order_id>{again}</order_id></cancel_order>")
        assert result is not None and not result.ok and "belongs to agent" in result.message

    asyncio.run(scenario())


def test_flatten_all_leaves_no_open_order_and_no_position(world, bus) -> None:
    async def scenario() -> None:
        person = controls(world, bus)
        await agent_call(world, "<create_order><symbol>BTC/USD</symbol><side>BUY</side>"
                                "<quote_amount>1500</quote_amount></create_order>")
        next_bar(world)
        held = world.venue.broker.position_size("BTC/USD")
        assert held > 0
        high = (await world.venue.broker.last_price("BTC/USD") * Decimal("1.2")).quantize(
            Decimal("0.01"))
        # the agent's plain sell holds back part of the position, its TP/SL the rest
        await agent_call(world, "<create_order><symbol>BTC/USD</symbol><side>SELL</side>"
                                f"<order_type>LIMIT</order_type><price>{high}</price>"
                                f"<quantity>{(held / 2).quantize(Decimal('0.0001'))}</quantity>"
                                "</create_order>")
        await agent_call(world, "<create_order><symbol>BTC/USD</symbol><side>BUY</side>"
                                f"<order_type>LIMIT</order_type><price>{await limit_below(world)}"
                                "</price><quantity>0.01</quantity></create_order>", "trader-2")
        plan = await person.flatten_plan()
        assert len(plan.orders) == 2 and [p.symbol for p in plan.positions] == ["BTC/USD"]
        outcomes = await person.flatten()
        assert all(o.ok for o in outcomes), [o.text for o in outcomes]
        next_bar(world)  # the market close fills at the next bar's open
        assert await world.venue.broker.open_orders() == []
        assert await world.venue.broker.positions() == []
        # on paper the close is the person's market sell (its exits stayed until it filled)
        stored = {r.order.agent_id: r.order.status for r in world.ledger.load().orders
                  if r.order.reason == "closed by the person"}
        assert stored == {PERSON_ID: OrderStatus.FILLED}
        trades = closed_trades(await world.venue.broker.trades(None, None))
        (trade,) = trades
        assert trade.opened_by == "trader-1" and trade.closed_by == (PERSON_ID,)
        assert totals_by_actor(trades)["trader-1"].pnl == trade.pnl

    asyncio.run(scenario())


def test_with_the_kill_switch_tripped_closing_works_and_new_exposure_does_not(
    world, bus
) -> None:
    async def scenario() -> None:
        person = controls(world, bus)
        await agent_call(world, "<create_order><symbol>BTC/USD</symbol><side>BUY</side>"
                                "<quote_amount>1000</quote_amount></create_order>")
        next_bar(world)
        assert world.kill_log is not None
        now = world.venue.clock.now_ms()
        world.kill_log.trip(cause=TripCause.MANUAL, cause_key="", reason="testing", by="tests",
                            tripped_ms=now, market_ms=now)
        buy = read_ticket({"symbol": "BTC/USD", "side": "BUY", "kind": "MARKET",
                           "amount": "0.01", "unit": "base"})
        assert (await person.preview(buy)).rule == "kill_switch"
        refused = await person.submit(buy)
        assert refused.status == "rejected" and "kill_switch" in refused.text
        last = await world.venue.broker.last_price("BTC/USD")
        exits = read_ticket({"symbol": "BTC/USD", "kind": "TP_SL",
                             "stop_loss": str((last * Decimal("0.9")).quantize(Decimal("0.01")))})
        assert (await person.preview(exits)).passes
        assert (await person.submit(exits)).ok
        closed = await person.close("BTC/USD")
        assert closed.ok, closed.text
        next_bar(world)
        assert await world.venue.broker.positions() == []
        assert await world.venue.broker.open_orders() == []  # the stop went with the position

    asyncio.run(scenario())


def test_tp_and_sl_of_a_buy_ticket_are_placed_once_the_buy_fills(world, bus) -> None:
    async def scenario() -> None:
        person = controls(world, bus)
        last = await world.venue.broker.last_price("BTC/USD")
        tp, sl = (last * Decimal("1.5")).quantize(Decimal("0.01")), (
            last * Decimal("0.5")).quantize(Decimal("0.01"))
        ticket = read_ticket({"symbol": "BTC/USD", "side": "BUY", "kind": "MARKET",
                              "amount": "0.01", "unit": "base", "take_profit": str(tp),
                              "stop_loss": str(sl)})
        outcome = await person.submit(ticket)
        assert outcome.ok and outcome.order_id in person.pending_exits
        next_bar(world)
        await eventually(lambda: person.exit_outcomes)  # the fill's event places the exits
        (placed,) = person.exit_outcomes
        assert placed.ok, placed.text
        exits = {o.exit_kind.value: o for o in await world.venue.broker.open_orders()}
        assert exits["TAKE_PROFIT"].price == tp and exits["STOP_LOSS"].stop_price == sl
        assert {o.agent_id for o in exits.values()} == {PERSON_ID}
        assert not person.pending_exits

    asyncio.run(scenario())


def test_an_agents_lot_closed_by_the_person_is_the_agents_pnl_in_the_list_and_closed_trades(
    world, bus
) -> None:
    """Whose position is it: the agent list and Closed trades attribute each lot's P&L to its
    owner by one rule, whoever sold it (here the person's Close sold both lots)."""
    async def scenario() -> None:
        person = controls(world, bus)
        buy = read_ticket({"symbol": "BTC/USD", "side": "BUY", "kind": "MARKET",
                           "amount": "0.05", "unit": "base"})
        assert (await person.submit(buy)).ok
        await agent_call(world, "<create_order><symbol>BTC/USD</symbol><side>BUY</side>"
                                "<quantity>0.03</quantity></create_order>")
        next_bar(world)
        next_bar(world, 6)
        assert (await person.close("BTC/USD")).ok
        next_bar(world)
        fills = await world.venue.broker.trades(None, None)
        by_owner = totals_by_actor(closed_trades(fills))
        tracker = PnLTracker(world.venue.broker, world.venue.broker.last_price)
        listed = await tracker.update()
        assert set(by_owner) == {"person", "trader-1"}
        for owner, totals in by_owner.items():
            assert listed[owner].realized == totals.pnl, owner
        assert listed["trader-1"].fills == 1  # its buy; the sale of its lot was the person's
        cash = world.venue.broker.ledger.load().balances["USD"]
        assert sum((t.pnl for t in by_owner.values()), Decimal(0)) == cash - Decimal(10_000)

    asyncio.run(scenario())
