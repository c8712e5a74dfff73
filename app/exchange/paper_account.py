"""The paper account's state in memory: balances, orders, settle cursors, counters, statistics.

One object both halves of the paper broker work on: order entry (``app.exchange.paper``) adds
and cancels orders, settlement (``app.exchange.settlement``) fills them, and the valuation
functions (``app.exchange.valuation``) read it. Everything here is rebuilt from the ledger at
start-up (``restore``), because the ledger, not this object, is the record.
"""

from __future__ import annotations

import logging
from dataclasses import fields
from decimal import Decimal, InvalidOperation
from pathlib import Path

from app.domain.agents import agent_key
from app.domain.errors import InvalidOrderError, NotFoundError, OperationalError
from app.domain.market import split_symbol
from app.domain.numbers import MAX_MONEY, MONEY_LIMIT_REASON, plain
from app.domain.trading import Order, OrderStatus, Side
from app.exchange.account_stats import AccountStats
from app.exchange.book import ZERO, AccountBook
from app.store.ledger import Ledger, LedgerSnapshot, OrderRecord

logger = logging.getLogger(__name__)

RESET_COMMAND = "kestrel reset-paper-account"
_ORDER_FIELDS = tuple(field.name for field in fields(Order))


def stored_money_problems(snap: LedgerSnapshot) -> list[str]:
    """What of a stored paper account lies outside the range Kestrel keeps money in (0 to
    ``MAX_MONEY``): its initial cash and its balances, each said with its value. Such an account
    was opened before ``[paper] initial_cash`` was limited, or its ledger was edited by hand."""
    problems = []
    cash = snap.meta.get("initial_cash")
    if cash is not None and not _in_range(cash):
        quote = snap.meta.get("quote_currency", "")
        problems.append(f"an initial cash of {_shown(cash)} {quote}".rstrip())
    for asset, total in sorted(snap.balances.items()):
        if not _in_range(total):
            problems.append(f"a {asset} balance of {_shown(total)}")
    return problems


def _in_range(value: object) -> bool:
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return False
    return number.is_finite() and 0 <= number <= MAX_MONEY


def _shown(value: object) -> str:
    try:
        return plain(Decimal(str(value)))
    except (InvalidOperation, ValueError):
        return repr(str(value))


def out_of_range_error(snap: LedgerSnapshot, problems: list[str], db: Path | None) -> Exception:
    """The refusal to open an account whose stored money is out of range: what is stored, why
    it cannot be used, that nothing was changed, and how to go on.

    The account is never repaired on opening: its money is the record of what it did, and a
    trading app that rewrote it by itself would make every later number a lie. An account
    without orders or fills has nothing computed from that money, so ``RESET_COMMAND`` may
    start it over with the setting's cash once the person asks (it backs the database up first);
    one with orders or fills is left as it is, and the person opens a new workspace.
    """
    where = "" if db is None else f" --workspace {db.parent}"
    if snap.orders or snap.fill_count:
        fix = (f"Its {len(snap.orders)} orders and {snap.fill_count} fills were made with that "
               "money, so it cannot be started over in place: trade paper in a new workspace "
               "(--workspace NEW_DIR); this one is kept as it is.")
    else:
        fix = (f"It has no orders or fills yet: start it over with [paper] initial_cash, keeping "
               f"its agents, their memory and the audit trail, with: {RESET_COMMAND}{where} --yes "
               "(the database is backed up first).")
    return OperationalError(
        f"this workspace's paper account holds {' and '.join(problems)}, outside the range "
        f"Kestrel keeps money in, 0 to {plain(MAX_MONEY)} ({MONEY_LIMIT_REASON}). Nothing was "
        f"changed. {fix}"
    )


class PaperAccount:
    """Balances and positions (``book``), every order (``records``; ``open`` the live ones, found
    by client id through ``by_client``), per-symbol settle cursors and the running statistics.

    Agent ids are case-insensitive (``agent_key``): an order belongs to its agent whatever the
    case its id is spelt in.
    """

    book: AccountBook
    records: dict[str, OrderRecord]
    open: dict[str, OrderRecord]
    by_client: dict[tuple[str, str], str]
    cursor_ms: dict[str, int]  # per symbol, the open time of its last settled bar
    order_seq: int
    fill_seq: int
    stats: AccountStats

    def __init__(self, quote_currency: str, initial_cash: Decimal) -> None:
        self.quote_currency = quote_currency
        self.initial_cash = initial_cash
        self._empty()

    def _empty(self) -> None:
        """No balances, orders, cursors or statistics yet: what ``restore`` or ``fund`` fill."""
        self.book = AccountBook(self.quote_currency)
        self.records = {}
        self.open = {}
        self.by_client = {}
        self.cursor_ms = {}
        self.order_seq = 0
        self.fill_seq = 0
        self.stats = AccountStats.fresh(self.initial_cash)

    def fund(self) -> None:
        """A new account: the initial cash, nothing else."""
        self.book.balances[self.quote_currency] = self.initial_cash

    def restore(self, snap: LedgerSnapshot) -> None:
        """Rebuild the account exactly as the ledger last committed it."""
        meta = snap.meta
        self.initial_cash = Decimal(meta["initial_cash"])
        self.book.balances = dict(snap.balances)
        for symbol, pos in snap.positions.items():
            book = self.book.position(symbol)
            book.size, book.avg_price, book.realized_pnl = pos.size, pos.avg_price, pos.realized_pnl
        self.book.holdings = dict(snap.holdings)
        for record in snap.orders:
            self.index(record)
        self.order_seq = len(snap.orders)
        self.fill_seq = snap.fill_count
        self.stats = AccountStats.restore(meta, self.initial_cash)
        for key, value in meta.items():
            if key.startswith("cursor:"):
                self.cursor_ms[key[len("cursor:"):]] = int(value)

    def reload(self, snap: LedgerSnapshot) -> None:
        """Forget what is held here and rebuild it from ``snap``. After a write the ledger
        refused, memory may be ahead of the record (an order filled here whose fill was not
        committed); the record is what the account is, and a settle run again from it fills
        that order once. An order known before keeps its object, given the stored values, so
        whoever holds it (the caller that placed it) sees what becomes of it from then on."""
        known = self.records
        for record in snap.orders:
            old = known.get(record.order.order_id)
            if old is not None:
                for name in _ORDER_FIELDS:
                    setattr(old.order, name, getattr(record.order, name))
                record.order = old.order
        self._empty()
        self.restore(snap)

    def back_to(self, ledger: Ledger) -> None:
        """``reload`` from what ``ledger`` committed, after it refused a write; when it cannot
        be read either, the write's own error is the one its caller reports, and this is
        logged."""
        try:
            self.reload(ledger.committed())
        except Exception:  # noqa: BLE001 - the refused write's error is the one raised
            logger.exception("the paper account could not be read back from its ledger")

    # -- orders --------------------------------------------------------------------------------

    def index(self, record: OrderRecord) -> None:
        """Know ``record`` by id and client id; an open one holds its reservation."""
        order = record.order
        self.records[order.order_id] = record
        self.by_client[(agent_key(order.agent_id), order.client_order_id)] = order.order_id
        if order.status.is_open:
            self.open[order.order_id] = record
            if record.reserved:
                self.book.reserve(self.reserve_asset(order), record.reserved)

    def reserve_asset(self, order: Order) -> str:
        """What an open order holds back: quote for a buy, the base asset for a sell."""
        if order.side is Side.BUY:
            return self.quote_currency
        return self.base_of(order.symbol)

    def base_of(self, symbol: str) -> str:
        return split_symbol(symbol, self.quote_currency)[0]

    def find(self, agent_id: str, client_order_id: str) -> Order | None:
        order_id = self.by_client.get((agent_key(agent_id), client_order_id))
        return None if order_id is None else self.records[order_id].order

    def lookup(self, symbol: str, order_id: str | None, client_order_id: str | None,
               agent_id: str) -> OrderRecord:
        """The order named by id (or by the agent's client id) in ``symbol``.

        Raises:
            InvalidOrderError: neither id was given.
            NotFoundError: no such order in ``symbol``.
        """
        record = None
        if order_id:
            record = self.records.get(order_id)
        elif client_order_id:
            found = self.by_client.get((agent_key(agent_id), client_order_id))
            record = None if found is None else self.records[found]
        else:
            raise InvalidOrderError(
                "Give <order_id> or <client_order_id> to say which order.",
                details={"field": "order_id"},
            )
        wanted = order_id or client_order_id
        if record is None or record.order.symbol.upper() != symbol.upper():
            raise NotFoundError(
                f"No order {wanted!r} for {symbol} exists in this account.",
                details={"order_id": wanted, "symbol": symbol},
            )
        return record

    def close_order(self, record: OrderRecord, status: OrderStatus, why: str, now_ms: int) -> None:
        """Take an order off the book in memory (the caller commits it) and free its reservation."""
        order = record.order
        order.status = status
        order.updated_ms = now_ms
        if why:
            order.reason = f"{order.reason}; {why}" if order.reason else why
        if record.reserved:
            self.book.release(self.reserve_asset(order), record.reserved)
            record.reserved = ZERO
        self.open.pop(order.order_id, None)
