"""The ``approvals`` table: each order the policy held, and the person's decision, kept with it.

The question an agent's loop asks about a held order offers two replies; ``is_approval`` reads a
typed answer (Telegram, the chat) the same way as the button.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.agents import Question
from app.domain.clock import Clock
from app.store.db import StoreDb, store_db


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    question_id: str
    agent_id: str
    task_id: str
    tool_name: str
    call_xml: str
    reason: str
    decision: str | None
    decided_ms: int | None
    order_id: str | None


APPROVE_WORDS = frozenset({"approve", "approved", "yes", "ok", "go", "confirm", "y"})
APPROVE_REPLY = "Approve"
REFUSE_REPLY = "Refuse"


def is_approval(answer: str) -> bool:
    return answer.strip().strip(".!").casefold() in APPROVE_WORDS


class ApprovalLog:
    def __init__(
        self, db_path: Path | str | StoreDb, clock: Clock, *, durable: bool = True
    ) -> None:
        self._db = store_db(db_path, durable=durable)
        self._clock = clock

    def close(self) -> None:
        self._db.close()

    def requested(self, question: Question, tool_name: str, call_xml: str, reason: str) -> None:
        self._db.conn.execute(  # a redelivered task asks again: keep the first request only
            "INSERT INTO approvals (question_id, agent_id, task_id, client_order_id, tool_name, "
            "params_json, reason) SELECT ?,?,?,?,?,?,? WHERE NOT EXISTS "
            "(SELECT 1 FROM approvals WHERE question_id=?)",
            (
                question.question_id, question.agent_id, question.task_id,
                question.details.get("call_key"), tool_name,
                json.dumps({"call_xml": call_xml}), reason, question.question_id,
            ),
        )

    def decided(self, question: Question, decision: str, order_id: str | None) -> None:
        self._db.conn.execute(
            "UPDATE approvals SET decision=?, decided_ms=?, order_id=? WHERE question_id=?",
            (decision, self._clock.now_ms(), order_id, question.question_id),
        )

    def all(self) -> list[ApprovalRecord]:
        rows = self._db.conn.execute(
            "SELECT question_id, agent_id, task_id, tool_name, params_json, reason, decision, "
            "decided_ms, order_id FROM approvals ORDER BY id"
        ).fetchall()
        return [_record(row) for row in rows]


def _record(row: tuple[Any, ...]) -> ApprovalRecord:
    return ApprovalRecord(
        row[0], row[1], row[2], row[3], json.loads(row[4])["call_xml"], row[5], row[6], row[7],
        row[8],
    )
