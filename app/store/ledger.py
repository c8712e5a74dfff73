"""The durable ledger: orders, fills, balances, positions, holdings and the equity curve in SQLite.

The broker keeps its working state in memory and writes every change here before it counts: an order
is committed before it can have any effect, and a fill commits in one transaction together with the
balances, position, holdings and order status it changes. Restarting from the file therefore gives
back the account exactly as at the last committed fill.
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

from app.domain.trading import ExitKind, Fill, Order, OrderStatus, OrderType, Side
from app.store.db import connect


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
_SELECT_FILLS = f"SELECT {_FILL_COLUMNS} FROM fills"  # noqa: S608


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _dec(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


class Ledger:
    """One account's durable record; the only code that writes the trading tables."""

    def __init__(self, path: Path | str = ":memory:", *, durable: bool = True) -> None:
        self.path = path
        self._conn = connect(path, durable=durable)

    @property
    def connection(self) -> sqlite3.Connection:
        return self._conn

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit of work: everything inside commits together or not at all."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- writing -------------------------------------------------------------------------------

    def initialize(self, balances: Mapping[str, Decimal], meta: Mapping[str, str]) -> None:
        """Write the opening balances and settings of a new account, once."""
        with self.transaction() as conn:
            self._put_balances(conn, balances)
            self._put_meta(conn, {**meta, "initialized": "1"})

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
        self, time_ms: int, equity: Decimal, cash: Decimal, meta: Mapping[str, str]
    ) -> None:
        """Commit an equity-curve point together with the settle cursor and running statistics."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO equity_curve (time_ms, equity, cash) VALUES (?,?,?) "
                "ON CONFLICT(time_ms) DO UPDATE SET equity=excluded.equity, cash=excluded.cash",
                (time_ms, str(equity), str(cash)),
            )
            self._put_meta(conn, meta)

    def record_risk_decision(self, row: tuple[Any, ...]) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO risk_decisions (now_ms, agent_id, symbol, side, order_type, quantity, "
                "notional, accepted, rule, reason) VALUES (?,?,?,?,?,?,?,?,?,?)",
                row,
            )

    def record_tool_call(self, row: tuple[Any, ...]) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO tool_calls (agent_id, tool_name, params_json, status, error_code, "
                "result_xml, started_ms, duration_ms) VALUES (?,?,?,?,?,?,?,?)",
                row,
            )

    @staticmethod
    def _put_meta(conn: sqlite3.Connection, meta: Mapping[str, str]) -> None:
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?,?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            list(meta.items()),
        )

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
             _text(o.average_price), str(o.fee), o.fee_currency, o.reason, o.created_ms,
             o.updated_ms, int(o.triggered), _text(record.quote_amount), str(record.reserved)),
        )

    # -- reading -------------------------------------------------------------------------------

    def load(self) -> LedgerSnapshot:
        """Read the whole account state back, as the last committed transaction left it."""
        conn = self._conn
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
        sql = _SELECT_FILLS + (" WHERE symbol = ?" if symbol else "")
        args: list[Any] = [symbol] if symbol else []
        if limit is None:
            sql += " ORDER BY seq"
        else:
            sql += " ORDER BY seq DESC LIMIT ?"
            args.append(limit)
        return [_fill(row) for row in self._conn.execute(sql, args)]

    def equity_curve(self) -> list[tuple[int, Decimal, Decimal]]:
        return [
            (t, Decimal(e), Decimal(c))
            for t, e, c in self._conn.execute(
                "SELECT time_ms, equity, cash FROM equity_curve ORDER BY time_ms"
            )
        ]

    def risk_decisions(self) -> list[dict[str, Any]]:
        cur = self._conn.execute("SELECT * FROM risk_decisions ORDER BY id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur]

    def tool_calls(self) -> list[dict[str, Any]]:
        cur = self._conn.execute("SELECT * FROM tool_calls ORDER BY id")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur]
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


def _fill(row: tuple[Any, ...]) -> Fill:
    (fill_id, order_id, agent_id, symbol, side, quantity, price, fee, fee_currency, time_ms,
     realized, is_maker) = row
    return Fill(
        fill_id=fill_id, order_id=order_id, agent_id=agent_id, symbol=symbol, side=Side(side),
        quantity=Decimal(quantity), price=Decimal(price), fee=Decimal(fee),
        fee_currency=fee_currency, time_ms=time_ms, realized_pnl=Decimal(realized),
        is_maker=bool(is_maker),
    )
