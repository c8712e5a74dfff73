"""Per-file locks of the memory bank: one asyncio lock and one thread lock per (agent, path).

Appends and writes of one file must never interleave. Tasks on the event loop queue on the asyncio
lock (so a waiting task does not hold a worker thread); the work itself runs in a worker thread
under the (re-entrant) thread lock, which also serialises callers of the synchronous API (scripts,
tests, other threads). Across processes the file's ``flock`` (see ``fsops``) does the same. Locks
of different files are independent, so two agents, or two files of one agent, never wait for each
other.
"""

from __future__ import annotations

import asyncio
import threading
import weakref

LockKey = tuple[str, str]


class PathLocks:
    """Hands out the lock pair of an (agent, path); created on first use, kept for the process."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._threads: dict[LockKey, threading.RLock] = {}
        self._loops: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[LockKey, asyncio.Lock]
        ] = weakref.WeakKeyDictionary()

    def thread_lock(self, agent_id: str, path: str) -> threading.RLock:
        key = (agent_id, path)
        with self._guard:
            lock = self._threads.get(key)
            if lock is None:
                lock = self._threads[key] = threading.RLock()
            return lock

    def async_lock(self, agent_id: str, path: str) -> asyncio.Lock:
        """The asyncio lock of the path for the running loop (asyncio locks belong to one loop)."""
        loop = asyncio.get_running_loop()
        with self._guard:
            per_loop = self._loops.get(loop)
            if per_loop is None:
                per_loop = self._loops[loop] = {}
            lock = per_loop.get((agent_id, path))
            if lock is None:
                lock = per_loop[(agent_id, path)] = asyncio.Lock()
            return lock
