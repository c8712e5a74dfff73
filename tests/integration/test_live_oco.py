"""A take profit and a stop loss on one live Binance spot position, as one OCO order list.

Binance locks the coins of a resting sell, so two separate exits cannot both hold a position:
the second is refused for insufficient balance. The broker places them as one OCO list
(``app.ccxt.oco``) against the fake Binance's ``POST /api/v3/orderList/oco``: journaled before
it is sent, its outcome sorted like a single order's, never sent twice.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from app.ccxt.outcome import OrderOutcomeUnknownError
from app.domain.errors import ErrorCode, InvalidOrderError, ToolError
from app.domain.trading import ExitKind, OrderStatus, OrderType, Side
from app.runtime.controls import PersonControls
from app.runtime.ticket import read_ticket
from app.runtime.world import World
from app.store.order_journal import JournalState
from app.trading.entry import OCO_LINE
from app.trading.port import OrderRequest
from tests.helpers.eventually import eventually
from tests.helpers.fake_exchange import FakeExchangeServer, Fault
from tests.helpers.fake_exchange.account import Refused
from tests.helpers.fake_exchange.broker import (
    assert_journal_matches_exchange,
    close_broker,
    open_broker,
    reconciler,
)
from tests.helpers.fake_exchange.live import (
    call,
    grant,
    market_buy,
    run_live,
    trader,
)
from tests.helpers.fake_exchange.oco import create_oco
from tests.helpers.fake_exchange.tape import MINUTE
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
AGENT = "trader-1"
CENT = Decimal("0.01")
HELD = Decimal("0.00999")  # 0.01 bought, less the 0.1% fee taken in BTC


@pytest.fixture(name="venue")
def venue_fixture(server):
    server.binance_account.reset()
    return server


def price_at(server: FakeExchangeServer, ms: int) -> Decimal:
    return Decimal(str(server.state.market("BTC/USDT").tape.last_price(ms)))


def tp_reached(server: FakeExchangeServer) -> tuple[Decimal, Decimal, int]:
    """A take profit above the last price that the tape reaches within two days, a stop loss
    below every price until then, and the minute it is reached."""
    now = server.now.now_ms()
    last = price_at(server, now)
    path = [(now + k * MINUTE, price_at(server, now + k * MINUTE)) for k in range(1, 2880)]
    peak = max(p for _, p in path)
    assert peak > last * Decimal("1.002"), "the tape never rises: pick another start"
    tp = ((last + peak) / 2).quantize(CENT)
    when = next(t for t, p in path if p >= tp)
    low = min(p for t, p in path if t <= when)
    return tp, (min(low, last) * Decimal("0.97")).quantize(CENT), when


def sl_reached(server: FakeExchangeServer) -> tuple[Decimal, Decimal, int]:
    """A stop loss below the last price that the tape falls to within two days, a take profit
    above every price until then, and the minute the stop is touched."""
    now = server.now.now_ms()
    last = price_at(server, now)
    path = [(now + k * MINUTE, price_at(server, now + k * MINUTE)) for k in range(1, 2880)]
    trough = min(p for _, p in path)
    assert trough < last * Decimal("0.998"), "the tape never falls: pick another start"
    sl = ((last + trough) / 2).quantize(CENT)
    when = next(t for t, p in path if p <= sl)
    high = max(p for t, p in path if t <= when)
    return (max(high, last) * Decimal("1.03")).quantize(CENT), sl, when


def exits(tp: Decimal, sl: Decimal, key: str = "k-oco:1") -> tuple[OrderRequest, OrderRequest]:
    return (
        OrderRequest(AGENT, "BTC/USDT", Side.SELL, OrderType.LIMIT, HELD, price=tp,
                     reduce_only=True, exit_kind=ExitKind.TAKE_PROFIT, reason="take profit",
                     client_order_id=f"{key}:tp"),
        OrderRequest(AGENT, "BTC/USDT", Side.SELL, OrderType.STOP, HELD, stop_price=sl,
                     reduce_only=True, exit_kind=ExitKind.STOP_LOSS, reason="stop loss",
                     client_order_id=f"{key}:sl"),
    )


def run(server, tmp_path, scenario):
    async def main():
        broker, market = await open_broker(server, tmp_path / "kestrel.db")
        try:
            await reconciler(broker, server).startup()  # the balance baseline
            bought = await broker.create_order(OrderRequest(
                AGENT, "BTC/USDT", Side.BUY, OrderType.MARKET, Decimal("0.01"),
                client_order_id="k-buy:1"))
            assert bought.status is OrderStatus.FILLED
            return await scenario(broker)
        finally:
            await close_broker(broker, market)

    return asyncio.run(main())


def open_on_exchange(server: FakeExchangeServer) -> dict[str, str]:
    with server.binance_account.lock:
        return {o.type: o.status for o in server.binance_account.orders if o.side == "SELL"}


def test_a_take_profit_and_a_stop_loss_are_one_oco_list_holding_the_coins_once(
    venue, tmp_path
):
    async def scenario(broker):
        tp, sl, _ = tp_reached(venue)
        assert broker.abilities("BTC/USDT").oco
        take, stop = await broker.create_oco(*exits(tp, sl))
        assert take.status is OrderStatus.SUBMITTED and take.price == tp
        assert stop.order_type is OrderType.STOP_LIMIT and stop.stop_price == sl
        assert open_on_exchange(venue) == {"LIMIT_MAKER": "NEW", "STOP_LOSS_LIMIT": "NEW"}
        (sent,) = [r for r in venue.requests if r.endpoint == "orderList.oco"]
        assert sent.query["aboveClientOrderId"] == broker.journal.by_agent_order_id(
            "binance", AGENT, "k-oco:1:tp").client_order_id
        assert venue.binance_account.balances["BTC"] == [Decimal(0), HELD]  # locked once
        assert {o.order_id for o in await broker.open_orders(AGENT)} == {
            take.order_id, stop.order_id}
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_when_the_price_reaches_the_take_profit_it_fills_once_and_the_stop_is_gone(
    venue, tmp_path
):
    async def scenario(broker):
        tp, sl, when = tp_reached(venue)
        take, stop = await broker.create_oco(*exits(tp, sl))
        venue.now.set(when + 1)
        assert await broker.open_orders(AGENT) == []
        filled = await broker.get_order(AGENT, "BTC/USDT", take.order_id)
        gone = await broker.get_order(AGENT, "BTC/USDT", stop.order_id)
        assert filled.status is OrderStatus.FILLED and filled.filled_quantity == HELD
        assert gone.status is OrderStatus.EXPIRED
        sells = [f for f in await broker.trades("BTC/USDT") if f.side is Side.SELL]
        assert [(f.order_id, f.quantity, f.price) for f in sells] == [(take.order_id, HELD, tp)]
        assert await broker.positions("BTC/USDT") == []
        assert venue.binance_account.balances["BTC"] == [Decimal(0), Decimal(0)]
        assert_journal_matches_exchange(broker, venue)
        report = await reconciler(broker, venue).startup()
        assert not report.mismatches, report.mismatches
        assert len([f for f in await broker.trades("BTC/USDT") if f.side is Side.SELL]) == 1

    run(venue, tmp_path, scenario)


def test_when_the_price_falls_to_the_stop_the_stop_sells_and_the_take_profit_expires(
    venue, tmp_path
):
    async def scenario(broker):
        tp, sl, when = sl_reached(venue)
        take, stop = await broker.create_oco(*exits(tp, sl))
        venue.now.set(when + 1)
        for _ in range(3):  # triggered, then filled once the price is at its limit or above
            await broker.open_orders(AGENT)
            venue.now.advance(MINUTE)
        sold = await broker.get_order(AGENT, "BTC/USDT", stop.order_id)
        gone = await broker.get_order(AGENT, "BTC/USDT", take.order_id)
        assert gone.status is OrderStatus.EXPIRED
        assert sold.status is OrderStatus.FILLED and sold.filled_quantity == HELD
        assert await broker.positions("BTC/USDT") == []
        assert venue.binance_account.balances["BTC"] == [Decimal(0), Decimal(0)]
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


@pytest.mark.parametrize("how", ["drop", "status", "garbage"])
def test_an_oco_whose_answer_is_lost_is_found_by_client_id_and_never_sent_twice(
    venue, tmp_path, how
):
    async def scenario(broker):
        tp, sl, _ = tp_reached(venue)
        venue.fail("binance", "orderList.oco", Fault.lost(how, 503))
        with pytest.raises(OrderOutcomeUnknownError) as caught:
            await broker.create_oco(*exits(tp, sl))
        assert caught.value.details["do_not_resend"] is True
        legs = [broker.journal.by_agent_order_id("binance", AGENT, f"k-oco:1:{leg}")
                for leg in ("tp", "sl")]
        assert [e.state for e in legs] == [JournalState.UNKNOWN] * 2
        # the redelivered call finds both legs by client id instead of sending the list again
        take, stop = await broker.create_oco(*exits(tp, sl))
        assert take.status is OrderStatus.SUBMITTED and stop.status is OrderStatus.SUBMITTED
        assert venue.count("binance", "orderList.oco") == 1
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_an_oco_lost_answer_is_resolved_by_the_reconciler_without_a_second_list(
    venue, tmp_path
):
    async def scenario(broker):
        tp, sl, _ = tp_reached(venue)
        venue.fail("binance", "orderList.oco", Fault.lost("drop"))
        with pytest.raises(OrderOutcomeUnknownError):
            await broker.create_oco(*exits(tp, sl))
        await reconciler(broker, venue).startup()
        states = {e.exit_kind: e.state for e in broker.journal.entries("binance")
                  if e.side is Side.SELL}
        assert states == {ExitKind.TAKE_PROFIT: JournalState.OPEN,
                          ExitKind.STOP_LOSS: JournalState.OPEN}
        assert venue.count("binance", "orderList.oco") == 1
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_a_rate_limited_oco_is_refused_and_nothing_is_placed(venue, tmp_path):
    async def scenario(broker):
        tp, sl, _ = tp_reached(venue)
        venue.fail("binance", "orderList.oco", Fault.status(429, retry_after=1))
        with pytest.raises(ToolError) as caught:
            await broker.create_oco(*exits(tp, sl))
        assert caught.value.code is ErrorCode.RATE_LIMITED
        assert "Too many requests" in caught.value.details["exchange_message"]
        legs = [e for e in broker.journal.entries("binance") if e.side is Side.SELL]
        assert [e.state for e in legs] == [JournalState.REJECTED] * 2
        assert open_on_exchange(venue) == {}
        assert venue.binance_account.balances["BTC"] == [HELD, Decimal(0)]
        assert_journal_matches_exchange(broker, venue)
        # refused, so the same call may send it again once the pause it asked for is over:
        # it is placed once
        venue.now.advance(1000)
        await broker.create_oco(*exits(tp, sl))
        assert open_on_exchange(venue) == {"LIMIT_MAKER": "NEW", "STOP_LOSS_LIMIT": "NEW"}
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_cancelling_one_leg_cancels_the_list_and_the_journal_says_so_for_both(
    venue, tmp_path
):
    async def scenario(broker):
        tp, sl, _ = tp_reached(venue)
        take, stop = await broker.create_oco(*exits(tp, sl))
        cancelled = await broker.cancel_order(AGENT, "BTC/USDT", take.order_id)
        assert cancelled.status is OrderStatus.CANCELLED
        other = broker.journal.by_agent_order_id("binance", AGENT, "k-oco:1:sl")
        assert other.state is JournalState.CANCELED
        assert venue.binance_account.balances["BTC"] == [HELD, Decimal(0)]
        assert_journal_matches_exchange(broker, venue)

    run(venue, tmp_path, scenario)


def test_the_fake_binance_checks_oco_prices_against_the_market(venue) -> None:
    venue.binance_account.reset({"USDT": "0", "BTC": "1"})
    last = price_at(venue, venue.now.now_ms())
    base = {"symbol": "BTCUSDT", "side": "SELL", "quantity": "0.01000",
            "aboveType": "LIMIT_MAKER", "belowType": "STOP_LOSS_LIMIT",
            "belowTimeInForce": "GTC", "listClientOrderId": "l1",
            "aboveClientOrderId": "a1", "belowClientOrderId": "b1"}
    for above, stop in ((last - 1, last - 100), (last + 100, last + 1)):
        with pytest.raises(Refused) as refused:
            create_oco(venue.binance_account, {
                **base, "abovePrice": f"{above:.2f}", "belowStopPrice": f"{stop:.2f}",
                "belowPrice": f"{stop - 10:.2f}"})
        assert refused.value.code == -2010
    with pytest.raises(Refused, match="insufficient balance"):
        create_oco(venue.binance_account, {
            **base, "quantity": "2.00000", "abovePrice": f"{last + 100:.2f}",
            "belowStopPrice": f"{last - 100:.2f}", "belowPrice": f"{last - 110:.2f}"})


def test_a_leg_id_used_for_another_order_is_refused(venue, tmp_path):
    async def scenario(broker):
        tp, sl, _ = tp_reached(venue)
        await broker.create_oco(*exits(tp, sl))
        with pytest.raises(InvalidOrderError, match="already used"):
            await broker.create_oco(*exits(tp + 1, sl))
        assert venue.count("binance", "orderList.oco") == 1

    run(venue, tmp_path, scenario)


# -- through the tools: a live Trader and the person's ticket -----------------------------------


def tp_sl_call(tp: Decimal, sl: Decimal) -> str:
    return ("<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
            f"<take_profit_price>{tp}</take_profit_price>"
            f"<stop_loss_price>{sl}</stop_loss_price></set_position_tp_sl_orders>")


def test_a_live_traders_tp_and_sl_are_one_oco_that_closes_the_position_at_the_take_profit(
    tmp_path, venue
):
    async def body(world: World) -> None:
        agent = await trader(world)
        grant(world, agent)
        bought = await call(world, agent, market_buy("0.01000"))
        assert bought.status == "success", bought.xml
        tp, sl, when = tp_reached(venue)
        # before: "cannot hold a take profit and a stop loss for the same position"
        both = await call(world, agent, tp_sl_call(tp, sl))
        assert both.status == "success", both.xml
        assert 'linked="OCO"' in both.xml and 'stop_loss_order_type="STOP_LIMIT"' in both.xml
        assert venue.count("binance", "orderList.oco") == 1
        assert open_on_exchange(venue) == {"LIMIT_MAKER": "NEW", "STOP_LOSS_LIMIT": "NEW"}
        broker = world.venue.broker
        assert {o.exit_kind for o in await broker.open_orders(agent)} == {
            ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS}
        assert_journal_matches_exchange(broker, venue)
        venue.now.set(when + 1)  # the price reaches the take profit
        assert await broker.open_orders(agent) == []
        assert open_on_exchange(venue) == {"LIMIT_MAKER": "FILLED",
                                           "STOP_LOSS_LIMIT": "EXPIRED"}
        assert await broker.positions("BTC/USDT") == []
        sells = [f for f in await broker.trades("BTC/USDT") if f.side is Side.SELL]
        assert [(f.quantity, f.price) for f in sells] == [(HELD, tp)]
        assert_journal_matches_exchange(broker, venue)

    run_live(tmp_path, venue, body)


async def listed(world: World, venue: FakeExchangeServer) -> tuple[str, Decimal, Decimal]:
    """A granted agent's position protected by one OCO list: the agent, its TP and SL."""
    agent = "desk-1"
    grant(world, agent)
    assert (await call(world, agent, market_buy("0.01000"))).status == "success"
    tp, sl, _ = tp_reached(venue)
    assert (await call(world, agent, tp_sl_call(tp, sl))).status == "success"
    return agent, tp, sl


def test_a_new_tp_and_sl_replace_the_oco_list_already_protecting_the_position(tmp_path, venue):
    async def body(world: World) -> None:
        agent, tp, sl = await listed(world, venue)
        # balances read since (the account panel reads them every few seconds): the list
        # holds every coin; the new list placed after the old one's cancel must see them
        assert (await world.venue.broker.refresh_balances())["BTC"].free == 0
        again = await call(world, agent, tp_sl_call(tp + 1, sl - 1))
        assert again.status == "success", again.xml
        with venue.binance_account.lock:
            resting = sorted((o.type, o.price) for o in venue.binance_account.orders
                             if o.status == "NEW")
        assert [kind for kind, _ in resting] == ["LIMIT_MAKER", "STOP_LOSS_LIMIT"]
        assert resting[0][1] == tp + 1
        off_tick = await call(world, agent, tp_sl_call(tp + Decimal("0.005"), sl))
        assert off_tick.status == "error", off_tick.xml
        with venue.binance_account.lock:  # refused before the list protecting it went
            still = [o.type for o in venue.binance_account.orders if o.status == "NEW"]
        assert sorted(still) == ["LIMIT_MAKER", "STOP_LOSS_LIMIT"]
        assert_journal_matches_exchange(world.venue.broker, venue)

    run_live(tmp_path, venue, body)


def test_closing_a_position_held_by_an_oco_list_cancels_the_list_and_sells_once(
    tmp_path, venue
):
    async def body(world: World) -> None:
        agent = "desk-1"
        grant(world, agent)
        assert (await call(world, agent, market_buy("0.01000"))).status == "success"
        tp, sl, _ = tp_reached(venue)
        assert (await call(world, agent, tp_sl_call(tp, sl))).status == "success"
        closed = await call(world, agent, (
            "<close_position><symbol>BTC/USDT</symbol></close_position>"))
        # before: the second leg, cancelled with the first, was "CANCELLED and cannot be
        # cancelled", and the close failed with the coins free
        assert closed.status == "success", closed.xml
        assert open_on_exchange(venue) == {"LIMIT_MAKER": "CANCELED",
                                           "STOP_LOSS_LIMIT": "CANCELED", "MARKET": "FILLED"}
        assert await world.venue.broker.positions("BTC/USDT") == []
        assert_journal_matches_exchange(world.venue.broker, venue)

    run_live(tmp_path, venue, body)


def test_the_persons_ticket_with_tp_and_sl_on_live_places_one_oco_list(tmp_path, venue):
    async def body(world: World) -> None:
        person = PersonControls(world.executor, world.orders, world.bus)
        tp, sl, _ = tp_reached(venue)
        ticket = read_ticket({
            "symbol": "BTC/USDT", "side": "BUY", "kind": "MARKET", "amount": "0.01",
            "unit": "base", "take_profit": str(tp), "stop_loss": str(sl)})
        preview = await person.preview(ticket)
        assert preview.passes, preview
        assert any(line.startswith("Placed as one OCO order list") for line in preview.lines)
        outcome = await person.submit(ticket)
        assert outcome.ok, outcome.text
        await eventually(lambda: venue.count("binance", "orderList.oco") == 1)
        assert open_on_exchange(venue) == {"LIMIT_MAKER": "NEW", "STOP_LOSS_LIMIT": "NEW"}
        exits = read_ticket({"symbol": "BTC/USDT", "kind": "TP_SL",
                             "take_profit": str(tp + 1), "stop_loss": str(sl)})
        exits_preview = await person.preview(exits)
        assert exits_preview.passes and OCO_LINE in exits_preview.lines
        replaced = await person.submit(exits)
        assert replaced.ok, replaced.text
        assert venue.count("binance", "orderList.oco") == 2
        assert_journal_matches_exchange(world.venue.broker, venue)

    run_live(tmp_path, venue, body)


def test_a_new_list_the_exchange_refuses_puts_the_old_list_back_as_a_list(tmp_path, venue):
    """The old list is cancelled before the new one is sent (it holds the coins); refused, the
    new list would have left the position with neither exit."""
    async def body(world: World) -> None:
        agent, tp, sl = await listed(world, venue)
        # a refusal that asks for no pause (Retry-After: 0): the old list may go back at once
        venue.fail("binance", "orderList.oco", Fault.status(429, retry_after=0), times=1)
        refused = await call(world, agent, tp_sl_call(tp + 1, sl - 1))
        assert refused.status == "error" and "RATE_LIMITED" in refused.xml
        assert f"previous take profit at {tp} was cancelled first and has been placed again" \
            in refused.xml
        assert f"previous stop loss at {sl} was cancelled first and has been placed again" \
            in refused.xml
        with venue.binance_account.lock:
            resting = sorted((o.type, Decimal(o.price), Decimal(o.stop_price))
                             for o in venue.binance_account.orders if o.status == "NEW")
        assert [(kind, price) for kind, price, _ in resting][0] == ("LIMIT_MAKER", tp)
        assert resting[1][0] == "STOP_LOSS_LIMIT" and resting[1][2] == sl
        assert venue.count("binance", "orderList.oco") == 3  # placed, refused, put back
        assert_journal_matches_exchange(world.venue.broker, venue)

    run_live(tmp_path, venue, body)
