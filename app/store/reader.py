"""Read a workspace database off the event loop: one read-only connection, queries in a thread.

The stores write through their own connections on the loop's thread, so a view must not share
them from a worker thread: a read there could land inside one of their transactions, and the
ledger's connection itself may start one (it flushes pending audit rows). An ``OffLoopReader``
opens its own read-only connection to the same file (WAL lets it read while the stores write) and
runs every query in a worker thread behind one lock. An in-memory database has no file to share,
so its reads run on the loop through the owner's connection (such databases only exist in tests
and backtests, and are small). The stores hand out readers for their own tables (``Ledger``'s
audit trail, the conversation history): the views never write SQL.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from app.store.texts import install

T = TypeVar("T")


class OffLoopReader:
    """Runs read functions against a database file in a worker thread.

    Args:
        path: the database file (":memory:": read through ``loop_connection`` on the loop).
        flush: called on the loop before each read, so rows a store keeps in memory (batched
            audit rows) are committed and visible to this connection.
        loop_connection: the owner's connection, for an in-memory database.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        flush: Callable[[], None] | None = None,
        loop_connection: Callable[[], sqlite3.Connection] | None = None,
    ) -> None:
        self._file = None if str(path) == ":memory:" else Path(path)
        if self._file is None and loop_connection is None:
            raise ValueError("an in-memory database is read through its owner's connection")
        self._flush = flush
        self._loop_connection = loop_connection
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` in the reader's thread (on the loop for an in-memory database)."""
        if self._flush is not None:
            self._flush()  # pending rows are committed by the loop's thread, the writer's
        if self._file is None:
            assert self._loop_connection is not None
            return fn(self._loop_connection())
        return await asyncio.to_thread(self._locked, fn)

    def _locked(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._conn is None:
                uri = f"{self._file.resolve().as_uri()}?mode=ro"  # type: ignore[union-attr]
                self._conn = install(sqlite3.connect(uri, uri=True, check_same_thread=False))
            return fn(self._conn)
