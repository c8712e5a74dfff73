"""Conversations and LLM usage: every message an agent saw or said, and what each call cost.

A task's conversation is rebuilt from these rows, so a task redelivered after a crash continues
exactly where it stopped, and any decision can be audited or replayed later. A message is committed
before anything acts on it (the assistant's tool call is stored before the tool runs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from app.domain.clock import Clock
from app.events import ConversationMessageAdded, EventBus, LLMCallRecorded
from app.store.db import connect

# kinds sent to the model; the others ("question", "notice", "hidden_result") are for people
SENT_KINDS = frozenset({"task", "assistant", "tool_result", "user_reply"})


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    agent_id: str
    task_id: str
    step: int
    role: str
    kind: str
    content: str
    market_ms: int
    wall_ms: int


@dataclass(frozen=True, slots=True)
class UsageTotals:
    calls: int
    input_tokens: int
    output_tokens: int
    cost: Decimal


class ConversationStore:
    def __init__(
        self,
        db_path: Path | str,
        clock: Clock,
        bus: EventBus | None = None,
        *,
        durable: bool = True,
    ) -> None:
        self._conn = connect(db_path, durable=durable)
        self._clock = clock
        self._bus = bus

    def close(self) -> None:
        self._conn.close()

    def add(
        self, agent_id: str, task_id: str, step: int, role: str, kind: str, content: str
    ) -> StoredMessage:
        market_ms, wall_ms = self._clock.now_ms(), int(time.time() * 1000)
        cur = self._conn.execute(
            "INSERT INTO messages (agent_id, task_id, step, role, kind, content, market_ms, "
            "wall_ms) VALUES (?,?,?,?,?,?,?,?)",
            (agent_id, task_id, step, role, kind, content, market_ms, wall_ms),
        )
        message = StoredMessage(
            int(cur.lastrowid or 0), agent_id, task_id, step, role, kind, content, market_ms,
            wall_ms,
        )
        if self._bus is not None:
            self._bus.publish_nowait(
                ConversationMessageAdded(agent_id, task_id, step, role, kind, content)
            )
        return message

    def messages(self, task_id: str) -> list[StoredMessage]:
        return self._rows("WHERE task_id=? ORDER BY id", (task_id,))

    def recent(self, agent_id: str, limit: int = 200) -> list[StoredMessage]:
        """The agent's latest messages across tasks, oldest first (the chat panel's history)."""
        rows = self._rows("WHERE agent_id=? ORDER BY id DESC LIMIT ?", (agent_id, limit))
        return rows[::-1]

    def _rows(self, where: str, args: tuple[object, ...]) -> list[StoredMessage]:
        rows = self._conn.execute(
            "SELECT id, agent_id, task_id, step, role, kind, content, market_ms, wall_ms "  # noqa: S608
            f"FROM messages {where}",
            args,
        ).fetchall()
        return [StoredMessage(*row) for row in rows]

    def record_usage(
        self,
        *,
        agent_id: str,
        task_id: str,
        run_id: str,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int,
        cost: Decimal,
        latency_ms: float,
    ) -> None:
        self._conn.execute(
            "INSERT INTO llm_usage (agent_id, task_id, run_id, provider, model, input_tokens, "
            "output_tokens, cached_tokens, cost, latency_ms, market_ms, wall_ms) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                agent_id, task_id, run_id, provider, model, input_tokens, output_tokens,
                cached_tokens, str(cost), latency_ms, self._clock.now_ms(),
                int(time.time() * 1000),
            ),
        )
        if self._bus is not None:
            self._bus.publish_nowait(
                LLMCallRecorded(
                    agent_id, task_id, provider, model, input_tokens, output_tokens, str(cost),
                    latency_ms,
                )
            )

    def usage(
        self,
        *,
        agent_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
        since_wall_ms: int | None = None,
    ) -> UsageTotals:
        """Totals over the matching calls; costs are summed as Decimals, never floats."""
        clauses, args = [], []
        for column, value in (("agent_id", agent_id), ("task_id", task_id), ("run_id", run_id)):
            if value is not None:
                clauses.append(f"{column}=?")
                args.append(value)
        if since_wall_ms is not None:
            clauses.append("wall_ms>=?")
            args.append(since_wall_ms)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._conn.execute(
            f"SELECT input_tokens, output_tokens, cost FROM llm_usage {where}",  # noqa: S608
            args,
        ).fetchall()
        return UsageTotals(
            calls=len(rows),
            input_tokens=sum(r[0] for r in rows),
            output_tokens=sum(r[1] for r in rows),
            cost=sum((Decimal(r[2]) for r in rows), Decimal(0)),
        )
