"""Paper trading on live quotes, against the fake Binance on 127.0.0.1, through ``build_world``.

The paper broker must fill against the exchange's own touch (market orders at the ask or bid
plus slippage, limits when the live price crosses them), never against a quote older than the
order, and a workspace's paper account stays on the market it was opened on.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.cli.common import EXIT_USAGE
from app.cli.main import main
from app.domain.errors import OperationalError
from app.domain.trading import OrderStatus, OrderType, Side
from app.runtime.venue import VenueSpec
from app.runtime.world import World
from app.trading.port import OrderRequest
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.helpers.fake_exchange import FakeExchangeServer, FakeNow
from tests.helpers.fake_exchange.venues import Binance, MarketState
from tests.helpers.unreachable import no_retry_waits  # noqa: F401 - a fixture
from tests.integration.ccxt_fixtures import (  # noqa: F401 - fixtures
    START_MS,
    fake_exchange_fixture,
    server_fixture,
)
from tests.integration.live_paper import fake_exchange_settings, live, live_spec, live_world

SYMBOL = "BTC/USDT"
TICK_MS = 5_000


def touch_at(server: FakeExchangeServer, now_ms: int) -> tuple[Decimal, Decimal]:
    """The best bid and ask the fake Binance serves at ``now_ms``."""
    binance = server.venues["binance"]
    assert isinstance(binance, Binance)
    bids, asks = MarketState(FakeNow(now_ms)).book(SYMBOL, 1, binance.shape, 2)
    return Decimal(bids[0][0]), Decimal(asks[0][0])


async def tick(world: World, server: FakeExchangeServer, ms: int = TICK_MS) -> int:
    """Let ``ms`` of live time pass, then one round of the driver (read, settle, jobs)."""
    server.now.advance(ms)
    return await world.venue.driver.round()  # type: ignore[attr-defined]


def buy(order_type: OrderType, quantity: str, price: Decimal | None = None) -> OrderRequest:
    return OrderRequest("trader-1", SYMBOL, Side.BUY, order_type, Decimal(quantity), price=price)


@live
async def test_a_market_buy_fills_at_the_live_ask_plus_slippage(tmp_path, server):
    world = await live_world(tmp_path, server, agents=False)
    try:
        venue = world.venue
        assert venue.label == "Paper on live quotes (binance)"
        order = await venue.broker.create_order(buy(OrderType.MARKET, "0.01"))
        assert order.status is OrderStatus.SUBMITTED
        assert await tick(world, server) == 1
        (fill,) = await venue.broker.trades()
        _bid, ask = touch_at(server, server.now.now_ms())
        rules = venue.broker.market_rules(SYMBOL)
        assert fill.price == rules.round_price(ask * Decimal("1.0002"), up=True)  # 2 bps
        assert fill.time_ms == server.now.now_ms()
        assert not fill.is_maker
        account = await venue.broker.account()
        assert account.quote_currency == "USDT"
        assert account.positions[0].size == Decimal("0.01")
    finally:
        await world.aclose()


@live
async def test_a_resting_limit_buy_fills_at_its_price_once_the_live_ask_crosses_it(
    tmp_path, server
):
    world = await live_world(tmp_path, server, agents=False)
    try:
        broker = world.venue.broker
        await tick(world, server)
        _bid, ask = touch_at(server, server.now.now_ms())
        limit = ask - Decimal("40")
        await broker.create_order(buy(OrderType.LIMIT, "0.01", limit))
        asks = []
        for _ in range(240):  # up to 20 minutes of the tape
            filled = await tick(world, server)
            asks.append(touch_at(server, server.now.now_ms())[1])
            if filled:
                break
        (fill,) = await broker.trades()
        assert asks[-1] <= limit < min(asks[:-1] or [ask])  # it rested until the ask crossed
        assert fill.price == limit and fill.is_maker
    finally:
        await world.aclose()


@live
async def test_a_marketable_limit_buy_takes_the_better_live_ask(tmp_path, server):
    world = await live_world(tmp_path, server, agents=False)
    try:
        broker = world.venue.broker
        await broker.create_order(buy(OrderType.LIMIT, "0.01", Decimal("99999")))
        await tick(world, server)
        (fill,) = await broker.trades()
        assert fill.price == touch_at(server, server.now.now_ms())[1]
        assert not fill.is_maker
    finally:
        await world.aclose()


@live
async def test_an_order_never_fills_on_a_quote_read_before_it_was_placed(tmp_path, server):
    world = await live_world(tmp_path, server, agents=False)
    try:
        broker = world.venue.broker
        await broker.create_order(buy(OrderType.MARKET, "0.01"))
        world.venue.driver.advance_to(server.now.now_ms())  # settle on no new read
        assert await broker.trades() == []
        assert await tick(world, server) == 1
    finally:
        await world.aclose()


@live
async def test_a_market_sell_on_okx_fills_at_its_live_bid_less_slippage(tmp_path, server):
    world = await live_world(tmp_path, server, live_spec(server, "okx"), agents=False)
    try:
        broker = world.venue.broker
        assert world.venue.label == "Paper on live quotes (okx)"
        await broker.create_order(buy(OrderType.MARKET, "0.01"))
        await tick(world, server)
        await broker.create_order(OrderRequest("trader-1", SYMBOL, Side.SELL, OrderType.MARKET,
                                               Decimal("0.01")))
        await tick(world, server)
        sold = (await broker.trades())[0]
        book = await world.venue.market.order_book(SYMBOL, 1)
        assert sold.side is Side.SELL and book.best_bid is not None
        rules = broker.market_rules(SYMBOL)
        assert sold.price == rules.round_price(book.best_bid * Decimal("0.9998"), up=False)
    finally:
        await world.aclose()


@live
async def test_the_order_book_shown_is_the_exchanges_own(tmp_path, server):
    world = await live_world(tmp_path, server, agents=False)
    try:
        book = await world.venue.market.order_book(SYMBOL, 10)
        bid, ask = touch_at(server, server.now.now_ms())
        assert not book.synthetic
        assert (book.best_bid, book.best_ask) == (bid, ask)
        assert len(book.bids) == len(book.asks) == 10
    finally:
        await world.aclose()


@live
async def test_the_exchanges_market_rules_reach_the_paper_broker(tmp_path, server):
    world = await live_world(tmp_path, server, agents=False)
    try:
        rules = world.venue.broker.market_rules(SYMBOL)
        assert (rules.tick, rules.step) == (Decimal("0.01"), Decimal("0.00001"))
        assert rules.min_notional == Decimal(5)
    finally:
        await world.aclose()


@live
async def test_a_replay_workspace_is_not_continued_on_live_quotes(tmp_path, server):
    tool_world(Workspace.at(tmp_path).ensure()).close()  # its paper account: the replay's
    with pytest.raises(OperationalError, match="trades on the offline replay; it cannot "
                       "continue on live quotes of binance"):
        await live_world(tmp_path, server, agents=False)
    # the refusal let the workspace go, and closed the connection it made
    tool_world(Workspace.at(tmp_path)).close()


@live
@pytest.mark.usefixtures("no_retry_waits")
async def test_without_network_choosing_live_paper_says_so_in_one_sentence(tmp_path):
    unreachable = {"binance": {"timeout_s": 2, "ccxt_config": {
        "urls": {"api": {k: "http://127.0.0.1:9/api/v3" for k in
                         ("public", "private", "v1", "v3", "sapi")}}}}}
    from app.config import Settings
    from app.runtime.open_world import open_world
    from app.runtime.world import WorldOptions

    settings = Settings.model_validate({"exchanges": unreachable})
    with pytest.raises(OperationalError) as caught:
        await open_world(Workspace.at(tmp_path).ensure(), VenueSpec.live_paper("binance"),
                         WorldOptions(settings=settings, agents=False))
    text = str(caught.value)
    assert text.startswith("Cannot open paper on live quotes (binance): ")
    assert "network" in text and "--venue replay" in text


@pytest.mark.usefixtures("no_retry_waits")
def test_kestrel_run_without_network_prints_one_line_and_no_traceback(tmp_path, capsys):
    (tmp_path / "settings.toml").write_text(
        '[exchanges.binance]\ntimeout_s = 2\n'
        '[exchanges.binance.ccxt_config.urls.api]\npublic = "http://127.0.0.1:9/api/v3"\n'
        'v3 = "http://127.0.0.1:9/api/v3"\n', encoding="utf-8")
    code = main(["run", "--workspace", str(tmp_path), "--venue", "live-paper",
                 "--exchange", "binance", "--for", "5s"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err.startswith("kestrel: Cannot open paper on live quotes (binance)")
    assert "Traceback" not in err


@live
async def test_per_exchange_ccxt_options_from_the_workspace_settings_reach_the_adapter(
    tmp_path, server
):
    """The workspace's settings.toml points binance at the fake server (as a proxy or test
    server would be), and the venue opened from it talks to it."""
    from app.config import Settings
    from app.ui.settings_io import save_settings

    folder = tmp_path / "ws"
    Workspace.at(folder).ensure()
    save_settings(folder / "settings.toml",
                  Settings.model_validate({"exchanges": fake_exchange_settings(server)}))
    from app.runtime.open_world import open_world
    from app.runtime.world import WorldOptions

    before = server.count("binance", "markets")
    world = await open_world(Workspace.at(folder), live_spec(server), WorldOptions(agents=False))
    try:
        assert server.count("binance", "markets") == before + 1
        assert world.venue.market.symbols() == ("BTC/USDT", "ETH/USDT")
    finally:
        await world.aclose()


@live
async def test_a_fill_the_ledger_refused_on_live_quotes_is_made_once_at_the_next_round(
    tmp_path, server
):
    """The database refuses the fill (a trigger aborts it, as a failing disk would): the
    account stays as the ledger holds it and the next round fills the order once."""
    world = await live_world(tmp_path, server, agents=False)
    try:
        broker = world.venue.broker
        conn = broker.ledger.connection  # type: ignore[attr-defined]
        order = await broker.create_order(buy(OrderType.MARKET, "0.01"))
        conn.execute("CREATE TEMP TRIGGER refuse BEFORE INSERT ON fills "
                     "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")
        with pytest.raises(Exception, match="disk I/O error"):
            await tick(world, server)
        assert order.status is OrderStatus.SUBMITTED
        assert await broker.trades() == []
        assert (await broker.account()).positions == ()

        conn.execute("DROP TRIGGER refuse")
        assert await tick(world, server) == 1
        assert order.status is OrderStatus.FILLED
        assert len(await broker.trades()) == 1
        assert (await broker.account()).positions[0].size == Decimal("0.01")
        assert await tick(world, server) == 0
    finally:
        await world.aclose()
