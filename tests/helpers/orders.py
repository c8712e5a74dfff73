"""Order entry over a broker and a guard, for tests that build the tools without a world.

The requests it keeps as asked live in an in-memory database of their own, as a world without a
workspace keeps them.
"""

from __future__ import annotations

from typing import Any

from app.store.order_requests import OrderRequests
from app.trading.entry import Guard, OrderEntry
from app.trading.port import TradingBroker


def order_entry(broker: TradingBroker, guard: Guard, **options: Any) -> OrderEntry:
    """``OrderEntry`` on ``broker`` behind ``guard``; ``options`` as ``OrderEntry`` takes them."""
    options.setdefault("now_ms", getattr(getattr(broker, "clock", None), "now_ms", lambda: 0))
    return OrderEntry(broker, guard, OrderRequests(":memory:", durable=False), **options)
