"""Open a venue: the one place that knows the adapters behind the ports.

``open_venue(spec, context)`` looks the spec's kind up in ``OPENERS`` and builds that venue's
clock, market data, broker and driver. A new venue is a new adapter of the ports plus one entry
here; nothing above the venue changes:

- ``replay`` (here): ``ReplayClock`` + ``ReplayMarketData`` over CSV history + ``PaperBroker``
  filling on the replayed bars + ``ReplayDriver``.
- ``live-paper`` (next): ``WallClock`` + ``CcxtMarketData`` (public endpoints, no keys) +
  ``PaperBroker`` filling on live quotes + a driver that settles on the market's own updates.
- ``live`` (after it): ``WallClock`` + ``CcxtMarketData`` + ``CcxtBroker`` (keys from the
  keyring, the order journal in the workspace, reconciliation at start).

Until an entry exists, opening that kind is refused with a sentence saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.config import PaperSettings, Settings
from app.domain.clock import ReplayClock, ms_to_iso
from app.domain.errors import OperationalError
from app.domain.trading import Mode
from app.events import EventBus, EventSink
from app.exchange.paper import Costs, PaperBroker
from app.market.replay import ReplayMarketData
from app.resources import sample_data_files
from app.runtime.replay import ReplayDriver
from app.runtime.venue import Venue, VenueSpec
from app.store.ledger import Ledger

REPLAY_LABEL = "Offline replay"


@dataclass(frozen=True)
class VenueContext:
    """What a venue is opened with, from the world being built.

    Attributes:
        ledger: where a paper account keeps its orders, fills and equity.
        paper: the paper account's cash, fees and slippage.
        mode: the account's trading mode (BACKTEST, PAPER, LIVE).
        events: where the broker announces orders and fills (the bus's ``publish_nowait``).
        bus: where the driver announces clock moves; None for a world nobody watches.
        resume: settle the account up to the cursor at once (a workspace reopened where its
            account was; not for a fresh backtest ledger or a read-only look).
        workspace: the workspace folder, named in errors (None: a backtest in memory).
    """

    ledger: Ledger
    paper: PaperSettings
    mode: Mode
    events: EventSink | None = None
    bus: EventBus | None = None
    resume: bool = False
    workspace: Path | None = None


def open_replay(spec: VenueSpec, context: VenueContext) -> Venue:
    """History replayed behind a cursor, the paper broker filling on its bars.

    Raises:
        DataFileError: a data file is unusable.
        OperationalError: the cursor is before the point the ledger's account was already
            settled to (history an account has traded through cannot change).
    """
    clock = ReplayClock(0)
    if spec.loaded:
        market = ReplayMarketData(clock, spec.loaded)
    else:
        market = ReplayMarketData.from_paths(clock, list(spec.data_files) or sample_data_files())
    clock.advance_to(market.end_ms() if spec.at_ms is None else spec.at_ms)
    paper = context.paper
    opened_in = context.ledger.meta_value("quote_currency")  # an account keeps its currency
    broker = PaperBroker(
        market, clock, context.ledger, initial_cash=paper.initial_cash,
        quote_currency=opened_in or spec.quote_currency, mode=context.mode,
        fee_maker=paper.fee_rate, fee_taker=paper.fee_rate, slippage_bps=paper.slippage_bps,
        events=context.events,
    )
    if clock.now_ms() < broker.settled_ms:
        where = context.workspace or context.ledger.path
        raise OperationalError(
            f"the paper account in {where} is already settled to "
            f"{ms_to_iso(broker.settled_ms)}; the replay cursor cannot go back to "
            f"{ms_to_iso(clock.now_ms())}. Use a later --at or another --workspace."
        )
    if context.resume:
        broker.settle()
    driver = ReplayDriver(clock, broker, end_ms=market.end_ms(), bus=context.bus)
    finest = min(market.loaded(s, market.finest_interval(s)).bar_ms for s in market.symbols())
    return Venue("replay", REPLAY_LABEL, clock, market, broker, driver, end_ms=market.end_ms(),
                 bar_ms=finest, history=market,
                 reconfigure=lambda old, new: paper_costs(broker, old, new))


def paper_costs(broker: PaperBroker, old: Settings, new: Settings) -> list[str]:
    """New fee and slippage for a running paper broker (its next orders and fills); a new
    starting cash only opens a new account, so it waits."""
    paper = new.paper
    broker.set_costs(Costs(paper.fee_rate, paper.fee_rate, paper.slippage_bps))
    if old.paper.initial_cash != paper.initial_cash:
        return ["the paper account's starting cash (a new workspace's account starts with it)"]
    return []


OPENERS: dict[str, Callable[[VenueSpec, VenueContext], Venue]] = {
    "replay": open_replay,
}


def open_venue(spec: VenueSpec, context: VenueContext) -> Venue:
    """The venue ``spec`` asks for.

    Raises:
        OperationalError: a kind with no adapter in this version; also what its opener raises.
    """
    opener = OPENERS.get(spec.kind)
    if opener is None:
        raise OperationalError(
            f"the {spec.kind} venue is not available in this version; available: "
            f"{', '.join(sorted(OPENERS))}"
        )
    return opener(spec, context)


@dataclass(frozen=True, slots=True)
class ReplayExtent:
    """What a replay's data covers, for choosing where to start before anything is built.

    Attributes:
        bars: per symbol, how many candles its finest file holds.
    """

    symbols: tuple[str, ...]
    start_ms: int
    end_ms: int
    bars: dict[str, int]


def replay_extent(data_files: Sequence[Path] = ()) -> ReplayExtent:
    """Read the files (default: the bundled sample data) and say what they cover.

    Raises:
        DataFileError: a data file is unusable.
    """
    market = ReplayMarketData.from_paths(ReplayClock(0), list(data_files) or sample_data_files())
    bars = {
        s: int(market.loaded(s, market.finest_interval(s)).series.timestamp_ms.size)
        for s in market.symbols()
    }
    return ReplayExtent(tuple(market.symbols()), market.start_ms(), market.end_ms(), bars)
