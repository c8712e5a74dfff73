"""The exchange's word about orders, applied to the journal: lookups, answers, fills.

One place reads an order from the exchange and writes it to the journal, so an order means the
same whether it came from its create answer, a lookup by client order id, the open-orders sweep or
the trade history. The broker uses it for its own calls; the ``Reconciler`` for everything else.
Reads are retried with backoff (``errors.retry_read``); nothing here creates an order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from app.ccxt.client_ids import ClientIdRules
from app.ccxt.orders import ZERO, changes_from, fee_of, fills_from
from app.ccxt.outcome import check_answer
from app.domain.clock import Clock
from app.domain.errors import NotFoundError
from app.store.order_journal import JournalEntry, JournalFill, JournalState, OrderJournal

# how the trade history is paged per exchange: by trade id (``fromId``) or by time (``since``)
TRADE_CURSOR: Mapping[str, str] = {"binance": "fromId"}
TRADES_PAGE = 500

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
            rows = await self._read(lambda fetch=fetch: fetch(entry.symbol, since),
                                    f"looking for order {cid}")
            for raw in rows:
                if raw.get("clientOrderId") == cid and check_answer(raw, cid).ok:
                    return raw
        return None

    async def apply(self, entry: JournalEntry, raw: Mapping[str, Any]) -> JournalEntry:
        """Write what the exchange says of an order to the journal, with every fill it has:
        the answer's own trades, and the trade history for any part they do not cover."""
        entry = self.record(entry, raw)
        return await self.record_fills(entry, raw)

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
        return await self._read(lambda: self.exchange.fetch_open_orders(symbol),
                                "listing the open orders")

    async def fetch_by_id(self, entry: JournalEntry) -> Mapping[str, Any] | None:
        if entry.exchange_order_id is None:
            return await self.lookup(entry)
        try:
            return await self._read(
                lambda: self.exchange.fetch_order(entry.exchange_order_id, entry.symbol),
                f"reading order {entry.exchange_order_id}")
        except NotFoundError:
            return None

    def entry_for(self, raw: Mapping[str, Any]) -> JournalEntry | None:
        """The journal's entry of an exchange order, by client id, else by exchange id."""
        cid = raw.get("clientOrderId")
        entry = None if not cid else self.journal.get(self.venue, str(cid))
        if entry is None and raw.get("id") is not None:
            entry = self.journal.by_exchange_id(self.venue, str(raw["id"]))
        return entry

    async def catch_up_trades(self, symbol: str) -> list[Mapping[str, Any]]:
        """Store the fills of ``symbol`` since the last one seen (deduplicated by trade id);
        return the trades of orders the journal does not know."""
        key = f"trade_cursor:{symbol}"
        cursor = self.journal.meta(self.venue, key)
        foreign: list[Mapping[str, Any]] = []
        by_id = TRADE_CURSOR.get(self.venue) == "fromId"
        while True:
            params: dict[str, Any] = {}
            since = None
            if cursor is not None and by_id:
                params["fromId"] = int(cursor) + 1
            elif cursor is not None:
                since = int(cursor) + 1
            trades = await self._read(
                lambda since=since, params=params: self.exchange.fetch_my_trades(
                    symbol, since, TRADES_PAGE, params),
                f"fetching the {symbol} trade history",
            )
            for trade in trades:
                entry = self.journal.by_exchange_id(self.venue, str(trade.get("order")))
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
