"""The venue: the seam between the runtime and a market, as one bundle of ports.

A ``Venue`` is what the runtime runs on: a ``Clock``, ``MarketData``, a ``TradingBroker`` and the
``Driver`` that moves the clock (bar by bar over history, or with the wall clock when live). Above
the venue nothing knows which one it is: the world, the agents' loop, the tools and every panel
hold these ports, and learn of orders and fills from events on the bus. ``VenueSpec`` says which
venue to open; ``app.runtime.venues.open_venue`` is the one place that knows the adapters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from app.domain.clock import Clock
from app.domain.market_rules import MarketRules
from app.market.port import MarketData
from app.trading.live_account import LiveAccount
from app.trading.port import TradingBroker

if TYPE_CHECKING:
    from app.config import Settings
    from app.market.csv_loader import LoadedFile
    from app.market.replay import ReplayMarketData
    from app.runtime.blind_map import BlindMap

Sleep = Callable[[float], Awaitable[None]]

VenueKind = Literal["replay", "live-paper", "live"]


class LiveMarketData(MarketData, Protocol):
    """What a live venue needs of its market beyond the port: the exchange it is, the exchange's
    trading rules (for the paper broker and the Risk Guard), and a connection to close."""

    @property
    def exchange_id(self) -> str: ...

    def rules(self, symbol: str) -> MarketRules: ...

    async def close(self) -> None: ...


# What is live, said the same way wherever a person reads about venues (Settings > Exchanges,
# ``kestrel gui --help``, the README): three venues, and the live one never a default.
VENUES_IN_WORDS = (
    "Kestrel trades on three venues: the offline replay and paper on an exchange's live quotes "
    "(simulated fills, public data, no keys), either of which can be this workspace's default "
    "below; and LIVE, real orders with real money on your exchange account. LIVE is never a "
    "default: it opens only with kestrel --workspace DIR --venue live --exchange ID (the window "
    "asks you to type the exchange's name first), and an agent places orders there only once "
    "you mark it \"May trade live\" in the Agents panel. The keys below are what it uses; they "
    "are kept in the OS keyring, never in settings.toml."
)


class Driver(Protocol):
    """What moves a venue's clock and lets what depends on time react, in a fixed order: the
    clock moves, the broker settles what the market allows (fills are announced as they are
    committed), the time-dependent services run (due jobs fire), then the world is told
    (``ClockAdvanced``)."""

    speed: float
    paused: bool

    @property
    def last_error(self) -> str | None:
        """Why the market's last read failed (a live market); None: it worked."""
        ...

    @property
    def held(self) -> str | None:
        """Why the market is not read now (its exchange paused requests); None: it is."""
        ...

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
        self, end_ms: int | None = None, *, tick_s: float = 0.1, max_step_ms: int | None = None,
        settle: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Let time flow until ``end_ms`` (a replay's end; None: until cancelled); ``settle``
        is awaited between a replay's catching-up moves (see ``ReplayDriver.run_paced``)."""
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
        blind: replay: the agents see a disguised market (neutral symbol, shifted times,
            rescaled prices; ``app.runtime.blind``), their orders mapped back to real terms.
        symbols: live kinds: the symbols to follow (BASE/QUOTE); empty: every spot market.
        market: live kinds: the exchange's market data, already connected on the event loop
            the world will run on (``app.runtime.venues.connect_venue``; opening it is network
            I/O, building the world is not).
        time_source: live kinds: where the wall clock's time comes from (tests: a fake
            exchange's time); None: the system clock.
        tick_s: live kinds: seconds between two reads of the market by the driver.
        sleep: live kinds: how the driver waits between reads (tests: moving a fake clock).
        market_options: live kinds: options of the market adapter (tests: its ``monotonic``
            on the fake time, so its caches age with it).
        account: live: the exchange connection with the account's keys, connected like
            ``market`` (``app.runtime.live_venue.connect_live``).
        confirmed: live: the exchange the person confirmed trading on with real money (the
            window's dialog, ``kestrel run --confirm-live``); a live venue is refused unless it
            names ``exchange``.
        stop_limit_band: live: the exchange settings' ``stop_limit_band`` (set by
            ``connect_live``); None: the broker's default.
    """

    kind: VenueKind = "replay"
    data_files: Sequence[Path] = ()
    loaded: Sequence[LoadedFile] = field(default=())
    at_ms: int | None = None
    quote_currency: str | None = None
    exchange: str = ""
    symbols: tuple[str, ...] = ()
    blind: bool = False
    market: LiveMarketData | None = None
    time_source: Clock | None = None
    tick_s: float = 1.0
    sleep: Sleep | None = None
    market_options: Mapping[str, Any] = field(default_factory=dict)
    account: Any = None
    confirmed: str = ""
    stop_limit_band: Decimal | None = None

    @classmethod
    def replay(
        cls, data_files: Sequence[Path] = (), at_ms: int | None = None,
        quote_currency: str | None = None, *, blind: bool = False,
    ) -> VenueSpec:
        return cls("replay", tuple(data_files), (), at_ms, quote_currency, blind=blind)

    @classmethod
    def live_paper(
        cls, exchange: str, symbols: Sequence[str] = (), quote_currency: str | None = None,
    ) -> VenueSpec:
        """Paper trading on the live quotes of ``exchange`` (a ccxt id), no keys."""
        return cls("live-paper", quote_currency=quote_currency, exchange=exchange,
                   symbols=tuple(symbols))

    @classmethod
    def live_account(
        cls, exchange: str, symbols: Sequence[str] = (), quote_currency: str | None = None,
        *, confirmed: str = "",
    ) -> VenueSpec:
        """Real orders on the account whose keys are in the keyring for ``exchange``."""
        return cls("live", quote_currency=quote_currency, exchange=exchange,
                   symbols=tuple(symbols), confirmed=confirmed)

    @property
    def live(self) -> bool:
        return self.kind != "replay"


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
        account: a blind venue's real broker, whose ledger and answers are in real terms (what
            lays out a backtest's result reads it); None: ``broker`` is real.
        blind: a blind venue's disguise (``app.runtime.blind_map``); None: the agents see the market
            as it is.
        before_agents: awaited by ``World.start`` before any agent runs, with the person's
            decision about orders the venue finds and does not know (a live account's
            reconciliation); None: nothing to do first.
        live: a live exchange account's reconciliation and grants, for the fronts; None on
            every other venue.
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
    account: TradingBroker | None = None
    blind: BlindMap | None = None
    before_agents: Callable[[Any], Awaitable[object]] | None = None
    live: LiveAccount | None = None

    @property
    def is_live_account(self) -> bool:
        """Real money: every view says LIVE."""
        return self.kind == "live"

    @property
    def offline(self) -> bool:
        return self.kind == "replay"

    @property
    def real_broker(self) -> TradingBroker:
        """The broker in real terms (the blind one's own, else ``broker``)."""
        return self.account if self.account is not None else self.broker

    async def aclose(self) -> None:
        """Close the market's and the broker's connections (nothing to close for a replay)."""
        for close in self.closers:
            await close()
