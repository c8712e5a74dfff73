"""End to end on live quotes: the rule-engine Analyst and Trader, a few minutes of the fake
Binance's live time, a paper order filled against its live book.

The world is built by the same composition function as the desk's, on the live-paper venue; the
driver runs as in the window (``run_paced``), its waits injected: each moves the fake exchange's
time and lets the agents finish, so six minutes of live time take a few seconds and a run is
repeatable. The start is a moment of the fake's tape a few minutes before the Trend Analyst's
rules signal BUY on one-minute candles (as the offline demo picks its start on the replay).
"""

from __future__ import annotations

from decimal import Decimal

from app.domain.agents import AgentRole
from app.domain.market import OrderBook
from app.domain.trading import Side
from app.events import OrderFilled
from app.orchestration.ids import SeededIds
from tests.helpers.agents import settle
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    fake_exchange_fixture,
    server_fixture,
)
from tests.integration.live_paper import live, live_spec, live_world

# 2026-02-08 07:00 UTC: the tape's one-minute candles give the Trend Analyst a BUY at 07:01
# (confidence 0.60) and at 07:05 (0.75)
START_MS = 1_770_534_000_000
MINUTES = 6
SETUP = "watch BTC/USDT on 1m every 1m with a trend analyst and a trader"


@live
async def test_rule_engine_agents_trade_on_live_quotes_and_fill_against_the_live_book(
    tmp_path, server
):
    server.now.set(START_MS - 2_000)
    world_box: list = []

    async def live_time_passes(seconds: float) -> None:
        """The driver's wait: the fake exchange's time moves, the agents finish their work."""
        server.now.advance(int(seconds * 1000))
        await settle(world_box[0], 120)

    spec = live_spec(server, symbols=("BTC/USDT",), tick_s=5.0, sleep=live_time_passes)
    world = await live_world(tmp_path, server, spec, ids=SeededIds("live"))
    world_box.append(world)
    books: list[OrderBook] = []
    market = world.venue.market
    read_book = market.order_book

    async def recording_book(symbol: str, limit: int) -> OrderBook:
        book = await read_book(symbol, limit)
        books.append(book)
        return book

    market.order_book = recording_book  # type: ignore[method-assign]
    fills: list[OrderFilled] = []
    world.bus.subscribe(OrderFilled, fills.append)
    try:
        await world.start()
        orchestrator = await world.ensure_orchestrator()
        world.agents.manager.send_user_message(orchestrator.agent_id, SETUP)
        await settle(world)
        roles = {a.role for a in world.agents.manager.list_agents()}
        assert {AgentRole.ANALYST, AgentRole.TRADER} <= roles

        await world.venue.driver.run_paced(START_MS + MINUTES * 60_000)

        assert fills, "the Trader placed no order that filled in six minutes of live time"
        filled = fills[0]
        assert filled.fill.side is Side.BUY and filled.fill.symbol == "BTC/USDT"
        # against the book the exchange served at the moment of the fill: its ask plus 2 bps
        at_fill = [b for b in books if b.timestamp_ms <= filled.fill.time_ms]
        ask = at_fill[-1].best_ask
        assert ask is not None and not at_fill[-1].synthetic
        rules = world.venue.broker.market_rules("BTC/USDT")
        assert filled.fill.price == rules.round_price(ask * Decimal("1.0002"), up=True)
        trader = next(a for a in world.agents.manager.list_agents()
                      if a.role is AgentRole.TRADER)
        assert filled.order.agent_id == trader.agent_id
        # the analysis ran on the live candles, once a minute, on the live clock
        (job,) = world.agents.scheduler.jobs()
        assert job.last_run_ms is not None and job.last_run_ms >= START_MS + 4 * 60_000
        assert job.next_run_ms is not None and job.next_run_ms > server.now.now_ms()
        account = await world.venue.broker.account()
        assert account.positions and account.positions[0].symbol == "BTC/USDT"
    finally:
        await world.aclose()
