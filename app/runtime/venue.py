"""The venue: the seam between the runtime and a market, as one bundle of ports.

A ``Venue`` is what the runtime runs on: a ``Clock``, ``MarketData``, a ``TradingBroker`` and the
``Driver`` that moves the clock (bar by bar over history, or with the wall clock when live). Above
the venue nothing knows which one it is: the world, the agents' loop, the tools and every panel
hold these ports, and learn of orders and fills from events on the bus. ``VenueSpec`` says which
venue to open; ``app.runtime.venues.open_venue`` is the one place that knows the adapters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from app.domain.clock import Clock
from app.exchange.port import TradingBroker
from app.market.port import MarketData

if TYPE_CHECKING:
    from app.config import Settings
    from app.market.csv_loader import LoadedFile
    from app.market.replay import ReplayMarketData

VenueKind = Literal["replay", "live-paper", "live"]


class Driver(Protocol):
    """What moves a venue's clock and lets what depends on time react, in a fixed order: the
    clock moves, the broker settles what the market allows (fills are announced as they are
    committed), the time-dependent services run (due jobs fire), then the world is told
    (``ClockAdvanced``)."""

    speed: float
    paused: bool

    def on_advance(self, service: Callable[[int], object]) -> None:
        """Run ``service(now_ms)`` after every settle (the scheduler's ``fire_due``)."""
        ...

    def advance_to(self, now_ms: int) -> int:
        """Move to ``now_ms`` (never back); return how many fills the move produced."""
        ...

    def set_speed(self, speed: float) -> None:
        ...

    def step_once(self, step_ms: int) -> int:
        """Advance one step by hand (the window's "step" button while paused)."""
        ...

    async def run_paced(
        self, end_ms: int | None = None, *, tick_s: float = 0.1, max_step_ms: int | None = None
    ) -> None:
        """Let time flow until ``end_ms`` (a replay's end; None: until cancelled)."""
        ...


@dataclass(frozen=True)
class VenueSpec:
    """Which venue to open.

    Attributes:
        kind: ``replay`` (history from files, the paper broker filling on its bars), and next
            ``live-paper`` (live quotes, the paper broker on them) and ``live`` (a real account).
        data_files: replay: kline CSVs; empty means the bundled sample data.
        loaded: replay: files already loaded and checked (a backtest loads them first, to refuse
            bad data before anything is built); used instead of ``data_files``.
        at_ms: replay: where the cursor starts; None: the end of the data (everything visible).
        quote_currency: the currency a new paper account is kept in (default: the quote of the
            data's first symbol); an existing account keeps the one it was opened in.
        exchange: live kinds: the ccxt id of the exchange.
        symbols: live kinds: the symbols to follow.
    """

    kind: VenueKind = "replay"
    data_files: Sequence[Path] = ()
    loaded: Sequence[LoadedFile] = field(default=())
    at_ms: int | None = None
    quote_currency: str | None = None
    exchange: str = ""
    symbols: tuple[str, ...] = ()

    @classmethod
    def replay(
        cls, data_files: Sequence[Path] = (), at_ms: int | None = None,
        quote_currency: str | None = None,
    ) -> VenueSpec:
        return cls("replay", tuple(data_files), (), at_ms, quote_currency)


@dataclass
class Venue:
    """A market to run on: its ports, the driver of its clock, and what to call it.

    Attributes:
        label: what the window's title, account panel and status bar call it ("Offline
            replay", later "Paper on live quotes (binance)", "LIVE binance").
        end_ms: where a replay's data ends (None: a live market has no end).
        bar_ms: a replay's shortest candle: a paced tick moves no further, so no close is skipped
            (None: live).
        history: a replay's files, for what lays out a backtest (its timeline, buy-and-hold);
            None when live.
        reconfigure: applies saved settings the venue's adapters can take while running (old,
            new) and returns, in words, what waits for the next start; None: nothing can.
        closers: what ``aclose`` awaits (a live market's connections); a replay has none.
    """

    kind: VenueKind
    label: str
    clock: Clock
    market: MarketData
    broker: TradingBroker
    driver: Driver
    end_ms: int | None = None
    bar_ms: int | None = None
    history: ReplayMarketData | None = None
    reconfigure: Callable[[Settings, Settings], list[str]] | None = None
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    @property
    def offline(self) -> bool:
        return self.kind == "replay"

    async def aclose(self) -> None:
        """Close the market's and the broker's connections (nothing to close for a replay)."""
        for close in self.closers:
            await close()
