"""The audit trail as a view reads it: tool calls, incrementally, and one call's details.

The ledger writes each tool call (``record_tool_call``) in the same database as the orders they
explain; this is the read side, off the loop (``OffLoopReader``), incremental (only ids above the
last one seen), with the bulky parameters and result XML read only for the call asked about.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from app.store.ledger import Ledger
from app.store.reader import OffLoopReader

_CALLS = (
    "SELECT id, started_ms, agent_id, tool_name, status, error_code, duration_ms, params_json "
    "FROM tool_calls WHERE id > ? ORDER BY id LIMIT ?"
)


@dataclass(frozen=True, slots=True)
class ToolCallRow:
    """One audit row as the table shows it; the bulky params and result XML load on demand."""

    call_id: int
    started_ms: int
    agent_id: str
    tool_name: str
    status: str
    error_code: str | None
    duration_ms: float
    params_json: str


@dataclass(frozen=True, slots=True)
class ToolCallDetail:
    call_id: int
    params: dict[str, Any]
    result_xml: str


def read_tool_calls(conn: sqlite3.Connection, after_id: int, limit: int) -> list[ToolCallRow]:
    """Audit rows with an id above ``after_id``, oldest first."""
    return [ToolCallRow(*row) for row in conn.execute(_CALLS, (after_id, limit))]


def read_tool_call_detail(conn: sqlite3.Connection, call_id: int) -> ToolCallDetail | None:
    row = conn.execute(
        "SELECT params_json, result_xml FROM tool_calls WHERE id = ?", (call_id,)
    ).fetchone()
    if row is None:
        return None
    return ToolCallDetail(call_id, json.loads(row[0]), row[1])


def read_durations(
    conn: sqlite3.Connection, agent_id: str, from_ms: int, to_ms: int
) -> dict[str, float]:
    """Durations of the agent's calls started between the two times, by their result XML."""
    rows = conn.execute(
        "SELECT result_xml, duration_ms FROM tool_calls WHERE agent_id=? "
        "AND started_ms BETWEEN ? AND ?",
        (agent_id, from_ms, to_ms),
    ).fetchall()
    return {xml: float(duration) for xml, duration in rows}


class AuditTrailReader:
    """The audit panel's reads of one ledger's tool calls, each in a worker thread."""

    def __init__(self, ledger: Ledger) -> None:
        self.reader = ledger_reader(ledger)

    def close(self) -> None:
        self.reader.close()

    async def tool_calls(self, after_id: int = 0, limit: int = 1_000_000) -> list[ToolCallRow]:
        """Audit rows with an id above ``after_id``, oldest first."""
        return await self.reader.run(lambda conn: read_tool_calls(conn, after_id, limit))

    async def tool_call_detail(self, call_id: int) -> ToolCallDetail | None:
        return await self.reader.run(lambda conn: read_tool_call_detail(conn, call_id))


def ledger_reader(ledger: Ledger) -> OffLoopReader:
    """A reader of ``ledger``'s database that sees every row the ledger keeps pending."""
    return OffLoopReader(ledger.path, flush=ledger.flush, loop_connection=lambda: ledger.connection)
