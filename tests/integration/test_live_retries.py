"""A retried order is the same order, on the fake Binance with its answers lost or refused.

An agent that gets no answer (a lost response, a timeout) or a refusal that booked nothing (-1021:
its timestamp outside the exchange's window) repeats the call, word for word, seconds later. By
then the price has moved, so an order given as a quote amount is worth another quantity: the
repeat must still be the same order (compared as asked, never by a quantity derived from the
market), answered "still being checked" while its outcome is unknown, and never advised to take
a new id, which would place a second order for one intention.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from app.runtime.world import World
from tests.helpers.fake_exchange import FakeExchangeServer, Fault
from tests.helpers.fake_exchange.broker import assert_journal_matches_exchange
from tests.helpers.fake_exchange.live import call, grant, run_live
from tests.helpers.fake_exchange.tape import MINUTE
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
AGENT = "trader-1"
SPEND = "500"
BUY_ETH = ("<create_order><symbol>ETH/USDT</symbol><side>BUY</side><order_type>MARKET"
           f"</order_type><quote_amount>{SPEND}</quote_amount>"
           "<client_order_id>m1</client_order_id></create_order>")


def _orders(server: FakeExchangeServer, client_id: str) -> list[tuple[str, Decimal]]:
    with server.binance_account.lock:
        return [(o.status, o.executed) for o in server.binance_account.orders
                if o.client_id == client_id]


def _client_id(world: World) -> str:
    entry = world.venue.broker.journal.by_agent_order_id("binance", AGENT, "m1")
    assert entry is not None
    return entry.client_order_id


def _eth(server: FakeExchangeServer) -> Decimal:
    return server.binance_account.total("ETH")


def _price_moved(server: FakeExchangeServer) -> None:
    before = server.state.last("ETH/USDT")
    for _ in range(30):
        server.now.advance(MINUTE)
        if server.state.last("ETH/USDT") != before:
            return
    raise AssertionError("the tape's ETH price never moved: pick another start")


@pytest.mark.parametrize("lost", [Fault.lost("status", 503), Fault.lost("drop")],
                         ids=["503 after booking", "connection dropped after booking"])
def test_a_repeat_after_a_lost_answer_is_the_same_order_once_the_price_has_moved(
    tmp_path: Path, server: FakeExchangeServer, lost: Fault
) -> None:
    async def body(world: World) -> None:
        grant(world, AGENT)
        server.fail("binance", "order.create", lost, times=1)
        first = await call(world, AGENT, BUY_ETH)
        assert first.status == "error" and "outcome is unknown" in first.message
        _price_moved(server)  # 500 USDT is worth another quantity of ETH now
        again = await call(world, AGENT, BUY_ETH)
        assert again.status == "success", again.xml
        assert "use a new id" not in again.xml
        assert _orders(server, _client_id(world)) == [("FILLED", _eth(server) + _fee(server))]
        assert len(server.binance_account.orders) == 1
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body, aging=True)


def test_while_the_first_is_invisible_a_repeat_hears_it_is_still_being_checked(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        grant(world, AGENT)
        server.binance_account.hide_new_s = 600  # booked, but no read shows it for 10 minutes
        server.fail("binance", "order.create", Fault.lost("status", 503), times=1)
        await call(world, AGENT, BUY_ETH)
        _price_moved(server)
        again = await call(world, AGENT, BUY_ETH)
        assert again.status == "error"
        assert "still being checked" in again.message
        assert "never sent twice" in again.message
        assert "new id" not in again.message and "its own id" not in again.message
        assert again.details["state"] == "in_flight"
        assert len(server.binance_account.orders) == 1

    run_live(tmp_path, server, body, aging=True)


def test_a_repeat_after_a_refused_timestamp_sends_the_same_order_once(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        grant(world, AGENT)
        server.fail("binance", "order.create", Fault.skew(), times=1)
        first = await call(world, AGENT, BUY_ETH)
        assert first.status == "error" and "recvWindow" in first.xml
        assert server.binance_account.orders == []  # nothing was booked
        _price_moved(server)
        again = await call(world, AGENT, BUY_ETH)
        assert again.status == "success", again.xml
        (placed,) = server.binance_account.orders
        assert placed.client_id == _client_id(world) and placed.status == "FILLED"
        assert_journal_matches_exchange(world.venue.broker, server)

    run_live(tmp_path, server, body, aging=True)


def test_the_same_id_for_a_different_spend_is_refused_and_names_both(
    tmp_path: Path, server: FakeExchangeServer
) -> None:
    async def body(world: World) -> None:
        grant(world, AGENT)
        assert (await call(world, AGENT, BUY_ETH)).status == "success"
        other = await call(world, AGENT, BUY_ETH.replace(SPEND, "700"))
        assert other.status == "error"
        assert "BUY 500 USDT of ETH/USDT" in other.message
        assert "BUY 700 USDT of ETH/USDT" in other.message
        assert len(server.binance_account.orders) == 1

    run_live(tmp_path, server, body, aging=True)


def _fee(server: FakeExchangeServer) -> Decimal:
    """The ETH the exchange kept as its fee (Binance takes a buy's fee in what it buys)."""
    with server.binance_account.lock:
        return sum((Decimal(t["commission"]) for t in server.binance_account.trades
                    if t["commissionAsset"] == "ETH"), Decimal(0))
