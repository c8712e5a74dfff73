"""Open a workspace for the desktop: resume where it stopped, or seed the offline demo on first use.

A new user must see agents analyse, signal, order and fill within the first minute, offline. So a
workspace that has never run gets the demo: the bundled Coinbase BTC/USD hourly candles replayed
from a moment chosen by the Trend Analyst's own rules (``demo_start_ms``: the first hour, at least
``DEMO_DAYS_AHEAD`` days before the data ends, at which the analyst would signal BUY), and the
person's first chat message to the Orchestrator, ``DEMO_COMMAND``, which sets up a trend analyst,
a trader and an hourly job on the rule engine. Nothing is faked: the chosen moment only decides
where the replay starts; every decision after it is the agents' own, through the tools.

A workspace that has run before resumes at the point its paper account was settled to, with its
agents, jobs, questions and conversations as they were.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np

from app.agents.loop_share import LoopShare
from app.agents.rules.signals import Candle, Readings, assess_trend
from app.domain.clock import ReplayClock
from app.domain.trading import Mode
from app.events import EventBus
from app.indicators.catalogue import default_catalogue
from app.indicators.engine import compute
from app.market.replay import ReplayMarketData
from app.market.series import Floats, KlineSeries
from app.memory.roles import Signal
from app.resources import sample_data_files
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions, build_world
from app.store.db import connect
from app.workspace import Workspace

logger = logging.getLogger(__name__)

DEMO_SYMBOL = "BTC/USD"
DEMO_INTERVAL = "1h"
DEMO_COMMAND = f"watch {DEMO_SYMBOL} on 1h every 1h with a trend analyst and a trader"
DEMO_DAYS_AHEAD = 30
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
MIN_CONFIDENCE = Decimal("0.6")  # the Trend Analyst template's default
_SCAN_DAYS = 60


@dataclass(frozen=True, slots=True)
class Desk:
    world: World
    fresh: bool  # no agent had ever run here: the demo is to be seeded


def workspace_resume_ms(workspace: Workspace) -> int | None:
    """Where a used workspace's replay continues (its paper account's last settle), else None."""
    if not workspace.db_path.exists():
        return None
    conn = connect(workspace.db_path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='settled_ms'").fetchone()
    finally:
        conn.close()
    return int(row[0]) if row is not None and int(row[0]) >= 0 else None


def is_fresh(workspace: Workspace) -> bool:
    """True when no agent was ever created in the workspace."""
    if not workspace.db_path.exists():
        return True
    conn = connect(workspace.db_path)
    try:
        count: int = conn.execute("SELECT COUNT(*) FROM agents").fetchone()[0]
        return count == 0
    finally:
        conn.close()


def _dec(value: float) -> Decimal:
    return Decimal(repr(float(value)))


def _readings(s: KlineSeries, columns: dict[str, dict[str, Floats]], at: int) -> Readings:
    """What the Trend Analyst sees when candle ``at`` has just closed."""
    candles = [
        Candle(int(s.timestamp_ms[i]), _dec(s.open[i]), _dec(s.high[i]), _dec(s.low[i]),
               _dec(s.close[i]), _dec(s.volume[i]))
        for i in range(at - 29, at + 1)
    ]

    def pair(name: str, out: str) -> tuple[Decimal, Decimal]:
        values = columns[name][out]
        return _dec(values[at - 1]), _dec(values[at])

    def point(name: str, index: int) -> dict[str, Decimal]:
        return {key: _dec(values[index]) for key, values in columns[name].items()}

    return Readings(
        candles=candles, rsi=pair("RSI", "value"),
        macd=(point("MACD", at - 1), point("MACD", at)),
        bbands=(point("BBANDS", at - 1), point("BBANDS", at)), ema=pair("EMA", "value"),
    )


def demo_start_ms(market: ReplayMarketData, symbol: str = DEMO_SYMBOL,
                  days_ahead: int = DEMO_DAYS_AHEAD) -> int:
    """The first hour (with ``days_ahead`` days of data after it) at which the Trend Analyst's
    rules, with its default settings, give a BUY of at least its minimum confidence.

    The replay starts there, so the demo's first analysis already leads to a trade. Falls back to
    ``days_ahead`` days before the end when no such hour exists in the last ``_SCAN_DAYS`` days.
    """
    series = market.loaded(symbol, DEMO_INTERVAL).series
    end = int(series.timestamp_ms[-1]) + HOUR_MS
    latest = end - days_ahead * DAY_MS
    catalogue = default_catalogue()
    wanted: dict[str, dict[str, int | float]] = {"EMA": {"length": 50}, "RSI": {"length": 14},
              "MACD": {"fast": 12, "slow": 26, "signal": 9}, "BBANDS": {"length": 20, "std": 2.0}}
    first = max(0, int(np.searchsorted(series.timestamp_ms, latest - _SCAN_DAYS * DAY_MS)))
    window = series.tail(len(series) - max(0, first - 200))
    columns = {
        name: dict(compute(catalogue.get(name), params, window).columns)
        for name, params in wanted.items()
    }
    for at in range(200, len(window)):
        close_ms = int(window.timestamp_ms[at]) + HOUR_MS
        if close_ms > latest:
            break
        try:
            assessment = assess_trend(_readings(window, columns, at), Decimal(70), Decimal(30))
        except ArithmeticError:  # an indicator still undefined (NaN) at this bar
            continue
        if assessment.signal is Signal.BUY and assessment.confidence >= MIN_CONFIDENCE:
            return close_ms
    logger.info("no BUY setup found for the demo start; starting %d days before the end",
                days_ahead)
    return latest - latest % HOUR_MS


def open_desk(
    workspace: Workspace,
    *,
    bus: EventBus | None = None,
    data_files: Sequence[Path] = (),
    mode: Mode = Mode.PAPER,
    loop_share: LoopShare | None = None,
    start_ms: int | None = None,
) -> Desk:
    """Build the world of ``workspace``: resumed, or positioned for the demo when fresh.

    Args:
        loop_share: given by a window running the agents on its own event loop.
        start_ms: where the replay starts (the person's start date) instead of where the
            workspace left off or the demo's moment; refused (``OperationalError``) when the
            workspace's account already traded past it.
    """
    hold = workspace.hold_for_writing()  # before reading it: nobody else may be writing it
    try:
        files = list(data_files) or sample_data_files()
        probe = ReplayMarketData.from_paths(ReplayClock(0), files)
        fresh = is_fresh(workspace)
        start = start_ms if start_ms is not None else workspace_resume_ms(workspace)
        if start is None:
            symbol = DEMO_SYMBOL if DEMO_SYMBOL in probe.symbols() else probe.symbols()[0]
            start = demo_start_ms(probe, symbol)
    except BaseException:
        hold.release()
        raise
    world = build_world(
        workspace, VenueSpec.replay(files, start), WorldOptions(mode=mode, loop_share=loop_share),
        bus=bus, hold=hold,
    )
    return Desk(world, fresh)


def live_spec(
    workspace: Workspace, kind: str | None = None, exchange: str | None = None,
    symbols: Sequence[str] = (),
) -> VenueSpec | None:
    """The live venue chosen (``kind``, ``exchange``, ``symbols``; what is not given comes from
    the workspace's ``[venue]`` setting); None for the replay.

    Raises:
        OperationalError: the workspace's settings cannot be read.
    """
    venue = workspace.settings().venue
    if (kind or venue.kind) == "replay":
        return None
    return VenueSpec.live_paper(exchange or venue.exchange, tuple(symbols) or venue.symbols)


async def open_live_desk(
    workspace: Workspace,
    spec: VenueSpec,
    *,
    bus: EventBus | None = None,
    mode: Mode = Mode.PAPER,
    loop_share: LoopShare | None = None,
) -> Desk:
    """Build the world of ``workspace`` on a live venue: the market is connected on this loop,
    the world built off it. There is no demo to seed: the person chooses what to watch.

    Raises:
        OperationalError: the market cannot be reached (one sentence, naming the exchange), or
            the workspace's paper account trades on another market.
    """
    from app.runtime.open_world import open_world

    world = await open_world(workspace, spec, WorldOptions(mode=mode, loop_share=loop_share),
                             bus=bus, off_loop=True)
    return Desk(world, fresh=False)


async def seed_demo(world: World) -> None:
    """Say the demo's first sentence to the Orchestrator, as the person would in the chat."""
    orchestrator = await world.ensure_orchestrator()
    assert world.agents is not None
    world.agents.manager.send_user_message(orchestrator.agent_id, DEMO_COMMAND)
