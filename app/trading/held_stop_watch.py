"""Kestrel's own market watch for the stops it holds: a check after every move of the clock.

Every venue's driver publishes ``ClockAdvanced`` after the market has been read and the broker
settled (a replay's bar, a live tick), so the stops Kestrel holds are judged on the prices the
rest of the desk sees, at most one check at a time (a slow sale is not started twice).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from app.events import ClockAdvanced, EventBus
from app.trading.entry import OrderEntry

logger = logging.getLogger(__name__)


def watch_held_stops(orders: OrderEntry, bus: EventBus) -> None:
    """Check ``orders``' held stops after every ``ClockAdvanced`` on ``bus``."""
    busy = False

    async def check() -> None:
        nonlocal busy
        busy = True
        try:
            await orders.check_held_stops()
        finally:
            busy = False

    def on_clock(_event: ClockAdvanced) -> Awaitable[None] | None:
        # judged at once on every tick; a task is started only when a stop is held
        if busy or not orders.held_stops():
            return None
        return check()

    bus.subscribe(ClockAdvanced, on_clock)
