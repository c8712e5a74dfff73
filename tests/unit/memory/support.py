"""Helpers of the memory tests: run XML tool calls as an agent, build call XML."""

from __future__ import annotations

import asyncio
from typing import Any

from app.domain.clock import parse_time
from app.memory.bank import MemoryBank
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.memory_tools import MemoryTools
from app.tools.protocol.render import ToolResult
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext

START = parse_time("2024-02-20T14:00:00Z")


class ToolRunner:
    """Runs XML tool calls as one agent through the real registry and executor."""

    def __init__(self, bank: MemoryBank, agent_id: str = "trader-1") -> None:
        self.executor = ToolExecutor(
            ToolRegistry(MemoryTools(bank).specs()), MemoryRecorder(), bank.clock
        )
        self.ctx = AgentContext(agent_id)

    def __call__(self, xml: str, agent_id: str | None = None) -> ToolResult:
        ctx = self.ctx if agent_id is None else AgentContext(agent_id)
        result = asyncio.run(self.executor.execute_text(ctx, xml))
        assert result is not None
        return result


def call(tool: str, **params: Any) -> str:
    """Build one tool call's XML from keyword parameters."""
    body = "".join(f"<{name}>{value}</{name}>" for name, value in params.items())
    return f"<{tool}>{body}</{tool}>"
