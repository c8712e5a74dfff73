"""Read the ledger's audit trail, fills and equity curve off the event loop, incrementally.

The broker writes through ``Ledger`` on the loop's thread, so the panels must not share its
connection from a worker thread: a read there could land inside one of the broker's transactions,
and ``Ledger.connection`` itself may start one (it flushes pending audit rows). This reader opens
its own read-only connection to the same file (WAL lets it read while the broker writes) and runs
every query in a worker thread behind one lock. An in-memory ledger has no file to share, so its
reads run on the loop through the ledger's connection (such ledgers only exist in tests and are
small). Queries are incremental (``after_id``, ``from_ms``) so a refresh costs the new rows only.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from app.domain.trading import Fill
from app.store.ledger import SELECT_FILLS, Ledger, fill_from_row

T = TypeVar("T")


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


_CALLS = (
    "SELECT id, started_ms, agent_id, tool_name, status, error_code, duration_ms, params_json "
    "FROM tool_calls WHERE id > ? ORDER BY id LIMIT ?"
)
_FILLS = SELECT_FILLS + " ORDER BY seq DESC LIMIT ?"


class LedgerReader:
    """Incremental, thread-side reads of one ledger for the UI."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        path = ledger.path
        self._file = None if str(path) == ":memory:" else Path(path)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def _query(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        # rows the ledger keeps in memory (batched audit rows, deferred settle points) must be
        # committed before another connection can see them; flushing is the loop thread's job
        self.ledger.flush()
        if self._file is None:
            return fn(self.ledger.connection)
        return await asyncio.to_thread(self._locked, fn)

    def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._conn is None:
                uri = f"{self._file.resolve().as_uri()}?mode=ro"  # type: ignore[union-attr]
                self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            return fn(self._conn)

    async def tool_calls(self, after_id: int = 0, limit: int = 1_000_000) -> list[ToolCallRow]:
        """Audit rows with an id above ``after_id``, oldest first."""

        def read(conn: sqlite3.Connection) -> list[ToolCallRow]:
            return [ToolCallRow(*row) for row in conn.execute(_CALLS, (after_id, limit))]

        return await self._query(read)

    async def tool_call_detail(self, call_id: int) -> ToolCallDetail | None:
        def read(conn: sqlite3.Connection) -> ToolCallDetail | None:
            row = conn.execute(
                "SELECT params_json, result_xml FROM tool_calls WHERE id = ?", (call_id,)
            ).fetchone()
            if row is None:
                return None
            return ToolCallDetail(call_id, json.loads(row[0]), row[1])

        return await self._query(read)

    async def fills(self, limit: int) -> list[Fill]:
        """The newest ``limit`` fills, newest first."""

        def read(conn: sqlite3.Connection) -> list[Fill]:
            return [fill_from_row(row) for row in conn.execute(_FILLS, (limit,))]

        return await self._query(read)

    async def equity_points(self, from_ms: int = -1) -> list[tuple[int, float]]:
        """Equity-curve points at or after ``from_ms`` (the last one may have been updated)."""

        def read(conn: sqlite3.Connection) -> list[tuple[int, float]]:
            cur = conn.execute(
                "SELECT time_ms, equity FROM equity_curve WHERE time_ms >= ? ORDER BY time_ms",
                (from_ms,),
            )
            return [(t, float(e)) for t, e in cur]

        return await self._query(read)

