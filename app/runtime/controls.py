"""The person's trading controls: the order ticket, Cancel, Close and Flatten all.

A person's order takes the path every agent's order takes: an XML tool call through the
``ToolExecutor`` to the trade tools and ``OrderEntry``, recorded in the audit trail. The actor is
``PERSON_ID``: the audit trail, the guard's decisions, the order and its fills all say "person".
There is no side door to the broker here; the ticket's review is order entry's own ``preview``,
the same steps without sending.

What differs from an agent's call is who may do what, and that lives in order entry: the person
may cancel any agent's order, closes the whole position (every owner's lot) and frees what every
agent's plain sells hold back. The approval policy (``app.trading.approval``) asks the person
about an agent's order; the person's own order is that person's decision, reviewed in the ticket
before it is sent.

While the kill switch is tripped the guard refuses every new entry, the person's included; a
cancel, a close, a sell within the position and TP/SL exits still pass (they only reduce risk).

A BUY ticket with a take-profit or stop-loss places them, for the whole position, when the buy
has filled (``set_position_tp_sl_orders`` needs a position to protect). That wait is held in
memory: if Kestrel is closed before the buy fills, the exits are not placed, and the ticket says so.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from app.domain.agents import PERSON_ID
from app.domain.errors import KestrelError, ToolError
from app.domain.numbers import plain
from app.domain.trading import Order, OrderStatus, Position, Side
from app.events import EventBus, OrderCancelled, OrderFilled
from app.runtime.ticket import Ticket, TicketKind
from app.tools.executor import ToolExecutor
from app.tools.protocol.render import Element, ToolResult, escape_text
from app.tools.spec import AgentContext, Permission
from app.trading.entry import Caller, OrderAsk, OrderEntry
from app.trading.port import STOP_LIMIT_NOTE, TradingBroker

logger = logging.getLogger(__name__)

PERSON_CONTEXT = AgentContext(
    PERSON_ID, permissions=frozenset({Permission.TRADE, Permission.ACCOUNT, Permission.DESK}),
    role="person",
)
PERSON = Caller(PERSON_ID)
# a broker's amounts of money and prices in its sentences (not its quantities): "needs X",
# "only X is free", "at about X", "costs X"
_AMOUNTS = re.compile(r"\b(needs |needed |only |at about |costs? |free: )(\d+\.\d+)")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one of the person's calls came to, in a sentence.

    ``status`` is the tool result's: ``success``, ``error`` or ``rejected`` (the Risk Guard).
    """

    status: str
    text: str
    order_id: str | None = None
    order_status: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "success"


@dataclass(frozen=True, slots=True)
class Preview:
    """A ticket as the broker and the Risk Guard see it now, before it is sent.

    ``error``: the broker would refuse it (funds, lot size, no position), in its words;
    ``rule``/``refusal``: the guard would refuse it; ``lines``: what it would do (quantity,
    estimated cost, what it holds back).
    """

    lines: tuple[str, ...] = ()
    error: str | None = None
    rule: str | None = None
    refusal: str | None = None

    @property
    def passes(self) -> bool:
        return self.error is None and self.rule is None


@dataclass(frozen=True, slots=True)
class FlattenPlan:
    """What "Flatten all" would do now: cancel these orders, then close these positions."""

    orders: tuple[Order, ...]
    positions: tuple[Position, ...]

    @property
    def empty(self) -> bool:
        return not self.orders and not self.positions


@dataclass
class _PendingExits:
    symbol: str
    take_profit: Decimal | None
    stop_loss: Decimal | None


@dataclass
class PersonControls:
    """The person's order, cancel, close and flatten, each one tool call as the person.

    Args:
        on_exits: told the outcome of TP/SL exits placed after a ticket's BUY filled.
        next_bar_open: on a replay, when a market order placed now fills (see
            ``close_fills_at``); None on live quotes and on an exchange.
    """

    executor: ToolExecutor
    orders: OrderEntry
    bus: EventBus | None = None
    on_exits: Callable[[Outcome], None] | None = None
    # a replay's: the open of the bar a market order of a symbol placed now fills at
    next_bar_open: Callable[[str], int] | None = None
    pending_exits: dict[str, _PendingExits] = field(default_factory=dict)
    exit_outcomes: list[Outcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.bus is not None:
            self.bus.subscribe(OrderFilled, self._on_filled)
            self.bus.subscribe(OrderCancelled, self._on_cancelled)

    @property
    def broker(self) -> TradingBroker:
        return self.orders.broker

    def detach(self) -> None:
        if self.bus is not None:
            self.bus.unsubscribe(OrderFilled, self._on_filled)
            self.bus.unsubscribe(OrderCancelled, self._on_cancelled)

    # -- the ticket ----------------------------------------------------------------------------

    def _ask(self, ticket: Ticket) -> OrderAsk:
        return OrderAsk(
            ticket.symbol, ticket.side, ticket.order_type, quantity=ticket.quantity,
            quote_amount=ticket.quote_amount, price=ticket.price, stop_price=ticket.stop_price,
            reason="the person's order ticket",
        )

    async def preview(self, ticket: Ticket) -> Preview:
        """What the ticket would do, and whether order entry would take it: the same steps
        without sending (nothing is placed, the guard records nothing; placing is judged
        again, as always)."""
        ccy = self.broker.quote_currency
        try:
            symbol = self.broker.canonical_symbol(ticket.symbol)
            last = await self.broker.last_price(symbol)
        except KestrelError as exc:
            return Preview(error=_words(exc))
        if ticket.kind is TicketKind.TP_SL:
            return await self._preview_exits(ticket, symbol, last)
        review = await self.orders.preview(PERSON, self._ask(ticket))
        checked = review.checked
        error = None if review.error is None else self._readable(review.error, symbol)
        if checked is None:
            return Preview(error=error)
        at = ticket.price or ticket.stop_price
        notional = checked.quantity * (at or checked.reference_price)
        lines = [
            f"{ticket.side.value} {plain(checked.quantity)} {symbol} "
            + (f"at {plain(at)}" if at else f"at market (last {plain(last)})"),
            f"Value about {_money(notional)} {ccy}",
        ]
        if ticket.side is Side.BUY:
            lines.append(f"Holds back {_money(checked.reserve)} {ccy} (fee and slippage "
                         "included)")
        lines.extend(review.notes)
        if review.reduces:
            lines.append("Reduces the position held: exits are never blocked by the Risk Guard")
        if ticket.has_exits:
            exits = self.orders.exit_review(symbol, ticket.take_profit, ticket.stop_loss)
            if exits.error is not None:
                return Preview(tuple(lines), error=exits.error)
            lines.append(_exits_text(ticket) + " for the whole position once this buy fills "
                         "(while Kestrel runs)")
            lines.extend(exits.notes)
        if error is not None:
            return Preview(tuple(lines), error=error)
        if review.rule is not None:
            return Preview(tuple(lines), rule=review.rule, refusal=review.refusal)
        return Preview(tuple(lines))

    def _readable(self, words: str, symbol: str) -> str:
        """The broker's words with its amounts at the market's precision: it writes them to the
        last unit for the agents ("needs 49999.9932432 … 8517.26774931 is free"), which a
        person reads as noise. Amounts of the quote currency (what is needed, what is free) and
        prices are rounded to the market's price precision; quantities are left as written."""
        try:
            places = self.broker.market_rules(symbol).price_decimals
        except KestrelError:
            places = 2
        quantum = Decimal(1).scaleb(-places)

        def rounded(match: re.Match[str]) -> str:
            value = Decimal(match.group(2)).quantize(quantum, rounding=ROUND_HALF_UP)
            return f"{match.group(1)}{value:,}"

        return _AMOUNTS.sub(rounded, words)

    async def _preview_exits(self, ticket: Ticket, symbol: str, last: Decimal) -> Preview:
        review = await self.orders.preview_exits(PERSON, symbol, ticket.take_profit,
                                                 ticket.stop_loss)
        if review.error is not None:
            return Preview(error=review.error)
        held = await self.orders.own_lot(PERSON, symbol)
        lines = [
            f"{_exits_text(ticket)} for the whole {symbol} position ({plain(held)}, last "
            f"{plain(last)})",
            "Replaces the exits you placed before; reduce-only, never blocked by the Risk Guard",
            *review.notes,
        ]
        return Preview(tuple(lines))

    async def submit(self, ticket: Ticket, client_order_id: str = "") -> Outcome:
        """Place the ticket as the person, through the executor and the Risk Guard.

        ``client_order_id``: the ticket's own id, so a second press of the same reviewed ticket
        returns the order already placed instead of placing another.
        """
        if ticket.kind is TicketKind.TP_SL:
            return await self._set_exits(ticket.symbol, ticket.take_profit, ticket.stop_loss)
        client_id = client_order_id or f"person-{uuid.uuid4().hex[:16]}"
        amount = (("quantity", ticket.quantity) if ticket.quantity is not None
                  else ("quote_amount", ticket.quote_amount))
        outcome = await self._call("create_order", {
            "symbol": ticket.symbol, "side": ticket.side.value,
            "order_type": ticket.order_type.value, amount[0]: amount[1], "price": ticket.price,
            "stop_price": ticket.stop_price, "client_order_id": client_id,
            "reason": "the person's order ticket",
        })
        if outcome.ok and ticket.has_exits and outcome.order_id is not None:
            exits = _PendingExits(self.broker.canonical_symbol(ticket.symbol),
                                  ticket.take_profit, ticket.stop_loss)
            if outcome.order_status == OrderStatus.FILLED.value:
                self._told(await self._set_exits(exits.symbol, exits.take_profit,
                                                 exits.stop_loss))
            else:
                self.pending_exits[outcome.order_id] = exits
        return outcome

    async def _set_exits(self, symbol: str, take_profit: Decimal | None,
                         stop_loss: Decimal | None) -> Outcome:
        return await self._call("set_position_tp_sl_orders", {
            "symbol": symbol, "take_profit_price": take_profit, "stop_loss_price": stop_loss,
        })

    async def _on_filled(self, event: OrderFilled) -> None:
        order = event.order
        exits = self.pending_exits.get(order.order_id)
        if exits is None or order.status.is_open:
            return  # not a ticket's entry, or still filling
        del self.pending_exits[order.order_id]
        self._told(await self._set_exits(exits.symbol, exits.take_profit, exits.stop_loss))

    def _on_cancelled(self, event: OrderCancelled) -> None:
        order = event.order
        if order.filled_quantity == 0:  # a part fill is followed by its OrderFilled
            self.pending_exits.pop(order.order_id, None)

    def _told(self, outcome: Outcome) -> None:
        self.exit_outcomes.append(outcome)
        if self.on_exits is not None:
            self.on_exits(outcome)

    # -- rows and flatten ----------------------------------------------------------------------

    async def cancel(self, order: Order) -> Outcome:
        """Cancel any open order (an agent's or the person's) as the person."""
        return await self._call("cancel_order", {"symbol": order.symbol,
                                                 "order_id": order.order_id})

    async def modify(self, order: Order, *, price: Decimal | None = None,
                     stop_price: Decimal | None = None) -> Outcome:
        """Move an open order (any agent's too) to a new price: its line dragged on the chart."""
        return await self._call("modify_order", {
            "symbol": order.symbol, "order_id": order.order_id, "price": price,
            "stop_price": stop_price})

    def keeps_exits_while_closing(self, symbol: str) -> bool:
        """Whether a close leaves the position's take profit and stop loss resting until its
        sell fills: where exits share the coins (a paper account), nothing needs them gone
        first, and a paper market sell fills only at the next bar's open (or quote); where a
        resting sell locks its coins (an exchange), they must go first."""
        try:
            return not self.broker.abilities(symbol).exits_lock_coins
        except KestrelError:
            return False

    def close_fills_at(self, symbol: str) -> int | None:
        """The market time a market close of ``symbol`` placed now fills at (the open of the
        next bar of a replay); None where it fills at once, on live quotes or an exchange."""
        if self.next_bar_open is None:
            return None
        try:
            return self.next_bar_open(symbol)
        except KestrelError:
            return None

    async def close(self, symbol: str) -> Outcome:
        """Market-sell the whole position of ``symbol`` (reduce-only: passes a tripped switch).

        On a paper account the take profit and stop loss stay until the sell fills (the
        settlement cancels them once the position is flat), so the position is never without
        its stop while the close waits for the next bar; only sells that are not exits go
        first, since they hold back what the close sells. Elsewhere ``close_position``
        cancels the exits first, as an exchange that locks their coins requires.
        """
        if not self.keeps_exits_while_closing(symbol):
            return await self._call("close_position", {"symbol": symbol,
                                                       "reason": "closed by the person"})
        try:
            symbol = self.broker.canonical_symbol(symbol)
            held = await self.orders.own_lot(PERSON, symbol)
            holding_back = [o for o in await self.broker.open_orders(None, symbol)
                            if o.side is Side.SELL and not o.reduce_only]
        except KestrelError as exc:
            return Outcome("error", _words(exc))
        for order in holding_back:
            cancelled = await self.cancel(order)
            if not cancelled.ok:
                return cancelled
        return await self._call("create_order", {
            "symbol": symbol, "side": Side.SELL.value, "order_type": "MARKET",
            "quantity": plain(held), "reason": "closed by the person",
        })

    async def flatten_plan(self) -> FlattenPlan:
        state = await self.broker.account()
        return FlattenPlan(tuple(state.open_orders), tuple(state.positions))

    async def flatten(self) -> list[Outcome]:
        """Cancel every open order, then close every position; one outcome per call.

        The positions are read again after the cancels: a close sells what is held then.
        """
        outcomes = []
        for order in (await self.flatten_plan()).orders:
            outcomes.append(await self.cancel(order))
        for position in await self.broker.positions():
            if position.size > 0:
                outcomes.append(await self.close(position.symbol))
        return outcomes

    # -- the call ------------------------------------------------------------------------------

    async def _call(self, tool: str, params: dict[str, object]) -> Outcome:
        body = "".join(f"<{name}>{escape_text(str(value))}</{name}>"
                       for name, value in params.items() if value is not None and value != "")
        result = await self.executor.execute_text(PERSON_CONTEXT, f"<{tool}>{body}</{tool}>")
        assert result is not None, "a tool call is never a text answer"
        return _outcome(result)


def _outcome(result: ToolResult) -> Outcome:
    if result.status == "rejected":
        return Outcome("rejected", f"Refused by the Risk Guard ({result.rule}): {result.message}")
    if not result.ok:
        return Outcome(result.status, result.message)
    item = result.data[0]
    order_id, status = item.attr("order_id"), item.attr("status")
    if item.tag == "order_cancelled":
        return Outcome("success", f"Cancelled {order_id}.", order_id, status)
    if item.tag == "order_moved":
        return Outcome("success", f"Moved: order {order_id} now rests in its place.", order_id,
                       status)
    if item.tag == "tp_sl_set":
        parts = [f"take profit {tp}" for tp in [item.attr("take_profit_order_id")] if tp]
        parts += [f"stop loss {sl}" for sl in [item.attr("stop_loss_order_id")] if sl]
        note = item.attr("stop_loss_note")
        left_out = item.attr("note")
        return Outcome("success", f"Exits placed for {item.attr('symbol')}: "
                                  f"{', '.join(parts)}." + (f" Stop loss {note}." if note else "")
                       + (f" {left_out}" if left_out else ""))
    filled = item.attr("filled_quantity") or "0"
    return Outcome(
        "success",
        f"Order {order_id} placed: {item.attr('quantity')} {item.attr('symbol')}, {status}"
        + (f", filled {filled} at {item.attr('average_price')}" if filled not in ("0", "") else "")
        + "." + _stop_limit_note(item),
        order_id, status,
    )


def _stop_limit_note(item: Element) -> str:
    """A stop the exchange took only as a stop-limit: its limit and the trade-off, said."""
    note = item.attr("note") or ""
    if item.attr("order_type") != "STOP_LIMIT" or STOP_LIMIT_NOTE not in note:
        return ""
    return " It is a STOP_LIMIT" + note[note.index(STOP_LIMIT_NOTE) + len(STOP_LIMIT_NOTE):] + "."


def _exits_text(ticket: Ticket) -> str:
    parts = []
    if ticket.take_profit is not None:
        parts.append(f"take profit at {plain(ticket.take_profit)}")
    if ticket.stop_loss is not None:
        parts.append(f"stop loss at {plain(ticket.stop_loss)}")
    return " and ".join(parts).capitalize()



def _money(value: Decimal) -> str:
    return f"{value.quantize(Decimal('0.01')):,}"


def _words(exc: KestrelError) -> str:
    return exc.message if isinstance(exc, ToolError) else str(exc)
