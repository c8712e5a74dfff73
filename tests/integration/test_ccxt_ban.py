"""A ban (HTTP 418) or a rate limit (429) is honoured: nothing more is sent to the exchange until
the pause it stated is over, from any of Kestrel's exchange objects.

ccxt's real binance classes talk to the fake Binance, which bans as Binance does
(``server.ban``: every request answered 418 with Retry-After, the ban lengthened while requests
keep coming). Requests are counted at the fake; time is the fake's (``server.now``), which the
exchange's gate measures its pause on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import aiohttp
import pytest

from app.ccxt.broker import CcxtBroker
from app.ccxt.errors import RequestsPausedError
from app.ccxt.gate import gate_for
from app.ccxt.market import CcxtMarketData
from app.domain.errors import ErrorCode, TemporaryError
from app.domain.trading import OrderStatus, OrderType, Side
from app.runtime.live_venue import AccountWatch
from app.store.order_journal import JournalState
from app.trading.port import OrderRequest
from tests.helpers.fake_exchange import FakeExchangeServer, Fault
from tests.helpers.fake_exchange.broker import (
    assert_journal_matches_exchange,
    close_broker,
    open_broker,
    reconciler,
)
from tests.helpers.fake_exchange.client import open_market
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    START_MS,
    fake_exchange_fixture,
    server_fixture,
)

BAN_S = 120
# START_MS is 06:37:15.250 UTC: a 120 s ban ends at 06:39:15
BANNED = ("binance has banned requests until 06:39:15 UTC (HTTP 418, Retry-After 120 s); "
          "nothing is sent before then.")
AGENT = "trader-1"


def limit_buy(key: str) -> OrderRequest:
    return OrderRequest(AGENT, "BTC/USDT", Side.BUY, OrderType.LIMIT, Decimal("0.01"),
                        price=Decimal("50000.00"), client_order_id=key)


async def meet_the_ban(server: FakeExchangeServer, market: CcxtMarketData) -> None:
    """Ban the client, and let one read meet the ban (the only way a client learns of it)."""
    server.ban("binance", BAN_S)
    with pytest.raises(RequestsPausedError) as caught:
        await market.ticker("ETH/USDT")
    assert caught.value.answered and caught.value.message.startswith(BANNED)
    assert "Way too many requests" in caught.value.details["exchange_message"]


Call = Callable[[CcxtBroker, CcxtMarketData], Awaitable[Any]]
KINDS: dict[str, Call] = {
    "order": lambda broker, market: broker.create_order(limit_buy("k-ban:1")),
    "klines": lambda broker, market: market.series("ETH/USDT", "4h"),
    "ticker": lambda broker, market: market.ticker("ETH/USDT"),
    "order book": lambda broker, market: market.order_book("ETH/USDT", 5),
    "balances": lambda broker, market: broker.refresh_balances(),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_during_a_ban_a_read_or_an_order_sends_nothing_and_says_until_when_then_flows_after(
    server: FakeExchangeServer, tmp_path: Any, kind: str
) -> None:
    call = KINDS[kind]

    async def scenario() -> None:
        broker, market = await open_broker(server, tmp_path / "kestrel.db")
        try:
            await broker.last_price("BTC/USDT")  # an order's reference price, read before
            await meet_the_ban(server, market)
            asked = len(server.requests)
            for _ in range(3):  # an analyst and a driver ask again and again
                with pytest.raises(RequestsPausedError) as caught:
                    await call(broker, market)
                error = caught.value
                assert error.message == BANNED
                assert isinstance(error, TemporaryError) and error.code is ErrorCode.RATE_LIMITED
                assert error.retry_after_s == BAN_S and error.details["kind"] == "temporary"
                assert not error.answered
            assert len(server.requests) == asked  # nothing reached the exchange
            assert server.banned_until("binance") == START_MS + BAN_S * 1000  # not lengthened
            server.now.set(START_MS + BAN_S * 1000)  # the ban is over
            await call(broker, market)
            assert len(server.requests) > asked
        finally:
            await close_broker(broker, market)

    asyncio.run(scenario())


def test_an_order_held_by_a_ban_is_journaled_not_sent_and_may_be_sent_after_it(
    server: FakeExchangeServer, tmp_path: Any
) -> None:
    async def scenario() -> None:
        broker, market = await open_broker(server, tmp_path / "kestrel.db")
        try:
            await broker.last_price("BTC/USDT")
            await meet_the_ban(server, market)
            for _ in range(4):
                with pytest.raises(RequestsPausedError):
                    await broker.create_order(limit_buy("k-ban:2"))
            entry = broker.journal.by_agent_order_id("binance", AGENT, "k-ban:2")
            assert entry is not None and entry.state is JournalState.NOT_SENT
            assert entry.attempts == 0 and entry.reason == BANNED
            assert broker.unknown_run == 0
            assert server.count("binance", "order.create") == 0
            server.now.set(START_MS + BAN_S * 1000)
            order = await broker.create_order(limit_buy("k-ban:2"))  # the same tool call
            assert order.status is OrderStatus.SUBMITTED
            assert server.count("binance", "order.create") == 1
            assert_journal_matches_exchange(broker, server)
        finally:
            await close_broker(broker, market)

    asyncio.run(scenario())


def test_the_order_whose_answer_is_the_ban_is_rejected_and_ends_the_unknown_run(
    server: FakeExchangeServer, tmp_path: Any
) -> None:
    async def scenario() -> None:
        broker, market = await open_broker(server, tmp_path / "kestrel.db")
        try:
            await broker.last_price("BTC/USDT")
            server.fail("binance", "order.create", Fault.lost("status", 503))
            with pytest.raises(Exception, match="outcome is unknown"):
                await broker.create_order(limit_buy("k-ban:3"))
            assert broker.unknown_run == 1
            server.ban("binance", BAN_S)
            with pytest.raises(RequestsPausedError) as caught:
                await broker.create_order(limit_buy("k-ban:4"))
            assert caught.value.answered and caught.value.message.startswith(BANNED)
            entry = broker.journal.by_agent_order_id("binance", AGENT, "k-ban:4")
            assert entry is not None and entry.state is JournalState.REJECTED
            assert broker.unknown_run == 0  # the exchange answered: a definite refusal
        finally:
            await close_broker(broker, market)

    asyncio.run(scenario())


def test_the_account_watcher_skips_its_poll_during_a_ban_without_failing(
    server: FakeExchangeServer, tmp_path: Any
) -> None:
    async def scenario() -> None:
        broker, market = await open_broker(server, tmp_path / "kestrel.db")
        try:
            watch = AccountWatch(broker, reconciler(broker, server),
                                 hold=gate_for("binance").held)
            await watch()
            await meet_the_ban(server, market)
            asked = len(server.requests)
            for _ in range(5):
                await watch()  # no error: nothing asked
            assert len(server.requests) == asked
            server.now.set(START_MS + BAN_S * 1000)
            await watch()
            assert server.count("binance", "account") > 0
        finally:
            await close_broker(broker, market)

    asyncio.run(scenario())


def test_a_429_with_retry_after_holds_every_request_the_same_way(
    server: FakeExchangeServer, tmp_path: Any
) -> None:
    async def scenario() -> None:
        broker, market = await open_broker(server, tmp_path / "kestrel.db")
        try:
            await broker.last_price("BTC/USDT")
            server.fail("binance", "ticker", Fault.status(429, retry_after=30))
            with pytest.raises(RequestsPausedError) as caught:
                await market.ticker("ETH/USDT")  # 30 s is longer than a read waits: at once
            assert caught.value.message.startswith(
                "binance has rate-limited requests until 06:37:45 UTC (HTTP 429, Retry-After "
                "30 s); nothing is sent before then.")
            assert "Too many requests" in caught.value.details["exchange_message"]
            asked = len(server.requests)
            server.now.advance(10_000)
            for call in KINDS.values():
                with pytest.raises(RequestsPausedError) as held:
                    await call(broker, market)
                assert held.value.message == (
                    "binance has rate-limited requests until 06:37:45 UTC (HTTP 429, "
                    "Retry-After 20 s); nothing is sent before then.")
            assert len(server.requests) == asked
            server.now.advance(20_000)
            for call in KINDS.values():
                await call(broker, market)
            assert server.count("binance", "order.create") == 1
        finally:
            await close_broker(broker, market)

    asyncio.run(scenario())


def test_a_streaming_markets_rest_reads_share_the_exchanges_gate(
    server: FakeExchangeServer,
) -> None:
    async def scenario() -> None:
        plain = await open_market(server, "binance")
        streaming = await open_market(server, "binance", streams=True, history=50)
        try:
            await meet_the_ban(server, plain)
            asked = len(server.requests)
            with pytest.raises(RequestsPausedError, match="until 06:39:15 UTC"):
                await streaming.series("ETH/USDT", "1h")
            assert len(server.requests) == asked
        finally:
            await streaming.close()
            await plain.close()

    asyncio.run(scenario())


def test_the_fake_exchange_lengthens_a_ban_while_requests_keep_coming(
    server: FakeExchangeServer,
) -> None:
    """The fake's rule (what a client that does not honour a ban costs itself): the first
    request is told what is left, each later one doubles it."""
    async def scenario() -> list[tuple[int, str]]:
        server.ban("binance", BAN_S)
        url = f"{server.base_url}/binance/api/v3/ticker/24hr?symbol=BTCUSDT"
        answers = []
        async with aiohttp.ClientSession() as session:
            for _ in range(3):
                async with session.get(url) as response:
                    answers.append((response.status, response.headers["Retry-After"]))
        return answers

    assert asyncio.run(scenario()) == [(418, "120"), (418, "240"), (418, "480")]
    assert server.banned_until("binance") == START_MS + 480_000
    server.now.set(START_MS + 480_000)
    assert server.banned_until("binance") is None
