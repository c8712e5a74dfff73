"""Tell agents about their fills: each fill of an agent's order becomes an ORDER_FILLED task.

A market order fills at the next bar's open, after the agent's task has ended, so the agent learns
of it the way a trader does: a message arrives. The Trader uses it to set its take-profit and stop-
loss on the position it now holds, and to record the outcome of an exit. Each fill is delivered
once: the task's dedupe key is the fill id, so routing the same fills again (after a restart) adds
nothing.
"""

from __future__ import annotations

from typing import Any

from app.domain.agents import Task
from app.domain.clock import ms_to_iso
from app.store.ledger import Ledger

ORDER_FILLED = "ORDER_FILLED"
_SQL = (
    "SELECT f.seq, f.fill_id, f.order_id, f.agent_id, f.symbol, f.side, f.quantity, f.price, "
    "f.fee, f.fee_currency, f.time_ms, f.realized_pnl, o.client_order_id, o.exit_kind "
    "FROM fills f JOIN orders o ON o.order_id = f.order_id WHERE f.seq > ? ORDER BY f.seq"
)


class FillRouter:
    def __init__(self, ledger: Ledger, queue: Any, agents: Any) -> None:
        self._ledger = ledger
        self._queue = queue
        self._agents = agents
        self._last_seq = 0

    def route(self) -> list[Task]:
        """Queue an ORDER_FILLED task for every new fill of an order placed by a known agent."""
        rows = self._ledger.connection.execute(_SQL, (self._last_seq,)).fetchall()
        queued: list[Task] = []
        for row in rows:
            self._last_seq = row[0]
            agent_id = row[3]
            if self._agents.get(agent_id) is None:
                continue
            payload = {
                "fill_id": row[1], "order_id": row[2], "symbol": row[4], "side": row[5],
                "quantity": row[6], "price": row[7], "fee": row[8], "fee_currency": row[9],
                "time": ms_to_iso(row[10]), "realized_pnl": row[11], "client_order_id": row[12],
                "exit_kind": row[13],
            }
            queued.append(self._queue.enqueue(
                agent_id, ORDER_FILLED, payload, "system", dedupe_key=f"fill:{row[1]}"
            ))
        return queued
