"""What a live account's orders did, as the Broker port's events: placed, cancelled, filled.

The live broker learns of fills in several ways (the answer to an order, the order's trade list,
the trade history it catches up with); the journal stores each fill once, and the fills it stores
new are announced here, with the realized P&L the average-cost rule gives them (as ``trades()``
reports them) and the order as the journal now has it. Kept apart from the broker so the event
shapes are built in one place.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from app.ccxt.orders import to_fills, to_order
from app.domain.errors import ToolError
from app.domain.trading import Order
from app.events import (
    AccountRefreshed,
    EventSink,
    OrderCancelled,
    OrderFilled,
    OrderOutcomeUnknown,
    OrderPlaced,
    OrderRejected,
)
from app.store.order_journal import JournalEntry, JournalFill, OrderJournal
from app.trading.port import OrderRequest


class Announcer:
    """Publishes a live account's order events through ``emit`` (nothing when it is None)."""

    def __init__(
        self,
        journal: OrderJournal,
        venue: str,
        quote_currency: str,
        base_of: Callable[[str], str],
        emit: EventSink | None,
    ) -> None:
        self.journal = journal
        self.venue = venue
        self.quote = quote_currency
        self.base_of = base_of
        self.emit = emit

    def placed(self, order: Order) -> None:
        if self.emit is not None:
            self.emit(OrderPlaced(copy.copy(order)))

    def cancelled(self, order: Order) -> None:
        if self.emit is not None:
            self.emit(OrderCancelled(copy.copy(order)))

    def rejected(self, req: OrderRequest, exc: ToolError, now_ms: int) -> None:
        if self.emit is not None:
            self.emit(OrderRejected(
                agent_id=req.agent_id, symbol=req.symbol, side=req.side.value,
                order_type=req.order_type.value, quantity=req.quantity, source="broker",
                rule=exc.code.value, reason=exc.message, time_ms=now_ms,
            ))

    def unknown(self, entry: JournalEntry, why: str, consecutive: int) -> None:
        """An order was sent and whether it was placed is not known (the kill switch counts
        ``consecutive``)."""
        if self.emit is not None:
            self.emit(OrderOutcomeUnknown(self.venue, entry.agent_id, entry.symbol,
                                          entry.agent_order_id, why, consecutive))

    def account_read(self, now_ms: int) -> None:
        if self.emit is not None:
            self.emit(AccountRefreshed(self.venue, now_ms))

    def filled(self, entry: JournalEntry, new: list[JournalFill]) -> None:
        """``new``: fills of ``entry``'s order the journal had not seen before."""
        if self.emit is None or not new:
            return
        history = self.journal.fills(self.venue, entry.symbol)
        priced = to_fills(history, {entry.client_order_id: entry.agent_id},
                          {entry.symbol: self.base_of(entry.symbol)}, self.quote)
        by_id = {f.fill_id: f for f in priced}
        now = self.journal.get(self.venue, entry.client_order_id) or entry
        order = to_order(now)
        for fill in new:
            known = by_id.get(fill.trade_id)
            if known is not None:
                self.emit(OrderFilled(known, copy.copy(order)))
