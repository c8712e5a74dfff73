"""The Risk Guard: runs an order intent past every rule and records each decision.

The guard is the single gate between an order-creating tool and a broker. It is pure apart from the
recorder and the rules' own latches (the daily loss limit), so it can be tested with plain values.

Exits are never blocked: an intent with ``reduces_position`` set (close, reduce-only TP/SL, a sell
that only shrinks a long) is accepted without consulting any rule, not even the allowed-symbols
list, because refusing to reduce risk can only ever increase it. The acceptance is still recorded.

Between its acceptance and the broker's answer an order is in flight: a venue may take a while to
confirm it, and other agents' orders are judged meanwhile. ``admit`` holds each accepted intent as
a pending order of every later decision until the broker has answered (and lists the order as
open), so two orders accepted in the same moment cannot together pass a limit neither passes alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.domain.errors import RiskRejection
from app.risk.types import OrderIntent, RiskDecision, RiskView

EXIT_REASON = "reduces an existing position; exits are never blocked"


@dataclass(frozen=True, slots=True)
class Violation:
    """Why a rule refuses an order: a sentence with the numbers and the limit, plus specifics."""

    reason: str
    details: dict[str, Any] = field(default_factory=dict)


class RiskRule(Protocol):
    """One entry rule. ``name`` is what ``<rule>`` shows when it refuses."""

    @property
    def name(self) -> str:
        """Read-only here, so a rule may give it as a class constant."""
        ...

    def evaluate(self, intent: OrderIntent, view: RiskView) -> Violation | None:
        """Return a violation, or ``None`` when the order passes this rule."""
        ...


class RiskDecisionRecorder(Protocol):
    def record(self, decision: RiskDecision) -> None:
        """Store one decision of the guard (the audit trail)."""
        ...


@dataclass
class MemoryDecisionRecorder:
    """Keeps every decision in a list: the backtest's and the tests' recorder."""

    decisions: list[RiskDecision] = field(default_factory=list)

    def record(self, decision: RiskDecision) -> None:
        self.decisions.append(decision)

    @property
    def rejected(self) -> list[RiskDecision]:
        return [d for d in self.decisions if not d.accepted]


class RiskGuard:
    """Checks order intents against rules in order; the first failing rule refuses the order."""

    def __init__(self, rules: Sequence[RiskRule], recorder: RiskDecisionRecorder) -> None:
        names = [rule.name for rule in rules]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"risk rules must have distinct names; repeated: {duplicates}")
        self.rules = tuple(rules)
        self._recorder = recorder
        self._in_flight: dict[int, OrderIntent] = {}
        self._next_ticket = 0

    def replace_rules(self, rules: Sequence[RiskRule]) -> None:
        """Judge every order from now on by ``rules`` (new limits saved in Settings).

        A rule whose limits did not change keeps its instance, so what it has latched (the daily
        loss limit's tripped day) stands; a changed rule starts afresh under its new limits. The
        swap is one assignment: an order is judged by the old rules or the new, never a mix.
        """
        names = [rule.name for rule in rules]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"risk rules must have distinct names; repeated: {duplicates}")
        old = {rule.name: rule for rule in self.rules}
        kept = []
        for rule in rules:
            before = old.get(rule.name)
            same = (before is not None and type(before) is type(rule)
                    and getattr(before, "config", None) == getattr(rule, "config", None))
            kept.append(before if same and before is not None else rule)
        self.rules = tuple(kept)

    @contextmanager
    def admit(self, intent: OrderIntent, view: RiskView) -> Iterator[None]:
        """Check the intent, then count it as pending while the ``with`` block places the order.

        The block must end once the broker has answered: by then a placed order is among the
        broker's open orders (and in the next view), and a refused one never existed.

        Raises:
            RiskRejection: as ``check``; the block does not run.
        """
        self.check(intent, view)
        ticket = self._next_ticket
        self._next_ticket += 1
        self._in_flight[ticket] = intent
        try:
            yield
        finally:
            del self._in_flight[ticket]

    def check(self, intent: OrderIntent, view: RiskView) -> None:
        """Accept the intent or raise ``RiskRejection`` naming the rule; record either way.

        Orders admitted and still in flight count as pending in ``view``.

        Raises:
            RiskRejection: the first rule that refuses, with its plain-words reason and details.
        """
        if self._in_flight:
            view = view.with_pending(i.as_pending() for i in self._in_flight.values())
        if intent.reduces_position:
            self._record(intent, view, accepted=True, reason=EXIT_REASON)
            return
        for rule in self.rules:
            violation = rule.evaluate(intent, view)
            if violation is not None:
                self._record(intent, view, accepted=False, rule=rule.name,
                             reason=violation.reason)
                raise RiskRejection(rule.name, violation.reason, violation.details)
        self._record(intent, view, accepted=True)

    def preview(self, intent: OrderIntent, view: RiskView) -> tuple[str, Violation] | None:
        """The rule that would refuse ``intent`` now, and why; None when it would pass.

        Nothing is recorded: a person's order ticket asks before the order is placed, and the
        placing itself is judged (and recorded) by ``check`` as every order is.
        """
        if self._in_flight:
            view = view.with_pending(i.as_pending() for i in self._in_flight.values())
        if intent.reduces_position:
            return None
        for rule in self.rules:
            violation = rule.evaluate(intent, view)
            if violation is not None:
                return rule.name, violation
        return None

    def refuse(self, intent: OrderIntent, view: RiskView, rule: str, reason: str) -> None:
        """Record a refusal order entry decided before the rules (the kill switch's entry
        block), so the audit trail of decisions holds every order refused."""
        self._record(intent, view, accepted=False, rule=rule, reason=reason)

    def _record(
        self,
        intent: OrderIntent,
        view: RiskView,
        *,
        accepted: bool,
        rule: str = "",
        reason: str = "",
    ) -> None:
        self._recorder.record(
            RiskDecision(
                now_ms=view.now_ms,
                agent_id=intent.agent_id,
                symbol=intent.symbol,
                side=intent.side,
                order_type=intent.order_type,
                quantity=intent.quantity,
                notional=intent.notional,
                accepted=accepted,
                rule=rule,
                reason=reason,
            )
        )
