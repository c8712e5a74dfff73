"""What the agent table shows, gathered: each agent's row from the stores, the queue and its fills.

Kept apart from the panel so the widget is about layout and actions, and so the cost of a refresh
is visible in one place. A refresh runs up to four times a second during a fast replay, so each
part is read the cheap way: the agent list and a task by its key are single small reads on the
loop; LLM usage is summed from the table once per agent and then kept current from the
``LLMCallRecorded`` events (re-summing every call on every refresh would grow with the run); the
account's fills are read once through the broker port and then arrive as ``OrderFilled`` events.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from app.agents.conversation_store import UsageTotals
from app.events import LLMCallRecorded, OrderFilled
from app.trading.agent_pnl import PnLTracker
from app.ui.agents.agent_table import AgentRow

if TYPE_CHECKING:
    from app.runtime.world import World


class AgentFeed:
    """Builds the table's rows for one world."""

    def __init__(self, world: World) -> None:
        self.world = world
        broker = world.venue.broker
        self.pnl = PnLTracker(broker, broker.last_price)
        self._usage: dict[str, UsageTotals] = {}

    def close(self) -> None:
        """Nothing to release: the feed reads through the ports and the stores' own reads."""

    def on_fill(self, event: OrderFilled) -> None:
        self.pnl.on_fill(event.fill)

    def on_llm_call(self, event: LLMCallRecorded) -> None:
        """Add the call to the agent's totals. An agent not read yet is left to its first read,
        which already holds this call (the row is committed before the event is published)."""
        usage = self._usage.get(event.agent_id)
        if usage is not None:
            self._usage[event.agent_id] = UsageTotals(
                calls=usage.calls + 1,
                input_tokens=usage.input_tokens + event.input_tokens,
                output_tokens=usage.output_tokens + event.output_tokens,
                cost=usage.cost + Decimal(event.cost),
            )

    async def rows(self) -> list[AgentRow]:
        """Every agent's row, read now; the fills are awaited first so that the rest is read
        and returned without a gap in which an agent could change unseen."""
        pnl = await self.pnl.update()
        world = self.world
        infos = world.agents.manager.list_agents()
        for agent_id in set(self._usage) - {info.agent_id for info in infos}:
            del self._usage[agent_id]
        rows = []
        health = world.agents.health
        for info in infos:
            usage = self._usage.get(info.agent_id)
            if usage is None:
                usage = self._usage[info.agent_id] = world.agents.conversations.usage(
                    agent_id=info.agent_id)
            template = world.agents.manager.templates.get(info.template)
            task = world.agents.queue.get(info.current_task_id) if info.current_task_id else None
            rows.append(AgentRow(
                info=info, template_label=template.display_name if template else info.template,
                task=task, usage=usage, pnl=pnl.get(info.agent_id),
                started=world.agents.manager.started,
                failing=health.failing(info.agent_id) if health is not None else None,
            ))
        return rows
