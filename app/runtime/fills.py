"""Tell agents about their fills: each fill of an agent's order becomes an ORDER_FILLED task.

A market order fills at the next bar's open, after the agent's task has ended, so the agent learns
of it the way a trader does: a message arrives. The Trader uses it to set its take-profit and stop-
loss on the position it now holds, and to record the outcome of an exit.

The router follows the broker's ``OrderFilled`` events, so it works the same over any venue. Fills
made while nobody listened (the settle of a resumed workspace at start-up, a crash between a fill
and its task) are caught up from the Broker port's trade history when the runtime starts. Each
fill is delivered once: the task's dedupe key is the fill id, so routing a fill again adds nothing.
"""

from __future__ import annotations

from app.agents.agent_store import AgentStore
from app.domain.agents import Task
from app.domain.clock import ms_to_iso
from app.domain.errors import KestrelError
from app.domain.trading import Fill, Order
from app.events import OrderFilled
from app.orchestration.queue import TaskQueue
from app.trading.port import Broker

ORDER_FILLED = "ORDER_FILLED"
# how far back the start-up catch-up looks: older fills were told in an earlier run
CATCH_UP_FILLS = 1_000


class FillRouter:
    """Queues an ORDER_FILLED task for every fill of an order placed by a known agent.

    Args:
        queue: the task queue (``enqueue`` with a dedupe key).
        agents: the agent store (``get``): fills of orders placed by no agent (a person's
            ``kestrel tool``, an MCP client) are not routed.
    """

    def __init__(self, queue: TaskQueue, agents: AgentStore) -> None:
        self._queue = queue
        self._agents = agents

    def on_filled(self, event: OrderFilled) -> None:
        self.route(event.fill, event.order)

    def route(self, fill: Fill, order: Order) -> Task | None:
        if self._agents.get(fill.agent_id) is None:
            return None
        payload = {
            "fill_id": fill.fill_id, "order_id": fill.order_id, "symbol": fill.symbol,
            "side": fill.side.value, "quantity": str(fill.quantity), "price": str(fill.price),
            "fee": str(fill.fee), "fee_currency": fill.fee_currency,
            "time": ms_to_iso(fill.time_ms), "realized_pnl": str(fill.realized_pnl),
            "client_order_id": order.client_order_id, "exit_kind": order.exit_kind.value,
        }
        return self._queue.enqueue(
            fill.agent_id, ORDER_FILLED, payload, "system", dedupe_key=f"fill:{fill.fill_id}"
        )

    async def catch_up(self, broker: Broker, limit: int = CATCH_UP_FILLS) -> list[Task]:
        """Route the newest ``limit`` fills again, oldest first (those told already add nothing)."""
        queued = []
        for fill in reversed(await broker.trades(limit=limit)):
            if self._agents.get(fill.agent_id) is None:
                continue
            try:
                order = await broker.get_order(fill.agent_id, fill.symbol, fill.order_id)
            except KestrelError:  # the broker no longer knows the order: nothing to tell
                continue
            task = self.route(fill, order)
            if task is not None:
                queued.append(task)
        return queued
