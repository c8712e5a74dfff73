"""Build a workspace's world (agents included) over real replayed data for tests, and move its
market clock."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.orchestration.ids import SeededIds
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions, build_world
from app.workspace import Workspace
from tests.helpers.paths import BTC_USDT_1H

HOUR_MS = 3_600_000
# ten days into the BTC/USDT sample, so indicators have history; on the hour
START_MS = 1_569_826_800_000 + 10 * 24 * HOUR_MS
SETUP_COMMAND = "watch BTC/USDT on 1h every 1h with a trend analyst and a trader"


def agent_world(
    folder: Path,
    *,
    at_ms: int | None = START_MS,
    data_files: Sequence[Path] = (BTC_USDT_1H,),
    bus: Any = None,
    hold: Any = None,
    **options: Any,
) -> World:
    """The world of the workspace in ``folder`` on the BTC/USDT replay; ``options`` are
    ``WorldOptions`` fields (deterministic ids by default)."""
    options.setdefault("ids", SeededIds("test"))
    return build_world(
        Workspace.at(folder).ensure(), VenueSpec.replay(data_files, at_ms),
        WorldOptions(**options), bus=bus, hold=hold,
    )


async def settle(world: World, timeout_s: float = 60.0) -> None:
    """Wait until every running agent is idle (fails the test instead of hanging)."""
    assert world.agents is not None
    await asyncio.wait_for(world.agents.manager.wait_idle(), timeout_s)


async def advance_hours(world: World, hours: int) -> None:
    for _ in range(hours):
        world.venue.driver.advance_to(world.venue.clock.now_ms() + HOUR_MS)
        await settle(world)


def tool_world(
    workspace: Workspace,
    data_files: Sequence[Path] = (),
    *,
    at_ms: int | None = None,
    bus: Any = None,
    **options: Any,
) -> World:
    """A workspace's world without agents (what ``kestrel tool`` runs a call in): the replay of
    ``data_files`` (default: the bundled data) with the cursor at ``at_ms`` (default: the end)."""
    options.setdefault("agents", False)
    return build_world(workspace, VenueSpec.replay(data_files, at_ms), WorldOptions(**options),
                       bus=bus)
