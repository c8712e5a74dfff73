"""The ``Clock`` port: wall time in paper and live, the replay cursor in a backtest.

Everything that asks "what time is it" asks a Clock, so a backtest's agents, scheduler and journal
see simulated time and can never see past the cursor.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from functools import lru_cache
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Return the current time in UTC milliseconds."""
        ...


class WallClock:
    """Real time."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ReplayClock:
    """A clock that only moves when the replay advances it, and never backwards."""

    def __init__(self, start_ms: int) -> None:
        self._now_ms = start_ms

    def now_ms(self) -> int:
        return self._now_ms

    def advance_to(self, when_ms: int) -> None:
        """Move the cursor forward to ``when_ms``.

        Raises:
            ValueError: when asked to move backwards, which would let history change under an agent.
        """
        if when_ms < self._now_ms:
            raise ValueError(f"replay clock cannot move backwards: {when_ms} < {self._now_ms}")
        self._now_ms = when_ms


@lru_cache(maxsize=4096)
def ms_to_iso(ms: int) -> str:
    """Render UTC milliseconds as ISO 8601 with a ``Z`` suffix (cached: a step of the agents
    stamps dozens of records with the same few market times)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> int:
    """Parse UTC milliseconds or an ISO 8601 date/time (naive means UTC) into milliseconds.

    Raises:
        ValueError: naming the accepted forms.
    """
    stripped = text.strip()
    if stripped.isascii() and stripped.isdigit():  # int() would also read other scripts' digits
        return int(stripped)
    try:
        parsed = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"not a time: {text!r} (give Unix milliseconds or ISO 8601: YYYY-MM-DDThh:mm:ssZ)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)
