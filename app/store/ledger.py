"""The durable ledger: orders, fills, balances, positions, holdings and the equity curve in SQLite.

The broker keeps its working state in memory and writes every change here before it counts: an order
is committed before it can have any effect, and a fill commits in one transaction together with the
balances, position, holdings and order status it changes. Restarting from the file therefore gives
back the account exactly as at the last committed fill.

Two kinds of record may wait in memory, because a transaction per record would cost more than the
work it records (a backtest makes one tool call and one settle per bar):

- the audit trail (tool calls, Risk Guard decisions), when the ledger is opened with
  ``audit_batch > 1``: rows wait until the next transaction of any kind (every order and fill),
  until ``audit_batch`` of them are waiting, or until ``flush``/``close``/a read. The tail a kill -9
  can lose is therefore at most ``audit_batch - 1`` records made since the last order or fill,
  none of which changed the account. The default (1) writes each record at once.
- deferred settle points (``record_settle(..., defer=True)``, the broker's BACKTEST mode): the
  equity point and the settle cursor wait for the next order or fill commit,
  ``MAX_DEFERRED_POINTS`` of them, or ``flush``/``close``. A crash then resumes from an older
  cursor, which is safe because settling candles again is idempotent (filled orders are no longer
  open); a PAPER or LIVE broker never defers.

Pending rows are written at the START of the next transaction, so they commit together with it
and before anything newer; they are dropped from memory only after that commit succeeded.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.domain.errors import OperationalError
from app.domain.trading import ExitKind, Fill, Order, OrderStatus, OrderType, Side
from app.redaction import redact
from app.store.db import StoreDb, store_db, unit_of_work
from app.store.texts import MIN_SHARED_CHARS, put_text


@dataclass(slots=True)
class OrderRecord:
    """An order with the broker's bookkeeping: the quote budget and the amount it reserves."""

    order: Order
    quote_amount: Decimal | None = None
    reserved: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class PositionRecord:
    symbol: str
    size: Decimal
    avg_price: Decimal
    realized_pnl: Decimal


@dataclass(slots=True)
class LedgerSnapshot:
    """Everything needed to rebuild a broker after a restart."""

    orders: list[OrderRecord] = field(default_factory=list)
    balances: dict[str, Decimal] = field(default_factory=dict)
    positions: dict[str, PositionRecord] = field(default_factory=dict)
    holdings: dict[tuple[str, str], tuple[Decimal, Decimal]] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    fill_count: int = 0


_ORDER_COLUMNS = (
    "order_id, client_order_id, agent_id, symbol, side, order_type, quantity, price, stop_price, "
    "reduce_only, exit_kind, status, filled_quantity, average_price, fee, fee_currency, reason, "
    "created_ms, updated_ms, triggered, quote_amount, reserved"
)
_FILL_COLUMNS = (
    "fill_id, order_id, agent_id, symbol, side, quantity, price, fee, fee_currency, time_ms, "
    "realized_pnl, is_maker"
)
# The column lists above are constants, so these statements carry no outside text.
_INSERT_FILL = f"INSERT INTO fills ({_FILL_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"  # noqa: S608
_UPSERT_ORDER = (
    f"INSERT INTO orders ({_ORDER_COLUMNS}) VALUES "  # noqa: S608
    "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT(order_id) DO UPDATE SET quantity=excluded.quantity, "
    "status=excluded.status, filled_quantity=excluded.filled_quantity, "
    "average_price=excluded.average_price, fee=excluded.fee, "
    "fee_currency=excluded.fee_currency, reason=excluded.reason, "
    "updated_ms=excluded.updated_ms, triggered=excluded.triggered, "
    "reserved=excluded.reserved"
)
_SELECT_ORDERS = f"SELECT {_ORDER_COLUMNS} FROM orders ORDER BY seq"  # noqa: S608
SELECT_FILLS = f"SELECT {_FILL_COLUMNS} FROM fills"  # noqa: S608


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _dec(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


MAX_DEFERRED_POINTS = 4096  # bounds the memory a long run without orders keeps pending
# the result goes to ``texts`` once, and the parameters when they are long; the row refers to
# them (``app.store.texts``) and the ``tool_calls`` view reads them back
_INSERT_TOOL_CALL = (
    "INSERT INTO tool_call_rows (agent_id, tool_name, params_json, params_id, status, "
    "error_code, result_xml, result_id, started_ms, duration_ms) VALUES (?,?,?,?,?,?,'',?,?,?)"
)
_INSERT_RISK = (
    "INSERT INTO risk_decisions (now_ms, agent_id, symbol, side, order_type, quantity, notional, "
    "accepted, rule, reason) VALUES (?,?,?,?,?,?,?,?,?,?)"
)
_UPSERT_META = (
    "INSERT INTO meta (key, value) VALUES (?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value"
)
_UPSERT_POINT = (
    "INSERT INTO equity_curve (time_ms, equity, cash) VALUES (?,?,?) "
    "ON CONFLICT(time_ms) DO UPDATE SET equity=excluded.equity, cash=excluded.cash"
)


class Ledger:
    """One account's durable record; the only code that writes the trading tables."""

    def __init__(
        self,
        path: Path | str | StoreDb = ":memory:",
        *,
        durable: bool = True,
        audit_batch: int = 1,
        read_only: bool = False,
    ) -> None:
        """Open the ledger.

        Args:
            audit_batch: how many audit records (tool calls, risk decisions) may wait in memory
                for the next transaction; 1 writes each at once (see the module docstring).
            read_only: read a ledger another process writes; every write is refused.

        ``path`` may be an open ``StoreDb`` shared with other stores (a ``GroupedDb``).
        """
        if audit_batch < 1:
            raise ValueError(f"audit_batch must be at least 1, got {audit_batch}")
        self.read_only = read_only
        self._db = store_db(path, durable=durable, read_only=read_only)
        self.path = self._db.path
        self._conn = self._db.conn  # the ledger's own transaction writes what is pending first
        self._audit_batch = audit_batch
        self._calls: list[tuple[Any, ...]] = []
        self._risk: list[tuple[Any, ...]] = []
        self._points: list[tuple[int, Decimal, Decimal]] = []
        self._meta: dict[str, object] = {}
        # deferred meta values as last committed, so an unchanged value is not written again;
        # cleared whenever meta is written any other way
        self._meta_written: dict[str, str] = {}
        self._meta_overwritten = False

    @property
    def connection(self) -> sqlite3.Connection:
        """The connection, after writing anything pending, so a reader sees every record."""
        self.flush()
        return self._conn

    @property
    def pending(self) -> int:
        """How many records wait in memory for the next transaction."""
        return len(self._calls) + len(self._risk) + len(self._points) + bool(self._meta)

    def flush(self) -> None:
        """Commit every pending record now (an empty transaction when there are some)."""
        if self._calls or self._risk or self._points or self._meta:
            with self.transaction():
                pass

    def unwritten(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """The audit rows still waiting in memory: tool calls and Risk Guard decisions, in the
        order they were made. After a ``close`` that could not write them (a full disk) they
        are what was not recorded, for the caller to name."""
        return list(self._calls), list(self._risk)

    def close(self) -> None:
        """Write what is pending, then close; the connection is closed even when the write
        fails, and the rows that failed stay readable through ``unwritten``."""
        try:
            self.flush()
        finally:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit of work: everything inside commits together or not at all.

        Pending records go first, so they commit with this unit and before anything newer.
        """
        if self.read_only:
            raise OperationalError(
                f"the ledger {self.path} is open read-only (another process writes this "
                "workspace); nothing can be changed from here"
            )
        with self._db.lock, unit_of_work(self._conn) as conn:
            self._meta_overwritten = False
            written = self._write_pending(conn)
            yield conn
        if written:
            self._drop_pending(*written)

    def _write_pending(self, conn: sqlite3.Connection) -> tuple[int, int, int, bool] | None:
        calls, risk, points, meta = self._calls, self._risk, self._points, self._meta
        if not (calls or risk or points or meta):
            return None
        if points:
            conn.executemany(_UPSERT_POINT, [(t, str(e), str(c)) for t, e, c in points])
        if meta:
            written = self._meta_written  # a backtest's day, peak and drawdown rarely change
            changed = [(k, text) for k, v in meta.items() if written.get(k) != (text := str(v))]
            if changed:
                conn.executemany(_UPSERT_META, changed)
        if risk:
            conn.executemany(_INSERT_RISK, risk)
        if calls:
            rows = []
            for agent, tool, params, status, code, result, started, duration in calls:
                shared = len(params) >= MIN_SHARED_CHARS
                rows.append((agent, tool, "" if shared else params,
                             put_text(conn, params) if shared else None, status, code,
                             put_text(conn, result), started, duration))
            conn.executemany(_INSERT_TOOL_CALL, rows)
        return len(calls), len(risk), len(points), bool(meta)

    def _drop_pending(self, calls: int, risk: int, points: int, meta: bool) -> None:
        del self._calls[:calls]
        del self._risk[:risk]
        del self._points[:points]
        if meta:
            if self._meta_overwritten:  # the same transaction also wrote meta directly
                self._meta_written.clear()
            else:
                self._meta_written.update((k, str(v)) for k, v in self._meta.items())
            self._meta = {}

    # -- writing -------------------------------------------------------------------------------

    def initialize(self, balances: Mapping[str, Decimal], meta: Mapping[str, str]) -> None:
        """Write the opening balances and settings of a new account, once."""
        with self.transaction() as conn:
            self._put_balances(conn, balances)
            self._put_meta(conn, {**meta, "initialized": "1"})

    def start_over(self, quote_currency: str, initial_cash: Decimal) -> None:
        """Give an account that never had an order or a fill a new opening cash: its balances
        become ``initial_cash`` of ``quote_currency``, and its statistics and equity curve,
        computed from the old cash, are dropped; where it settled to is kept. For an account
        whose stored money is out of range (``app.cli.paper_account``).

        Raises:
            OperationalError: the account has orders or fills (their numbers came from the old
                cash), or was never opened; nothing is changed.
        """
        with self.transaction() as conn:
            orders = conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
            fills = conn.execute("SELECT COUNT(*) FROM fills").fetchone()[0]
            opened = conn.execute("SELECT 1 FROM meta WHERE key='initialized'").fetchone()
            if orders or fills or opened is None:
                raise OperationalError(
                    "only an opened paper account without orders or fills can be started over; "
                    f"this one has {orders} orders and {fills} fills" if opened is not None else
                    "this workspace has no paper account to start over"
                )
            for table in ("balances", "positions", "holdings", "equity_curve"):
                conn.execute(f"DELETE FROM {table}")  # noqa: S608 - the names above
            conn.execute("DELETE FROM meta WHERE key IN ('peak_equity', 'day_start_equity', "
                         "'max_drawdown_pct', 'last_equity')")
            self._put_balances(conn, {quote_currency: initial_cash})
            self._put_meta(conn, {"initial_cash": str(initial_cash)})

    def save_order(self, record: OrderRecord) -> None:
        """Commit a new order or an order's new status (cancel, trigger) on its own."""
        with self.transaction() as conn:
            self._put_order(conn, record)

    def save_orders(self, records: list[OrderRecord]) -> None:
        with self.transaction() as conn:
            for record in records:
                self._put_order(conn, record)

    def commit_fill(
        self,
        fill: Fill,
        orders: list[OrderRecord],
        balances: Mapping[str, Decimal],
        position: PositionRecord,
        holdings: Mapping[tuple[str, str], tuple[Decimal, Decimal]],
    ) -> None:
        """Commit a fill and every state change it causes in ONE transaction."""
        with self.transaction() as conn:
            conn.execute(
                _INSERT_FILL,
                (fill.fill_id, fill.order_id, fill.agent_id, fill.symbol, fill.side.value,
                 str(fill.quantity), str(fill.price), str(fill.fee), fill.fee_currency,
                 fill.time_ms, str(fill.realized_pnl), int(fill.is_maker)),
            )
            for record in orders:
                self._put_order(conn, record)
            self._put_balances(conn, balances)
            conn.execute(
                "INSERT INTO positions (symbol, size, avg_price, realized_pnl) VALUES (?,?,?,?) "
                "ON CONFLICT(symbol) DO UPDATE SET size=excluded.size, "
                "avg_price=excluded.avg_price, realized_pnl=excluded.realized_pnl",
                (position.symbol, str(position.size), str(position.avg_price),
                 str(position.realized_pnl)),
            )
            for (agent_id, symbol), (size, cost) in holdings.items():
                conn.execute(
                    "INSERT INTO holdings (agent_id, symbol, size, cost) VALUES (?,?,?,?) "
                    "ON CONFLICT(agent_id, symbol) DO UPDATE SET size=excluded.size, "
                    "cost=excluded.cost",
                    (agent_id, symbol, str(size), str(cost)),
                )

    def record_settle(
        self,
        time_ms: int,
        equity: Decimal,
        cash: Decimal,
        meta: Mapping[str, object],
        *,
        defer: bool = False,
    ) -> None:
        """Commit an equity-curve point together with the settle cursor and running statistics.

        Args:
            meta: values are stored as ``str(value)``; give immutable ones (str, int, Decimal),
                since a deferred write reads them later.
            defer: keep both for the next transaction instead (a backtest's per-bar point; see
                the module docstring for why a lost tail is safe there).
        """
        if defer:
            self._points.append((time_ms, equity, cash))
            self._meta.update(meta)
            if len(self._points) >= MAX_DEFERRED_POINTS:
                self.flush()
            return
        with self.transaction() as conn:
            conn.execute(_UPSERT_POINT, (time_ms, str(equity), str(cash)))
            self._put_meta(conn, meta)

    def record_risk_decision(self, row: tuple[Any, ...]) -> None:
        self._risk.append(row)
        if len(self._risk) + len(self._calls) >= self._audit_batch:
            self.flush()

    def record_tool_call(self, row: tuple[Any, ...]) -> None:
        self._calls.append(row)
        if len(self._risk) + len(self._calls) >= self._audit_batch:
            self.flush()

    def _put_meta(self, conn: sqlite3.Connection, meta: Mapping[str, object]) -> None:
        self._meta_written.clear()
        self._meta_overwritten = True
        conn.executemany(_UPSERT_META, [(key, str(value)) for key, value in meta.items()])

    @staticmethod
    def _put_balances(conn: sqlite3.Connection, balances: Mapping[str, Decimal]) -> None:
        conn.executemany(
            "INSERT INTO balances (asset, total) VALUES (?,?) "
            "ON CONFLICT(asset) DO UPDATE SET total=excluded.total",
            [(asset, str(total)) for asset, total in balances.items()],
        )

    @staticmethod
    def _put_order(conn: sqlite3.Connection, record: OrderRecord) -> None:
        o = record.order
        conn.execute(
            _UPSERT_ORDER,
            (o.order_id, o.client_order_id, o.agent_id, o.symbol, o.side.value,
             o.order_type.value, str(o.quantity), _text(o.price), _text(o.stop_price),
             int(o.reduce_only), o.exit_kind.value, o.status.value, str(o.filled_quantity),
             _text(o.average_price), str(o.fee), o.fee_currency, redact(o.reason), o.created_ms,
             o.updated_ms, int(o.triggered), _text(record.quote_amount), str(record.reserved)),
        )

    # -- reading -------------------------------------------------------------------------------

    def load(self) -> LedgerSnapshot:
        """Read the whole account state back, as the last committed transaction left it (what
        is pending is committed first)."""
        return self._read_state(self.connection)

    def committed(self) -> LedgerSnapshot:
        """The account state as committed, without writing what is pending first: what the
        paper account goes back to after the ledger refused one of its writes (writing the
        pending records could be refused the same way). Read under the store's lock, so no
        other thread's transaction is half seen."""
        with self._db.lock:
            return self._read_state(self._conn)

    @staticmethod
    def _read_state(conn: sqlite3.Connection) -> LedgerSnapshot:
        snap = LedgerSnapshot()
        for row in conn.execute(_SELECT_ORDERS):
            snap.orders.append(_order_record(row))
        rows = conn.execute("SELECT asset, total FROM balances")
        snap.balances = {asset: Decimal(total) for asset, total in rows}
        for symbol, size, avg, realized in conn.execute("SELECT * FROM positions"):
            snap.positions[symbol] = PositionRecord(
                symbol, Decimal(size), Decimal(avg), Decimal(realized)
            )
        for agent_id, symbol, size, cost in conn.execute("SELECT * FROM holdings"):
            snap.holdings[(agent_id, symbol)] = (Decimal(size), Decimal(cost))
        snap.meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        snap.fill_count = int(conn.execute("SELECT COUNT(*) FROM fills").fetchone()[0])
        return snap

    def fills(self, symbol: str | None = None, limit: int | None = None) -> list[Fill]:
        """Fills, newest first when ``limit`` is given, else all of them oldest first."""
        sql = SELECT_FILLS + (" WHERE symbol = ?" if symbol else "")
        args: list[Any] = [symbol] if symbol else []
        if limit is None:
            sql += " ORDER BY seq"
        else:
            sql += " ORDER BY seq DESC LIMIT ?"
            args.append(limit)
        return [fill_from_row(row) for row in self.connection.execute(sql, args)]

    def meta_value(self, key: str) -> str | None:
        """One value of the account's meta (its currency, mode, last settle...), None if unset."""
        row = self.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def traded_symbols(self) -> set[str]:
        """Every symbol the account ever had a fill in."""
        return {row[0] for row in self.connection.execute("SELECT DISTINCT symbol FROM fills")}

    def equity_curve(self, from_ms: int = -1) -> list[tuple[int, Decimal, Decimal]]:
        """(time, equity, cash) of every settle at or after ``from_ms``, oldest first."""
        return [
            (t, Decimal(e), Decimal(c))
            for t, e, c in self.connection.execute(
                "SELECT time_ms, equity, cash FROM equity_curve WHERE time_ms >= ? "
                "ORDER BY time_ms", (from_ms,),
            )
        ]

    def risk_decisions(self) -> list[dict[str, Any]]:
        self.flush()
        return self._db.rows("SELECT * FROM risk_decisions ORDER BY id")

    def tool_calls(self) -> list[dict[str, Any]]:
        self.flush()
        rows = self._db.rows("SELECT * FROM tool_calls ORDER BY id")
        for row in rows:
            row["params"] = json.loads(row.pop("params_json"))
        return rows


def _order_record(row: tuple[Any, ...]) -> OrderRecord:
    (order_id, client_id, agent_id, symbol, side, order_type, quantity, price, stop_price,
     reduce_only, exit_kind, status, filled, average, fee, fee_currency, reason, created_ms,
     updated_ms, triggered, quote_amount, reserved) = row
    order = Order(
        order_id=order_id, client_order_id=client_id, agent_id=agent_id, symbol=symbol,
        side=Side(side), order_type=OrderType(order_type), quantity=Decimal(quantity),
        created_ms=created_ms, price=_dec(price), stop_price=_dec(stop_price),
        reduce_only=bool(reduce_only), exit_kind=ExitKind(exit_kind), status=OrderStatus(status),
        filled_quantity=Decimal(filled), average_price=_dec(average), fee=Decimal(fee),
        fee_currency=fee_currency, reason=reason, updated_ms=updated_ms, triggered=bool(triggered),
    )
    return OrderRecord(order, _dec(quote_amount), Decimal(reserved))


def fill_from_row(row: tuple[Any, ...]) -> Fill:
    """A ``SELECT_FILLS`` row as a ``Fill``."""
    (fill_id, order_id, agent_id, symbol, side, quantity, price, fee, fee_currency, time_ms,
     realized, is_maker) = row
    return Fill(
        fill_id=fill_id, order_id=order_id, agent_id=agent_id, symbol=symbol, side=Side(side),
        quantity=Decimal(quantity), price=Decimal(price), fee=Decimal(fee),
        fee_currency=fee_currency, time_ms=time_ms, realized_pnl=Decimal(realized),
        is_maker=bool(is_maker),
    )
