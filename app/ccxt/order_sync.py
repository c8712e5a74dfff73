"""The exchange's word about orders, applied to the journal: lookups, answers, fills.

One place reads an order from the exchange and writes it to the journal, so an order means the
same whether it came from its create answer, a lookup by client order id, the open-orders sweep or
the trade history. The broker uses it for its own calls; the ``Reconciler`` for everything else.
Reads are retried with backoff (``errors.retry_read``); nothing here creates an order.

An entry whose outcome was unknown (in flight, or NOT_PLACED after its lookups) is re-attached
wherever its order turns up: a lookup, the open orders, or a trade in the history whose order the
journal does not know, which is read by its exchange id before the trade cursor moves past it (an
exchange may list a trade before any read shows its order). Each re-attachment is told to
``on_found`` (the reconciler tells the person).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from app.ccxt.client_ids import ClientIdRules
from app.ccxt.orders import ZERO, changes_from, fee_of, fills_from
from app.ccxt.outcome import check_answer
from app.domain.clock import Clock
from app.domain.errors import NotFoundError
from app.store.order_journal import JournalEntry, JournalFill, JournalState, OrderJournal

logger = logging.getLogger(__name__)

# how the trade history is paged per exchange: by trade id (``fromId``) or by time (``since``)
TRADE_CURSOR: Mapping[str, str] = {"binance": "fromId"}
TRADES_PAGE = 500
# A trade whose order no read shows yet, while the journal holds an order it may be, keeps the
# trade cursor before it for this long after the trade: an exchange's order index lags its trade
# history by seconds, and a lost fill cannot be recovered once the cursor is past it; after an
# hour the trade is counted foreign (and logged), so one broken order cannot stop the history.
UNSEEN_ORDER_HOLD_MS = 3_600_000
_HOLD = object()  # the owner of a trade is not readable yet: the cursor stays before it

Read = Callable[[Callable[[], Awaitable[Any]], str], Awaitable[Any]]


class OrderSync:
    """Reads orders and trades of one exchange into one journal.

    Args:
        read: runs a read with retries and translation (the broker's ``_read``).
    """

    def __init__(self, exchange: Any, journal: OrderJournal, id_rules: ClientIdRules,
                 clock: Clock, read: Read,
                 on_fills: Callable[[JournalEntry, list[JournalFill]], None] | None = None,
                 ) -> None:
        self.exchange = exchange
        self.journal = journal
        self.venue = str(exchange.id)
        self.id_rules = id_rules
        self.clock = clock
        self._read = read
        self._on_fills = on_fills
        # told each entry whose outcome was unknown when its order is found (the reconciler)
        self.on_found: Callable[[JournalEntry], None] | None = None

    def _add_fills(self, entry: JournalEntry, fills: list[JournalFill]) -> JournalEntry:
        """Store fills of ``entry``'s order; the new ones are told to ``on_fills``, after the
        entry's fee has taken them in. Returns the entry as now stored."""
        new = self.journal.add_fills(fills)
        if not new:
            return entry
        entry = self._fee_from_fills(entry)
        if self._on_fills is not None:
            self._on_fills(entry, new)
        return entry

    def _fee_from_fills(self, entry: JournalEntry) -> JournalEntry:
        """The entry's fee as its stored fills say. An order read by lookup or from the open
        orders carries no fee of its own (only a create answer lists its fills), so the fills
        are what the fee is kept from, whichever way they were learnt."""
        fee, currency = fee_of(self.journal.fills(
            self.venue, client_order_id=entry.client_order_id))
        if not currency or (fee, currency) == (entry.fee, entry.fee_currency):
            return entry
        return self.journal.update(entry, fee=fee, fee_currency=currency)

    async def lookup(self, entry: JournalEntry) -> Mapping[str, Any] | None:
        """The exchange's order with ``entry``'s client order id, or ``None`` when it has none."""
        cid = entry.client_order_id
        if self.id_rules.lookup_param is not None:
            try:
                raw = await self._read(
                    lambda: self.exchange.fetch_order(
                        None, entry.symbol, {self.id_rules.lookup_param: cid}),
                    f"looking up order {cid}",
                )
            except NotFoundError:
                return None
            return raw if check_answer(raw, cid).ok else None
        since = entry.created_ms - 60_000
        for fetch in (self.exchange.fetch_open_orders, self.exchange.fetch_closed_orders):
            rows: list[Mapping[str, Any]] = await self._read(
                partial(fetch, entry.symbol, since), f"looking for order {cid}")
            for raw in rows:
                if raw.get("clientOrderId") == cid and check_answer(raw, cid).ok:
                    return raw
        return None

    async def apply(self, entry: JournalEntry, raw: Mapping[str, Any]) -> JournalEntry:
        """Write what the exchange says of an order to the journal, with every fill it has:
        the answer's own trades, and the trade history for any part they do not cover. An
        entry whose outcome was unknown is found by this: ``on_found`` is told."""
        was = entry.state
        entry = self.record(entry, raw)
        entry = await self.record_fills(entry, raw)
        if (was.in_flight or was is JournalState.NOT_PLACED) and self.on_found is not None:
            self.on_found(entry)
        return entry

    def record(self, entry: JournalEntry, raw: Mapping[str, Any]) -> JournalEntry:
        """Write what the exchange says of an order (its state, ids, amounts) to the journal."""
        changes = changes_from(raw, self.clock.now_ms())
        if entry.state.in_flight or entry.state is JournalState.NOT_PLACED:
            changes["reason"] = ""  # found: the lookup's story is over
        return self.journal.update(entry, **changes)

    async def record_fills(self, entry: JournalEntry, raw: Mapping[str, Any]) -> JournalEntry:
        """Store the fills of an order the exchange reported: its answer's trades, and the
        trade history for any part they do not cover. Returns the entry as now stored (its
        fee from its fills)."""
        when = raw.get("lastTradeTimestamp") or raw.get("timestamp") or self.clock.now_ms()
        entry = self._add_fills(
            entry, fills_from(raw.get("trades") or [], self.venue, entry, int(when)))
        entry = await self.complete_fills(entry)
        return self._fee_from_fills(entry)

    async def complete_fills(self, entry: JournalEntry) -> JournalEntry:
        """Fetch the order's trades when the journal holds less than the exchange executed;
        returns the entry as now stored."""
        if entry.exchange_order_id is None or entry.filled_quantity <= 0:
            return entry
        have = sum((f.quantity for f in self.journal.fills(
            self.venue, client_order_id=entry.client_order_id)), ZERO)
        if have >= entry.filled_quantity:
            return entry
        trades = await self._read(
            lambda: self.exchange.fetch_my_trades(
                entry.symbol, None, None, {"orderId": entry.exchange_order_id}),
            f"fetching the trades of order {entry.exchange_order_id}",
        )
        mine = [t for t in trades if str(t.get("order")) == entry.exchange_order_id]
        return self._add_fills(entry, fills_from(mine, self.venue, entry))

    async def fetch_open(self, symbol: str | None = None) -> list[Mapping[str, Any]]:
        orders: list[Mapping[str, Any]] = await self._read(
            lambda: self.exchange.fetch_open_orders(symbol), "listing the open orders")
        return orders

    async def fetch_by_id(self, entry: JournalEntry) -> Mapping[str, Any] | None:
        if entry.exchange_order_id is None:
            return await self.lookup(entry)
        try:
            raw: Mapping[str, Any] = await self._read(
                lambda: self.exchange.fetch_order(entry.exchange_order_id, entry.symbol),
                f"reading order {entry.exchange_order_id}")
        except NotFoundError:
            return None
        return raw

    def entry_for(self, raw: Mapping[str, Any]) -> JournalEntry | None:
        """The journal's entry of an exchange order, by client id, else by exchange id."""
        cid = raw.get("clientOrderId")
        entry = None if not cid else self.journal.get(self.venue, str(cid))
        if entry is None and raw.get("id") is not None:
            entry = self.journal.by_exchange_id(self.venue, str(raw["id"]))
        return entry

    async def catch_up_trades(self, symbol: str) -> list[Mapping[str, Any]]:
        """Store the fills of ``symbol`` since the last one seen (deduplicated by trade id);
        return the trades of orders that are not Kestrel's.

        A trade of an order the journal does not know by exchange id is not passed over: its
        order is read, and when its client order id is a journal entry's (in any state, NOT_PLACED
        included) the entry is re-attached with its fills. When no read shows the order yet and
        the journal holds an order it may be, the cursor stays before the trade
        (``UNSEEN_ORDER_HOLD_MS``) and the next catch-up reads it again.
        """
        key = f"trade_cursor:{symbol}"
        cursor = self.journal.meta(self.venue, key)
        foreign: list[Mapping[str, Any]] = []
        owners: dict[str, Any] = {}  # exchange order id -> entry, None (foreign) or _HOLD
        by_id = TRADE_CURSOR.get(self.venue) == "fromId"
        while True:
            params: dict[str, Any] = {}
            since = None
            if cursor is not None and by_id:
                params["fromId"] = int(cursor) + 1
            elif cursor is not None:
                since = int(cursor) + 1
            trades = await self._read(
                partial(self.exchange.fetch_my_trades, symbol, since, TRADES_PAGE, params),
                f"fetching the {symbol} trade history",
            )
            for trade in trades:
                order_id = str(trade.get("order"))
                entry = self.journal.by_exchange_id(self.venue, order_id)
                if entry is None:
                    if order_id not in owners:
                        owners[order_id] = await self._owner(symbol, trade)
                    entry = owners[order_id]
                if entry is _HOLD:
                    # read this trade again next time: the cursor just before it
                    before = int(trade["id"] if by_id else trade["timestamp"]) - 1
                    self.journal.set_meta(self.venue, {key: str(before)})
                    return foreign
                if entry is None:
                    foreign.append(trade)
                else:
                    self._add_fills(entry, fills_from([trade], self.venue, entry))
            if trades:
                last = trades[-1]
                cursor = str(last["id"] if by_id else last["timestamp"])
                self.journal.set_meta(self.venue, {key: cursor})
            if len(trades) < TRADES_PAGE:
                return foreign

    async def _owner(self, symbol: str, trade: Mapping[str, Any]) -> Any:
        """The journal entry a trade of an order it does not know by exchange id belongs to,
        re-attached to that order; None when the order is not Kestrel's; ``_HOLD`` when no read
        shows the order yet and it may be one of the journal's."""
        order_id = str(trade.get("order"))
        try:
            raw = await self._read(
                lambda: self.exchange.fetch_order(order_id, symbol),
                f"reading order {order_id} of trade {trade.get('id')}")
        except NotFoundError:
            raw = None
        if raw is None:
            if not self._may_be_ours(symbol, trade):
                return None
            if self.clock.now_ms() - int(trade.get("timestamp") or 0) < UNSEEN_ORDER_HOLD_MS:
                logger.info("%s: no read shows order %s of trade %s yet: the trade history "
                            "waits for it", self.venue, order_id, trade.get("id"))
                return _HOLD
            logger.warning("%s: no read shows order %s of trade %s an hour after the trade; "
                           "the trade is counted foreign", self.venue, order_id, trade.get("id"))
            return None
        cid = str(raw.get("clientOrderId") or "")
        entry = self.journal.get(self.venue, cid) if cid else None
        if entry is None or entry.exchange_order_id not in (None, str(raw.get("id"))):
            return None
        logger.warning("%s: order %s (%s), %s in the journal, found on the exchange from its "
                       "trade %s: re-attached", self.venue, entry.agent_order_id, cid,
                       entry.state.value, trade.get("id"))
        return await self.apply(entry, raw)

    def _may_be_ours(self, symbol: str, trade: Mapping[str, Any]) -> bool:
        """Whether the journal holds an order of this trade's symbol and side that no exchange
        order is attached to and whose outcome was not known (in flight or NOT_PLACED)."""
        states = [JournalState.SENDING, JournalState.UNKNOWN, JournalState.NOT_PLACED]
        side = str(trade.get("side") or "").upper()
        return any(e.exchange_order_id is None and e.side.value == side
                   for e in self.journal.entries(self.venue, states, symbol))
