"""Where a new workspace's replay starts: where the data of the symbols it will watch exists.

(Replay-specific start-up, so it lives with the composition: the headless commands ask it through
``plan_for_files``, ``check_world_setup`` and ``world_hint_symbol``.)


A workspace that never ran starts ``days`` before the data ends. The data files need not cover
the same months (the bundled BTC/USDT hours begin on 2019-09-30, six days after the 30 days
before the data's end), so that moment alone can fall before a watched symbol's first candle, and
every analysis would then see no bars. The start therefore also waits until each watched symbol
(those a ``--setup`` names, else every symbol still trading then) has ``WARMUP_BARS`` candles
behind it, what the analysts' indicators need before their first reading. When no such moment
exists, the error says why, instead of a run in which nothing can happen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.domain.clock import ReplayClock, ms_to_iso
from app.domain.errors import InvalidParameterError, OperationalError
from app.domain.market import interval_ms, is_interval, split_symbol
from app.market.replay import ReplayMarketData
from app.resources import sample_data_files
from app.runtime.world import World

DAY_MS = 86_400_000
WARMUP_BARS = 60  # candles an analyst's indicators need (EMA 50 and MACD 26/9 with room)
SYMBOL_IN_TEXT = re.compile(r"\b([A-Za-z0-9]{2,12}/[A-Za-z0-9]{2,12})\b")
INTERVAL_IN_TEXT = re.compile(r"\bon\s+(\d+[mhdwM])\b")


def named_symbols(text: str) -> list[str]:
    """Symbols written like ``BTC/USDT`` in a request, upper-cased, in order, once each."""
    return list(dict.fromkeys(s.upper() for s in SYMBOL_IN_TEXT.findall(text)))


def _named_interval(text: str) -> str | None:
    match = INTERVAL_IN_TEXT.search(text)
    return match.group(1) if match is not None and is_interval(match.group(1)) else None


@dataclass(frozen=True, slots=True)
class NewWorkspace:
    """How a workspace that never ran begins: its first market time and its account's currency
    (``None``: the broker's default, the quote of the data's first symbol)."""

    start_ms: int
    quote_currency: str | None


def plan_new_workspace(
    market: ReplayMarketData, *, days: int, setup: str | None = None
) -> NewWorkspace:
    """Where a new workspace starts, and in which currency its paper account is kept.

    An account holds one quote currency, so a setup that watches ``BTC/USDT`` gets a USDT
    account: otherwise every order of its Trader would be refused.

    Raises:
        OperationalError: as ``new_workspace_start``; or the setup watches symbols quoted in
            different currencies.
    """
    start = new_workspace_start(market, days=days, setup=setup)
    watched = [s for s in named_symbols(setup or "") if s in market.symbols()]
    quotes = {s: split_symbol(s, "")[1] for s in watched}
    if len(set(quotes.values())) > 1:
        listed = ", ".join(f"{s} is quoted in {q}" for s, q in quotes.items())
        raise OperationalError(
            f"one paper account holds one quote currency ({listed}); watch them in separate "
            "workspaces"
        )
    return NewWorkspace(start, next(iter(quotes.values()), None) or None)


def new_workspace_start(market: ReplayMarketData, *, days: int, setup: str | None = None) -> int:
    """The market time a new workspace's replay starts at.

    Args:
        days: how far before the end of the watched symbols' data to start, at most.
        setup: the first request to the Orchestrator, if any; the symbols and the interval it
            names (``watch BTC/USDT on 1h …``) are the ones that must have data.

    Raises:
        OperationalError: the setup names only symbols the data lacks, or a watched symbol's
            data is too short for the warm-up, or the watched symbols' data do not overlap.
    """
    available = market.symbols()
    named = named_symbols(setup or "")
    if named:
        watched = [s for s in named if s in available]
        if not watched:
            raise OperationalError(
                f"the setup asks to watch {', '.join(named)}, but the data has "
                f"{'no such symbol' if len(named) == 1 else 'none of them'}; it has "
                f"{', '.join(available)}. Watch one of those, or replay your own file with "
                "--data FILE."
            )
    else:
        watched = list(available)
    interval = _named_interval(setup or "")
    first: dict[str, int] = {}
    ready: dict[str, int] = {}
    end: dict[str, int] = {}
    for symbol in watched:
        loaded = market.loaded(symbol, market.finest_interval(symbol))
        bar = max(loaded.bar_ms, interval_ms(interval)) if interval else loaded.bar_ms
        first[symbol] = int(loaded.series.timestamp_ms[0])
        ready[symbol] = first[symbol] + WARMUP_BARS * bar
        end[symbol] = int(loaded.series.timestamp_ms[-1]) + loaded.bar_ms
    latest_end = max(end.values())
    start = latest_end - days * DAY_MS
    if not named:  # no request yet: wait for the symbols that still trade then, if they can
        trading = [s for s in watched if end[s] > start]
        wait = max((ready[s] for s in trading), default=start)
        return max(start, wait) if wait < min(end[s] for s in trading) else start
    _check_enough(watched, first, ready, end)
    return max(start, *ready.values())


def _check_enough(
    watched: Sequence[str], first: dict[str, int], ready: dict[str, int], end: dict[str, int]
) -> None:
    for symbol in watched:
        if ready[symbol] >= end[symbol]:
            raise OperationalError(
                f"the data of {symbol} runs only from {ms_to_iso(first[symbol])} to "
                f"{ms_to_iso(end[symbol])}: too short for the {WARMUP_BARS} candles an analyst "
                "needs before its first analysis. Replay a longer file with --data FILE."
            )
    latest_ready = max(ready, key=lambda s: ready[s])
    earliest_end = min(end, key=lambda s: end[s])
    if ready[latest_ready] >= end[earliest_end]:
        raise OperationalError(
            f"the data of {earliest_end} ends at {ms_to_iso(end[earliest_end])}, before "
            f"{latest_ready} has {WARMUP_BARS} candles to analyse "
            f"({ms_to_iso(ready[latest_ready])}): there is no time at which both can be watched. "
            "Watch them in separate workspaces."
        )


@dataclass(frozen=True, slots=True)
class Untradeable:
    """Why a symbol cannot be watched in a workspace now.

    One check (``untradeable``) decides for every front; each front says it its own way:
    ``reason`` for the chat and the agents' tools (no flags in it), ``command_line`` as
    ``kestrel run --setup`` says it (with the flags that lead on).
    """

    symbol: str
    reason: str
    command_line: str


def untradeable(
    symbol: str,
    *,
    available: Sequence[str],
    account_quote: str,
    now_ms: int,
    history: ReplayMarketData | None,
    label: str,
    interval: str | None = None,
) -> Untradeable | None:
    """Whether ``symbol`` can be watched and traded here now; None when it can.

    It cannot when the market does not offer it, when it is quoted in another currency than the
    account holds (every order would be refused), or, on a replay, when its data has ended
    before the market time or has fewer than ``WARMUP_BARS`` candles (of ``interval`` or its
    finest) behind it: an analyst would fail on every task for want of data.
    """
    listed = ", ".join(available)
    if symbol not in available:
        if history is None:
            return Untradeable(
                symbol, f"{label} follows only {listed}",
                f"the setup asks to watch {symbol}, but {label} follows only {listed}; add it "
                f"with --symbol {symbol}")
        return Untradeable(
            symbol, f"the market data has no such symbol (it has {listed})",
            f"the setup asks to watch {symbol}, but the data has no such symbol; it has "
            f"{listed}. Watch one of those, or replay your own file with --data FILE.")
    quote = split_symbol(symbol, "")[1]
    if quote != account_quote:
        return Untradeable(
            symbol, f"it is quoted in {quote}, and this workspace's paper account holds "
                    f"{account_quote}, so every order would be refused",
            f"this workspace's paper account holds {account_quote}, so {symbol} (quoted in "
            f"{quote}) cannot be traded in it; watch a {account_quote} pair here, or use a new "
            "--workspace for it")
    if history is None:
        return None
    loaded = history.loaded(symbol, history.finest_interval(symbol))
    end = int(loaded.series.timestamp_ms[-1]) + loaded.bar_ms
    if end <= now_ms:
        return Untradeable(
            symbol, f"its data ended at {_when(end)}, before this workspace's market time "
                    f"{_when(now_ms)}: nothing can happen for it here",
            f"the data of {symbol} ended at {ms_to_iso(end)}, before this workspace's market "
            f"time {ms_to_iso(now_ms)}: nothing can happen for it here. Use a new --workspace, "
            "or replay later data with --data FILE.")
    first = int(loaded.series.timestamp_ms[0])
    bar = max(loaded.bar_ms, interval_ms(interval)) if interval and is_interval(interval) \
        else loaded.bar_ms
    ready = first + WARMUP_BARS * bar
    if ready > now_ms:
        began = "begins" if first > now_ms else "began"
        return Untradeable(
            symbol, f"its data {began} at {_when(first)}, so at this workspace's market time "
                    f"{_when(now_ms)} it has fewer than the {WARMUP_BARS} candles an analyst "
                    f"reads (there are enough from {_when(ready)})",
            f"the data of {symbol} {began} at {ms_to_iso(first)}: at this workspace's market time "
            f"{ms_to_iso(now_ms)} it has fewer than the {WARMUP_BARS} candles an analyst needs "
            "before its first analysis. Use a new --workspace for it.")
    return None


def _when(ms: int) -> str:
    """Market time for a person: ``2019-07-20 14:00 UTC``."""
    return ms_to_iso(ms).replace("T", " ")[:16] + " UTC"


def check_setup(market: ReplayMarketData, *, account_quote: str, now_ms: int, setup: str) -> None:
    """Before a setup is sent to a workspace's Orchestrator: can its symbols trade there now?

    A used workspace keeps its account's currency and resumes where it stopped, so a setup may
    name a symbol this account cannot trade, or whose data ended before now.

    Raises:
        OperationalError: saying which symbol and why nothing could happen.
    """
    interval = _named_interval(setup)
    for symbol in named_symbols(setup):
        refused = untradeable(symbol, available=market.symbols(), account_quote=account_quote,
                              now_ms=now_ms, history=market, label="the replay",
                              interval=interval)
        if refused is not None:
            raise OperationalError(refused.command_line)


def tradeable_symbol(market: ReplayMarketData, *, account_quote: str, now_ms: int) -> str | None:
    """A symbol the account can trade that still has data after ``now_ms`` (for a hint)."""
    for symbol in market.symbols():
        if untradeable(symbol, available=market.symbols(), account_quote=account_quote,
                       now_ms=now_ms, history=market, label="the replay") is None:
            return symbol
    return None


def plan_for_files(
    data_files: Sequence[Path], *, days: int, setup: str | None = None
) -> NewWorkspace:
    """``plan_new_workspace`` over the replay of ``data_files`` (default: the bundled data).

    Raises:
        DataFileError: a data file is unusable; and as ``plan_new_workspace``.
    """
    market = ReplayMarketData.from_paths(ReplayClock(0), list(data_files) or sample_data_files())
    return plan_new_workspace(market, days=days, setup=setup)


def world_untradeable(world: World, symbol: str, interval: str | None = None) -> Untradeable | None:
    """``untradeable`` for a world's market, account currency and market time."""
    venue = world.venue
    return untradeable(
        symbol, available=venue.market.symbols(), account_quote=venue.broker.quote_currency,
        now_ms=venue.clock.now_ms(), history=venue.history, label=venue.label,
        interval=interval)


def world_tradeable(world: World) -> list[str]:
    """The symbols a world's account can watch and trade now."""
    return [s for s in world.venue.market.symbols() if world_untradeable(world, s) is None]


def check_world_setup(world: World, setup: str) -> None:
    """Before ``kestrel run --setup`` sends its setup: can the setup's symbols trade in this
    world now (``untradeable``, the check the agents' own setups pass through too)?

    Raises:
        OperationalError: the first symbol that cannot, why, and the flags that lead on.
    """
    interval = _named_interval(setup)
    for symbol in named_symbols(setup):
        refused = world_untradeable(world, symbol, interval)
        if refused is not None:
            raise OperationalError(refused.command_line)


def refuse_untradeable(world: World, symbols: Sequence[str], interval: str | None) -> None:
    """The agents' side of the same check: an agent set up (or reconfigured) to watch a symbol
    this world cannot trade now is refused with the reason and what can be watched, so an
    Orchestrator (the rule engine's or a model) says it in the chat instead of creating agents
    that fail on every task.

    Raises:
        InvalidParameterError: naming the symbol, why, and the symbols this account can trade.
    """
    for symbol in symbols:
        refused = world_untradeable(world, str(symbol), interval)
        if refused is None:
            continue
        can = world_tradeable(world)
        offer = (f"It can watch and trade {', '.join(can)}." if can else
                 "It can trade none of its symbols now.")
        raise InvalidParameterError(
            f"{symbol} cannot be watched in this workspace: {refused.reason}. {offer}",
            details={"parameter": "initial_config_json", "symbol": str(symbol),
                     "tradeable": can},
        )


def world_hint_symbol(world: World) -> str | None:
    """A symbol the world's account can trade now (the chat's example), else None."""
    return next(iter(world_tradeable(world)), None)
