"""Assemble the offline runtime: replay clock, market, tools, registry and executor.

One place wires the services together so the CLI, the tests and (later) the GUI build the same
thing. Dependencies are passed in, never looked up globally.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.domain.clock import ReplayClock
from app.market.replay import ReplayMarketData
from app.resources import sample_data_files
from app.tools.executor import MemoryRecorder, ToolCallRecorder, ToolExecutor
from app.tools.market_tools import build_market_tools
from app.tools.registry import ToolRegistry
from app.tools.spec import ToolSpec
from app.workspace import Workspace


@dataclass
class OfflineRuntime:
    """Everything a headless caller needs to run tools against replayed data."""

    workspace: Workspace
    clock: ReplayClock
    market: ReplayMarketData
    registry: ToolRegistry
    executor: ToolExecutor


def core_tool_specs(
    market: ReplayMarketData, clock: ReplayClock, workspace: Workspace
) -> list[ToolSpec]:
    """Every tool group that is available offline, bound to the given services."""
    from app.indicators.engine import IndicatorEngine
    from app.tools.indicator_tools import build_indicator_tools

    specs = build_market_tools(market)
    specs += build_indicator_tools(market, IndicatorEngine())
    return specs


def build_offline_runtime(
    workspace: Workspace,
    data_files: Sequence[Path] = (),
    at_ms: int | None = None,
    recorder: ToolCallRecorder | None = None,
) -> OfflineRuntime:
    """Replay ``data_files`` (default: the bundled sample data) with the cursor at ``at_ms``.

    Without ``at_ms`` the cursor sits at the end of the data, so every candle is visible.
    """
    files = list(data_files) or sample_data_files()
    clock = ReplayClock(0)
    market = ReplayMarketData.from_paths(clock, files)
    clock.advance_to(market.end_ms() if at_ms is None else at_ms)
    registry = ToolRegistry(core_tool_specs(market, clock, workspace))
    executor = ToolExecutor(
        registry,
        recorder or MemoryRecorder(),
        clock,
        default_timeout_s=workspace.settings().tools.default_timeout_s,
    )
    return OfflineRuntime(workspace, clock, market, registry, executor)
