"""The kill switch as the Risk Guard sees it: a trip record, its settings and the guard's rule.

The kill switch is one persisted fact, "trading is halted since this trip", checked by the Risk
Guard before every order like any other rule (``KillSwitchRule``, first in the guard's order). It
refuses every order that could add exposure, naming when, why and by whom it was tripped. Exits
are not refused, as for every rule (``app.risk.guard``): after a trip a person or an agent may
still cancel orders, close a position or place reduce-only take-profit and stop-loss exits,
because refusing to reduce risk can only ever increase it. That holds for an agent too: agents are
paused by the trip, and one the person resumes while the switch is still tripped may close or
protect what it holds, never open anything.

Who trips it, what a trip does and how it is reset is the service's business
(``app.orchestration.kill_switch``); where the record lives is the store's
(``app.store.kill_switch_log``). Here everything is plain values, so the rule is tested as the
other rules are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from app.domain.clock import ms_to_iso
from app.risk.guard import Violation
from app.risk.types import OrderIntent, RiskView

RULE_NAME = "kill_switch"
# how far apart the wall clock and the market clock of a trip may be before both are shown
_SAME_MOMENT_MS = 60_000


class TripCause(StrEnum):
    """Why the switch was tripped: by a person, or by one of the automatic watches."""

    MANUAL = "manual"
    DAILY_LOSS = "daily_loss"
    DRAWDOWN = "drawdown"
    RECONCILIATION = "reconciliation"
    UNKNOWN_OUTCOMES = "unknown_outcomes"


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
        """Why trading is halted, as ``OrderGate.kill_switch`` and the refusals say it."""
        return f"the kill switch was {self.describe()}"


def _iso(ms: int) -> str:
    return ms_to_iso(ms).replace("T", " ").replace("Z", " UTC")


class KillSwitchRule:
    """While the kill switch is tripped no new entry passes: the first rule the guard checks.

    Args:
        active_trip: the trip in force, or ``None`` when the switch is armed (read on every
            check; the store answers it from memory).
    """

    name: ClassVar[str] = RULE_NAME

    def __init__(self, active_trip: Callable[[], Trip | None]) -> None:
        self._active_trip = active_trip

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        trip = self._active_trip()
        if trip is None:
            return None
        return Violation(
            f"Trading is halted: the kill switch was {trip.describe()}. No new order is "
            f"accepted (this {intent.side.value} of {intent.symbol} included) until a person "
            "resets it in the Kestrel window; cancelling orders and closing or reducing a "
            "position still work",
            {"tripped_at": ms_to_iso(trip.tripped_ms), "market_time": ms_to_iso(trip.market_ms),
             "tripped_by": trip.by, "reason": trip.reason, "cause": trip.cause.value},
        )
