"""A thread that moves the workspace database's WAL back into the database file.

SQLite's automatic checkpoint runs inside whichever commit finds the WAL over 1,000 pages; with
the agents' stores writing from the Qt event loop, that commit takes 40-90 ms instead of one, and
the window stutters. While a ``WalCheckpointer`` runs, connections opened to its database don't
checkpoint (``app.store.db.connect`` sees the registration) and this thread does it instead, a
few times a second, with PASSIVE checkpoints: they never wait for a reader or block a writer, so
the loop's commits never wait on it either. A checkpoint that cannot finish (a reader still
needs old pages) is simply tried again on the next tick.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

from app.store.db import (
    connect,
    register_background_checkpoints,
    unregister_background_checkpoints,
)
from app.store.disk_full import DiskFullWatch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointResult:
    """What one checkpoint did: frames in the WAL and how many of them are now in the database."""

    busy: bool
    wal_frames: int
    checkpointed_frames: int

    @property
    def complete(self) -> bool:
        return not self.busy and self.checkpointed_frames >= self.wal_frames


class WalCheckpointer:
    """Checkpoints one database every ``interval_s`` on its own thread; ``stop`` does a last one."""

    def __init__(self, path: Path | str, *, interval_s: float = 0.25) -> None:
        if interval_s <= 0:
            raise ValueError(f"the checkpoint interval must be positive, not {interval_s}")
        self.path = Path(path)
        self.interval_s = interval_s
        self.checkpoints = 0
        self.failures = 0
        self.last: CheckpointResult | None = None
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        # the world's account of a full disk (set by the world the checkpointer serves)
        self.disk: DiskFullWatch | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Open the checkpoint connection and start the thread.

        Raises:
            RuntimeError: it is already running.
            OperationalError: the database cannot be opened.
        """
        if self._thread is not None:
            raise RuntimeError(f"the checkpointer for {self.path} is already running")
        self._conn = connect(self.path, durable=False)
        register_background_checkpoints(self.path)
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"wal-checkpoint:{self.path.name}", daemon=True
        )
        self._thread.start()

    def checkpoint(self) -> CheckpointResult:
        """One PASSIVE checkpoint now (on the calling thread).

        Raises:
            RuntimeError: the checkpointer is not started.
            sqlite3.Error: SQLite refused (the file is unreadable, the disk is full).
        """
        with self._lock:
            if self._conn is None:
                raise RuntimeError(f"the checkpointer for {self.path} is not started")
            busy, log, done = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        result = CheckpointResult(bool(busy), int(log), int(done))
        self.last = result
        self.checkpoints += 1
        return result

    def stop(self) -> None:
        """Stop the thread, checkpoint what is left and hand checkpoints back to commits."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        try:
            self._tick()
        finally:
            unregister_background_checkpoints(self.path)
            with self._lock:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._tick()

    def _tick(self) -> None:
        try:
            self.checkpoint()
        except sqlite3.Error as exc:
            # the next tick tries again; the commits still succeed, the WAL only grows meanwhile.
            # A full disk trips ``disk``: the WAL keeps every commit, but it would only grow
            # until the commits fail too, so the run stops now and says so once
            self.failures += 1
            full = self.disk.check(exc) if self.disk is not None else False
            if str(exc) != self.last_error:
                logger.log(logging.INFO if full else logging.WARNING,
                           "checkpointing %s failed: %s", self.path, exc)
            self.last_error = str(exc)
