"""Open a workspace's world on paper-on-live-quotes against the fake exchange, time injected.

The venue runs on the fake exchange's time (``FakeNow``): its clock, the market adapter's cache
ages and the driver's waits all read or move it, so minutes of live time pass in a moment and a
test knows exactly which book a fill was made against.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.config import Settings
from app.runtime.open_world import open_world
from app.runtime.venue import Sleep, VenueSpec
from app.runtime.world import World, WorldOptions
from app.workspace import Workspace
from tests.helpers.fake_exchange import FakeExchangeServer
from tests.helpers.fake_exchange.client import fake_settings


def live[**P](test: Callable[P, Awaitable[None]]) -> Callable[P, None]:
    """Run an async test on its own event loop (the way this suite runs coroutines)."""

    @functools.wraps(test)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        asyncio.run(test(*args, **kwargs))  # type: ignore[arg-type]

    return run


def fake_exchange_settings(server: FakeExchangeServer, venue: str = "binance") -> dict[str, Any]:
    """The ``[exchanges]`` settings that point ``venue`` at the fake server."""
    return {venue: fake_settings(server, venue).model_dump(mode="json", exclude_defaults=True)}


def live_spec(
    server: FakeExchangeServer,
    venue: str = "binance",
    symbols: tuple[str, ...] = ("BTC/USDT", "ETH/USDT"),
    *,
    tick_s: float = 5.0,
    sleep: Sleep | None = None,
) -> VenueSpec:
    """Paper on the fake ``venue``'s live quotes, on the fake time (caches included)."""
    now = server.now
    return replace(
        VenueSpec.live_paper(venue, symbols), time_source=now, tick_s=tick_s, sleep=sleep,
        market_options={"monotonic": lambda: now.now_ms() / 1000},
    )


async def live_world(
    folder: Path, server: FakeExchangeServer, spec: VenueSpec | None = None, **options: Any
) -> World:
    """The world of the workspace in ``folder`` on ``spec`` (default: binance's live quotes)."""
    exchanges = {**fake_exchange_settings(server), **fake_exchange_settings(server, "okx")}
    settings = Settings.model_validate({"exchanges": exchanges})
    options.setdefault("settings", settings)
    return await open_world(Workspace.at(folder).ensure(), spec or live_spec(server),
                            WorldOptions(**options))
