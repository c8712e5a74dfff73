"""Stops on a live Binance spot account, against the fake Binance (offline).

Binance spot BTCUSDT lists no stop-market order (no STOP_LOSS in its orderTypes), and ccxt
refuses a market order with a stop price there before anything is sent: a live stop-loss could
not be placed at all. It is now sent as a stop-limit (STOP_LOSS_LIMIT) with its limit a band
beyond the stop, and the order says so.
"""

from __future__ import annotations

import asyncio
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path

import pytest

from app.domain.agents import PERSON_ID
from app.domain.trading import OrderType
from app.runtime.controls import PersonControls
from app.runtime.ticket import read_ticket
from app.runtime.world import World
from tests.helpers.fake_exchange import FakeExchangeServer, Fault
from tests.helpers.fake_exchange.account import Refused
from tests.helpers.fake_exchange.broker import assert_journal_matches_exchange
from tests.helpers.fake_exchange.client import fake_settings
from tests.helpers.fake_exchange.live import (
    call,
    decided,
    grant,
    live_settings,
    live_world,
    market_buy,
    run_live,
    trader,
)
from tests.helpers.fake_exchange.venues import Binance
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    START_MS,
    fake_exchange_fixture,
    server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
CENT = Decimal("0.01")


def test_the_fake_binance_refuses_a_stop_market_on_btcusdt_as_binance_does(
    server: FakeExchangeServer,
) -> None:
    last = Decimal(str(server.state.last("BTC/USDT")))
    with pytest.raises(Refused) as refused:
        server.binance_account.create({
            "symbol": "BTCUSDT", "side": "BUY", "type": "STOP_LOSS", "quantity": "0.01000",
            "stopPrice": f"{last * 2:.2f}", "newClientOrderId": "x-1"})
    assert (refused.value.code, refused.value.msg) == (
        -2010, "Stop loss orders are not supported for this symbol.")


def test_a_live_traders_stop_loss_is_placed_as_a_stop_limit_below_its_stop(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        agent = await trader(world)
        grant(world, agent)
        bought = await call(world, agent, market_buy("0.01000"))
        assert bought.status == "success", bought.xml
        last = await world.venue.broker.last_price("BTC/USDT")
        sl = (last * Decimal("0.95")).quantize(CENT)
        # (the stop alone; a take profit beside it goes as one OCO list, test_live_oco)
        protect = await call(world, agent, (
            "<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
            f"<stop_loss_price>{sl}</stop_loss_price></set_position_tp_sl_orders>"))
        # before: "binance triggerPrice parameter is not allowed for BTC/USDT market orders"
        assert protect.status == "success", protect.xml
        limit = (sl * Decimal("0.995")).quantize(CENT, ROUND_FLOOR)
        assert 'stop_loss_order_type="STOP_LIMIT"' in protect.xml
        assert f'stop_loss_limit_price="{limit}"' in protect.xml
        with server.binance_account.lock:
            on_exchange = {o.type: o for o in server.binance_account.orders
                           if o.status == "NEW"}
        assert set(on_exchange) == {"STOP_LOSS_LIMIT"}
        stop = on_exchange["STOP_LOSS_LIMIT"]
        assert (stop.stop_price, stop.price, stop.side) == (sl, limit, "SELL")
        (card,) = [o for o in await world.venue.broker.open_orders(agent)
                   if o.order_type is OrderType.STOP_LIMIT]
        assert card.price == limit and card.stop_price == sl
        assert "may not fill" in card.reason
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


def test_the_persons_ticket_stop_on_live_is_a_stop_limit_with_the_band_from_settings(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def scenario() -> None:
        exchange = fake_settings(server, "binance").model_copy(
            update={"stop_limit_band": Decimal("0.02")})
        settings = live_settings(server)
        settings = settings.model_copy(update={"exchanges": type(settings.exchanges)(
            {"binance": exchange})})
        world = await live_world(tmp_path, server, settings=settings)
        try:
            await world.start(decided(None))
            person = PersonControls(world.executor, world.orders, world.bus)
            last = await world.venue.broker.last_price("BTC/USDT")
            stop = (last * Decimal("1.03")).quantize(CENT)  # a buy stop above the market
            ticket = read_ticket({
                "symbol": "BTC/USDT", "side": "BUY", "kind": "STOP", "amount": "0.01",
                "unit": "base", "stop_price": str(stop)})
            limit = (stop * Decimal("1.02")).quantize(CENT, ROUND_CEILING)
            preview = await person.preview(ticket)  # said before the person places it
            assert preview.passes, preview
            (said,) = [line for line in preview.lines if line.startswith("Sent as a STOP_LIMIT")]
            assert f"limit {limit}" in said and "2% above the stop" in said
            assert "may not fill" in said
            outcome = await person.submit(ticket)
            assert outcome.ok, outcome.text
            assert "It is a STOP_LIMIT" in outcome.text
            assert f"limit {limit}" in outcome.text and "may not fill" in outcome.text
            (order,) = server.binance_account.orders
            assert (order.type, order.side, order.stop_price, order.price) == (
                "STOP_LOSS_LIMIT", "BUY", stop, limit)
            (card,) = await world.venue.broker.open_orders(PERSON_ID)
            assert card.order_type is OrderType.STOP_LIMIT and card.price == limit
            # a market that takes no OCO list cannot hold both exits: the stop loss alone will
            # protect the position, and the ticket says so before placing
            world.venue.broker.exchange.markets["BTC/USDT"]["info"]["ocoAllowed"] = False
            both = await person.preview(read_ticket({
                "symbol": "BTC/USDT", "side": "BUY", "kind": "MARKET", "amount": "0.01",
                "unit": "base", "take_profit": str(stop * 2), "stop_loss": str(last / 2)}))
            (said,) = [line for line in both.lines if line.startswith("The take profit")]
            assert "is not placed" in said and "OCO" in said and "stop loss alone" in said
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_both_exits_where_the_market_takes_no_oco_leave_the_stop_loss_alone_protecting_it(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        # Binance spot marks each market ocoAllowed; on one that is not, two exits cannot
        # hold one position (the exchange locks the coins for the first)
        world.venue.broker.exchange.markets["BTC/USDT"]["info"]["ocoAllowed"] = False
        agent = "desk-1"
        grant(world, agent)
        assert (await call(world, agent, market_buy("0.01000"))).status == "success"
        last = await world.venue.broker.last_price("BTC/USDT")
        sl = (last * Decimal("0.95")).quantize(CENT)
        tp = (last * Decimal("1.05")).quantize(CENT)
        both = await call(world, agent, (
            "<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
            f"<take_profit_price>{tp}</take_profit_price>"
            f"<stop_loss_price>{sl}</stop_loss_price></set_position_tp_sl_orders>"))
        assert both.status == "success", both.xml
        (done,) = both.data
        assert done.attr("take_profit_order_id") is None
        assert done.attr("stop_loss_order_id") is not None
        note = done.attr("note") or ""
        assert f"take profit at {tp} is not placed" in note and "no OCO list" in note
        assert "stop loss alone protects it" in note
        with server.binance_account.lock:  # the stop alone, and nothing sent that was refused
            open_now = [o.type for o in server.binance_account.orders if o.status == "NEW"]
            refused = [r for r in server.requests if r.endpoint == "order.create"]
        assert open_now == ["STOP_LOSS_LIMIT"]
        assert len(refused) == 2  # the buy and the stop

    run_live(tmp_path, server, body)


def test_a_live_stop_loss_moved_to_a_new_price_replaces_the_old_one_whose_coins_it_frees(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    """Binance locks the coins of a resting stop: the new stop's funds check counts what the old
    one holds (it is cancelled first), so moving a stop is not refused for 'free 0'."""
    async def scenario() -> None:
        world = await live_world(tmp_path, server)
        try:
            await world.start(decided(None))  # the person's own orders: no agent acts on the fill
            assert (await call(world, PERSON_ID, market_buy("0.01000"))).status == "success"
            last = await world.venue.broker.last_price("BTC/USDT")

            def stop_at(price: Decimal) -> str:
                return ("<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
                        f"<stop_loss_price>{price}</stop_loss_price></set_position_tp_sl_orders>")

            first = await call(world, PERSON_ID, stop_at((last * Decimal("0.95")).quantize(CENT)))
            assert first.status == "success", first.xml
            moved = (last * Decimal("0.97")).quantize(CENT)
            # balances read since (the account panel reads them every few seconds): the old
            # stop holds every coin, none is free
            balances = await world.venue.broker.refresh_balances()
            assert balances["BTC"].free == 0
            second = await call(world, PERSON_ID, stop_at(moved))
            assert second.status == "success", second.xml
            with server.binance_account.lock:
                sells = [(o.status, Decimal(o.stop_price)) for o in server.binance_account.orders
                         if o.side == "SELL"]
            assert sells == [("CANCELED", (last * Decimal("0.95")).quantize(CENT)),
                             ("NEW", moved)]
            assert_journal_matches_exchange(world.venue.broker, server)
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_closing_a_live_position_whose_stop_holds_the_coins_cancels_it_and_sells_once(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    """The close cancels the stop first; the sell after it reads the coins the stop freed
    (before, balances cached from a moment earlier said none were free: the stop was gone and
    the close refused)."""
    async def body(world: World) -> None:
        assert (await call(world, PERSON_ID, market_buy("0.01000"))).status == "success"
        last = await world.venue.broker.last_price("BTC/USDT")
        stop = await call(world, PERSON_ID, (
            "<set_position_tp_sl_orders><symbol>BTC/USDT</symbol><stop_loss_price>"
            f"{(last * Decimal('0.95')).quantize(CENT)}</stop_loss_price>"
            "</set_position_tp_sl_orders>"))
        assert stop.status == "success", stop.xml
        assert (await world.venue.broker.refresh_balances())["BTC"].free == 0
        closed = await call(world, PERSON_ID, (
            "<close_position><symbol>BTC/USDT</symbol><reason>done</reason>"
            "</close_position>"))
        assert closed.status == "success", closed.xml
        with server.binance_account.lock:
            sells = [(o.type, o.status) for o in server.binance_account.orders
                     if o.side == "SELL"]
        assert sells == [("STOP_LOSS_LIMIT", "CANCELED"), ("MARKET", "FILLED")]
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


def _stop_at(price: Decimal) -> str:
    return ("<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>"
            f"<stop_loss_price>{price}</stop_loss_price></set_position_tp_sl_orders>")


def _sells(server: FakeExchangeServer) -> list[tuple[str, Decimal]]:
    with server.binance_account.lock:
        return [(o.status, Decimal(o.stop_price)) for o in server.binance_account.orders
                if o.side == "SELL"]


async def _protected(world: World) -> tuple[Decimal, Decimal]:
    """A position bought by the person with a stop 5% under the last price; that stop and a
    higher one 3% under it."""
    assert (await call(world, PERSON_ID, market_buy("0.01000"))).status == "success"
    last = await world.venue.broker.last_price("BTC/USDT")
    old, new = ((last * Decimal(share)).quantize(CENT) for share in ("0.95", "0.97"))
    first = await call(world, PERSON_ID, _stop_at(old))
    assert first.status == "success", first.xml
    return old, new


def test_a_stop_move_the_exchange_refuses_puts_the_old_stop_back_and_says_so(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    """The old stop is cancelled before the new one is sent (Binance locks its coins); when the
    exchange then refuses the new one, the position is not left without a stop."""
    async def body(world: World) -> None:
        old, new = await _protected(world)
        # a refusal that asks for no pause (Retry-After: 0), so the old stop may go back at once
        server.fail("binance", "order.create", Fault.status(429, retry_after=0), times=1)
        moved = await call(world, PERSON_ID, _stop_at(new))
        assert moved.status == "error"
        assert "RATE_LIMITED" in moved.xml
        assert f"previous stop loss at {old} was cancelled first and has been placed again" \
            in moved.xml
        # before: [("CANCELED", old)] and nothing else: no stop at all
        assert _sells(server) == [("CANCELED", old), ("NEW", old)]
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


def test_a_stop_move_refused_twice_says_the_position_has_no_stop_loss_now(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        old, new = await _protected(world)
        # refusals that ask for no pause (Retry-After: 0): the old stop is sent back, and refused
        server.fail("binance", "order.create", Fault.status(429, retry_after=0), times=2)
        moved = await call(world, PERSON_ID, _stop_at(new))
        assert moved.status == "error"
        assert "could not be placed again" in moved.xml
        assert "the position has NO stop loss now" in moved.xml
        assert _sells(server) == [("CANCELED", old)]
        assert_journal_matches_exchange(world.venue.broker, server)
        # the person is told on every channel, not only the caller
        await world.bus.drain()
        (alert,) = [n for n in world.agents.notifications.recent()
                    if n.subject == "Kestrel: BTC/USDT has no stop loss now"]
        assert alert.urgency.value == "CRITICAL"
        assert alert.message.startswith(f"The BTC/USDT position lost its stop loss at {old}.")
        assert alert.message.endswith(
            "Set a stop loss in the account panel, or close the position.")
        assert "set_position_tp_sl_orders" not in alert.message  # the agent's words, not ours
        shown = {s.channel.value: s.delivery_status.value for s in alert.statuses}
        assert shown["UI_ALERT"] == shown["TRAY"] == "SUCCESS"

    run_live(tmp_path, server, body)


def test_a_stop_move_whose_answer_is_lost_never_puts_the_old_stop_back_beside_it(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    """The new stop may rest on the exchange (here it does): putting the old one back would
    hold two stops selling the same coins, so nothing is put back until it is known."""
    async def body(world: World) -> None:
        old, new = await _protected(world)
        server.fail("binance", "order.create", Fault.lost("drop"), times=1)
        moved = await call(world, PERSON_ID, _stop_at(new))
        assert moved.status == "error"
        assert "outcome is unknown" in moved.xml
        assert "is not put back while this order's outcome is unknown" in moved.xml
        assert _sells(server) == [("CANCELED", old), ("NEW", new)]
        # the reconciler finds the new stop by its client id, a few seconds on: one stop
        server.now.advance(10_000)
        await world.venue.driver.round()
        assert_journal_matches_exchange(world.venue.broker, server)
        assert _sells(server) == [("CANCELED", old), ("NEW", new)]

    run_live(tmp_path, server, body)


def test_a_close_the_exchange_refuses_puts_the_stop_it_cancelled_back(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    """The close cancels the stop first (it holds the coins); a refused sell would otherwise
    leave the position open and unprotected."""
    async def body(world: World) -> None:
        old, _new = await _protected(world)
        # a refusal that asks for no pause (Retry-After: 0), so the old stop may go back at once
        server.fail("binance", "order.create", Fault.status(429, retry_after=0), times=1)
        closed = await call(world, PERSON_ID, (
            "<close_position><symbol>BTC/USDT</symbol><reason>done</reason></close_position>"))
        assert closed.status == "error" and "RATE_LIMITED" in closed.xml
        assert f"previous stop loss at {old} was cancelled first and has been placed again" \
            in closed.xml
        assert _sells(server) == [("CANCELED", old), ("NEW", old)]
        assert await world.venue.broker.positions("BTC/USDT")  # still open, still protected
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


def _limit_buy(_world: World) -> str:
    return ("<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT"
            "</order_type><quantity>0.01000</quantity><price>{price}</price></create_order>")


def test_a_resting_limit_moved_on_the_chart_is_replaced_in_one_request(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        last = await world.venue.broker.last_price("BTC/USDT")
        first = (last * Decimal("0.95")).quantize(CENT)
        placed = await call(world, PERSON_ID, _limit_buy(world).format(price=first))
        assert placed.status == "success", placed.xml
        person = PersonControls(world.executor, world.orders, world.bus)
        (order,) = await world.venue.broker.open_orders(PERSON_ID)
        new = (last * Decimal("0.96")).quantize(CENT)
        moved = await person.modify(order, price=new)
        assert moved.ok, moved.text
        assert server.count("binance", "order.cancelReplace") == 1
        assert server.count("binance", "order.cancel") == 0  # no moment without an order
        with server.binance_account.lock:
            states = [(o.status, o.price) for o in server.binance_account.orders]
        assert states == [("CANCELED", first), ("NEW", new)]
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


def test_a_move_whose_new_order_the_exchange_refuses_says_the_old_one_is_gone(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        last = await world.venue.broker.last_price("BTC/USDT")
        first = (last * Decimal("0.95")).quantize(CENT)
        assert (await call(world, PERSON_ID, _limit_buy(world).format(price=first))).ok
        (order,) = await world.venue.broker.open_orders(PERSON_ID)
        # the exchange stops taking limit orders after its exchangeInfo was read: the cancel
        # goes through, the new order is refused (-2021)
        binance = server.venues["binance"]
        assert isinstance(binance, Binance)
        server.binance_account.relist("BTC/USDT", {**binance.infos["BTC/USDT"],
                                                   "orderTypes": ["MARKET"]})
        person = PersonControls(world.executor, world.orders, world.bus)
        moved = await person.modify(order, price=(last * Decimal("0.96")).quantize(CENT))
        assert not moved.ok
        assert "was cancelled but its replacement was refused" in moved.text
        assert "nothing rests in its place" in moved.text
        with server.binance_account.lock:
            assert [o.status for o in server.binance_account.orders] == ["CANCELED"]
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)
