"""ccxt's unified orders and trades as journal changes, and journal entries as Kestrel's orders.

Pure functions, no I/O: the broker and the reconciler both read the exchange's word through
these, so an order means the same whether it came from its create answer, a lookup by client id,
the open-orders sweep or the trade history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from app.domain.trading import Fill, Order, OrderStatus, Side
from app.store.order_journal import JournalEntry, JournalFill, JournalState

ZERO = Decimal(0)

_STATES = {
    "closed": JournalState.FILLED,
    "canceled": JournalState.CANCELED,
    "cancelled": JournalState.CANCELED,
    "expired": JournalState.EXPIRED,
    "rejected": JournalState.REJECTED,
}

_STATUS = {
    JournalState.NEW: OrderStatus.SUBMITTED,
    JournalState.SENDING: OrderStatus.SUBMITTED,
    JournalState.UNKNOWN: OrderStatus.SUBMITTED,
    JournalState.ACCEPTED: OrderStatus.SUBMITTED,
    JournalState.OPEN: OrderStatus.SUBMITTED,
    JournalState.PARTIALLY_FILLED: OrderStatus.PARTIALLY_FILLED,
    JournalState.FILLED: OrderStatus.FILLED,
    JournalState.CANCELED: OrderStatus.CANCELLED,
    JournalState.EXPIRED: OrderStatus.EXPIRED,
    JournalState.REJECTED: OrderStatus.REJECTED,
    JournalState.NOT_SENT: OrderStatus.REJECTED,
    JournalState.NOT_PLACED: OrderStatus.REJECTED,
}


def dec(value: Any) -> Decimal | None:
    """A number from ccxt (float, str or None) as a Decimal, via its shortest text."""
    if value is None or value == "":
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def state_of(raw: Mapping[str, Any]) -> JournalState:
    """The journal state an exchange order is in (ACCEPTED when its status is not stated)."""
    status = str(raw.get("status") or "").lower()
    if status == "open":
        filled = dec(raw.get("filled")) or ZERO
        return JournalState.PARTIALLY_FILLED if filled > 0 else JournalState.OPEN
    return _STATES.get(status, JournalState.ACCEPTED)


def changes_from(raw: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    """The journal fields an exchange order sets: state, id, executed amount, average, fee."""
    changes: dict[str, Any] = {
        "state": state_of(raw),
        "exchange_order_id": str(raw["id"]),
        "updated_ms": now_ms,
    }
    filled = dec(raw.get("filled"))
    if filled is not None:
        changes["filled_quantity"] = filled
    average = dec(raw.get("average"))
    if average is None and filled:
        cost = dec(raw.get("cost"))
        average = None if cost is None else cost / filled
    if average is not None and average > 0:
        changes["average_price"] = average
    fee = raw.get("fee") or {}
    fees = raw.get("fees") or ([fee] if fee else [])
    costs = [(dec(f.get("cost")), f.get("currency")) for f in fees if isinstance(f, Mapping)]
    paid = [(c, cur) for c, cur in costs if c is not None]
    if paid:
        currency = paid[0][1] or ""
        changes["fee"] = sum((c for c, cur in paid if (cur or "") == currency), ZERO)
        changes["fee_currency"] = currency
    return changes


def fee_of(fills: Iterable[JournalFill]) -> tuple[Decimal, str]:
    """An order's fee from its fills: the sum of the fees in the currency of its first charged
    fill, and that currency ((0, "") when no fill was charged). The journal keeps one fee per
    order; fills keep each fee in full."""
    fills = [f for f in fills if f.fee]
    if not fills:
        return ZERO, ""
    currency = fills[0].fee_currency
    return sum((f.fee for f in fills if f.fee_currency == currency), ZERO), currency


def fills_from(
    trades: Iterable[Mapping[str, Any]], venue: str, entry: JournalEntry, default_ms: int = 0
) -> list[JournalFill]:
    """Journal fills of ``entry`` from ccxt trades that carry a trade id (others are skipped:
    without an id a fill cannot be told from its repetition, so the trade history supplies it).

    Args:
        default_ms: the time of a trade that states none (Binance's fills in an order's
            answer), normally the order's own transaction time.
    """
    out = []
    for trade in trades:
        trade_id = trade.get("id")
        quantity, price = dec(trade.get("amount")), dec(trade.get("price"))
        if trade_id in (None, "") or quantity is None or price is None or quantity <= 0:
            continue
        fee = trade.get("fee") or {}
        cost = dec(trade.get("cost"))
        out.append(JournalFill(
            venue=venue, trade_id=str(trade_id), client_order_id=entry.client_order_id,
            exchange_order_id=str(trade.get("order") or entry.exchange_order_id or ""),
            symbol=entry.symbol, side=entry.side, quantity=quantity, price=price,
            cost=cost if cost is not None else quantity * price,
            fee=dec(fee.get("cost")) or ZERO, fee_currency=str(fee.get("currency") or ""),
            time_ms=int(trade.get("timestamp") or default_ms),
            is_maker=trade.get("takerOrMaker") == "maker",
        ))
    return out


def to_order(entry: JournalEntry) -> Order:
    """Kestrel's ``Order`` for a journal entry; its id is the exchange's (the client id until
    the exchange named one), its client id the agent's."""
    reason = entry.note
    if entry.state.in_flight:
        reason = (f"{reason}; " if reason else "") + "outcome unknown: being checked"
    elif entry.reason and entry.state in (JournalState.REJECTED, JournalState.NOT_SENT,
                                          JournalState.NOT_PLACED):
        reason = (f"{reason}; " if reason else "") + entry.reason
    return Order(
        order_id=entry.exchange_order_id or entry.client_order_id,
        client_order_id=entry.agent_order_id,
        agent_id=entry.agent_id,
        symbol=entry.symbol,
        side=entry.side,
        order_type=entry.order_type,
        quantity=entry.quantity,
        created_ms=entry.created_ms,
        price=entry.price,
        stop_price=entry.stop_price,
        reduce_only=entry.reduce_only,
        exit_kind=entry.exit_kind,
        status=_STATUS[entry.state],
        filled_quantity=entry.filled_quantity,
        average_price=entry.average_price,
        fee=entry.fee,
        fee_currency=entry.fee_currency,
        reason=reason,
        updated_ms=entry.updated_ms,
    )


def average_cost(
    fills: Iterable[JournalFill], base: str, quote: str
) -> tuple[Decimal, Decimal, list[Decimal]]:
    """Size, average entry price and each fill's realized PnL of a spot position, from its fills.

    The average-cost rule: a buy adds its cost (with a fee paid in quote) to the position, and a
    fee paid in the base asset shrinks what it received; a sell realizes ``(price - average) x
    quantity`` less a fee paid in quote and leaves the average unchanged. A fee in a third asset
    (BNB) is in neither.
    """
    size, avg = ZERO, ZERO
    realized: list[Decimal] = []
    for fill in fills:
        fee_base = fill.fee if fill.fee_currency == base else ZERO
        fee_quote = fill.fee if fill.fee_currency == quote else ZERO
        if fill.side is Side.BUY:
            got = fill.quantity - fee_base
            if got > 0:
                avg = (avg * size + fill.cost + fee_quote) / (size + got)
                size += got
            realized.append(ZERO)
        else:
            sold = min(fill.quantity, size)
            realized.append((fill.price - avg) * sold - fee_quote)
            size -= min(fill.quantity + fee_base, size)
            if size <= 0:
                size, avg = ZERO, ZERO
    return size, avg, realized


def to_fills(
    journal_fills: list[JournalFill], agents: Mapping[str, str], base_of: Mapping[str, str],
    quote: str,
) -> list[Fill]:
    """Kestrel's ``Fill``s with realized PnL by the average-cost rule, per symbol, oldest first.

    Args:
        agents: the agent of each client order id.
        base_of: the base asset of each symbol.
    """
    by_symbol: dict[str, list[JournalFill]] = {}
    for fill in journal_fills:
        by_symbol.setdefault(fill.symbol, []).append(fill)
    realized_of: dict[tuple[str, str], Decimal] = {}
    for symbol, fills in by_symbol.items():
        _size, _avg, realized = average_cost(fills, base_of.get(symbol, ""), quote)
        for fill, pnl in zip(fills, realized, strict=True):
            realized_of[(fill.venue, fill.trade_id)] = pnl
    return [
        Fill(
            fill_id=f.trade_id, order_id=f.exchange_order_id,
            agent_id=agents.get(f.client_order_id, ""), symbol=f.symbol, side=f.side,
            quantity=f.quantity, price=f.price, fee=f.fee, fee_currency=f.fee_currency,
            time_ms=f.time_ms, realized_pnl=realized_of[(f.venue, f.trade_id)],
            is_maker=f.is_maker,
        )
        for f in journal_fills
    ]
