"""Order entry on a paper account: the approval policy, the kill switch's entry block, lots with
an owner, and idempotency as asked, each decided once, in order, for every front."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from decimal import Decimal

import pytest

from app.config.approval import ApprovalSettings
from app.config.risk import AllowedSymbolsConfig, RiskConfig
from app.domain.agents import PERSON_ID
from app.domain.errors import APPROVAL_RULE, AccessDeniedError, InvalidOrderError, RiskRejection
from app.domain.kill_switch import Trip, TripCause
from app.domain.trading import Mode, OrderType, Side
from app.risk.config import build_guard
from app.risk.guard import MemoryDecisionRecorder
from app.trading.approval import ApprovalNeeded
from app.trading.entry import Caller, OrderAsk, OrderEntry
from tests.helpers.orders import order_entry
from tests.unit.exchange.support import SYMBOL, Rig, make_rig
from tests.unit.risk.factories import NOON_MS

TRADER = Caller("trader", task_id="t1", call_key="t1:1")
PERSON = Caller(PERSON_ID)
TRIP = Trip(trip_id=7, cause=TripCause.MANUAL, cause_key="", reason="the model is misbehaving",
            by="the person in the Kestrel window", tripped_ms=NOON_MS + 5_000, market_ms=NOON_MS)


@dataclass
class Desk:
    """Order entry on a paper account of daily BTC/USDT candles, and the guard's decisions."""

    entry: OrderEntry
    rig: Rig
    decisions: MemoryDecisionRecorder


def _desk(*, mode: Mode = Mode.BACKTEST, config: RiskConfig | None = None, **options) -> Desk:
    rig = make_rig(visible=1, mode=mode)
    recorder = MemoryDecisionRecorder()
    entry = order_entry(rig.broker, build_guard(config or RiskConfig(), recorder), **options)
    return Desk(entry, rig, recorder)


def buy(quantity: str | None = "0.1", **kwargs) -> OrderAsk:
    quote = kwargs.pop("quote_amount", None)
    return OrderAsk(SYMBOL, Side.BUY, quantity=None if quantity is None else Decimal(quantity),
                    quote_amount=None if quote is None else Decimal(quote), **kwargs)


def sell(quantity: str) -> OrderAsk:
    return OrderAsk(SYMBOL, Side.SELL, quantity=Decimal(quantity))


def test_every_live_order_of_an_agent_waits_for_the_person_and_the_person_s_own_does_not():
    desk = _desk(mode=Mode.LIVE)
    entry = desk.entry
    with pytest.raises(ApprovalNeeded) as held:
        asyncio.run(entry.place(TRADER, buy()))
    assert held.value.rule == APPROVAL_RULE
    assert "approval.live_orders" in held.value.policy_reason
    assert desk.rig.ledger.load().orders == []
    assert asyncio.run(entry.place(PERSON, buy())).agent_id == PERSON_ID
    approved = Caller("trader", task_id="t1", call_key="t1:1", approved=True)
    assert asyncio.run(entry.place(approved, buy())).agent_id == "trader"


@pytest.mark.parametrize(("ask", "waits"), [
    (buy(None, quote_amount="1500"), True),  # spend stated in quote currency
    (buy(None, quote_amount="900"), False),
    (buy("0.2"), True),  # market order: quantity x the last price (7195.24)
    (buy("0.1"), False),
    (buy("0.1", order_type=OrderType.LIMIT, price=Decimal("11000")), True),  # its limit price
])
def test_an_agent_s_order_above_the_quote_limit_waits_with_its_worth_stated(ask, waits):
    desk = _desk(approval=ApprovalSettings(above_quote=Decimal(1000)))
    entry = desk.entry
    if not waits:
        asyncio.run(entry.place(TRADER, ask))
        return
    with pytest.raises(ApprovalNeeded) as held:
        asyncio.run(entry.place(TRADER, ask))
    assert "above your limit of 1,000" in held.value.reason
    assert "approval.above_quote" in held.value.reason


def test_the_first_order_in_a_symbol_never_traded_waits_when_asked_for():
    desk = _desk(approval=ApprovalSettings(new_symbols=True), traded_symbols=set)
    entry = desk.entry
    with pytest.raises(ApprovalNeeded, match="BTC/USDT has never been traded"):
        asyncio.run(entry.place(TRADER, buy()))
    traded = _desk(approval=ApprovalSettings(new_symbols=True),
                   traded_symbols=lambda: {SYMBOL}).entry
    asyncio.run(traded.place(TRADER, buy()))


def test_an_external_agent_that_nobody_can_approve_is_refused_saying_so():
    desk = _desk(mode=Mode.LIVE)
    entry = desk.entry
    external = Caller("mcp-client", can_ask=False)
    with pytest.raises(RiskRejection) as caught:
        asyncio.run(entry.place(external, buy()))
    assert caught.value.rule == APPROVAL_RULE
    assert "kestrel mcp-serve cannot be approved" in caught.value.reason


def test_while_the_switch_is_tripped_no_entry_passes_and_the_refusal_says_when_why_and_who():
    desk = _desk(halted=lambda: TRIP, config=RiskConfig(
        allowed_symbols=AllowedSymbolsConfig(symbols=("ETH/USDT",))))
    entry = desk.entry
    with pytest.raises(RiskRejection) as caught:
        asyncio.run(entry.place(PERSON, buy("5")))  # funds and symbol would refuse it too
    refusal = caught.value
    assert refusal.rule == "kill_switch"
    assert "2023-11-15 12:00:05 UTC" in refusal.reason
    assert "the person in the Kestrel window" in refusal.reason
    assert "the model is misbehaving" in refusal.reason
    assert "resets it in the Kestrel window" in refusal.reason
    assert refusal.details["tripped_by"] == "the person in the Kestrel window"
    assert refusal.details["cause"] == "manual"
    assert [(d.accepted, d.rule) for d in desk.decisions.decisions] == [(False, "kill_switch")]


def test_closing_and_protecting_a_lot_pass_a_tripped_switch():
    trip: list[Trip] = []
    desk = _desk(halted=lambda: trip[0] if trip else None)
    entry = desk.entry
    asyncio.run(entry.place(TRADER, buy("0.2")))
    desk.rig.step()
    trip.append(TRIP)
    exits = asyncio.run(entry.set_exits(TRADER, SYMBOL, None, Decimal("6000")))
    assert exits.stop_loss is not None
    closed = asyncio.run(entry.close(TRADER, SYMBOL))
    assert closed.quantity == Decimal("0.2")


def test_an_agent_closes_and_protects_its_own_lot_only():
    desk = _desk()
    entry = desk.entry
    asyncio.run(entry.place(PERSON, buy("0.15")))
    asyncio.run(entry.place(TRADER, buy("0.1")))
    desk.rig.step()
    exits = asyncio.run(entry.set_exits(TRADER, SYMBOL, Decimal("9000"), Decimal("6000")))
    assert exits.stop_loss.quantity == exits.take_profit.quantity == Decimal("0.1")
    closed = asyncio.run(entry.close(TRADER, SYMBOL))
    assert closed.quantity == Decimal("0.1")
    desk.rig.step()
    lots = asyncio.run(entry.broker.lots(SYMBOL))
    assert [(lot.owner, lot.size) for lot in lots] == [(PERSON_ID, Decimal("0.15"))]
    with pytest.raises(InvalidOrderError, match="holds no BTC/USDT lot of its own"):
        asyncio.run(entry.close(TRADER, SYMBOL))


def test_an_agent_s_sell_of_the_person_s_lot_waits_for_the_person():
    desk = _desk()
    entry = desk.entry
    asyncio.run(entry.place(PERSON, buy("0.15")))
    asyncio.run(entry.place(TRADER, buy("0.1")))
    desk.rig.step()
    with pytest.raises(ApprovalNeeded) as held:
        asyncio.run(entry.place(Caller("trader", task_id="t2", call_key="t2:1"), sell("0.2")))
    assert "sells 0.2 BTC where this agent's own lot is 0.1" in held.value.policy_reason
    assert "the person 0.15" in held.value.policy_reason
    asyncio.run(entry.place(Caller("trader", task_id="t3", call_key="t3:1"), sell("0.1")))


def test_the_person_s_close_sells_every_lot():
    desk = _desk()
    entry = desk.entry
    asyncio.run(entry.place(PERSON, buy("0.15")))
    asyncio.run(entry.place(TRADER, buy("0.1")))
    desk.rig.step()
    assert asyncio.run(entry.close(PERSON, SYMBOL)).quantity == Decimal("0.25")


def test_a_repeated_call_by_quote_amount_is_the_same_order_after_the_price_moved():
    desk = _desk()
    entry = desk.entry
    first = asyncio.run(entry.place(TRADER, buy(None, quote_amount="500",
                                                client_order_id="m1")))
    desk.rig.step()  # the price moves: 500 USDT buys another quantity now
    again = asyncio.run(entry.place(Caller("trader", task_id="t1", call_key="t1:2"),
                                    buy(None, quote_amount="500", client_order_id="m1")))
    assert again.order_id == first.order_id
    assert len(desk.rig.ledger.load().orders) == 1


def test_a_later_step_that_repeats_the_order_word_for_word_is_refused_naming_the_order():
    desk = _desk()
    entry = desk.entry
    placed = asyncio.run(entry.place(TRADER, buy()))
    later = Caller("trader", task_id="t1", call_key="t1:3")
    with pytest.raises(InvalidOrderError, match=placed.order_id) as caught:
        asyncio.run(entry.place(later, buy()))
    assert caught.value.details["reason"] == "repeated_in_task"
    another_task = Caller("trader", task_id="t9", call_key="t9:1")
    assert asyncio.run(entry.place(another_task, buy())).order_id != placed.order_id


def test_the_preview_takes_the_steps_placing_takes_without_sending_or_recording():
    desk = _desk(approval=ApprovalSettings(above_quote=Decimal(1000)))
    entry = desk.entry
    review = asyncio.run(entry.preview(TRADER, buy("0.2")))
    assert review.rule == APPROVAL_RULE and "above your limit" in (review.refusal or "")
    assert asyncio.run(entry.preview(PERSON, buy("0.2"))).passes
    assert asyncio.run(entry.preview(PERSON, buy("50"))).error is not None  # funds
    assert desk.rig.ledger.load().orders == [] and desk.decisions.decisions == []


def test_the_person_moves_a_resting_limit_in_one_step_and_it_rests_at_the_new_price():
    desk = _desk()
    entry = desk.entry
    placed = asyncio.run(entry.place(PERSON, buy("0.1", order_type=OrderType.LIMIT,
                                                 price=Decimal("6500"))))
    moved = asyncio.run(entry.modify(PERSON, SYMBOL, placed.order_id, price=Decimal("6600")))
    assert moved.order_id != placed.order_id and moved.price == Decimal("6600")
    open_now = asyncio.run(desk.rig.broker.open_orders())
    assert [(o.order_id, o.price) for o in open_now] == [(moved.order_id, Decimal("6600"))]
    assert moved.agent_id == PERSON_ID


def test_moving_an_agents_stop_loss_keeps_its_take_profit_and_another_agent_may_not():
    desk = _desk()
    entry = desk.entry
    asyncio.run(entry.place(TRADER, buy("0.1")))
    desk.rig.step()
    exits = asyncio.run(entry.set_exits(TRADER, SYMBOL, Decimal("9000"), Decimal("6000")))
    assert exits.stop_loss is not None
    with pytest.raises(AccessDeniedError):
        asyncio.run(entry.modify(Caller("other"), SYMBOL, exits.stop_loss.order_id,
                                 stop_price=Decimal("6100")))
    moved = asyncio.run(entry.modify(PERSON, SYMBOL, exits.stop_loss.order_id,
                                     stop_price=Decimal("6200")))
    assert moved.stop_price == Decimal("6200") and moved.agent_id == "trader"
    kinds = {(o.exit_kind.value, o.price or o.stop_price)
             for o in asyncio.run(desk.rig.broker.open_orders("trader"))}
    assert kinds == {("TAKE_PROFIT", Decimal("9000")), ("STOP_LOSS", Decimal("6200"))}
