"""The strategy seam of the backtest engine: ``BarContext`` and the ``Strategy`` protocol.

A strategy is anything with ``async def on_bar(self, ctx)`` that acts only by sending XML tool calls
through ``ctx.call`` (the executor), exactly as an LLM agent does. So the built-in strategies, the
rule-engine agents and the LLM agents of later issues all plug into the same place, see the market
only through the tools, and pass the same permission checks and Risk Guard.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from app.tools.executor import ToolExecutor
from app.tools.protocol.render import ToolResult
from app.tools.spec import AgentContext


class StrategyError(RuntimeError):
    """A strategy got something it cannot act on (e.g. a plain-text reply where a call was sent)."""


@dataclass(slots=True)
class BarContext:
    """What a strategy gets at one step of the replay (one per bar: slotted, not frozen, to keep
    its construction cheap; a strategy has no reason to change it).

    Attributes:
        now_ms: the replay cursor; every candle that closed at or before it is visible.
        step: 0-based index of this step.
        closed: symbols whose candle closed exactly at this step (a multi-interval run steps on
            the union of all close times, so a 1h symbol is not "new" at every 5m step).
        intervals: the interval each symbol is replayed in.
    """

    now_ms: int
    step: int
    closed: tuple[str, ...]
    symbols: tuple[str, ...]
    intervals: Mapping[str, str]
    agent: AgentContext
    executor: ToolExecutor

    async def call(self, xml: str) -> ToolResult:
        """Send one tool call as text and return its result (success, error or rejected)."""
        result = await self.executor.execute_text(self.agent, xml)
        if result is None:
            raise StrategyError(f"not a tool call: {xml[:80]!r}")
        return result


class Strategy(Protocol):
    @property
    def name(self) -> str:
        """Read-only here, so a wrapper may give its inner strategy's."""
        ...

    async def on_bar(self, ctx: BarContext) -> None:
        """Act on one step; the replay waits until this returns."""
        ...

    def parameters(self) -> dict[str, object]:
        """The strategy's settings, for the report."""
        ...
