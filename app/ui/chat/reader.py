"""Read pages of an agent's conversation, its questions and its tool-call durations off the loop.

A conversation can hold tens of thousands of messages (every tool result of a long replay), and a
page of them is parsed (XML, base64) before it can be drawn. Both happen in a worker thread on
``LedgerReader``'s own read-only connection to the workspace database, which holds the messages,
the questions and the ledger's ``tool_calls`` alike (WAL lets it read while agents write). The
agent stores' connections stay on the loop's thread, where their writers are.

A page never starts in the middle of a call: when its oldest message is a result, a parked
question or a reply, the messages before it are read too, back to the call, so a card is never
split over two pages.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from app.agents.conversation_store import StoredMessage
from app.domain.agents import Question, QuestionKind
from app.ui.chat.builder import ConversationBuilder
from app.ui.chat.entries import Message, ToolEntry
from app.ui.panels.ledger_reader import LedgerReader

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


@dataclass(slots=True)
class HistoryPage:
    """Entries built from one page of messages, oldest first."""

    builder: ConversationBuilder
    oldest_id: int | None  # where the next "load earlier" continues; None: the page is empty
    more: bool  # older messages exist


class ChatReader(LedgerReader):
    """The chat's reads of the workspace database, each in a worker thread."""

    async def page(self, agent_id: str, before: Message | None, limit: int) -> HistoryPage:
        """The ``limit`` messages before ``before`` (the newest ones when None), as entries.

        ``before`` may be a live message without a row id; its id is looked up first.
        """

        def read(conn: sqlite3.Connection) -> HistoryPage:
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
            builder = ConversationBuilder(agent_id, questions.get)
            builder.feed_all(Message.stored(row) for row in rows)
            tools = [e for e in builder.entries.values()
                     if isinstance(e, ToolEntry) and e.result_xml and e.market_ms is not None]
            if tools:
                times = _durations(conn, agent_id, min(e.market_ms or 0 for e in tools),
                                   max(e.market_ms or 0 for e in tools))
                for entry in tools:
                    entry.duration_ms = times.get(entry.result_xml)
            return HistoryPage(builder, oldest, more)

        return await self._query(read)

    async def durations(self, agent_id: str, from_ms: int, to_ms: int) -> dict[str, float]:
        """Durations of the agent's calls whose results were stored between the two times,
        by result XML (the exact text the conversation holds)."""

        def read(conn: sqlite3.Connection) -> dict[str, float]:
            return _durations(conn, agent_id, from_ms, to_ms)

        return await self._query(read)


def _row_id(conn: sqlite3.Connection, message: Message) -> int:
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
    conn: sqlite3.Connection, agent_id: str, task_ids: Sequence[str] | set[str]
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


def _durations(
    conn: sqlite3.Connection, agent_id: str, from_ms: int, to_ms: int
) -> dict[str, float]:
    rows = conn.execute(
        "SELECT result_xml, duration_ms FROM tool_calls WHERE agent_id=? "
        "AND started_ms BETWEEN ? AND ?",
        (agent_id, from_ms - CALL_WINDOW_MS, to_ms),
    ).fetchall()
    return {xml: float(duration) for xml, duration in rows}
