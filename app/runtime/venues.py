"""Open a venue: the one place that knows the adapters behind the ports.

``open_venue(spec, context)`` looks the spec's kind up in ``OPENERS`` and builds that venue's
clock, market data, broker and driver. A new venue is a new adapter of the ports plus one entry
here; nothing above the venue changes:

- ``replay`` (here): ``ReplayClock`` + ``ReplayMarketData`` over CSV history + ``PaperBroker``
  filling on the replayed bars + ``ReplayDriver``.
- ``live-paper`` (here): ``LiveClock`` (wall time) + ``CcxtMarketData`` (public endpoints, no
  keys) + ``PaperBroker`` filling on the exchange's live touch (``QuoteFeed``) + ``LiveDriver``
  (reads the quotes, settles, fires due jobs every second and when an order is placed).
- ``live`` (``app.runtime.live_venue``): ``LiveClock`` + ``CcxtMarketData`` + ``CcxtBroker``
  (keys from the keyring, the order journal in the workspace, reconciliation before any agent
  runs) + ``LiveDriver``; opened only with the person's confirmation naming the exchange.

``spec.blind`` wraps a replay's ports in ``app.runtime.blind``'s disguise (the agents cannot
recognise the market). A live market is connected first, on the event loop the world will run on
(``connect_venue``: network I/O, which the synchronous world building never does); a failure
there is one clear sentence, and the offline replay stays available. Until an entry exists,
opening a kind is refused with a sentence saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from app.config import ExchangesSettings, PaperSettings, Settings
from app.domain.clock import ReplayClock, ms_to_iso
from app.domain.errors import OperationalError, ToolError
from app.domain.trading import Mode
from app.events import EventBus, EventSink
from app.exchange.paper import Costs, PaperBroker
from app.exchange.quotes import QuoteFeed
from app.market.replay import ReplayMarketData
from app.resources import sample_data_files
from app.runtime.blind import blind_venue
from app.runtime.live_clock import LiveClock
from app.runtime.live_driver import LiveDriver
from app.runtime.replay import ReplayDriver
from app.runtime.venue import Venue, VenueSpec
from app.secrets import SecretStore
from app.store.ledger import Ledger

REPLAY_LABEL = "Offline replay"


def live_paper_label(exchange: str) -> str:
    return f"Paper on live quotes ({exchange})"


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


def open_live_paper(spec: VenueSpec, context: VenueContext) -> Venue:
    """The exchange's live market, the paper broker filling on its touch; no keys.

    Raises:
        OperationalError: the market was not connected first (``connect_venue``), or the
            workspace's paper account trades on another market or in another currency.
    """
    market = spec.market
    if market is None:
        raise OperationalError(
            "the live market must be connected before the world is built "
            "(app.runtime.venues.connect_venue)"
        )
    clock = LiveClock(spec.time_source)
    feed = QuoteFeed(market, clock)
    paper = context.paper
    opened_in = context.ledger.meta_value("quote_currency")  # an account keeps its currency
    broker = PaperBroker(
        market, clock, context.ledger, initial_cash=paper.initial_cash,
        quote_currency=opened_in or spec.quote_currency, mode=context.mode,
        fee_maker=paper.fee_rate, fee_taker=paper.fee_rate, slippage_bps=paper.slippage_bps,
        rules={s: market.rules(s) for s in market.symbols()}, events=context.events,
        quotes=feed, venue=f"live-paper:{market.exchange_id}",
    )
    from app.ccxt.gate import gate_for

    gate = gate_for(market.exchange_id)  # a ban of the exchange holds its quotes too
    driver = LiveDriver(clock, broker.settle, refresh=feed.refresh, bus=context.bus,
                        tick_s=spec.tick_s, sleep=spec.sleep, hold=gate.held)
    if context.events is not None:
        gate.watch(context.events)

    async def close() -> None:
        if context.events is not None:
            gate.unwatch(context.events)
        await market.close()

    return Venue("live-paper", live_paper_label(market.exchange_id), clock, market, broker,
                 driver, closers=[close],
                 reconfigure=lambda old, new: paper_costs(broker, old, new))


def open_live(spec: VenueSpec, context: VenueContext) -> Venue:
    """Real orders on the exchange account (``app.runtime.live_venue``; loaded only here)."""
    from app.runtime.live_venue import open_live as opener

    return opener(spec, context)


OPENERS: dict[str, Callable[[VenueSpec, VenueContext], Venue]] = {
    "replay": open_replay,
    "live-paper": open_live_paper,
    "live": open_live,
}


async def connect_venue(
    spec: VenueSpec, exchanges: ExchangesSettings, secrets: SecretStore | None = None
) -> VenueSpec:
    """``spec`` with its live market connected (markets loaded, clock measured); a replay, or
    a spec already connected, as it is. Run it on the loop the world will run on; close what it
    opened with ``await spec.market.close()`` if the world is not built after all.

    Args:
        exchanges: the per-exchange ccxt options (URLs, proxy, ``options``) and timeouts.
        secrets: the keyring a live account's keys are read from (default: the OS keyring).

    Raises:
        OperationalError: no exchange given, ccxt missing or the id unknown, the exchange
            unreachable (saying so, and that the offline replay needs no network), or none of
            the symbols listed there.
    """
    if spec.kind == "live" and spec.account is None:
        from app.runtime.live_venue import connect_live

        return await connect_live(spec, exchanges, secrets)
    if not spec.live or spec.market is not None:
        return spec
    if not spec.exchange:
        raise OperationalError(
            f"the {spec.kind} venue needs an exchange: give its ccxt id, e.g. --exchange binance"
        )
    from app.ccxt.market import CcxtMarketData

    try:
        market = await CcxtMarketData.open(
            spec.exchange, exchanges.get(spec.exchange), clock=spec.time_source,
            symbols=spec.symbols or None, **spec.market_options,
        )
    except ToolError as exc:
        raise OperationalError(
            f"Cannot open {live_paper_label(spec.exchange).lower()}: {exc.message} "
            "Check the network connection (or the exchange's proxy and URLs in Settings > "
            "Exchanges). The offline replay needs no network: --venue replay."
        ) from exc
    return replace(spec, market=market)


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
    if spec.blind:
        if spec.kind != "replay":
            raise OperationalError("blind mode hides a replay's history; a live market cannot "
                                   "be disguised")
        return blind_venue(lambda events: opener(spec, replace(context, events=events)),
                           context.events)
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
