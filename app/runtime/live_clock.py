"""The clock of a live venue: wall time that never runs backwards.

Everything that keeps time in order (the scheduler's due jobs, the ledger's settle cursor, the
journal) assumes time only moves forward, as the replay cursor does. The system clock can step
back (an NTP correction, a person setting the time); a live venue's clock then holds still until
the wall clock catches up instead of moving back. The source is injected so tests run a live
venue on a fake exchange's time without sleeping through it.
"""

from __future__ import annotations

import threading

from app.domain.clock import Clock, WallClock


class LiveClock:
    """Implements ``Clock``: ``source``'s time (default: the wall clock), never decreasing.

    Thread-safe: the window's reader threads and the event loop read it at once.
    """

    def __init__(self, source: Clock | None = None) -> None:
        self._source = source or WallClock()
        self._last = self._source.now_ms()
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        now = self._source.now_ms()
        with self._lock:
            if now > self._last:
                self._last = now
            return self._last
