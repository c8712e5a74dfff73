"""Open a workspace's world on the ``live`` venue against the fake Binance.

The world is built as the app builds it (``open_world``: connect, then ``build_world``), with the
account's keys in a keyring backend held in memory (a real ``keyring`` backend, minus the disk),
the fake's time as the wall clock and a sleep that moves the fake time instead of waiting.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from app.ccxt.credentials import key_names
from app.config import ExchangesSettings, Settings
from app.orchestration.ids import SeededIds
from app.runtime.open_world import open_world
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions
from app.secrets import SecretStore
from app.workspace import Workspace
from tests.helpers.fake_exchange.broker import DUMMY_KEYS, AdvancingSleep
from tests.helpers.fake_exchange.client import fake_settings
from tests.helpers.fake_exchange.server import FakeExchangeServer
from tests.helpers.memory_keyring import MemoryKeyring


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


def live_spec(server: FakeExchangeServer, *, confirmed: str = "binance") -> VenueSpec:
    spec = VenueSpec.live_account("binance", ("BTC/USDT", "ETH/USDT"), "USDT",
                                  confirmed=confirmed)
    return replace(spec, time_source=server.now, sleep=AdvancingSleep(server.now))


async def live_world(
    folder: Path, server: FakeExchangeServer, *, secrets: SecretStore | None = None,
    settings: Settings | None = None, **options: Any,
) -> World:
    """The workspace in ``folder`` on the live venue (not started: ``await world.start(...)``)."""
    options.setdefault("ids", SeededIds("live"))
    return await open_world(
        Workspace.at(folder).ensure(), live_spec(server),
        WorldOptions(settings=settings or live_settings(server),
                     secrets=secrets or keyring_with_keys(), **options),
    )
