"""The memory bank: every agent's own folder of files, its journal, notes and full-text recall.

One folder per agent under the memory root (``<root>/<agent_id>/``), one recall index per agent
(``<root>/.index/<agent_id>.sqlite3``, outside every agent's folder). ``MemoryStore`` (store.py)
does the blocking work; this class gives it two faces. The synchronous methods are for scripts,
tests and worker threads. The ``a``-prefixed coroutines run the same work in a worker thread
(``asyncio.to_thread``) behind the file's asyncio lock and then publish ``MemoryFileChanged`` on the
event bus, so the event loop (and the Qt window on it) never blocks. Synchronous callers' changes
are announced too, handed to the loop once one is known. Files edited by hand are caught up by
``rescan`` (on an agent's first use in this process, and on demand).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from app.domain.clock import Clock, ms_to_iso
from app.events import EventBus, MemoryFileChanged
from app.memory.index import Hit
from app.memory.paths import check_agent_id, note_path, split_memory_path
from app.memory.store import (
    FileContent,
    FileInfo,
    MemoryLimits,
    MemoryStore,
    WriteOutcome,
)
from app.store.disk_full import DiskFullWatch

__all__ = ["FileContent", "FileInfo", "MemoryBank", "MemoryLimits", "WriteOutcome"]


class MemoryBank(MemoryStore):
    """The memory bank of a workspace, for tools, the GUI and scripts.

    Args:
        root: the memory root (``<workspace>/memory``); created when first written.
        clock: the market clock (replay cursor in a backtest, wall clock otherwise).
        bus: where ``MemoryFileChanged`` events go; ``None`` to publish nothing.
        limits: per-file size limit, per-agent quota, fsync policy.
        inline: run the coroutines' work on the loop's own thread instead of a worker thread.
            Only for a loop that nothing else waits on (a backtest's, which waits for each
            call to finish before the next bar anyway): there the thread hop is pure cost.
        scratch: a backtest's memory, made again after a crash (see ``MemoryStore``).
        disk: told of a write the full disk refused (see ``MemoryStore``).
    """

    def __init__(
        self,
        root: Path,
        clock: Clock,
        bus: EventBus | None = None,
        *,
        limits: MemoryLimits | None = None,
        inline: bool = False,
        scratch: bool = False,
        disk: DiskFullWatch | None = None,
    ) -> None:
        super().__init__(root, clock, limits=limits, scratch=scratch, disk=disk)
        self.bus = bus
        self.inline = inline
        self._loop: asyncio.AbstractEventLoop | None = None
        self._working: set[asyncio.Future[Any]] = set()  # work in threads, until it finishes

    def _announce(self, events: list[MemoryFileChanged]) -> None:
        """Publish from synchronous code: directly on the loop thread, else hand over to it."""
        events = self._drain() + events
        if self.bus is None or not events:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            loop = self._loop
            if loop is not None and not loop.is_closed():
                for event in events:
                    loop.call_soon_threadsafe(self.bus.publish_nowait, event)
            return
        for event in events:
            self.bus.publish_nowait(event)

    async def _run(self, key: tuple[str, str] | None, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking method in a thread behind the file's asyncio lock; publish its events.

        If the calling task is cancelled, the work still finishes (nothing is left half-done) and
        its events are still published.
        """
        self._loop = asyncio.get_running_loop()
        if self.inline:
            result, events = fn(*args)
            if self.bus is not None:
                for event in self._drain() + events:
                    await self.bus.publish(event)
            return result
        lock = contextlib.nullcontext() if key is None else self._locks.async_lock(*key)
        async with lock:
            future = asyncio.ensure_future(asyncio.to_thread(self.healing, fn, *args))
            self._working.add(future)
            future.add_done_callback(self._working.discard)
            try:
                result, events = await asyncio.shield(future)
            except asyncio.CancelledError:
                future.add_done_callback(self._publish_late)
                raise
        if self.bus is not None:
            for event in self._drain() + events:
                await self.bus.publish(event)
        return result

    async def finish_work(self) -> None:
        """Wait for the work still running in threads (a write whose caller was cancelled, as
        when a world closes under its agents): closing the indexes under it would cut its
        indexing off half-way."""
        while pending := [future for future in self._working if not future.done()]:
            await asyncio.wait(pending)

    def _publish_late(self, future: Future[Any] | asyncio.Future[Any]) -> None:
        if self.bus is None or future.cancelled() or future.exception() is not None:
            return
        for event in future.result()[1]:
            self.bus.publish_nowait(event)

    # ------------------------------------------------------------ blocking work
    def read_file(self, agent_id: str, path: str) -> FileContent:
        """Read a file; a missing file is ``exists=False`` with empty data, not an error."""
        return self._sync(self._read, agent_id, path)

    def write_file(self, agent_id: str, path: str, data: bytes) -> WriteOutcome:
        """Create or replace a file atomically and index it."""
        return self._sync(self._write, agent_id, path, data)

    def append_file(
        self, agent_id: str, path: str, data: bytes, *, ensure_newline: bool = True
    ) -> WriteOutcome:
        """Append whole lines (one write, under the file's locks) and index them."""
        return self._sync(self._append, agent_id, path, data, ensure_newline)

    def log_journal_entry(self, agent_id: str, content: str) -> WriteOutcome:
        """Append a timestamped entry to ``journal/<market date>.md``."""
        return self._sync(self._journal, agent_id, content)

    def write_note(self, agent_id: str, key: str, content: str) -> WriteOutcome:
        """Create or overwrite ``notes/<key>.md``."""
        return self._sync(self._note, agent_id, key, content)

    def recall(self, agent_id: str, query: str, limit: int = 5) -> list[Hit]:
        """Best-ranked snippets written at or before the market clock's now."""
        return self._sync(self._recall, agent_id, query, limit)

    def list_files(self, agent_id: str, folder: str = "") -> list[FileInfo]:
        return self._sync(self._list, agent_id, folder)

    def update_file(
        self, agent_id: str, path: str, transform: Callable[[bytes | None], bytes]
    ) -> WriteOutcome:
        """Read-modify-write a file under its lock (``None`` is passed when it does not exist)."""
        return self._sync(self._update, agent_id, path, transform)

    def rescan(self, agent_id: str, *, unknown_ms: int | None = None) -> list[MemoryFileChanged]:
        """Catch the index up with files edited by hand; returns (and announces) the changes.

        Args:
            unknown_ms: market time to stamp on changed text whose age is unknown (no entry header);
                default: the file's modification time. Give 0 to make seeded notes visible to a
                backtest from its first bar.
        """
        return self._sync(self._rescan_public, agent_id, unknown_ms)

    def rescan_all(self, *, unknown_ms: int | None = None) -> list[MemoryFileChanged]:
        """Rescan every agent's folder: run it once at start-up (``arescan_all`` from the loop),
        so no agent's first tool call pays for catching up."""
        return self._sync(self._rescan_all, unknown_ms)

    def _sync(self, fn: Callable[..., tuple[Any, list[MemoryFileChanged]]], *args: Any) -> Any:
        result, events = self.healing(fn, *args)
        self._announce(events)
        return result

    # ------------------------------------------------------------ async API

    async def aread_file(self, agent_id: str, path: str) -> FileContent:
        return await self._run(None, self._read, agent_id, path)

    async def awrite_file(self, agent_id: str, path: str, data: bytes) -> WriteOutcome:
        return await self._run(_key(agent_id, path), self._write, agent_id, path, data)

    async def aappend_file(
        self, agent_id: str, path: str, data: bytes, *, ensure_newline: bool = True
    ) -> WriteOutcome:
        key = _key(agent_id, path)
        return await self._run(key, self._append, agent_id, path, data, ensure_newline)

    async def alog_journal_entry(self, agent_id: str, content: str) -> WriteOutcome:
        key = _key(agent_id, f"journal/{ms_to_iso(self.clock.now_ms())[:10]}.md")
        return await self._run(key, self._journal, agent_id, content)

    async def awrite_note(self, agent_id: str, key: str, content: str) -> WriteOutcome:
        return await self._run(_key(agent_id, note_path(key)), self._note, agent_id, key, content)

    async def arecall(self, agent_id: str, query: str, limit: int = 5) -> list[Hit]:
        return await self._run(None, self._recall, agent_id, query, limit)

    async def alist_files(self, agent_id: str, folder: str = "") -> list[FileInfo]:
        return await self._run(None, self._list, agent_id, folder)

    async def aupdate_file(
        self, agent_id: str, path: str, transform: Callable[[bytes | None], bytes]
    ) -> WriteOutcome:
        return await self._run(_key(agent_id, path), self._update, agent_id, path, transform)

    async def arescan(
        self, agent_id: str, *, unknown_ms: int | None = None
    ) -> list[MemoryFileChanged]:
        return await self._run(None, self._rescan_public, agent_id, unknown_ms)

    async def arescan_all(self, *, unknown_ms: int | None = None) -> list[MemoryFileChanged]:
        return await self._run(None, self._rescan_all, unknown_ms)


def _key(agent_id: str, path: str) -> tuple[str, str]:
    return check_agent_id(agent_id), "/".join(split_memory_path(path))
