"""Reconciliation: the journal brought in line with the exchange, and what cannot be, reported.

Four jobs, each also run once at start-up before any agent runs (``startup``):

- **In-flight orders** (SENDING, UNKNOWN) are looked up by client order id, the first time a few
  seconds after they were sent (an exchange may not show an order it has just accepted), then
  every few seconds up to a limit. Found: the journal takes the exchange's state and fills. Not
  found after the limit: NOT_PLACED, and the person is told (``OrderUnresolved``), because a
  lost answer that is really lost must be looked at by a human; a later sweep that finds the
  order after all re-attaches it. Never resent.
- **Open orders** are swept: the exchange's open orders update their entries; entries the
  journal holds open that the exchange no longer lists are read once (filled or cancelled while
  away); open orders the journal does not know are listed for the person to ``adopt`` or
  ``ignore``.
- **Fills missed while away** come from the trade history since the last trade seen, stored once
  per trade id.
- **Balances** (and so spot positions) come from the exchange and are compared with what the
  journal explains: the balances when reconciliation first ran, plus every fill stored and made
  since. A
  difference is reported (``BalanceMismatch``), never absorbed; ``accept_balances`` is the
  person's explicit "the exchange is right, start from here".

NEW entries at start-up never left the process (the request is only made after SENDING is
committed), so they become NOT_SENT without asking the exchange; the same tool call may send them.

Events go to ``notify`` (the lead wires it to the bus); ``unknown_run`` is the run of
create_order outcomes left unknown in a row, for the kill switch.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from app.ccxt.broker import CcxtBroker
from app.ccxt.orders import dec
from app.domain.errors import ToolError
from app.domain.market_rules import fmt
from app.domain.trading import ExitKind, OrderType, Side
from app.store.order_journal import JournalEntry, JournalFill, JournalState
from app.trading.live_account import BalanceCheck, BalanceMismatch, ExchangeOrder

logger = logging.getLogger(__name__)
ZERO = Decimal(0)
SLICE_S = 0.05


@dataclass(frozen=True, slots=True)
class ReconcilePolicy:
    """When in-flight orders are looked up, and how often the sweeps run (seconds)."""

    first_check_s: float = 3.0
    interval_s: float = 5.0
    max_checks: int = 6
    sweep_s: float = 30.0


_ACCEPTED = "balances_accepted:"


def exchange_order(raw: Mapping[str, Any]) -> ExchangeOrder:
    """An exchange order, as ccxt parsed it, in the journal's terms."""
    return ExchangeOrder(
        exchange_order_id=str(raw.get("id")), client_order_id=str(raw.get("clientOrderId") or ""),
        symbol=str(raw.get("symbol")), side=str(raw.get("side") or "").upper(),
        order_type=str(raw.get("type") or "").upper(), amount=dec(raw.get("amount")) or ZERO,
        price=dec(raw.get("price")), filled=dec(raw.get("filled")) or ZERO,
        status=str(raw.get("status") or ""), raw=raw,
    )


# -- events (past tense; the lead maps them onto the bus) ----------------------------------------


@dataclass(frozen=True, slots=True)
class OrderResolved:
    """An order whose outcome was unknown was found on the exchange."""

    entry: JournalEntry


@dataclass(frozen=True, slots=True)
class OrderUnresolved:
    """An order's outcome stayed unknown after every lookup: a person must look."""

    entry: JournalEntry
    message: str


@dataclass(frozen=True, slots=True)
class UnknownOrdersFound:
    orders: tuple[ExchangeOrder, ...]


@dataclass(frozen=True, slots=True)
class BalancesMismatched:
    mismatches: tuple[BalanceMismatch, ...]


ReconcileEvent = OrderResolved | OrderUnresolved | UnknownOrdersFound | BalancesMismatched
Notify = Callable[[ReconcileEvent], None]


@dataclass(slots=True)
class ReconcileReport:
    """What a reconciliation found and did; ``clean`` when nothing needs a person."""

    not_sent: list[JournalEntry] = field(default_factory=list)
    resolved: list[JournalEntry] = field(default_factory=list)
    unresolved: list[JournalEntry] = field(default_factory=list)
    refreshed: list[JournalEntry] = field(default_factory=list)
    unknown_orders: list[ExchangeOrder] = field(default_factory=list)
    fills_added: int = 0
    foreign_trades: int = 0
    mismatches: list[BalanceMismatch] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.unresolved or self.unknown_orders or self.mismatches)


class Reconciler:
    """Keeps one ``CcxtBroker``'s journal in line with its exchange.

    Args:
        notify: receives every event; must not raise (the bus isolates its subscribers).
        sleep: awaited between lookups at start-up (injected so tests need not wait).
    """

    def __init__(
        self,
        broker: CcxtBroker,
        *,
        notify: Notify | None = None,
        policy: ReconcilePolicy = ReconcilePolicy(),  # noqa: B008 - frozen
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.broker = broker
        self.journal = broker.journal
        self.venue = broker.venue
        self.policy = policy
        self._notify = notify or (lambda event: None)
        self._sleep = sleep
        self.mismatches: tuple[BalanceMismatch, ...] = ()  # the last balance check's

    @property
    def unknown_run(self) -> int:
        """create_order outcomes left unknown in a row (reset by the next definite one)."""
        return self.broker.unknown_run

    def _now(self) -> int:
        return self.broker.clock.now_ms()

    # -- in-flight orders ----------------------------------------------------------------------

    def _due_ms(self, entry: JournalEntry) -> int:
        if entry.checks == 0 or entry.last_checked_ms is None:
            return (entry.sent_ms or entry.created_ms) + int(self.policy.first_check_s * 1000)
        return entry.last_checked_ms + int(self.policy.interval_s * 1000)

    def in_flight(self) -> list[JournalEntry]:
        return self.journal.entries(self.venue, [JournalState.SENDING, JournalState.UNKNOWN])

    async def check_in_flight(self, report: ReconcileReport | None = None) -> ReconcileReport:
        """Look up every in-flight order that is due; escalate those past the limit."""
        report = report or ReconcileReport()
        now = self._now()
        for entry in self.in_flight():
            if now < self._due_ms(entry):
                continue
            try:
                raw = await self.broker.sync.lookup(entry)
            except ToolError as exc:  # the lookup failed: not a miss; try again when due
                logger.warning("%s: lookup of %s failed: %s", self.venue, entry.client_order_id,
                               exc.message)
                self.journal.update(entry, last_checked_ms=now)
                continue
            if raw is not None:
                entry = await self.broker.sync.apply(entry, raw)
                report.resolved.append(entry)
                self._notify(OrderResolved(entry))
                continue
            entry = self.journal.update(entry, checks=entry.checks + 1, last_checked_ms=now)
            if entry.checks >= self.policy.max_checks:
                why = (f"not found on {self.venue} by client order id after {entry.checks} "
                       f"lookups over {(now - (entry.sent_ms or entry.created_ms)) / 1000:.0f} s")
                entry = self.journal.update(entry, state=JournalState.NOT_PLACED,
                                            escalated=True, reason=why, updated_ms=now)
                report.unresolved.append(entry)
                self._notify(OrderUnresolved(entry, (
                    f"{entry.agent_id}'s {entry.side.value} {entry.quantity} {entry.symbol} "
                    f"order (client id {entry.agent_order_id}) was sent but its answer was lost, "
                    f"and it was {why}. Kestrel takes it as not placed and will not resend it. "
                    f"Check the exchange's order history for {entry.client_order_id}."
                )))
        return report

    def _next_due_s(self) -> float | None:
        pending = self.in_flight()
        if not pending:
            return None
        return max(min(self._due_ms(e) for e in pending) - self._now(), 0) / 1000

    # -- sweeps --------------------------------------------------------------------------------

    async def sweep(self, report: ReconcileReport | None = None) -> ReconcileReport:
        """Open orders: update known ones, read vanished ones, list unknown ones."""
        report = report or ReconcileReport()
        seen: set[str] = set()
        ignored = self.journal.ignored(self.venue)
        unknown = []
        for raw in await self.broker.sync.fetch_open():
            entry = self.broker.sync.entry_for(raw)
            if entry is None:
                if str(raw.get("id")) not in ignored:
                    unknown.append(exchange_order(raw))
                continue
            seen.add(entry.client_order_id)
            was = entry.state
            entry = await self.broker.sync.apply(entry, raw)
            if was.in_flight or was is JournalState.NOT_PLACED:
                report.resolved.append(entry)
                self._notify(OrderResolved(entry))
        states = [s for s in JournalState if s.on_exchange_open]
        for entry in self.journal.entries(self.venue, states):
            if entry.client_order_id in seen:
                continue
            raw = await self.broker.sync.fetch_by_id(entry)
            if raw is not None:
                report.refreshed.append(await self.broker.sync.apply(entry, raw))
        if unknown:
            report.unknown_orders.extend(unknown)
            self._notify(UnknownOrdersFound(tuple(unknown)))
        return report

    async def catch_up_fills(self, report: ReconcileReport | None = None) -> ReconcileReport:
        """Fills since the last trade seen, per symbol the journal trades."""
        report = report or ReconcileReport()
        before = len(self.journal.fills(self.venue))
        for symbol in self.journal.symbols(self.venue):
            report.foreign_trades += len(await self.broker.sync.catch_up_trades(symbol))
        for entry in self.journal.entries(self.venue):
            if not entry.state.final or entry.filled_quantity > 0:
                await self.broker.sync.complete_fills(entry)
        report.fills_added += len(self.journal.fills(self.venue)) - before
        return report

    # -- balances ------------------------------------------------------------------------------

    async def check_balances(self, report: ReconcileReport | None = None) -> ReconcileReport:
        """Compare the exchange's balances with the journal's account of them; report any gap."""
        report = report or ReconcileReport()
        check = await self.balance_check()
        if check is None:  # the first reading: the baseline
            return report
        if check.mismatches:
            report.mismatches.extend(check.mismatches)
            self._notify(BalancesMismatched(check.mismatches))
        return report

    async def balance_check(self) -> BalanceCheck | None:
        """The exchange's balances read now and how they differ from what the journal explains
        (nothing is reported: the window shows this before the person accepts it). None when
        there was no baseline yet: this reading became it."""
        balances = await self.broker.refresh_balances()
        actual = {asset: b.total for asset, b in balances.items()}
        check = BalanceCheck(actual, (), self.journal.fill_mark(self.venue), self._exchange_now())
        baseline_ms = self.journal.meta(self.venue, "baseline_ms")
        if baseline_ms is None:
            self._set_baseline(check)
            return None
        expected = self._expected(int(baseline_ms))
        mismatches = tuple(
            BalanceMismatch(asset, expected.get(asset, ZERO), actual.get(asset, ZERO))
            for asset in sorted(set(expected) | set(actual))
            if expected.get(asset, ZERO) != actual.get(asset, ZERO)
        )
        self.mismatches = mismatches
        return replace(check, mismatches=mismatches)

    def _exchange_now(self) -> int:
        # on the exchange's clock, as the fill times it is compared with
        return int(getattr(self.broker.market, "now_ms", self._now)())

    def _set_baseline(self, check: BalanceCheck, also: Mapping[str, str] | None = None) -> None:
        """The baseline from ``check`` (and ``also``), in one commit."""
        values = {f"baseline:{a}": str(v) for a, v in check.actual.items()}
        values.update(also or {})
        values["baseline_ms"] = str(check.exchange_ms)
        values["baseline_fill_mark"] = str(check.fill_mark)
        values["baseline_assets"] = ",".join(sorted(check.actual))
        self.journal.set_meta(self.venue, values)

    def _expected(self, baseline_ms: int) -> dict[str, Decimal]:
        assets = (self.journal.meta(self.venue, "baseline_assets") or "").split(",")
        out = {a: Decimal(self.journal.meta(self.venue, f"baseline:{a}") or "0")
               for a in assets if a}
        mark = int(self.journal.meta(self.venue, "baseline_fill_mark") or "0")
        adopted = {e.client_order_id for e in self.journal.entries(self.venue) if e.adopted}
        for fill in self.journal.fills_after(self.venue, mark):
            # a fill stored later but made before the baseline (an adopted order's) is in it;
            # Kestrel's own fills stored after the mark came after it, whatever the exchange's
            # clock stamped on them (it may run behind this machine's)
            if fill.client_order_id in adopted and fill.time_ms < baseline_ms:
                continue
            for asset, delta in fill_deltas(fill).items():
                out[asset] = out.get(asset, ZERO) + delta
        return {a: v for a, v in out.items() if v != 0}

    def accept_balances(self, check: BalanceCheck | None = None, by: str = "person") -> None:
        """The person's decision: the exchange is right, start from here.

        ``check`` is the reading the person was shown (``balance_check``); its balances become
        the baseline, with the fills stored up to that reading in it. Without one, the broker's
        last reading. The acceptance, who and the differences accepted, is kept in the journal
        (``acceptances``). The kill switch is not reset by it: that stays a deliberate act.
        """
        if check is None:
            balances = self.broker._balances  # noqa: SLF001 - the broker's last fetch
            check = BalanceCheck({a: b.total for a, b in balances.items()}, self.mismatches,
                                 self.journal.fill_mark(self.venue), self._exchange_now())
        now = self._now()
        record = {"by": by, "accepted_ms": now, "differences": [
            {"asset": m.asset, "journal": fmt(m.expected), "exchange": fmt(m.actual)}
            for m in check.mismatches]}
        self._set_baseline(check, {f"{_ACCEPTED}{now:015d}": json.dumps(record)})
        self.mismatches = ()
        logger.warning("%s: %s accepted the exchange's balances as the journal's baseline (%s)",
                       self.venue, by, "; ".join(
                           f"{m.asset}: journal {fmt(m.expected)}, exchange {fmt(m.actual)}"
                           for m in check.mismatches) or "no differences")

    def acceptances(self) -> list[dict[str, Any]]:
        """Every time the person accepted the exchange's balances, oldest first."""
        return [json.loads(value) for _key, value in self.journal.meta_with_prefix(
            self.venue, _ACCEPTED) if value]

    # -- start-up ------------------------------------------------------------------------------

    async def startup(self) -> ReconcileReport:
        """Settle every unfinished entry before any agent runs; return what needs a person.

        In-flight orders are looked up until each is found or has used its lookups, waiting
        between rounds (so this takes up to ``first_check_s + interval_s x (max_checks - 1)``
        when an order really is lost).
        """
        report = ReconcileReport()
        for entry in self.journal.entries(self.venue, [JournalState.NEW]):
            report.not_sent.append(self.journal.update(
                entry, state=JournalState.NOT_SENT, updated_ms=self._now(),
                reason="the process stopped before sending it; nothing reached the exchange"))
        await self.settle_in_flight(report)
        await self.sweep(report)
        await self.catch_up_fills(report)
        await self.check_balances(report)
        return report

    async def settle_in_flight(self, report: ReconcileReport) -> None:
        while True:
            await self.check_in_flight(report)
            wait = self._next_due_s()
            if wait is None:
                return
            await self._sleep(max(wait, SLICE_S))

    async def run(self, stop: asyncio.Event, tick_s: float = 1.0) -> None:
        """Check in-flight orders every ``tick_s`` and sweep every ``sweep_s`` until ``stop``."""
        last_sweep = -1e18
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            try:
                await self.check_in_flight()
                if loop.time() - last_sweep >= self.policy.sweep_s:
                    report = await self.sweep()
                    await self.catch_up_fills(report)
                    await self.check_balances(report)
                    last_sweep = loop.time()
            except ToolError as exc:  # the exchange is unreachable now; try again next tick
                logger.warning("%s: reconciliation deferred: %s", self.venue, exc.message)
            try:
                await asyncio.wait_for(stop.wait(), tick_s)
            except TimeoutError:
                pass

    # -- the person's choices ------------------------------------------------------------------

    async def adopt(self, order: ExchangeOrder, agent_id: str = "person") -> JournalEntry:
        """Take an exchange order into the journal (owned by ``agent_id``) and follow it."""
        raw = order.raw
        client_id = order.client_order_id or f"adopted-{order.exchange_order_id}"
        now = self._now()
        kind = OrderType.LIMIT if order.order_type == "LIMIT" else OrderType.MARKET
        entry = JournalEntry(
            venue=self.venue, client_order_id=client_id, agent_id=agent_id,
            agent_order_id=client_id, symbol=order.symbol, side=Side(order.side),
            order_type=kind, quantity=order.amount,
            created_ms=int(raw.get("timestamp") or now), price=order.price,
            exit_kind=ExitKind.NONE, note="adopted from the exchange",
            state=JournalState.ACCEPTED, exchange_order_id=order.exchange_order_id,
            updated_ms=now, adopted=True,
        )
        entry = self.journal.record(entry)
        return await self.broker.sync.apply(entry, raw)

    def ignore(self, order: ExchangeOrder) -> None:
        """Leave an exchange order alone: it is not listed again."""
        self.journal.ignore(self.venue, order.exchange_order_id, order.symbol, self._now())


def fill_deltas(fill: JournalFill) -> dict[str, Decimal]:
    """How one fill changes each asset's balance (the fee leaves whichever asset it is in)."""
    base, quote = fill.symbol.split("/")[0], fill.symbol.split("/")[1].split(":")[0]
    sign = 1 if fill.side is Side.BUY else -1
    out = {base: sign * fill.quantity, quote: -sign * fill.cost}
    if fill.fee and fill.fee_currency:
        out[fill.fee_currency] = out.get(fill.fee_currency, ZERO) - fill.fee
    return out
