"""Open a ``CcxtMarketData`` on the fake exchange, the way a test needs it.

ccxt's own classes talk to the fake over real HTTP. Two test conveniences: the rate limiter's
spacing is 1 ms (it is still on; the fake has no limit to respect) and retry waits are recorded
instead of slept, so a test of a Retry-After of 7 s takes no 7 s.
"""

from __future__ import annotations

from typing import Any

from app.ccxt.market import CcxtMarketData
from app.config.exchanges import ExchangeSettings
from app.domain.clock import Clock
from tests.helpers.fake_exchange.server import FakeExchangeServer


class RecordedSleep:
    """An injected ``sleep`` that records each wait and returns at once."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def fake_settings(server: FakeExchangeServer, venue: str, timeout_s: float = 5.0,
                  rate_limit_ms: int = 1, **settings: Any) -> ExchangeSettings:
    """``settings``: any other ``ExchangeSettings`` field (``max_response_mib``...)."""
    return ExchangeSettings.model_validate({
        "timeout_s": timeout_s,
        "ccxt_config": {**server.ccxt_config(venue), "rateLimit": rate_limit_ms},
        **settings,
    })


async def open_market(
    server: FakeExchangeServer,
    venue: str,
    *,
    clock: Clock | None = None,
    timeout_s: float = 5.0,
    sleep: RecordedSleep | None = None,
    settings: dict[str, Any] | None = None,
    **options: Any,
) -> CcxtMarketData:
    """The adapter on ``venue`` of ``server``, started; close it with ``await market.close()``.

    ``settings``: other ``ExchangeSettings`` fields of the exchange (``max_response_mib``...).
    """
    market = await CcxtMarketData.open(
        venue,
        fake_settings(server, venue, timeout_s, **(settings or {})),
        clock=clock or server.now,
        sleep=sleep or RecordedSleep(),
        **options,
    )
    market.exchange.timeout_on_exit = 0  # REST only: no websocket to wait for on close
    return market
