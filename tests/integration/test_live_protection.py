"""No live position stays unprotected, on a fake Binance that lists no stop or OCO order types.

Whether a market can hold a stop loss, and a take profit beside it, is in its static market data
(Binance's ``orderTypes`` and ``ocoAllowed``), so order entry knows before the entry: an agent may
not buy where no stop can rest; where only one resting sell fits, the stop loss alone protects
the lot. If the exchange still refuses the stop after the fill, the lot is sold at market; if that
is refused too, the person is alerted on every channel and the kill switch trips. Where the
person allows it, Kestrel holds the stop itself and sells when the price reaches it.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from app.config.approval import ApprovalSettings
from app.config.trading import TradingSettings
from app.domain.kill_switch import TripCause
from app.runtime.world import World
from tests.helpers.agents import settle
from tests.helpers.fake_exchange import FakeExchangeServer
from tests.helpers.fake_exchange.broker import assert_journal_matches_exchange
from tests.helpers.fake_exchange.live import (
    call,
    decided,
    grant,
    live_settings,
    live_world,
    market_buy,
    run_live,
    send_buy_signal,
    trader,
)
from tests.helpers.fake_exchange.tape import MINUTE
from tests.helpers.fake_exchange.venues import Binance
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
CENT = Decimal("0.01")
AGENT = "desk-1"
NO_STOPS = ("LIMIT", "LIMIT_MAKER", "MARKET")
STOP_LIMIT_ONLY = ("LIMIT", "LIMIT_MAKER", "MARKET", "STOP_LOSS_LIMIT", "TAKE_PROFIT_LIMIT")


def _exits(tp: Decimal | None, sl: Decimal | None) -> str:
    body = "".join(f"<{k}>{v}</{k}>" for k, v in (("take_profit_price", tp),
                                                   ("stop_loss_price", sl)) if v is not None)
    return f"<set_position_tp_sl_orders><symbol>BTC/USDT</symbol>{body}</set_position_tp_sl_orders>"


def _resting(server: FakeExchangeServer) -> list[str]:
    with server.binance_account.lock:
        return [o.type for o in server.binance_account.orders if o.status == "NEW"]


def test_an_agents_entry_where_no_stop_can_rest_is_refused_before_anything_is_sent(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    server.list_order_types("BTC/USDT", NO_STOPS, oco=False)

    async def body(world: World) -> None:
        grant(world, AGENT)
        refused = await call(world, AGENT, market_buy())
        assert refused.status == "error", refused.xml
        assert "can hold no stop-loss order" in refused.message
        assert "could not be protected" in refused.message
        assert server.count("binance", "order.create") == 0
        # the person may still buy by hand: the ticket says what the market cannot hold
        assert (await call(world, "person", market_buy())).status == "success"

    run_live(tmp_path, server, body)


def test_a_traders_tp_and_sl_where_the_market_takes_no_oco_leave_the_stop_protecting_it(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    """The rule-engine Trader on a market with a stop-limit but no OCO list: its take profit
    and stop loss cannot both rest, so the stop alone is placed the moment the entry fills."""
    server.list_order_types("BTC/USDT", STOP_LIMIT_ONLY, oco=False)

    async def scenario() -> None:
        settings = live_settings(server, approval=ApprovalSettings(live_orders=False))
        world = await live_world(tmp_path, server, settings=settings)
        try:
            await world.start(decided(None))
            agent = await trader(world)
            grant(world, agent)
            await send_buy_signal(world, agent)
            await settle(world)
            for _ in range(5):  # the fill is routed to the Trader, which protects it
                await world.venue.driver.round()
                await settle(world)
            with server.binance_account.lock:
                orders = list(server.binance_account.orders)
            (entry,) = [o for o in orders if o.side == "BUY"]
            (stop,) = [o for o in orders if o.side == "SELL"]
            assert entry.status == "FILLED" and stop.type == "STOP_LOSS_LIMIT"
            held = entry.executed - _fee(entry)  # all of it, down to the amount step
            assert stop.status == "NEW" and held - Decimal("0.00001") < stop.orig_qty <= held
            unprotected_s = (stop.time_ms - entry.update_ms) / 1000
            assert unprotected_s <= 1, unprotected_s
            assert_journal_matches_exchange(world.venue.broker, server)
            said = [n.message for n in world.agents.notifications.recent()
                    if n.subject.startswith("Trader:")]
            assert any("take profit" in m and "is not placed" in m for m in said), said
            print(f"\nseconds unprotected after the fill (fake time): {unprotected_s:.1f}")
        finally:
            await world.aclose()

    asyncio.run(scenario())


def test_an_agents_lot_the_exchange_refuses_a_stop_for_is_sold_at_market_and_the_person_told(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        grant(world, AGENT)
        assert (await call(world, AGENT, market_buy())).status == "success"
        last = await world.venue.broker.last_price("BTC/USDT")
        # the exchange stops taking stop-limits (its exchangeInfo, loaded before, still lists
        # them): the stop is refused at placement, after the fill
        server.binance_account.relist("BTC/USDT", {**_info(server), "orderTypes": list(
            ("LIMIT", "LIMIT_MAKER", "MARKET"))})
        result = await call(world, AGENT, _exits(None, (last * Decimal("0.97")).quantize(CENT)))
        assert result.status == "error"
        assert "sold it at market to leave nothing unprotected" in result.message
        assert server.binance_account.total("BTC") < Decimal("0.00001")  # the lot was sold
        assert _resting(server) == []
        await world.bus.drain()
        (alert,) = [n for n in world.agents.notifications.recent()
                    if n.subject == "Kestrel: BTC/USDT closed, no stop loss possible"]
        assert alert.urgency.value == "CRITICAL"
        assert world.agents.kill_switch.active() is None  # protected by selling: no halt
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body)


def test_a_lot_that_can_neither_be_protected_nor_sold_alerts_the_person_and_trips_the_switch(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        grant(world, AGENT)
        assert (await call(world, AGENT, market_buy())).status == "success"
        last = await world.venue.broker.last_price("BTC/USDT")
        server.binance_account.relist("BTC/USDT", {**_info(server), "orderTypes": ["LIMIT"]})
        result = await call(world, AGENT, _exits(None, (last * Decimal("0.97")).quantize(CENT)))
        assert result.status == "error"
        assert "has no stop loss" in result.message and "kill switch tripped" in result.message
        await world.bus.drain()
        trip = world.agents.kill_switch.active()
        assert trip is not None and trip.cause is TripCause.UNPROTECTED
        (alert,) = [n for n in world.agents.notifications.recent()
                    if n.subject == "Kestrel: BTC/USDT is unprotected"]
        assert alert.urgency.value == "CRITICAL"
        shown = {s.channel.value: s.delivery_status.value for s in alert.statuses}
        assert shown["UI_ALERT"] == shown["TRAY"] == "SUCCESS"

    run_live(tmp_path, server, body)


def test_a_stop_kestrel_holds_sells_the_lot_when_the_price_reaches_it(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    server.list_order_types("BTC/USDT", NO_STOPS, oco=False)
    settings = live_settings(server, trading=TradingSettings(kestrel_stops=True))

    async def scenario() -> None:
        world = await live_world(tmp_path, server, settings=settings, aging=True)
        try:
            await world.start(decided(None))
            grant(world, AGENT)
            assert (await call(world, AGENT, market_buy())).status == "success"
            stop, when = _stop_the_tape_reaches(server)
            set_ = await call(world, AGENT, _exits(None, stop))
            assert set_.status == "success", set_.xml
            (done,) = set_.data
            assert done.attr("stop_loss_held_by") == "kestrel"
            assert "only while Kestrel runs" in (done.attr("note") or "")
            listed = await call(world, AGENT, "<get_open_orders></get_open_orders>")
            (held,) = [e for e in listed.data[0].children if e.tag == "held_stop"]
            assert held.attr("stop_price") == str(stop)
            assert _resting(server) == []  # nothing rests on the exchange for it
            while server.now.now_ms() < when:
                server.now.advance(MINUTE)
            await world.venue.driver.round()
            await world.bus.drain()
            assert server.binance_account.total("BTC") < Decimal("0.00001")
            assert world.orders.held_stops() == []
            (alert,) = [n for n in world.agents.notifications.recent()
                        if n.subject == "Kestrel: BTC/USDT stop loss sold"]
            assert "Kestrel sold the position at market" in alert.message
        finally:
            await world.aclose()

    asyncio.run(scenario())


def _info(server: FakeExchangeServer) -> dict[str, Any]:
    """BTC/USDT as the fake's exchangeInfo lists it."""
    binance = server.venues["binance"]
    assert isinstance(binance, Binance)
    return dict(binance.infos["BTC/USDT"])


def _fee(order) -> Decimal:  # noqa: ANN001 - the fake's order
    return sum((Decimal(f["commission"]) for f in order.fills
                if f["commissionAsset"] == "BTC"), Decimal(0))


def _stop_the_tape_reaches(server: FakeExchangeServer) -> tuple[Decimal, int]:
    """A stop below the last price that the recorded tape falls to within two days, and the
    minute it does."""
    now = server.now.now_ms()
    last = Decimal(str(server.state.last("BTC/USDT")))
    tape = server.state.market("BTC/USDT").tape
    path = [(now + k * MINUTE, Decimal(str(tape.last_price(now + k * MINUTE))))
            for k in range(1, 2880)]
    trough = min(p for _, p in path)
    assert trough < last * Decimal("0.998"), "the tape never falls: pick another start"
    stop = ((last + trough) / 2).quantize(CENT)
    return stop, next(t for t, p in path if p <= stop)

