"""Reconciliation: the journal brought in line with the exchange, and what cannot be, reported.

Four jobs, each also run once at start-up before any agent runs (``startup``):

- **In-flight orders** (SENDING, UNKNOWN) are looked up by client order id, the first time a few
  seconds after they were sent (an exchange may not show an order it has just accepted), then
  every few seconds for a window of time from sending (``ReconcilePolicy.lookup_window_s``, 10
  minutes: an order an exchange shows late must not be given up while it may still appear).
  Found: the journal takes the exchange's state and fills. Not found within the window:
  NOT_PLACED, and the person is told (``OrderUnresolved``), because a lost answer that is really
  lost must be looked at by a human. Never resent. A NOT_PLACED order that turns up later (in the
  open orders, a lookup, or as the order of a trade in the history) is re-attached with its fills
  and the person is told it was found (``OrderResolved``); ``OrderSync`` does the re-attaching
  wherever the order turns up and tells the reconciler (``on_found``).
- **Open orders** are swept: the exchange's open orders update their entries; entries the
  journal holds open that the exchange no longer lists are read once (filled or cancelled while
  away); open orders the journal does not know are listed for the person to ``adopt`` or
  ``ignore``.
- **Fills missed while away** come from the trade history since the last trade seen, stored once
  per trade id.
- **Balances** (and so spot positions) come from the exchange and are compared with what the
  journal explains: the balances when reconciliation first ran, plus every fill stored and made
  since. A difference is reported (``BalanceMismatch``), never absorbed; ``accept_balances`` is
  the person's explicit "the exchange is right, start from here". A difference that orders still
  in flight could account for (``in_flight``: each between no fill and a full fill with its fee;
  the orders on the book are read again right after the balances, so only fills made around the
  reading count for them) is not reported yet: it is judged again once they are resolved, so a
  check that happens to run while an order fills raises no false alarm, and a gap that outlives
  them, or that no such order could make, is reported as before.

NEW entries at start-up never left the process (the request is only made after SENDING is
committed), so they become NOT_SENT without asking the exchange; the same tool call may send them.
Start-up waits for in-flight orders a bounded time (``startup_wait_s``); those still unknown are
left to the running reconciler's lookups, so agents do not wait out a whole lookup window.

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
from app.ccxt.in_flight import MAY_STILL_FILL, Reach, either_way, order_reach, unfilled
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
    """When in-flight orders are looked up, and how often the sweeps run (seconds).

    Attributes:
        first_check_s: the first lookup, this long after the order was sent.
        interval_s: the lookups after it, this far apart.
        lookup_window_s: an order not found this long after it was sent is NOT_PLACED. Ten
            minutes: exchanges have shown accepted orders that late under load, and giving up
            earlier loses the fills of an order that was booked after all.
        startup_wait_s: how long start-up waits for in-flight orders before the agents run;
            the rest are looked up while they do.
        sweep_s: the full sweep (open orders, missed fills, balances), this far apart.
        fill_price_band: how far from the last price (or an order's own prices) an order in
            flight may fill, as a fraction, when the balance check judges what it could explain.
        fee_allowance: the largest fee a fill may pay, as a fraction of what it trades, for
            the same judgement (1%: above any spot taker fee).
    """

    first_check_s: float = 3.0
    interval_s: float = 5.0
    lookup_window_s: float = 600.0
    startup_wait_s: float = 30.0
    sweep_s: float = 30.0
    fill_price_band: Decimal = Decimal("0.05")
    fee_allowance: Decimal = Decimal("0.01")


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
    """An order whose outcome was unknown (in flight, or NOT_PLACED: then ``entry.escalated``,
    the person was told it was not placed) was found on the exchange."""

    entry: JournalEntry

    @property
    def message(self) -> str:
        """The order and what the exchange says of it, for the person."""
        e = self.entry
        filled = f", {fmt(e.filled_quantity)} filled" if e.filled_quantity else ""
        average = f" at {fmt(e.average_price)}" if e.filled_quantity and e.average_price else ""
        return (f"{e.agent_id}'s {e.side.value} {fmt(e.quantity)} {e.symbol} order (client id "
                f"{e.agent_order_id}, exchange id {e.exchange_order_id}) was found on {e.venue}: "
                f"{e.state.value}{filled}{average}. Kestrel follows it again with its fills.")


@dataclass(frozen=True, slots=True)
class OrderUnresolved:
    """An order's outcome stayed unknown through its lookup window: a person must look."""

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
    pending: list[JournalEntry] = field(default_factory=list)  # in flight, still looked up
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
        self._found: list[JournalEntry] = []  # found since the last report took them
        broker.sync.on_found = self._on_found

    @property
    def unknown_run(self) -> int:
        """create_order outcomes left unknown in a row (reset by the next definite one)."""
        return self.broker.unknown_run

    def _now(self) -> int:
        return self.broker.clock.now_ms()

    def _on_found(self, entry: JournalEntry) -> None:
        """An entry whose outcome was unknown was found, by whichever read: tell the person."""
        self._found.append(entry)
        self._notify(OrderResolved(entry))

    def _take_found(self, report: ReconcileReport) -> ReconcileReport:
        report.resolved.extend(self._found)
        self._found.clear()
        return report

    # -- in-flight orders ----------------------------------------------------------------------

    def _window_end_ms(self, entry: JournalEntry) -> int:
        return (entry.sent_ms or entry.created_ms) + int(self.policy.lookup_window_s * 1000)

    def _due_ms(self, entry: JournalEntry) -> int:
        if entry.checks == 0 or entry.last_checked_ms is None:
            due = (entry.sent_ms or entry.created_ms) + int(self.policy.first_check_s * 1000)
        else:
            due = entry.last_checked_ms + int(self.policy.interval_s * 1000)
        return min(due, self._window_end_ms(entry))  # one last lookup as the window closes

    def in_flight(self) -> list[JournalEntry]:
        return self.journal.entries(self.venue, [JournalState.SENDING, JournalState.UNKNOWN])

    async def check_in_flight(self, report: ReconcileReport | None = None) -> ReconcileReport:
        """Look up every in-flight order that is due; an order still not found when its lookup
        window has closed is NOT_PLACED, and the person is told."""
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
                await self.broker.sync.apply(entry, raw)  # found: ``_on_found`` reports it
                continue
            entry = self.journal.update(entry, checks=entry.checks + 1, last_checked_ms=now)
            if now >= self._window_end_ms(entry):
                self._give_up(entry, now, report)
        return self._take_found(report)

    def _give_up(self, entry: JournalEntry, now: int, report: ReconcileReport) -> None:
        window = span(self.policy.lookup_window_s)
        why = (f"not found on {self.venue} by client order id within its {window} lookup "
               f"window ({entry.checks} lookup{'s' if entry.checks != 1 else ''})")
        entry = self.journal.update(entry, state=JournalState.NOT_PLACED, escalated=True,
                                    reason=why, updated_ms=now)
        report.unresolved.append(entry)
        self._notify(OrderUnresolved(entry, (
            f"{entry.agent_id}'s {entry.side.value} {entry.quantity} {entry.symbol} order "
            f"(client id {entry.agent_order_id}) was sent but its answer was lost, and it was "
            f"{why}. Kestrel takes it as not placed and will not resend it; should it turn up "
            "later, it is re-attached and you are told. Check the exchange's order history "
            f"for {entry.client_order_id}."
        )))

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
            await self.broker.sync.apply(entry, raw)  # a NOT_PLACED one found: ``_on_found``
        states = [s for s in JournalState if s.on_exchange_open]
        for entry in self.journal.entries(self.venue, states):
            if entry.client_order_id in seen:
                continue
            found = await self.broker.sync.fetch_by_id(entry)
            if found is not None:
                report.refreshed.append(await self.broker.sync.apply(entry, found))
        if unknown:
            report.unknown_orders.extend(unknown)
            self._notify(UnknownOrdersFound(tuple(unknown)))
        return self._take_found(report)

    async def catch_up_fills(self, report: ReconcileReport | None = None) -> ReconcileReport:
        """Fills since the last trade seen, per symbol the journal trades (an unknown or
        NOT_PLACED order whose trade turns up is re-attached by ``OrderSync``)."""
        report = report or ReconcileReport()
        before = len(self.journal.fills(self.venue))
        for symbol in self.journal.symbols(self.venue):
            report.foreign_trades += len(await self.broker.sync.catch_up_trades(symbol))
        for entry in self.journal.entries(self.venue):
            if not entry.state.final or entry.filled_quantity > 0:
                await self.broker.sync.complete_fills(entry)
        report.fills_added += len(self.journal.fills(self.venue)) - before
        return self._take_found(report)

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
        return self._take_found(report)  # the check reads the open orders again

    async def balance_check(self) -> BalanceCheck | None:
        """The exchange's balances read now and how they differ from what the journal explains
        (nothing is reported: the window shows this before the person accepts it). None when
        there was no baseline yet: this reading became it. A difference orders still in flight
        could account for is left out until they are resolved (see the module docstring)."""
        balances = await self.broker.refresh_balances()
        actual = {asset: b.total for asset, b in balances.items()}
        check = BalanceCheck(actual, (), self.journal.fill_mark(self.venue), self._exchange_now())
        baseline_ms = self.journal.meta(self.venue, "baseline_ms")
        if baseline_ms is None:
            self._set_baseline(check)
            return None
        gaps = self._gaps(int(baseline_ms), actual)
        if gaps:  # the orders on the book, read again: fills made around the reading stored
            await self.broker.open_orders()
            await self._complete_closed()
            learnt = self.journal.fills_after(self.venue, check.fill_mark)
            gaps = self._gaps(int(baseline_ms), actual)
            reach = await self._in_flight_reach(learnt) if gaps else {}
            mismatches = tuple(m for m in gaps if not reach.get(m.asset, Reach()).covers(
                m.difference))
            waiting = [m.describe() for m in gaps if m not in mismatches]
            if waiting:
                logger.info("%s: balances differ by what orders in flight may have filled; "
                            "judged again once they are resolved: %s", self.venue,
                            "; ".join(waiting))
        else:
            mismatches = ()
        self.mismatches = mismatches
        return replace(check, mismatches=mismatches)

    def _gaps(self, baseline_ms: int, actual: Mapping[str, Decimal]) -> tuple[
            BalanceMismatch, ...]:
        """Every asset whose balance differs from what the journal explains now."""
        expected = self._expected(baseline_ms)
        return tuple(
            BalanceMismatch(asset, expected.get(asset, ZERO), actual.get(asset, ZERO))
            for asset in sorted(set(expected) | set(actual))
            if expected.get(asset, ZERO) != actual.get(asset, ZERO)
        )

    def _stored(self) -> dict[str, tuple[Decimal, Decimal]]:
        """Quantity and cost of the stored fills, per client order id."""
        stored: dict[str, tuple[Decimal, Decimal]] = {}
        for fill in self.journal.fills(self.venue):
            quantity, cost = stored.get(fill.client_order_id, (ZERO, ZERO))
            stored[fill.client_order_id] = (quantity + fill.quantity, cost + fill.cost)
        return stored

    async def _complete_closed(self) -> None:
        """The trades of closed orders that executed more than the journal holds."""
        stored = self._stored()
        closed = [JournalState.FILLED, JournalState.CANCELED, JournalState.EXPIRED]
        for entry in self.journal.entries(self.venue, closed):
            if entry.filled_quantity > stored.get(entry.client_order_id, (ZERO, ZERO))[0]:
                await self.broker.sync.complete_fills(entry)

    async def _in_flight_reach(self, learnt: list[JournalFill]) -> dict[str, Reach]:
        """How far the orders whose fills the journal may not hold in full yet could move each
        asset (``app.ccxt.in_flight``), their fills priced within ``fill_price_band`` of the
        last price and of the orders' own prices, and the fills ``learnt`` since the reading."""
        reach: dict[str, Reach] = {}
        for fill in learnt:
            for asset, more in either_way(fill_deltas(fill)).items():
                reach[asset] = reach.get(asset, Reach()) + more
        stored = self._stored()
        band, fee = self.policy.fill_price_band, self.policy.fee_allowance
        last: dict[str, Decimal] = {}
        for entry in self.journal.entries(self.venue, MAY_STILL_FILL):
            quantity, cost = stored.get(entry.client_order_id, (ZERO, ZERO))
            left = unfilled(entry, quantity)
            if left <= 0:
                continue
            if entry.symbol not in last:
                last[entry.symbol] = await self.broker.last_price(entry.symbol)
            prices = [p for p in (entry.price, entry.stop_price, entry.average_price,
                                  last[entry.symbol]) if p]
            low, high = min(prices) * (1 - band), max(prices) * (1 + band)
            for asset, more in order_reach(entry, left, cost, low, high, fee).items():
                reach[asset] = reach.get(asset, Reach()) + more
        return reach

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

        In-flight orders are looked up, waiting between rounds, until each is found or NOT_PLACED
        or ``startup_wait_s`` has passed; those still unknown then are in ``report.pending``
        (the running reconciler keeps looking them up through their window).
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
        until = self._now() + int(self.policy.startup_wait_s * 1000)
        while True:
            await self.check_in_flight(report)
            wait = self._next_due_s()
            if wait is None:
                return
            if self._now() + wait * 1000 > until:
                report.pending.extend(self.in_flight())
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


def span(seconds: float) -> str:
    """A duration in words: "45 s", "10 min", "1.5 h"."""
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def fill_deltas(fill: JournalFill) -> dict[str, Decimal]:
    """How one fill changes each asset's balance (the fee leaves whichever asset it is in)."""
    base, quote = fill.symbol.split("/")[0], fill.symbol.split("/")[1].split(":")[0]
    sign = 1 if fill.side is Side.BUY else -1
    out = {base: sign * fill.quantity, quote: -sign * fill.cost}
    if fill.fee and fill.fee_currency:
        out[fill.fee_currency] = out.get(fill.fee_currency, ZERO) - fill.fee
    return out
