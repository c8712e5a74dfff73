"""Build the agent runtime over real replayed data for tests, and move its market clock."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.agents.runtime import AgentRuntime, build_agent_runtime
from app.orchestration.ids import SeededIds
from app.workspace import Workspace
from tests.helpers.paths import BTC_USDT_1H

HOUR_MS = 3_600_000
# ten days into the BTC/USDT sample, so indicators have history; on the hour
START_MS = 1_569_826_800_000 + 10 * 24 * HOUR_MS
SETUP_COMMAND = "watch BTC/USDT on 1h every 1h with a trend analyst and a trader"


def agent_runtime(folder: Path, **kwargs: Any) -> AgentRuntime:
    workspace = Workspace.at(folder).ensure()
    kwargs.setdefault("ids", SeededIds("test"))
    kwargs.setdefault("at_ms", START_MS)
    return build_agent_runtime(workspace, data_files=[BTC_USDT_1H], **kwargs)


async def settle(runtime: AgentRuntime, timeout_s: float = 60.0) -> None:
    """Wait until every running agent is idle (fails the test instead of hanging)."""
    await asyncio.wait_for(runtime.manager.wait_idle(), timeout_s)


async def advance_hours(runtime: AgentRuntime, hours: int) -> None:
    for _ in range(hours):
        runtime.driver.advance_to(runtime.clock.now_ms() + HOUR_MS)
        await settle(runtime)
