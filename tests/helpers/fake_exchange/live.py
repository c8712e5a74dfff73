"""Open a workspace's world on the ``live`` venue against the fake Binance.

The world is built as the app builds it (``open_world``: connect, then ``build_world``), with the
account's keys in a keyring backend held in memory (a real ``keyring`` backend, minus the disk),
the fake's time as the wall clock and a sleep that moves the fake time instead of waiting; and
what the live tests do to such a world: a Trader granted live trading, a tool call, the person's
answer to the unknown-orders question, a wait for a condition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.ccxt.credentials import key_names
from app.config import ExchangesSettings, Settings
from app.orchestration.ids import SeededIds
from app.runtime.live_startup import UnknownOrderChoice
from app.runtime.open_world import open_world
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions
from app.secrets import SecretStore
from app.tools.protocol.render import ToolResult
from app.tools.spec import AgentContext
from app.trading.live_account import ExchangeOrder
from app.workspace import Workspace
from tests.helpers.fake_exchange.broker import DUMMY_KEYS, AdvancingSleep
from tests.helpers.fake_exchange.client import fake_settings
from tests.helpers.fake_exchange.server import FakeExchangeServer
from tests.helpers.memory_keyring import MemoryKeyring

TRADER = "TraderAgent_Default_v1"


def keyring_with_keys(exchange: str = "binance") -> SecretStore:
    """A keyring holding the fake account's keys (nothing in the environment)."""
    store = SecretStore(backend=MemoryKeyring(), environ={})
    names = key_names(exchange)
    store.set(names["api_key"], DUMMY_KEYS.api_key)
    store.set(names["secret"], DUMMY_KEYS.secret)
    return store


def live_settings(server: FakeExchangeServer, **sections: Any) -> Settings:
    return Settings(exchanges=ExchangesSettings({"binance": fake_settings(server, "binance")}),
                    **sections)


def live_spec(
    server: FakeExchangeServer, *, confirmed: str = "binance", aging: bool = False
) -> VenueSpec:
    """The live venue on the fake Binance; ``aging``: the market's caches (tickers, candles)
    age with the fake time, so a price read after ``server.now.advance`` is the new one."""
    spec = VenueSpec.live_account("binance", ("BTC/USDT", "ETH/USDT"), "USDT",
                                  confirmed=confirmed)
    spec = replace(spec, time_source=server.now, sleep=AdvancingSleep(server.now))
    if aging:
        spec = replace(spec, market_options={"monotonic": lambda: server.now.now_ms() / 1000})
    return spec


async def live_world(
    folder: Path, server: FakeExchangeServer, *, secrets: SecretStore | None = None,
    settings: Settings | None = None, aging: bool = False, **options: Any,
) -> World:
    """The workspace in ``folder`` on the live venue (not started: ``await world.start(...)``)."""
    options.setdefault("ids", SeededIds("live"))
    return await open_world(
        Workspace.at(folder).ensure(), live_spec(server, aging=aging),
        WorldOptions(settings=settings or live_settings(server),
                     secrets=secrets or keyring_with_keys(), **options),
    )


def decided(choice: UnknownOrderChoice | None, seen: list[Any] | None = None):
    async def decide(orders: Sequence[ExchangeOrder]) -> UnknownOrderChoice | None:
        if seen is not None:
            seen.extend(orders)
        return choice
    return decide


async def call(world: World, agent_id: str, xml: str) -> ToolResult:
    """An agent's tool call as its loop makes it once the person has approved it (these tests
    are about the exchange; the approval policy has its own)."""
    ctx = AgentContext(agent_id=agent_id, approved=True)
    result = await world.executor.execute_text(ctx, xml)
    assert result is not None
    return result


def market_buy(quantity: str = "0.01000") -> str:
    return ("<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>MARKET"
            f"</order_type><quantity>{quantity}</quantity></create_order>")


async def send_buy_signal(world: World, agent_id: str) -> None:
    """An analyst's BUY signal for BTC/USDT at the last price to the Trader ``agent_id``: its
    stop 2% below, its take profit 4% above."""
    price = await world.venue.broker.last_price("BTC/USDT")
    assert world.agents is not None
    world.agents.queue.enqueue(agent_id, "NEW_MARKET_ANALYSIS_SIGNAL", {
        "symbol": "BTC/USDT", "side": "BUY", "confidence": "0.8", "price": str(price),
        "stop_loss": str((price * Decimal("0.98")).quantize(Decimal("0.01"))),
        "take_profit": str((price * Decimal("1.04")).quantize(Decimal("0.01"))),
        "reason": "test signal"}, "agent:analyst-1")


async def trader(world: World, name: str = "T") -> str:
    info = await world.agents.manager.create_agent(TRADER, name, {"symbols": ["BTC/USDT"]})
    return info.agent_id


def grant(world: World, agent_id: str) -> None:
    assert world.venue.live is not None
    world.venue.live.grants.grant(agent_id, "the person", world.venue.clock.now_ms())


def run_live(
    folder: Path, server: FakeExchangeServer, body: Callable[[World], Awaitable[None]],
    *, aging: bool = False,
) -> None:
    """Run ``body`` on the workspace in ``folder`` on the live venue, started with no
    unknown-order decision (an order the journal does not know stops it), closed afterwards."""
    async def scenario() -> None:
        world = await live_world(folder, server, aging=aging)
        try:
            await world.start(decided(None))
            await body(world)
        finally:
            await world.aclose()

    asyncio.run(scenario())
