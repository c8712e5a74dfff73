"""``OrderEntry``: the one path every order takes, whoever asks for it.

An agent's trade tools, the person's ticket and row buttons (through the same tools, so the audit
trail records them), Telegram's approvals and an external MCP agent all end here. What happens to
an order, in this order, once:

1. **Idempotency by client order id.** The request is kept as it was given (``OrderRequests``)
   before it is sent. A repeat under the same id with the same request is the same order: its
   order when the broker has it, "still being checked" while its outcome is unknown, and a send
   only when the broker certainly never booked it. The same id for a different request is
   refused (a different order needs its own id). A later step of the same task that repeats an
   order word for word, without an id of its own, gets the order already placed refused.
2. **The kill switch's entry block**: while it is tripped no entry passes (exits, closes and
   cancels do: they only reduce risk). It comes before the approval policy, so nobody is asked
   to approve an order that would be refused anyway.
3. **The approval policy** (``approval``): an agent's order the person wants to see first, or a
   sell of more than the agent's own lot, is refused with ``ApprovalNeeded``; the agent's loop
   parks on it and asks the person, and the approved call comes back with ``Caller.approved``.
   The person's own orders, and the exits that protect an agent's own lot, are exempt.
4. **The broker's pre-check** (fields, market rules, funds) and what the market can hold
   (``BrokerAbilities``): an agent's entry on a market that can hold no stop loss is refused
   before it is sent, unless Kestrel holds stops itself there.
5. **The Risk Guard's admission**, counting the order as pending until the broker answers.
6. **The send.**
7. **Linked exits**: a take profit and a stop loss as one OCO list where the market holds one;
   where it can hold only one resting sell, the stop loss alone (said); where it holds no stop,
   a stop kept by Kestrel (said to protect only while Kestrel runs).
8. **Exits put back after a refusal**, and when an agent's lot is left without a stop loss: the
   stop alone, else the lot sold at market, else a CRITICAL alert and the kill switch (the
   person's own lot is the person's to decide: they are told at once).
9. **The person's alerts** on every channel.

``preview`` runs the same steps without sending (the ticket's review). Positions are lots with an
owner (``Broker.lots``): an agent closes and protects its own lot only.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Set
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Protocol

from app.config.approval import ApprovalSettings
from app.domain.agents import PERSON_ID, agent_key
from app.domain.clock import ms_to_iso
from app.domain.errors import (
    AccessDeniedError,
    InvalidOrderError,
    InvalidParameterError,
    KestrelError,
    MissingParameterError,
    NotFoundError,
    RiskRejection,
    ToolError,
)
from app.domain.kill_switch import Trip
from app.domain.market import split_symbol
from app.domain.market_rules import fmt
from app.domain.risk_view import RiskView
from app.domain.trading import ExitKind, Order, OrderStatus, OrderType, Side
from app.risk.guard import Violation
from app.risk.types import OrderIntent
from app.store.held_stops import HeldStop, HeldStops, HeldStopState
from app.store.order_requests import OrderRequests, RequestRecord
from app.trading.approval import APPROVAL_RULE, ApprovalNeeded, approval_reason
from app.trading.exits import (
    exit_name,
    is_unknown_outcome,
    move_refused,
    putting_back,
    subject_of,
    unprotected_alert,
)
from app.trading.port import (
    CheckedOrder,
    OrderRequest,
    OwnedLot,
    PlacementState,
    TradingBroker,
)

logger = logging.getLogger(__name__)
ZERO = Decimal(0)
KILL_SWITCH_RULE = "kill_switch"
OCO_LINE = ("Placed as one OCO order list on the exchange: when one exit fills, the exchange "
            "cancels the other")

Alert = Callable[[str, str], Awaitable[None]]
Halt = Callable[[str, str], Awaitable[object]]


class Guard(Protocol):
    def admit(self, intent: OrderIntent, view: RiskView) -> AbstractContextManager[None]:
        """Raise ``RiskRejection`` when the order may not go ahead; otherwise a context in which
        it is placed, during which the guard counts it as pending."""
        ...

    def preview(self, intent: OrderIntent, view: RiskView) -> tuple[str, Violation] | None:
        ...

    def refuse(self, intent: OrderIntent, view: RiskView, rule: str, reason: str) -> None:
        """Record a refusal decided before the guard's own rules (the kill switch's)."""
        ...


@dataclass(frozen=True, slots=True)
class Caller:
    """Who asks, and what the front asking can do about an approval.

    Attributes:
        task_id, call_key: the agent's task and this call in it (a redelivered task repeats
            its keys: the order it placed is found, not placed again).
        approved: the person approved this very call (the loop asked them).
        can_ask: a person can be asked (an agent's loop parks the task); False for an external
            agent served over MCP, whose held order is refused with the reason.
    """

    agent_id: str
    task_id: str = ""
    call_key: str = ""
    approved: bool = False
    can_ask: bool = True

    @property
    def is_person(self) -> bool:
        return agent_key(self.agent_id) == PERSON_ID

    def key(self, suffix: str = "") -> str:
        """The stem of the client ids this call's orders get: from the tool call, so a repeated
        call finds what it placed; a call without a key gets a fresh one."""
        stem = f"k-{self.call_key}" if self.call_key else f"auto-{uuid.uuid4().hex[:16]}"
        return stem + suffix


@dataclass(frozen=True, slots=True)
class OrderAsk:
    """An order as it was asked for: a base ``quantity`` or a ``quote_amount``, never both."""

    symbol: str
    side: Side
    order_type: OrderType = OrderType.MARKET
    quantity: Decimal | None = None
    quote_amount: Decimal | None = None
    price: Decimal | None = None
    stop_price: Decimal | None = None
    client_order_id: str = ""
    reason: str = ""

    def canonical(self, symbol: str) -> str:
        """The request in one text form: equal text, the same order (the market ignored)."""
        def num(value: Decimal | None) -> str | None:
            return None if value is None else format(value.normalize(), "f")

        return json.dumps({
            "symbol": symbol, "side": self.side.value, "type": self.order_type.value,
            "quantity": num(self.quantity), "quote_amount": num(self.quote_amount),
            "price": num(self.price), "stop_price": num(self.stop_price),
        }, sort_keys=True)

    def request(self, agent_id: str, client_order_id: str) -> OrderRequest:
        return OrderRequest(
            agent_id, self.symbol, self.side, self.order_type, self.quantity or ZERO,
            price=self.price, stop_price=self.stop_price, client_order_id=client_order_id,
            reason=self.reason, quote_amount=self.quote_amount,
        )


def describe_request(canonical: str) -> str:
    """A kept request in words: "BUY 50 USDT of ETH/USDT at market", "SELL 0.5 BTC/USDT
    LIMIT at 9500"."""
    asked = json.loads(canonical)
    symbol = asked["symbol"]
    size = (f"{asked['quantity']} {symbol}" if asked["quantity"] is not None
            else f"{asked['quote_amount']} {split_symbol(symbol, '')[1]} of {symbol}")
    kind = "at market" if asked["type"] == "MARKET" else asked["type"]
    at = (f" at {asked['price']}" if asked["price"] else "") + (
        f" stop {asked['stop_price']}" if asked["stop_price"] else "")
    return f"{asked['side']} {size} {kind}{at}"


@dataclass(frozen=True, slots=True)
class ExitsSet:
    """What ``set_exits`` placed: the orders, whether they are one OCO list, and in words why
    a take profit asked for was left out (where the market holds only the stop)."""

    symbol: str
    take_profit: Order | None
    stop_loss: Order | None
    linked: bool = False
    left_out: str | None = None
    held_stop: HeldStop | None = None  # the stop loss Kestrel holds itself, if any


@dataclass(frozen=True, slots=True)
class Review:
    """An order as order entry would take it now, without sending it.

    ``checked`` is the broker's pre-check (None when it refused: ``error``); ``rule`` and
    ``refusal``: the step that would refuse it (the kill switch, the Risk Guard, the approval
    policy); ``notes``: what the market will do differently from the ask, in words.
    """

    checked: CheckedOrder | None = None
    reduces: bool = False
    error: str | None = None
    rule: str | None = None
    refusal: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def passes(self) -> bool:
        return self.error is None and self.rule is None


@dataclass
class OrderEntry:
    """The order path of one account (see the module docstring).

    Args:
        broker: the venue's broker.
        guard: the Risk Guard in front of it.
        requests: where requests are kept as asked; None keeps them in memory (a world without a
            workspace).
        approval: the approval policy (replaced when the person saves new settings).
        halted: the kill switch's trip in force, or None when it is armed.
        traded_symbols: the symbols the account ever traded (the new-symbol rule).
        alert: tells the person, on every channel, ``(message, subject)``.
        halt: trips the kill switch ``(reason, by)`` when a lot cannot be protected or closed.
        kestrel_stops: where the exchange can hold no stop, Kestrel may hold one itself.
    """

    broker: TradingBroker
    guard: Guard
    requests: OrderRequests
    approval: ApprovalSettings = field(default_factory=ApprovalSettings)
    halted: Callable[[], Trip | None] = lambda: None
    traded_symbols: Callable[[], Set[str]] = frozenset
    alert: Alert | None = None
    halt: Halt | None = None
    kestrel_stops: bool = False
    now_ms: Callable[[], int] = lambda: 0
    held: HeldStops | None = None

    @property
    def holds_stops(self) -> bool:
        """Kestrel may hold a stop itself where the exchange can hold none."""
        return self.kestrel_stops and self.held is not None

    # -- placing an order ----------------------------------------------------------------------

    async def place(self, who: Caller, ask: OrderAsk) -> Order:
        """Place one order through every step (module docstring); return it.

        Raises:
            ToolError: the request is invalid, the broker refuses it, or its outcome is unknown.
            RiskRejection: the Risk Guard, the kill switch or the approval policy refuses it
                (``ApprovalNeeded`` for the last: a person can approve it).
        """
        _one_amount(ask)
        symbol = self.broker.canonical_symbol(ask.symbol)
        client_id = ask.client_order_id or (f"k-{who.call_key}" if who.call_key else "")
        canonical = ask.canonical(symbol)
        if client_id:
            known = await self._known(who, client_id, canonical)
            if known is not None:
                return known
        if not ask.client_order_id and who.task_id:
            self._not_repeated_in_task(who, canonical, await self._placed_in_task(who, canonical))
        req = ask.request(who.agent_id, client_id)
        self._entry_block(req)
        await self._approve(who, req)
        checked = await self.broker.precheck(req)
        self._protectable(who, req, checked)
        if client_id:
            self.requests.record(RequestRecord(who.agent_id, client_id, who.task_id,
                                               bool(ask.client_order_id), canonical,
                                               self.now_ms()))
        return await self._send(req, checked)

    async def _known(self, who: Caller, client_id: str, canonical: str) -> Order | None:
        """The order this client id already stands for; None when it may be sent."""
        kept = self.requests.get(who.agent_id, client_id)
        if kept is not None and kept.request != canonical:
            raise InvalidOrderError(
                f"client_order_id {client_id!r} was already used for another order "
                f"({describe_request(kept.request)}); this call asks for "
                f"{describe_request(canonical)}. A different order needs its own id.",
                details={"client_order_id": client_id, "reason": "id_used_for_another_order"},
            )
        placed = await self.broker.placement(who.agent_id, client_id)
        if placed.state is PlacementState.PLACED:
            return placed.order
        if placed.state is PlacementState.IN_FLIGHT:
            raise ToolError(
                f"Order {client_id!r} is still being checked: {placed.detail}. It is this very "
                "order; it is never sent twice. Call get_order_status (client_order_id "
                f"{client_id}) in a few seconds, and decide nothing else about it until then.",
                details={"client_order_id": client_id, "outcome": "unknown",
                         "state": placed.state.value, "do_not_resend": True},
            )
        if placed.state is PlacementState.NOT_PLACED:
            raise ToolError(
                f"Order {client_id!r} is taken as not placed: {placed.detail}. It is not sent "
                "again under this id (it may still turn up: Kestrel keeps looking). Check "
                "get_open_orders, then decide anew.",
                details={"client_order_id": client_id, "state": placed.state.value},
            )
        return None

    async def _placed_in_task(self, who: Caller, canonical: str) -> Order | None:
        for kept in self.requests.of_task(who.agent_id, who.task_id):
            if kept.explicit or kept.request != canonical:
                continue
            placed = await self.broker.placement(who.agent_id, kept.client_order_id)
            if placed.state in (PlacementState.PLACED, PlacementState.IN_FLIGHT):
                return placed.order
        return None

    @staticmethod
    def _not_repeated_in_task(who: Caller, canonical: str, placed: Order | None) -> None:
        """Real models write prose around their calls, and one that ends a task by quoting the
        order it placed ("Done: <create_order>...") would place it twice: each step has its own
        key. A second identical order in one task needs an id of its own."""
        if placed is None:
            return
        raise InvalidOrderError(
            f"This task already placed exactly this order (order {placed.order_id}); it was not "
            "placed again. To check it, call get_order_status. To place a second, identical "
            "order on purpose, give it its own <client_order_id>.",
            details={"order_id": placed.order_id, "reason": "repeated_in_task",
                     "request": describe_request(canonical)},
        )

    async def _approve(self, who: Caller, req: OrderRequest) -> None:
        """Raise ``ApprovalNeeded`` when the person must see this order first."""
        if who.is_person or who.approved:
            return
        reason = await self._lot_reason(who, req)
        if reason is None:
            notional = None
            if self.approval.above_quote is not None:  # the one rule that needs the worth
                notional = await self._worth(req)
            reason = approval_reason(
                self.approval, symbol=self.broker.canonical_symbol(req.symbol),
                notional=notional, mode=self.broker.mode, traded_symbols=self.traded_symbols,
            )
        if reason is None:
            return
        raise ApprovalNeeded(reason, can_ask=who.can_ask)

    async def _worth(self, req: OrderRequest) -> Decimal | None:
        """What an order is worth in the quote currency: its quote amount, else its quantity at
        its own price or the last price; None when no price is known."""
        if req.quote_amount is not None:
            return req.quote_amount
        price = req.price or req.stop_price
        if price is None:
            try:
                price = await self.broker.last_price(req.symbol)
            except KestrelError:
                return None
        return req.quantity * price

    async def _lot_reason(self, who: Caller, req: OrderRequest) -> str | None:
        """A sell of more than the agent's own lot touches the person's (or another agent's):
        only with the person's approval."""
        if req.side is not Side.SELL:
            return None
        symbol = self.broker.canonical_symbol(req.symbol)
        lots = await self.broker.lots(symbol)
        own = _own(lots, who.agent_id)
        if req.quantity <= own or not any(
                agent_key(lot.owner) != agent_key(who.agent_id) for lot in lots):
            return None  # within its lot, or nobody else's to touch (the broker judges the rest)
        others = ", ".join(f"{_owner_name(lot.owner)} {fmt(lot.size)}" for lot in lots
                           if agent_key(lot.owner) != agent_key(who.agent_id))
        return (f"it sells {fmt(req.quantity)} {symbol.split('/')[0]} where this agent's own "
                f"lot is {fmt(own)}; the rest of the position is not its own ({others})")

    def _entry_block(self, req: OrderRequest) -> None:
        """No entry while the kill switch is tripped (a sell of a long-only account reduces)."""
        if req.side is not Side.BUY or req.reduce_only:
            return
        trip = self.halted()
        if trip is None:
            return
        reason = (f"Trading is halted: {trip.halt_reason()}. No new order is accepted (this "
                  f"BUY of {req.symbol} included) until a person resets it in the Kestrel "
                  "window; cancelling orders and closing or reducing a position still work")
        intent = OrderIntent(agent_id=req.agent_id, symbol=req.symbol, side=req.side,
                             order_type=req.order_type, quantity=req.quantity,
                             reference_price=req.price or req.stop_price or ZERO,
                             price=req.price, stop_price=req.stop_price)
        self.guard.refuse(intent, self.broker.risk_view(), KILL_SWITCH_RULE, reason)
        raise RiskRejection(KILL_SWITCH_RULE, reason, {
            "tripped_at": ms_to_iso(trip.tripped_ms), "market_time": ms_to_iso(trip.market_ms),
            "tripped_by": trip.by, "reason": trip.reason, "cause": trip.cause.value})

    def _protectable(self, who: Caller, req: OrderRequest, checked: CheckedOrder) -> None:
        """An agent's entry on a market that can hold no stop loss is refused before it is
        sent: the position it opens could not be protected (unless Kestrel holds stops)."""
        if who.is_person or req.side is not Side.BUY or self.holds_stops:
            return
        if self.broker.abilities(checked.symbol).holds_stop:
            return
        raise InvalidOrderError(
            f"{checked.symbol} on this exchange can hold no stop-loss order (the market lists "
            "neither a stop-market nor a stop-limit type), so a position bought here could not "
            "be protected; the order was not sent. Trade a market that holds stops. (The person "
            "can let Kestrel hold stops itself in Settings > Trading; they protect only while "
            "Kestrel runs.)",
            details={"symbol": checked.symbol, "needs": "stop_orders"},
        )

    async def _send(self, req: OrderRequest, checked: CheckedOrder | None = None) -> Order:
        """The broker's pre-check, the Risk Guard's admission, then the order itself."""
        if checked is None:
            checked = await self.broker.precheck(req)
        intent = order_intent(req, checked, self.broker.position_size(checked.symbol))
        with self.guard.admit(intent, self.broker.risk_view()):
            return await self.broker.create_order(req)

    # -- a review without sending --------------------------------------------------------------

    async def preview(self, who: Caller, ask: OrderAsk) -> Review:
        """What ``place`` would do now, each step run without sending and nothing recorded."""
        try:
            _one_amount(ask)
            symbol = self.broker.canonical_symbol(ask.symbol)
            req = ask.request(who.agent_id, "")
            checked = await self.broker.precheck(req)
        except KestrelError as exc:
            return Review(error=_words(exc))
        intent = order_intent(req, checked, self.broker.position_size(symbol))
        notes = (f"Sent {checked.note.removeprefix('sent ')}",) if checked.note else ()
        trip = None if intent.reduces_position else self.halted()
        if trip is not None and req.side is Side.BUY:
            return Review(checked, intent.reduces_position, rule=KILL_SWITCH_RULE,
                          refusal=f"Trading is halted: {trip.halt_reason()}", notes=notes)
        try:
            await self._approve(who, req)
            self._protectable(who, req, checked)
        except ApprovalNeeded as exc:
            return Review(checked, intent.reduces_position, rule=APPROVAL_RULE,
                          refusal=exc.reason, notes=notes)
        except KestrelError as exc:
            return Review(checked, intent.reduces_position, error=_words(exc), notes=notes)
        verdict = self.guard.preview(intent, self.broker.risk_view())
        if verdict is not None:
            rule, violation = verdict
            return Review(checked, intent.reduces_position, rule=rule,
                          refusal=violation.reason, notes=notes)
        return Review(checked, intent.reduces_position, notes=notes)

    def exit_review(
        self, symbol: str, take_profit: Decimal | None, stop_loss: Decimal | None
    ) -> Review:
        """What the market can hold of these exits, from its declared abilities alone (a BUY
        ticket's exits are reviewed so before the position exists): an error where it can hold
        no stop, a note where only the stop fits or where both go as one OCO list."""
        try:
            symbol = self.broker.canonical_symbol(symbol)
            abilities = self.broker.abilities(symbol)
        except KestrelError as exc:
            return Review(error=_words(exc))
        if stop_loss is not None and not abilities.holds_stop:
            if self.holds_stops:
                return Review(reduces=True, notes=(_held_note(stop_loss),))
            return Review(error=(
                f"{symbol} on this exchange can hold no stop-loss order (it lists neither a "
                "stop-market nor a stop-limit type); nothing was changed. Close the position "
                "when the price reaches your stop, or let the person have Kestrel hold stops "
                "(Settings > Trading)."))
        both = take_profit is not None and stop_loss is not None
        if both and not abilities.holds_both_exits:
            return Review(reduces=True, notes=(_tp_left_out(symbol, take_profit),))
        if both and abilities.exits_lock_coins and abilities.oco:
            return Review(reduces=True, notes=(OCO_LINE,))
        return Review(reduces=True)

    async def preview_exits(
        self, who: Caller, symbol: str, take_profit: Decimal | None, stop_loss: Decimal | None
    ) -> Review:
        """What ``set_exits`` would do now: the checks it makes before anything changes."""
        try:
            plan = await self._exit_plan(who, symbol, take_profit, stop_loss)
        except KestrelError as exc:
            return Review(error=_words(exc))
        return Review(reduces=True, notes=plan.notes)

    # -- cancelling ----------------------------------------------------------------------------

    async def cancel(
        self, who: Caller, symbol: str, order_id: str | None, client_order_id: str | None
    ) -> Order:
        """Cancel one open order: an agent its own, the person any agent's (as its owner)."""
        if not order_id and not client_order_id:
            raise MissingParameterError(
                "<cancel_order> needs <order_id> (or <client_order_id>) to say which order.",
                details={"parameter": "order_id"},
            )
        symbol = self.broker.canonical_symbol(symbol)
        owner = who.agent_id
        if who.is_person:
            owner = await self._owner(symbol, order_id, client_order_id) or owner
        return await self.broker.cancel_order(owner, symbol, order_id, client_order_id)

    async def _owner(self, symbol: str, order_id: str | None, client_id: str | None) -> str | None:
        """Whose order this is; None when the broker does not know it (it then says so)."""
        for order in await self.broker.open_orders(None, symbol):
            if (order_id and order.order_id == order_id) or (
                    client_id and order.client_order_id == client_id):
                return order.agent_id
        if not order_id:
            return None
        try:  # no longer open: its owner hears why it cannot be cancelled (filled, cancelled)
            return (await self.broker.get_order(PERSON_ID, symbol, order_id)).agent_id
        except KestrelError:
            return None

    async def open_orders(
        self, agent_id: str | None = None, symbol: str | None = None
    ) -> list[Order]:
        return await self.broker.open_orders(agent_id, symbol)

    async def cancel_order(
        self, agent_id: str, symbol: str, order_id: str | None = None,
        client_order_id: str | None = None,
    ) -> Order:
        """Cancel as ``agent_id`` (the kill switch's own cancels come this way)."""
        return await self.cancel(Caller(agent_id), symbol, order_id, client_order_id)

    # -- moving an order ----------------------------------------------------------------------

    async def modify(
        self, who: Caller, symbol: str, order_id: str, *, price: Decimal | None = None,
        stop_price: Decimal | None = None,
    ) -> Order:
        """Move an open order to a new price (the person dragging its line on the chart).

        An exit of a lot moves as ``set_exits`` moves it (the other exit kept, put back if
        refused); any other order is replaced in one request where the broker can
        (``cancel_replace``), else cancelled and placed again, the old one put back if the new
        one is refused. The same steps as a new order: the kill switch blocks a moved entry, the
        approval policy holds an agent's, the broker and the Risk Guard judge it.

        Raises:
            NotFoundError: no such open order; AccessDeniedError: an agent's order not its own.
        """
        if price is None and stop_price is None:
            raise MissingParameterError("Give the new <price> or <stop_price>.",
                                        details={"parameter": "price"})
        symbol = self.broker.canonical_symbol(symbol)
        old = next((o for o in await self.broker.open_orders(None, symbol)
                    if o.order_id == order_id), None)
        if old is None:
            raise NotFoundError(f"No open order {order_id!r} for {symbol}.",
                                details={"order_id": order_id, "symbol": symbol})
        if not who.is_person and agent_key(old.agent_id) != agent_key(who.agent_id):
            raise AccessDeniedError(
                f"Order {order_id} belongs to agent {old.agent_id!r}; an agent may only move its "
                "own orders.", details={"order_id": order_id, "owner": old.agent_id})
        if old.exit_kind in (ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS):
            return await self._move_exit(old, symbol, price, stop_price)
        req = OrderRequest(
            old.agent_id, symbol, old.side, old.order_type, old.remaining,
            price=price if price is not None else old.price,
            stop_price=stop_price if stop_price is not None else old.stop_price,
            client_order_id=f"mv-{uuid.uuid4().hex[:16]}", reduce_only=old.reduce_only,
            exit_kind=old.exit_kind,
            reason=old.reason or f"moved by {'the person' if who.is_person else who.agent_id}",
        )
        self._entry_block(req)
        await self._approve(who, req)
        released = old.remaining if old.side is Side.SELL else ZERO
        checked = await self.broker.precheck(req, released=released)
        intent = order_intent(req, checked, self.broker.position_size(symbol))
        with self.guard.admit(intent, self.broker.risk_view()):
            if self.broker.abilities(symbol).cancel_replace:
                return await self.broker.replace_order(old.agent_id, symbol, old.order_id, req)
            await self.broker.cancel_order(old.agent_id, symbol, old.order_id)
            try:
                return await self.broker.create_order(req)
            except (ToolError, RiskRejection) as exc:
                if is_unknown_outcome(exc):
                    raise
                back = replace(req, price=old.price, stop_price=old.stop_price,
                               client_order_id="", reason=f"{old.reason} (put back)".strip())
                put = await self.broker.create_order(back)
                raise _with_words(exc, f"{_words(exc)} The order was not moved: it was placed "
                                       f"again at its old price (order {put.order_id}).") from exc

    async def _move_exit(
        self, old: Order, symbol: str, price: Decimal | None, stop_price: Decimal | None
    ) -> Order:
        """A take profit or stop loss moved: its lot's exits set again with the other kept."""
        owner = Caller(old.agent_id)
        exits = [o for o in await self.broker.open_orders(old.agent_id, symbol)
                 if o.exit_kind in (ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS)]
        tp = next((o.price for o in exits if o.exit_kind is ExitKind.TAKE_PROFIT), None)
        sl = next((o.stop_price for o in exits if o.exit_kind is ExitKind.STOP_LOSS), None)
        if old.exit_kind is ExitKind.TAKE_PROFIT:
            tp = price if price is not None else tp
        else:
            sl = stop_price if stop_price is not None else (price if price is not None else sl)
        done = await self.set_exits(owner, symbol, tp, sl)
        moved = done.take_profit if old.exit_kind is ExitKind.TAKE_PROFIT else done.stop_loss
        if moved is None:  # the market could not hold it beside the other (said in left_out)
            raise InvalidOrderError(done.left_out or "The exit could not be moved.",
                                    details={"order_id": old.order_id})
        return moved

    # -- the lot an owner holds ----------------------------------------------------------------

    async def own_lot(self, who: Caller, symbol: str) -> Decimal:
        """What ``who`` may close or protect of ``symbol``, down to the amount step: an agent
        its own lot, the person every lot (read fresh: a live account's balances change with
        each fill)."""
        lots = await self.broker.lots(symbol)
        held = sum((lot.size for lot in lots), ZERO)
        size = held if who.is_person else _own(lots, who.agent_id)
        size = self.broker.market_rules(symbol).floor_amount(size)
        if size <= 0:
            if held > 0 and not who.is_person:
                raise InvalidOrderError(
                    f"This agent holds no {symbol} lot of its own: the {fmt(held)} held belong "
                    f"to {', '.join(_owner_name(lot.owner) for lot in lots)}. An agent closes "
                    "and protects only what it bought.",
                    details={"symbol": symbol, "size": "0", "held": fmt(held)},
                )
            raise InvalidOrderError(
                f"There is no open {symbol} position to protect or close.",
                details={"symbol": symbol, "size": "0"},
            )
        return size

    # -- exits ---------------------------------------------------------------------------------

    async def set_exits(
        self, who: Caller, symbol: str, take_profit: Decimal | None, stop_loss: Decimal | None
    ) -> ExitsSet:
        """Place (or replace) the take profit and stop loss of ``who``'s lot of ``symbol``.

        Everything that can be checked is checked before the old exits are cancelled; if the
        exchange still refuses the new ones, the old are put back, and a lot left without a
        stop loss is protected by the fallback (``_protect``).
        """
        plan = await self._exit_plan(who, symbol, take_profit, stop_loss)
        symbol, size, requests = plan.symbol, plan.size, plan.requests
        key = who.key()
        cancelled = [old for old in plan.replaced
                     if await self._cancel_exit(old.agent_id, symbol, old)]
        placed: dict[ExitKind, Order] = {}
        refusal: ToolError | RiskRejection | None = None
        if plan.linked:
            try:
                tp, sl = await self._place_oco(requests[0], requests[1])
                placed = {ExitKind.TAKE_PROFIT: tp, ExitKind.STOP_LOSS: sl}
            except (ToolError, RiskRejection) as exc:
                refusal = exc
        else:
            for req in requests:
                try:
                    placed[req.exit_kind] = await self._send(req)
                except (ToolError, RiskRejection) as exc:
                    refusal = exc
                    break
        if refusal is not None:
            # every cancelled exit that nothing new replaces is placed again (``exits``)
            unreplaced = [old for old in cancelled if old.exit_kind not in placed]
            raise await self._after_refusal(
                who, refusal, unreplaced, size, key, plan, placed) from refusal
        held = None
        if plan.held_stop is not None and self.held is not None:
            held = self.held.hold(who.agent_id, symbol, size, plan.held_stop, self.now_ms())
        return ExitsSet(symbol, placed.get(ExitKind.TAKE_PROFIT), placed.get(ExitKind.STOP_LOSS),
                        plan.linked, plan.left_out, held)

    async def _exit_plan(
        self, who: Caller, symbol: str, take_profit: Decimal | None, stop_loss: Decimal | None
    ) -> _ExitPlan:
        symbol = self.broker.canonical_symbol(symbol)
        if take_profit is None and stop_loss is None:
            raise MissingParameterError(
                "Give <take_profit_price>, <stop_loss_price> or both.",
                details={"parameter": "take_profit_price"},
            )
        size = await self.own_lot(who, symbol)
        last = await self.broker.last_price(symbol)
        if take_profit is not None and take_profit <= last:
            raise InvalidOrderError(
                f"take_profit_price {take_profit} must be above the last price {last} for a long "
                "position; at or below it, it would sell at once.",
                details={"field": "take_profit_price", "last_price": str(last)},
            )
        if stop_loss is not None and stop_loss >= last:
            raise InvalidOrderError(
                f"stop_loss_price {stop_loss} must be below the last price {last} for a long "
                "position; at or above it, it would sell at once.",
                details={"field": "stop_loss_price", "last_price": str(last)},
            )
        abilities = self.broker.abilities(symbol)
        review = self.exit_review(symbol, take_profit, stop_loss)
        if review.error is not None:
            raise InvalidOrderError(review.error, details={
                "field": "stop_loss_price", "symbol": symbol, "needs": "stop_orders"})
        notes = list(review.notes)
        held_stop = None
        if stop_loss is not None and not abilities.holds_stop:
            held_stop, stop_loss = stop_loss, None  # Kestrel holds it (the review allowed it)
        both = take_profit is not None and stop_loss is not None
        left_out = None
        if both and not abilities.holds_both_exits:
            left_out = _tp_left_out(symbol, take_profit)  # the stop loss alone protects it
            take_profit = None
            both = False
        linked = both and abilities.exits_lock_coins and abilities.oco
        key = who.key()
        requests = []
        if take_profit is not None:
            requests.append(OrderRequest(
                who.agent_id, symbol, Side.SELL, OrderType.LIMIT, size, price=take_profit,
                reduce_only=True, exit_kind=ExitKind.TAKE_PROFIT, reason="take profit",
                client_order_id=f"{key}:tp" if linked else "",
            ))
        if stop_loss is not None:
            requests.append(OrderRequest(
                who.agent_id, symbol, Side.SELL, OrderType.STOP, size, stop_price=stop_loss,
                reduce_only=True, exit_kind=ExitKind.STOP_LOSS, reason="stop loss",
                client_order_id=f"{key}:sl" if linked else "",
            ))
        if linked:
            # valid before the old exits go (their coins are free only once they are gone)
            self.broker.check_oco(requests[0], requests[1])
        replaced = [
            old for old in await self.broker.open_orders(who.agent_id, symbol)
            if old.exit_kind in (ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS) and not (
                linked and old.client_order_id in (r.client_order_id for r in requests))
        ]
        if not linked:
            # everything valid before the old exits go; the coins they hold are the new ones'
            released = sum((old.remaining for old in replaced), ZERO)
            for req in requests:
                checked = await self.broker.precheck(req, released=released)
                if checked.note and req.exit_kind is ExitKind.STOP_LOSS:
                    notes.append(f"The stop loss is sent {checked.note.removeprefix('sent ')}")
        return _ExitPlan(symbol, size, tuple(requests), tuple(replaced), linked,
                         tuple(notes), left_out, held_stop)

    async def _place_oco(self, take_profit: OrderRequest, stop_loss: OrderRequest
                         ) -> tuple[Order, Order]:
        """Both exits as one list, each judged by the Risk Guard like a single order (exits
        reduce the position, so the guard lets them through), then placed at once."""
        checked = [await self.broker.precheck(r) for r in (take_profit, stop_loss)]
        view = self.broker.risk_view()
        held = self.broker.position_size(checked[0].symbol)
        intents = [order_intent(r, c, held) for r, c in zip(
            (take_profit, stop_loss), checked, strict=True)]
        with self.guard.admit(intents[0], view), self.guard.admit(intents[1], view):
            return await self.broker.create_oco(take_profit, stop_loss)

    async def _cancel_exit(self, agent_id: str, symbol: str, old: Order) -> bool:
        """Cancel one order listed open a moment ago; the other leg of an OCO list goes with
        it on the exchange, so one no longer open by the time it is reached is already gone.
        Whether it ends cancelled (by this call or with its list), not filled."""
        try:
            await self.broker.cancel_order(agent_id, symbol, old.order_id)
        except InvalidOrderError:
            now = await self.broker.get_order(agent_id, symbol, old.order_id)
            if now.status.is_open:
                raise
            return now.status is OrderStatus.CANCELLED
        return True

    async def _after_refusal(
        self, who: Caller, exc: ToolError | RiskRejection, cancelled: list[Order], held: Decimal,
        key: str, plan: _ExitPlan | None = None, placed: dict[ExitKind, Order] | None = None,
    ) -> KestrelError:
        """The new exits' refusal, once the exits cancelled for them are back where they can
        be (never while the new exit's outcome is unknown: it may rest on the exchange), and
        the lot protected when it was left without a stop loss."""
        if is_unknown_outcome(exc):
            return move_refused(exc, cancelled, [], [])
        restored: list[Order] = []
        lost: list[tuple[Order, KestrelError]] = []
        by_kind = {old.exit_kind: old for old in cancelled}
        symbol = cancelled[0].symbol if cancelled else (plan.symbol if plan else "")
        if len(cancelled) == 2 and set(by_kind) == {ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS} \
                and self.broker.abilities(symbol).oco:
            # a list protected the position: it goes back as a list (the exchange would
            # refuse a second sell of coins the first one holds)
            pair = [replace(putting_back(by_kind[kind], held), client_order_id=f"{key}:{leg}")
                    for kind, leg in ((ExitKind.TAKE_PROFIT, "tp-back"),
                                      (ExitKind.STOP_LOSS, "sl-back"))]
            try:
                restored.extend(await self._place_oco(pair[0], pair[1]))
            except (ToolError, RiskRejection) as again:
                lost.extend((by_kind[kind], again) for kind in (ExitKind.TAKE_PROFIT,
                                                                  ExitKind.STOP_LOSS))
        else:
            for old in cancelled:
                try:
                    restored.append(await self._send(putting_back(old, held)))
                except (ToolError, RiskRejection) as again:
                    lost.append((old, again))
        placed = placed or {}
        unprotected = [(old, why) for old, why in lost if not is_unknown_outcome(why)]
        if unprotected:
            told = unprotected_alert(unprotected, exc)
            logger.warning("%s", told)
            if self.alert is not None:
                await self.alert(told, subject_of(unprotected))
        refused = move_refused(exc, [], restored, lost)
        stopped = ExitKind.STOP_LOSS in placed or any(
            o.exit_kind is ExitKind.STOP_LOSS for o in restored)
        if plan is not None and not who.is_person and not stopped and not any(
                is_unknown_outcome(why) for _, why in lost):
            # an agent's lot; the person, at the desk, is told and decides for their own
            return await self._protect(who, plan, refused, placed)
        return refused

    async def _protect(
        self, who: Caller, plan: _ExitPlan, refused: KestrelError,
        placed: dict[ExitKind, Order],
    ) -> KestrelError:
        """A lot the exchange left without a stop loss: the stop alone (when a pair was
        refused), else the lot sold at market, else the person alerted and the kill switch
        tripped. Returns the error the caller is given, saying what was done."""
        symbol, size = plan.symbol, plan.size
        stop = next((r for r in plan.requests if r.exit_kind is ExitKind.STOP_LOSS), None)
        if stop is None:
            return refused  # no stop was asked for: the caller chose a take profit alone
        said = _words(refused)
        if len(plan.requests) == 2 and ExitKind.TAKE_PROFIT not in placed:
            try:
                alone = await self._send(replace(stop, client_order_id=""))
            except (ToolError, RiskRejection) as again:
                if is_unknown_outcome(again):
                    return _with_words(refused, f"{said} The stop loss was then sent alone and "
                                                f"its answer was lost: {_words(again)}")
                said += f" The stop loss alone was refused too ({_words(again)})."
            else:
                return _with_words(refused, (
                    f"{said} The stop loss was then placed alone (order {alone.order_id} at "
                    f"{fmt(stop.stop_price or ZERO)}): it protects the position; the take profit "
                    "is not placed."))
        held = sum((lot.size for lot in await self.broker.lots(symbol)
                    if who.is_person or agent_key(lot.owner) == agent_key(who.agent_id)), ZERO)
        size = min(size, self.broker.market_rules(symbol).floor_amount(held))
        if size <= 0:
            return refused
        flatten = OrderRequest(who.agent_id, symbol, Side.SELL, OrderType.MARKET, size,
                               reduce_only=True, exit_kind=ExitKind.CLOSE,
                               reason="closed: no stop loss could be placed")
        try:
            sold = await self._send(flatten)
        except (ToolError, RiskRejection) as again:
            why = (f"The {symbol} position ({fmt(size)}) has no stop loss: the exchange refused "
                   f"it ({said}), and selling the position at market was refused too "
                   f"({_words(again)}).")
            await self._critical(why, f"Kestrel: {symbol} is unprotected")
            if self.halt is not None:
                await self.halt(why + " Trading is halted until a person looks.",
                                "Kestrel (a position it could not protect)")
            return _with_words(refused, why + " The person has been alerted and the kill switch "
                                              "tripped.")
        told = (f"The {symbol} position could not be given a stop loss ({said}), so Kestrel "
                f"sold it at market to leave nothing unprotected (order {sold.order_id}, "
                f"{fmt(size)} {symbol.split('/')[0]}).")
        await self._critical(told, f"Kestrel: {symbol} closed, no stop loss possible")
        return _with_words(refused, told)

    async def _critical(self, message: str, subject: str) -> None:
        logger.warning("%s", message)
        if self.alert is not None:
            await self.alert(message, subject)

    # -- closing -------------------------------------------------------------------------------

    async def close(self, who: Caller, symbol: str, reason: str = "", *,
                    protecting: bool = False) -> Order:
        """Market-sell ``who``'s lot of ``symbol`` (the person: the whole position).

        Every sell of the caller goes first (the person's: everyone's): a plain sell holds back
        what it will sell, and exits hold the coins on an exchange; if the close is refused, the
        exits that protected the lot are put back.
        """
        symbol = self.broker.canonical_symbol(symbol)
        size = await self.own_lot(who, symbol)
        if not protecting:  # a stop Kestrel holds is an exit that protects: never held
            await self._approve(who, OrderRequest(
                who.agent_id, symbol, Side.SELL, OrderType.MARKET, size, reduce_only=True,
                exit_kind=ExitKind.CLOSE))
        mine = None if who.is_person else who.agent_id
        exits = []
        for old in await self.broker.open_orders(mine, symbol):
            if old.side is Side.SELL and await self._cancel_exit(old.agent_id, symbol, old) and \
                    old.exit_kind in (ExitKind.TAKE_PROFIT, ExitKind.STOP_LOSS):
                exits.append(old)
        held = await self.own_lot(who, symbol)
        req = OrderRequest(
            who.agent_id, symbol, Side.SELL, OrderType.MARKET, held,
            reduce_only=True, exit_kind=ExitKind.CLOSE, reason=reason or "close position",
        )
        try:
            sold = await self._send(req)
        except (ToolError, RiskRejection) as exc:
            # not closed: the lot keeps the exits that protected it
            raise await self._after_refusal(who, exc, exits, held, who.key()) from exc
        if self.held is not None:
            for stop in self.held.active(symbol, mine):
                self.held.end(stop, HeldStopState.CANCELLED, f"the lot was closed ({reason})",
                              sold.order_id)
        return sold

    # -- stops Kestrel holds ---------------------------------------------------------------------

    def held_stops(self, symbol: str | None = None) -> list[HeldStop]:
        """The stops Kestrel holds now (they protect only while Kestrel runs)."""
        return [] if self.held is None else self.held.active(symbol)

    async def check_held_stops(self) -> list[Order]:
        """Sell each lot whose Kestrel-held stop the last price has reached; the orders sold.

        A stop whose sale is refused stays in the record as FAILED: the person is alerted on
        every channel and the kill switch trips, since the lot is now unprotected."""
        if self.held is None or not self.held.active():
            return []
        sold: list[Order] = []
        for stop in self.held.active():
            try:
                last = await self.broker.last_price(stop.symbol)
            except KestrelError as exc:  # no price now: the next tick asks again
                logger.warning("no %s price for the stop Kestrel holds: %s", stop.symbol,
                               _words(exc))
                continue
            if last > stop.stop_price:
                continue
            owner = Caller(stop.owner)
            why = f"stop loss at {fmt(stop.stop_price)} held by Kestrel (last {fmt(last)})"
            try:
                order = await self.close(owner, stop.symbol, why, protecting=True)
            except (ToolError, RiskRejection) as exc:
                self.held.end(stop, HeldStopState.FAILED, _words(exc))
                told = (f"The {stop.symbol} price reached the stop loss Kestrel held at "
                        f"{fmt(stop.stop_price)}, and selling the position was refused "
                        f"({_words(exc)}). It is unprotected now.")
                await self._critical(told, f"Kestrel: {stop.symbol} stop could not sell")
                if self.halt is not None:
                    await self.halt(told, "Kestrel (a stop it held could not sell)")
                continue
            self.held.end(stop, HeldStopState.FIRED, why, order.order_id)
            sold.append(order)
            await self._critical(
                f"The {stop.symbol} price reached the stop loss Kestrel held at "
                f"{fmt(stop.stop_price)}: Kestrel sold the position at market (order "
                f"{order.order_id}).", f"Kestrel: {stop.symbol} stop loss sold")
        return sold


@dataclass(frozen=True, slots=True)
class _ExitPlan:
    symbol: str
    size: Decimal
    requests: tuple[OrderRequest, ...]
    replaced: tuple[Order, ...]
    linked: bool
    notes: tuple[str, ...]
    left_out: str | None
    held_stop: Decimal | None = None



def order_intent(req: OrderRequest, checked: CheckedOrder, held: Decimal) -> OrderIntent:
    """What the Risk Guard judges for ``req`` once the broker's precheck has resolved it;
    ``held``: the account's position in the symbol (a sell within it only reduces)."""
    reduces = req.reduce_only or (req.side is Side.SELL and checked.quantity <= held)
    return OrderIntent(
        agent_id=req.agent_id, symbol=checked.symbol, side=req.side, order_type=req.order_type,
        quantity=checked.quantity, reference_price=checked.reference_price, price=req.price,
        stop_price=req.stop_price, reduces_position=reduces, exit_kind=req.exit_kind,
        reserve=checked.reserve,
    )


def _one_amount(ask: OrderAsk) -> None:
    if (ask.quantity is None) == (ask.quote_amount is None):
        raise (MissingParameterError if ask.quantity is None else InvalidParameterError)(
            "Give exactly one of <quantity> (base amount) or <quote_amount> (quote currency "
            "to spend), not " + ("neither." if ask.quantity is None else "both."),
            details={"parameter": "quantity"},
        )


def _own(lots: list[OwnedLot], agent_id: str) -> Decimal:
    key = agent_key(agent_id)
    return sum((lot.size for lot in lots if agent_key(lot.owner) == key), ZERO)


def _owner_name(owner: str) -> str:
    return "the person" if agent_key(owner) == PERSON_ID else f"agent {owner}"


def _held_note(stop_loss: Decimal) -> str:
    return (f"The stop loss at {fmt(stop_loss)} is held by Kestrel itself (this market holds no "
            "stop order): Kestrel sells the position when the price reaches it, but only while "
            "Kestrel runs.")


def _tp_left_out(symbol: str, take_profit: Decimal | None) -> str:
    return (f"The take profit at {fmt(take_profit or ZERO)} is not placed: {symbol} on this "
            "exchange cannot hold a take profit and a stop loss for one position at once (a "
            "resting sell holds its coins, and this market takes no OCO list), so the stop "
            "loss alone protects it. Close the position yourself when the price reaches the "
            "take-profit level.")


def _words(exc: BaseException) -> str:
    if isinstance(exc, RiskRejection):
        return exc.reason
    return str(getattr(exc, "message", None) or exc)


def _with_words(exc: KestrelError, text: str) -> KestrelError:
    """``exc`` saying ``text`` instead (its kind, code and details kept)."""
    if isinstance(exc, RiskRejection):
        return RiskRejection(exc.rule, text, exc.details)
    if isinstance(exc, ToolError):
        out = type(exc)(text, code=exc.code, details=exc.details)
        out.__cause__ = exc
        return out
    return exc


__all__ = ["Caller", "ExitsSet", "OrderAsk", "OrderEntry", "Review", "exit_name",
           "order_intent"]
