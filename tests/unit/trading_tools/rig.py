"""Tool-test set-up: the nine account/trading tools behind a real executor, broker and ledger.

``NotionalGuard`` is a real one-rule guard (not a mock): it refuses entries above a notional limit,
lets every exit through, and remembers what it judged, so tests can prove the guard ran first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal

from app.domain.errors import RiskRejection
from app.risk.guard import Violation
from app.risk.types import OrderIntent, RiskView
from app.tools.account_tools import AccountTools
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.protocol.render import ToolResult
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext
from app.tools.trade_tools import TradeTools
from tests.helpers.orders import order_entry
from tests.unit.exchange.support import Rig, make_rig


@dataclass
class NotionalGuard:
    limit: Decimal
    seen: list[OrderIntent] = field(default_factory=list)

    @contextmanager
    def admit(self, intent: OrderIntent, view: RiskView) -> Iterator[None]:
        self.seen.append(intent)
        if not intent.reduces_position and intent.notional > self.limit:
            raise RiskRejection(
                "max_order_notional",
                f"Order value {intent.notional} > limit {self.limit}",
                {"notional": str(intent.notional), "limit": str(self.limit)},
            )
        yield

    def preview(self, intent: OrderIntent, view: RiskView) -> tuple[str, Violation] | None:
        if not intent.reduces_position and intent.notional > self.limit:
            return "max_order_notional", Violation(
                f"Order value {intent.notional} > limit {self.limit}")
        return None

    def refuse(self, intent: OrderIntent, view: RiskView, rule: str, reason: str) -> None:
        self.seen.append(intent)


@dataclass
class ToolRig:
    rig: Rig
    guard: NotionalGuard
    executor: ToolExecutor

    def call(self, xml: str, agent: str = "a1") -> ToolResult:
        result = asyncio.run(self.executor.execute_text(AgentContext(agent_id=agent), xml))
        assert result is not None
        return result

    def data(self, xml: str, agent: str = "a1"):
        result = self.call(xml, agent)
        assert result.status == "success", result.xml
        return result.data[0]


def make_tool_rig(limit: str = "100000", visible: int = 1, **kwargs) -> ToolRig:
    rig = make_rig(visible=visible, **kwargs)
    guard = NotionalGuard(Decimal(limit))
    registry = ToolRegistry(
        AccountTools(rig.broker).specs() + TradeTools(order_entry(rig.broker, guard)).specs()
    )
    return ToolRig(rig, guard, ToolExecutor(registry, MemoryRecorder(), rig.clock))
