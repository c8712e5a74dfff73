"""One contract, two brokers: what the tools rely on holds for PaperBroker and CcxtBroker alike.

The paper broker runs on real 2020 BTC/USDT daily candles behind a replay clock; the live broker
on ccxt's own ``binance`` class against the fake Binance. ``ContractVenue.advance`` is the one
difference the contract allows: the paper broker fills a market order on the next candle, the
exchange at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest

from app.domain.errors import (
    AccessDeniedError,
    InsufficientFundsError,
    InvalidOrderError,
    NotFoundError,
)
from app.domain.trading import OrderStatus, OrderType, Side
from app.events import OrderCancelled, OrderFilled, OrderPlaced, OrderRejected
from app.trading.port import OrderRequest
from tests.helpers.fake_exchange.broker import close_broker, open_broker
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)
from tests.unit.exchange.support import make_rig

AGENT = "contract-agent"
SYMBOL = "BTC/USDT"


@dataclass
class ContractVenue:
    broker: Any
    advance: Callable[[], Awaitable[None]]
    events: list[Any] = field(default_factory=list)  # what the broker announced

    async def limit_far_below(self, key: str, qty: str = "0.01") -> OrderRequest:
        last = await self.broker.last_price(SYMBOL)
        price = (last * Decimal("0.8")).quantize(Decimal("0.01"))
        return OrderRequest(AGENT, SYMBOL, Side.BUY, OrderType.LIMIT, Decimal(qty), price=price,
                            client_order_id=key)


@pytest.fixture(params=["paper", "ccxt"], name="go")
def go_fixture(request, tmp_path):
    """Run ``scenario(venue)`` on one broker kind, on a fresh account."""
    def go(scenario: Callable[[ContractVenue], Awaitable[None]]) -> None:
        events: list[Any] = []
        if request.param == "paper":
            rig = make_rig(tmp_path / "paper.db", visible=30, cash="100000", events=events.append)

            async def step() -> None:
                rig.step(1)

            asyncio.run(scenario(ContractVenue(rig.broker, step, events)))
            return
        server = request.getfixturevalue("server")
        server.binance_account.reset()

        async def live() -> None:
            broker, market = await open_broker(server, tmp_path / "live.db",
                                               events=events.append)

            async def nothing() -> None:
                return None

            try:
                await scenario(ContractVenue(broker, nothing, events))
            finally:
                await close_broker(broker, market)

        asyncio.run(live())

    return go


def test_a_resting_order_is_listed_read_back_and_cancelled_once(go):
    async def scenario(v: ContractVenue) -> None:
        order = await v.broker.create_order(await v.limit_far_below("c-1"))
        assert order.status is OrderStatus.SUBMITTED and order.client_order_id == "c-1"
        assert [o.order_id for o in await v.broker.open_orders(AGENT, SYMBOL)] == [order.order_id]
        read = await v.broker.get_order(AGENT, SYMBOL, order.order_id)
        assert (read.order_id, read.quantity, read.price) == (
            order.order_id, order.quantity, order.price)
        cancelled = await v.broker.cancel_order(AGENT, SYMBOL, order.order_id)
        assert cancelled.status is OrderStatus.CANCELLED
        assert await v.broker.open_orders(AGENT, SYMBOL) == []
        with pytest.raises(InvalidOrderError, match="cannot be cancelled"):
            await v.broker.cancel_order(AGENT, SYMBOL, order.order_id)

    go(scenario)


def test_a_repeated_client_order_id_returns_the_order_already_placed(go):
    async def scenario(v: ContractVenue) -> None:
        req = await v.limit_far_below("c-2")
        first = await v.broker.create_order(req)
        second = await v.broker.create_order(req)
        assert second.order_id == first.order_id
        assert len(await v.broker.open_orders(AGENT)) == 1
        found = v.broker.find_order(AGENT, "c-2")
        assert found is not None and found.order_id == first.order_id
        assert v.broker.find_order(AGENT, "never-used") is None

    go(scenario)


def test_a_market_buy_fills_and_shows_in_positions_trades_and_account(go):
    async def scenario(v: ContractVenue) -> None:
        qty = Decimal("0.01")
        order = await v.broker.create_order(OrderRequest(
            AGENT, SYMBOL, Side.BUY, OrderType.MARKET, qty, client_order_id="c-3"))
        await v.advance()
        filled = await v.broker.get_order(AGENT, SYMBOL, order.order_id)
        assert filled.status is OrderStatus.FILLED and filled.filled_quantity == qty
        trades = await v.broker.trades(SYMBOL)
        assert sum(t.quantity for t in trades) == qty
        assert {t.order_id for t in trades} == {order.order_id}
        positions = await v.broker.positions(SYMBOL)
        assert len(positions) == 1 and 0 < positions[0].size <= qty  # a fee may come out of it
        account = await v.broker.account()
        assert account.quote_currency == "USDT"
        value = positions[0].size * positions[0].current_price
        assert abs(account.equity - (account.cash + value)) < Decimal("0.01")
        assert v.broker.position_size(SYMBOL) == positions[0].size

    go(scenario)


def test_refusals_name_what_is_wrong(go):
    async def scenario(v: ContractVenue) -> None:
        with pytest.raises(NotFoundError):
            await v.broker.precheck(OrderRequest(AGENT, "NOPE/USDT", Side.BUY, OrderType.MARKET,
                                                 Decimal("1")))
        with pytest.raises(InvalidOrderError, match="precision"):
            await v.broker.create_order(await v.limit_far_below("c-4", qty="0.0100001"))
        with pytest.raises(InvalidOrderError, match="hold no BTC"):
            await v.broker.precheck(OrderRequest(AGENT, SYMBOL, Side.SELL, OrderType.MARKET,
                                                 Decimal("0.01")))
        with pytest.raises(InsufficientFundsError):
            await v.broker.precheck(OrderRequest(AGENT, SYMBOL, Side.BUY, OrderType.MARKET,
                                                 Decimal("100")))
        with pytest.raises(NotFoundError):
            await v.broker.get_order(AGENT, SYMBOL, "999999999")

    go(scenario)


def test_an_agent_cannot_cancel_another_agents_order(go):
    async def scenario(v: ContractVenue) -> None:
        order = await v.broker.create_order(await v.limit_far_below("c-5"))
        with pytest.raises(AccessDeniedError):
            await v.broker.cancel_order("someone-else", SYMBOL, order.order_id)
        assert [o.order_id for o in await v.broker.open_orders()] == [order.order_id]

    go(scenario)


def test_orders_placed_cancelled_filled_and_refused_are_announced_as_events(go):
    """Whoever listens (the fill routing, the panels) learns of orders from the broker's events,
    whatever the venue: placed, cancelled, filled (with the order's client id) and refused."""
    async def scenario(v: ContractVenue) -> None:
        resting = await v.broker.create_order(await v.limit_far_below("e-1"))
        await v.broker.cancel_order(AGENT, SYMBOL, resting.order_id)
        bought = await v.broker.create_order(OrderRequest(
            AGENT, SYMBOL, Side.BUY, OrderType.MARKET, Decimal("0.01"), client_order_id="e-2"))
        await v.advance()
        with pytest.raises((InvalidOrderError, InsufficientFundsError)):
            await v.broker.create_order(OrderRequest(
                AGENT, SYMBOL, Side.SELL, OrderType.MARKET, Decimal("1000"),
                client_order_id="e-3"))
        kinds = [type(e).__name__ for e in v.events]
        assert kinds[:2] == ["OrderPlaced", "OrderCancelled"]
        assert kinds.count("OrderPlaced") == 2 and "OrderRejected" in kinds
        placed = [e.order for e in v.events if isinstance(e, OrderPlaced)]
        assert [o.order_id for o in placed] == [resting.order_id, bought.order_id]
        (cancelled,) = [e.order for e in v.events if isinstance(e, OrderCancelled)]
        assert cancelled.order_id == resting.order_id
        assert cancelled.status is OrderStatus.CANCELLED
        filled = [e for e in v.events if isinstance(e, OrderFilled)]
        assert filled and all(e.fill.order_id == bought.order_id for e in filled)
        assert filled[0].order.client_order_id == bought.client_order_id
        assert sum(e.fill.quantity for e in filled) == Decimal("0.01")
        (refused,) = [e for e in v.events if isinstance(e, OrderRejected)]
        assert (refused.agent_id, refused.source) == (AGENT, "broker")

    go(scenario)


def test_the_equity_history_grows_oldest_first_and_reads_from_a_moment(go):
    """The account panel's curve: the equity a broker recorded (the paper broker at each settle,
    the live one at each account reading), oldest first, and from a time on."""
    async def scenario(v: ContractVenue) -> None:
        await v.broker.account()
        await v.advance()
        await v.broker.account()
        points = await v.broker.equity_curve()
        assert points, "no equity point"
        assert [p.time_ms for p in points] == sorted({p.time_ms for p in points})
        assert all(p.equity > 0 for p in points)
        assert await v.broker.equity_curve(points[-1].time_ms) == points[-1:]
        assert await v.broker.equity_curve(points[-1].time_ms + 1) == []

    go(scenario)


def test_a_pair_quoted_in_another_currency_is_refused_in_the_same_words_on_paper_and_live(
    server, tmp_path
):
    """An account in USDC cannot buy BTC/USDT: its cash, equity and limits are all in USDC."""
    server.binance_account.reset()
    order = OrderRequest(AGENT, SYMBOL, Side.BUY, OrderType.MARKET, Decimal("0.01"),
                         client_order_id="k-quote:1")
    paper = make_rig(tmp_path / "paper.db", visible=30, quote_currency="USDC")

    async def refusals() -> list[InvalidOrderError]:
        broker, market = await open_broker(server, tmp_path / "live.db", quote_currency="USDC")
        caught = []
        try:
            for venue in (paper.broker, broker):
                with pytest.raises(InvalidOrderError) as refused:
                    await venue.create_order(order)
                caught.append(refused.value)
        finally:
            await close_broker(broker, market)
        return caught

    on_paper, live = asyncio.run(refusals())
    assert str(on_paper) == str(live) == (
        "BTC/USDT is quoted in USDT, but this account trades in USDC; only USDC pairs can be "
        "traded.")
    assert on_paper.details == live.details == {
        "symbol": "BTC/USDT", "quote": "USDT", "account_quote": "USDC"}
    assert server.count("binance", "order.create") == 0
    assert paper.ledger.load().orders == []
