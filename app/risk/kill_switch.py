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
(``app.store.kill_switch_log``); the record itself is a plain value (``app.domain.kill_switch``),
so the rule is tested as the other rules are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from app.domain.clock import ms_to_iso
from app.domain.kill_switch import Trip
from app.risk.guard import Violation
from app.risk.types import OrderIntent, RiskView

RULE_NAME = "kill_switch"


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
