"""A live account's reconciliation at start-up, before any agent runs, and its reports on the bus.

``LiveStartup.run(decide)`` is the live venue's ``before_agents``:

1. every unfinished journal entry is resolved (``Reconciler.startup``: never-sent ones marked
   NOT_SENT, in-flight ones looked up by client id until found, given up, or start-up's wait is
   over (the rest are looked up while the agents run), open ones swept, missed fills caught up
   from the trade history, balances compared with the journal);
2. orders on the exchange the journal does not know are put to the person (``decide``: the
   window's dialog, ``kestrel run --adopt-unknown/--ignore-unknown``): adopted (followed, owned
   by the person) or left alone. Without a decision the agents do not start: an
   ``UnknownOrdersUndecided`` error lists the orders and says how to decide;
3. what cannot be explained, a balance that differs from the journal or an order whose outcome
   stayed unknown, is published as ``ReconciliationMismatch`` and awaited, so the kill switch
   has tripped (and said so) before the first agent runs. Nothing is papered over. An order the
   person was told was not placed and that turned up after all is published as
   ``UnresolvedOrderFound`` (the person is told).

While the venue runs, ``BusReports`` turns the reconciler's reports into the same events.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from app.ccxt.reconcile import (
    BalancesMismatched,
    OrderResolved,
    OrderUnresolved,
    ReconcileEvent,
    Reconciler,
    ReconcileReport,
    UnknownOrdersFound,
)
from app.domain.errors import OperationalError
from app.events import (
    Event,
    EventBus,
    ReconciliationMismatch,
    UnknownOrdersAwaitDecision,
    UnresolvedOrderFound,
)
from app.orchestration.kill_switch import UNRESOLVED_ORDER
from app.trading.live_account import PERSON, ExchangeOrder

logger = logging.getLogger(__name__)


class UnknownOrderChoice(StrEnum):
    """The person's answer about exchange orders the journal does not know."""

    ADOPT = "adopt"
    IGNORE = "ignore"


# asked with the orders; None: the person has not decided (the agents do not start)
DecideUnknown = Callable[[Sequence[ExchangeOrder]], Awaitable[UnknownOrderChoice | None]]


class UnknownOrdersUndecided(OperationalError):
    """Orders on the exchange the journal does not know wait for the person's decision."""


def mismatch_events(venue: str, event: ReconcileEvent) -> list[Event]:
    """The bus's events for one reconciler report (none for an order found while its outcome
    was still being checked: the agent learns of it from its order)."""
    if isinstance(event, BalancesMismatched):
        detail = "; ".join(m.describe() for m in event.mismatches)
        return [ReconciliationMismatch(venue, "balance", detail)]
    if isinstance(event, OrderUnresolved):
        return [ReconciliationMismatch(venue, UNRESOLVED_ORDER, event.message)]
    if isinstance(event, UnknownOrdersFound):
        return [UnknownOrdersAwaitDecision(venue, tuple(o.describe() for o in event.orders))]
    if isinstance(event, OrderResolved) and getattr(event.entry, "escalated", False):
        return [UnresolvedOrderFound(venue, event.message)]  # the person was told otherwise
    return []


class BusReports:
    """The reconciler's ``notify``: each report onto the bus at once while the venue runs;
    kept in ``held`` while start-up reconciles (it publishes them itself, awaited, once the
    person has decided about unknown orders)."""

    def __init__(self, venue: str, bus: EventBus | None) -> None:
        self.venue = venue
        self.bus = bus
        self.held: list[ReconcileEvent] | None = None

    def __call__(self, event: ReconcileEvent) -> None:
        if self.held is not None:
            self.held.append(event)
            return
        if self.bus is None:
            return
        for out in mismatch_events(self.venue, event):
            self.bus.publish_nowait(out)


@dataclass(slots=True)
class StartupSummary:
    """What start-up reconciliation found and did (for the window, the terminal and the log)."""

    report: ReconcileReport
    adopted: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    elapsed_ms: float = 0.0

    def describe(self) -> str:
        r = self.report
        parts = [f"reconciled in {self.elapsed_ms:.0f} ms"]
        if r.not_sent:
            parts.append(f"{len(r.not_sent)} never sent")
        if r.resolved:
            parts.append(f"{len(r.resolved)} in-flight found")
        if r.unresolved:
            parts.append(f"{len(r.unresolved)} NOT found (the person must look)")
        if r.pending:
            parts.append(f"{len(r.pending)} in-flight still being looked up")
        if r.fills_added:
            parts.append(f"{r.fills_added} missed fills caught up")
        if self.adopted:
            parts.append(f"{len(self.adopted)} unknown exchange orders adopted")
        if self.ignored:
            parts.append(f"{len(self.ignored)} unknown exchange orders left alone")
        if r.mismatches:
            parts.append("balances DIFFER: " + "; ".join(m.describe()
                                                          for m in r.mismatches))
        return ", ".join(parts)


class LiveStartup:
    """The live venue's ``before_agents`` (see the module docstring).

    Args:
        reports: the reconciler's ``notify``; mismatches go to its bus (awaited: the kill
            switch trips before agents run).
        monotonic: the stopwatch of ``StartupSummary.elapsed_ms``.
    """

    def __init__(
        self,
        reconciler: Reconciler,
        reports: BusReports,
        *,
        monotonic: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.reconciler = reconciler
        self.venue = reconciler.venue
        self.reports = reports
        self.bus = reports.bus
        self._mono = monotonic
        self.summary: StartupSummary | None = None

    def describe(self) -> str | None:
        """The start-up's summary in words; None before it has run."""
        return None if self.summary is None else self.summary.describe()

    async def __call__(self, decide: DecideUnknown | None) -> StartupSummary:
        return await self.run(decide)

    async def run(self, decide: DecideUnknown | None) -> StartupSummary:
        """Reconcile, put unknown orders to the person, publish what does not add up.

        Raises:
            UnknownOrdersUndecided: orders on the exchange the journal does not know, and no
                decision (the agents must not start).
            ToolError: the exchange could not be read (translated; nothing is assumed).
        """
        started = self._mono()
        events: list[ReconcileEvent] = []
        self.reports.held = events
        try:
            report = await self.reconciler.startup()
        finally:
            self.reports.held = None
        summary = StartupSummary(report)
        if report.unknown_orders:
            await self._settle_unknown(report.unknown_orders, decide, summary)
        for event in events:
            if isinstance(event, UnknownOrdersFound):
                continue  # decided above
            for out in mismatch_events(self.venue, event):
                if self.bus is not None:
                    await self.bus.publish(out)
        summary.elapsed_ms = (self._mono() - started) * 1000
        logger.info("%s: start-up %s", self.venue, summary.describe())
        self.summary = summary
        return summary

    async def _settle_unknown(
        self, orders: Sequence[ExchangeOrder], decide: DecideUnknown | None,
        summary: StartupSummary,
    ) -> None:
        if self.bus is not None:
            await self.bus.publish(UnknownOrdersAwaitDecision(
                self.venue, tuple(o.describe() for o in orders)))
        choice = None if decide is None else await decide(orders)
        if choice is None:
            listed = "; ".join(o.describe() for o in orders)
            raise UnknownOrdersUndecided(
                f"{len(orders)} open order{'s' if len(orders) != 1 else ''} on {self.venue} "
                f"{'are' if len(orders) != 1 else 'is'} not in Kestrel's journal: {listed}. "
                "No agent starts until you decide: adopt them (Kestrel follows them as yours; "
                "kestrel run --adopt-unknown) or leave them alone (never touched or listed "
                "again; --ignore-unknown)."
            )
        for order in orders:
            if choice is UnknownOrderChoice.ADOPT:
                await self.reconciler.adopt(order, PERSON)
                summary.adopted.append(order.exchange_order_id)
            else:
                self.reconciler.ignore(order)
                summary.ignored.append(order.exchange_order_id)
