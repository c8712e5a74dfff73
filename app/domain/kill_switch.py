"""A trip of the kill switch, as a plain value: when, why and by whom trading was halted.

Order entry's block on new entries (``app.trading.entry``), the store that keeps the trips
(``app.store.kill_switch_log``), the service that trips and resets it
(``app.orchestration.kill_switch``) and the views all speak of the same record, so it lives here,
below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.domain.clock import ms_to_iso

# how far apart the wall clock and the market clock of a trip may be before both are shown
_SAME_MOMENT_MS = 60_000


class TripCause(StrEnum):
    """Why the switch was tripped: by a person, or by one of the automatic watches."""

    MANUAL = "manual"
    DAILY_LOSS = "daily_loss"
    DRAWDOWN = "drawdown"
    RECONCILIATION = "reconciliation"
    UNKNOWN_OUTCOMES = "unknown_outcomes"
    UNPROTECTED = "unprotected"  # a position order entry could neither protect nor close


@dataclass(frozen=True, slots=True)
class Trip:
    """One trip of the kill switch, from the moment it tripped until a person reset it.

    Attributes:
        cause_key: what exactly an automatic trip answered (``daily_loss:<day>``, a peak equity,
            an order's id): the same breach does not trip the switch again after a reset.
        tripped_ms: wall-clock time of the trip (what a person remembers).
        market_ms: the market clock at the trip (the replay's simulated time; the same as the
            wall clock when trading live).
        actions: what the trip did, in a sentence (orders cancelled, agents paused); ``None``
            while the trip's actions have not completed (a crash came in between: they are
            completed at the next start).
        reset_ms: wall-clock time of the reset; ``None`` while the switch is tripped.
    """

    trip_id: int
    cause: TripCause
    cause_key: str
    reason: str
    by: str
    tripped_ms: int
    market_ms: int
    actions: str | None = None
    reset_ms: int | None = None
    reset_by: str | None = None

    @property
    def active(self) -> bool:
        """The switch is still tripped by this trip."""
        return self.reset_ms is None

    def when(self) -> str:
        """When it tripped, in words: the wall clock, and the market clock when it differs."""
        wall = _iso(self.tripped_ms)
        if abs(self.tripped_ms - self.market_ms) <= _SAME_MOMENT_MS:
            return wall
        return f"{wall} (market time {_iso(self.market_ms)})"

    def describe(self) -> str:
        """The trip in one sentence: when, by whom and why (the guard's and the UI's words)."""
        return f"tripped {self.when()} by {self.by}: {self.reason}"

    def halt_reason(self) -> str:
        """Why trading is halted, as order entry's refusals say it."""
        return f"the kill switch was {self.describe()}"


def _iso(ms: int) -> str:
    return ms_to_iso(ms).replace("T", " ").replace("Z", " UTC")
