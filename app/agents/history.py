"""An agent's conversation history as a view reads it: pages of messages, their questions and the
durations of their tool calls, off the event loop.

A conversation can hold tens of thousands of messages (every tool result of a long replay), so
the chat reads it a page at a time, through the workspace database's ``OffLoopReader`` (its own
read-only connection, in a worker thread; WAL lets it read while agents write). The conversation
store's messages, the question store's questions and the ledger's tool calls are all read here,
so the chat itself holds no SQL. A page never starts in the middle of a call: when its oldest
message is a result, a parked question or a reply, the messages before it are read too, back to
the call, so a call is never split over two pages.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass

from app.agents.conversation_store import StoredMessage
from app.domain.agents import Question, QuestionKind
from app.store.audit_trail import read_durations
from app.store.reader import OffLoopReader

HOUR_MS = 3_600_000
# a call starts at most this long (market time) before its result is stored; in paced replay a
# slow call spans simulated hours
CALL_WINDOW_MS = 6 * HOUR_MS
_CONTINUATIONS = frozenset({"tool_result", "question", "user_reply"})
_MESSAGE_COLUMNS = "id, agent_id, task_id, step, role, kind, content, market_ms, wall_ms"
_QUESTION_COLUMNS = (
    "question_id, agent_id, task_id, kind, text, suggested_json, format_hint, asked_ms, answer, "
    "answered_ms"
)
_NEWEST = 1 << 62


@dataclass(frozen=True, slots=True)
class MessageKey:
    """Which message a page ends before: its row id, or (a live one) what identifies it."""

    agent_id: str
    task_id: str
    step: int
    kind: str
    content: str
    message_id: int | None = None


@dataclass(frozen=True, slots=True)
class HistoryRows:
    """One page: its messages oldest first, the questions they ask, their calls' durations (by
    result XML) and whether older messages exist."""

    messages: list[StoredMessage]
    questions: dict[str, Question]
    durations: dict[str, float]
    more: bool


class ConversationHistory:
    """Pages of one workspace's conversations, each read in the reader's worker thread."""

    def __init__(self, reader: OffLoopReader) -> None:
        self.reader = reader

    def close(self) -> None:
        self.reader.close()

    async def page(self, agent_id: str, before: MessageKey | None, limit: int) -> HistoryRows:
        """The ``limit`` messages before ``before`` (the newest ones when None)."""

        def read(conn: sqlite3.Connection) -> HistoryRows:
            before_id = _NEWEST if before is None else _row_id(conn, before)
            rows = _messages(conn, agent_id, before_id, limit)
            while rows and rows[0].kind in _CONTINUATIONS:
                earlier = _messages(conn, agent_id, rows[0].id, 1)
                if not earlier:
                    break
                rows = earlier + rows
            oldest = rows[0].id if rows else None
            more = oldest is not None and conn.execute(
                "SELECT 1 FROM messages WHERE agent_id=? AND id<? LIMIT 1", (agent_id, oldest)
            ).fetchone() is not None
            questions = _questions(conn, agent_id, {row.task_id for row in rows})
            results = [row.market_ms for row in rows if row.kind == "tool_result"]
            durations = read_durations(
                conn, agent_id, min(results) - CALL_WINDOW_MS, max(results)
            ) if results else {}
            return HistoryRows(rows, questions, durations, more)

        return await self.reader.run(read)

    async def durations(self, agent_id: str, from_ms: int, to_ms: int) -> dict[str, float]:
        """Durations of the agent's calls whose results were stored between the two times,
        by result XML (the exact text the conversation holds)."""
        return await self.reader.run(
            lambda conn: read_durations(conn, agent_id, from_ms - CALL_WINDOW_MS, to_ms)
        )


def _row_id(conn: sqlite3.Connection, message: MessageKey) -> int:
    if message.message_id is not None:
        return message.message_id
    row = conn.execute(
        "SELECT id FROM messages WHERE agent_id=? AND task_id=? AND step=? AND kind=? "
        "AND content=? ORDER BY id DESC LIMIT 1",
        (message.agent_id, message.task_id, message.step, message.kind, message.content),
    ).fetchone()
    return int(row[0]) if row is not None else _NEWEST


def _messages(
    conn: sqlite3.Connection, agent_id: str, before_id: int, limit: int
) -> list[StoredMessage]:
    rows = conn.execute(
        f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE agent_id=? AND id<? "  # noqa: S608
        "ORDER BY id DESC LIMIT ?",
        (agent_id, before_id, limit),
    ).fetchall()
    return [StoredMessage(*row) for row in reversed(rows)]


def _questions(
    conn: sqlite3.Connection, agent_id: str, task_ids: Collection[str]
) -> dict[str, Question]:
    if not task_ids:
        return {}
    marks = ",".join("?" * len(task_ids))  # placeholders only: the ids are bound
    where = f"agent_id=? AND task_id IN ({marks})"
    rows = conn.execute(
        f"SELECT {_QUESTION_COLUMNS} FROM questions WHERE {where}",  # noqa: S608
        (agent_id, *task_ids),
    ).fetchall()
    return {
        row[0]: Question(
            question_id=row[0], agent_id=row[1], task_id=row[2], kind=QuestionKind(row[3]),
            text=row[4], suggested_replies=tuple(json.loads(row[5])), format_hint=row[6],
            asked_ms=row[7], answer=row[8], answered_ms=row[9],
        )
        for row in rows
    }
