"""The live order journal: every order meant for a real exchange, written before it is sent.

Why a journal and not just the exchange's word: an order's answer can be lost (a timeout, a 5xx,
a killed process) while the exchange booked it. Only what was written down *before* the request
left tells a restarted Kestrel which orders may exist, under which client order id to look for
them, and that none of them may be sent again blindly. So every order is committed here first
(``synchronous=FULL``: the commit survives a power cut), marked SENDING in a second commit right
before the request, and every answer or lookup moves it on::

    NEW -> SENDING -> ACCEPTED | REJECTED | UNKNOWN
                      ACCEPTED | UNKNOWN -> OPEN | PARTIALLY_FILLED | FILLED | CANCELED | EXPIRED
    NEW at start-up -> NOT_SENT (nothing left the process; the same tool call may send it)
    UNKNOWN, not found within its lookup window -> NOT_PLACED (the person is told; found later
                      after all, by any read, it is re-attached and the person told so)

Fills are keyed by the exchange's trade id, so a fill learnt twice (from the order's answer and
from the trade history) is stored once. It lives in ``app/store`` beside the ledger because it is
storage: the workspace database, its migrations, backups and one-writer lock; ``app/ccxt`` holds
the exchange side (the broker and the reconciler) and reads and writes through this module only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

from app.domain.trading import ExitKind, OrderType, Side
from app.store.db import StoreDb

ZERO = Decimal(0)


class JournalState(StrEnum):
    NEW = "NEW"
    SENDING = "SENDING"
    ACCEPTED = "ACCEPTED"
    REJECTED = "REJECTED"
    UNKNOWN = "UNKNOWN"
    OPEN = "OPEN"
    PARTIALLY_FILLED = "PARTIALLY_FILLED"
    FILLED = "FILLED"
    CANCELED = "CANCELED"
    EXPIRED = "EXPIRED"
    NOT_SENT = "NOT_SENT"
    NOT_PLACED = "NOT_PLACED"

    @property
    def in_flight(self) -> bool:
        """Sent (or maybe sent) and not yet seen on the exchange: must be looked up."""
        return self in (JournalState.SENDING, JournalState.UNKNOWN)

    @property
    def on_exchange_open(self) -> bool:
        """Known to rest on the exchange (or accepted without a status yet)."""
        return self in (JournalState.ACCEPTED, JournalState.OPEN, JournalState.PARTIALLY_FILLED)

    @property
    def may_send(self) -> bool:
        """Certainly not on the exchange: the same tool call may send it (again)."""
        return self in (JournalState.NEW, JournalState.NOT_SENT, JournalState.REJECTED)

    @property
    def final(self) -> bool:
        return self in (
            JournalState.FILLED, JournalState.CANCELED, JournalState.EXPIRED,
            JournalState.REJECTED, JournalState.NOT_SENT, JournalState.NOT_PLACED,
        )


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One order as the journal knows it.

    Attributes:
        client_order_id: the id sent to the exchange (derived from the tool call, see
            ``app.ccxt.client_ids``); unique per venue.
        agent_order_id: the client order id as the agent and its tool call know it.
        note: the agent's one-line rationale for the order.
        checks: lookups made since the order's outcome became unknown.
        attempts: how many times a request to create it left this process.
        reason: why it is in its state, in words (the exchange's refusal, a lookup's result).
        escalated: the person has been told it could not be resolved.
        adopted: an order found on the exchange that the person chose to take over.
    """

    venue: str
    client_order_id: str
    agent_id: str
    agent_order_id: str
    symbol: str
    side: Side
    order_type: OrderType
    quantity: Decimal
    created_ms: int
    price: Decimal | None = None
    stop_price: Decimal | None = None
    quote_amount: Decimal | None = None
    reduce_only: bool = False
    exit_kind: ExitKind = ExitKind.NONE
    note: str = ""
    state: JournalState = JournalState.NEW
    exchange_order_id: str | None = None
    filled_quantity: Decimal = ZERO
    average_price: Decimal | None = None
    fee: Decimal = ZERO
    fee_currency: str = ""
    updated_ms: int = 0
    sent_ms: int | None = None
    last_checked_ms: int | None = None
    checks: int = 0
    attempts: int = 0
    reason: str = ""
    escalated: bool = False
    adopted: bool = False

    def same_intent(self, other: JournalEntry) -> bool:
        """Whether two entries ask for the same order (a repeated tool call must), compared as
        asked: an order given as a quote amount is the same whatever quantity the price of the
        moment makes of it."""
        keys: tuple[str, ...] = ("symbol", "side", "order_type", "price", "stop_price",
                                 "quote_amount", "reduce_only")
        if self.quote_amount is None:
            keys += ("quantity",)
        return all(getattr(self, k) == getattr(other, k) for k in keys)


@dataclass(frozen=True, slots=True)
class JournalFill:
    """One execution on the exchange, keyed by its trade id."""

    venue: str
    trade_id: str
    client_order_id: str
    exchange_order_id: str
    symbol: str
    side: Side
    quantity: Decimal
    price: Decimal
    cost: Decimal
    fee: Decimal
    fee_currency: str
    time_ms: int
    is_maker: bool = False


_DECIMALS = {"quantity", "price", "stop_price", "quote_amount", "filled_quantity",
             "average_price", "fee", "cost"}
_BOOLS = {"reduce_only", "escalated", "adopted", "is_maker"}
_ENTRY_COLUMNS = tuple(f.name for f in fields(JournalEntry))
_FILL_COLUMNS = tuple(f.name for f in fields(JournalFill))


def _to_row(obj: JournalEntry | JournalFill, columns: Iterable[str]) -> tuple[Any, ...]:
    out: list[Any] = []
    for name in columns:
        value = getattr(obj, name)
        if isinstance(value, Decimal):
            value = str(value)
        elif isinstance(value, bool):
            value = int(value)
        elif isinstance(value, StrEnum):
            value = value.value
        out.append(value)
    return tuple(out)


def _from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in row.items():
        if key in _DECIMALS and value is not None:
            value = Decimal(value)
        elif key in _BOOLS:
            value = bool(value)
        out[key] = value
    return out


def _entry(row: Mapping[str, Any]) -> JournalEntry:
    data = _from_row({k: v for k, v in row.items() if k in _ENTRY_COLUMNS})
    data["side"] = Side(data["side"])
    data["order_type"] = OrderType(data["order_type"])
    data["exit_kind"] = ExitKind(data["exit_kind"])
    data["state"] = JournalState(data["state"])
    return JournalEntry(**data)


def _fill(row: Mapping[str, Any]) -> JournalFill:
    data = _from_row(row)
    data["side"] = Side(data["side"])
    return JournalFill(**data)


class OrderJournal:
    """The journal of one workspace database; entries and fills are kept per venue.

    Every write is its own durable transaction, committed before the call returns, so the
    caller may act on it (send the request, answer the agent) knowing it survives a crash.

    Args:
        path: the workspace's ``kestrel.db`` (migrated here), or an open ``StoreDb``.
    """

    def __init__(self, path: Path | str | StoreDb) -> None:
        self.db = path if isinstance(path, StoreDb) else StoreDb(path, durable=True)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> OrderJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- entries -------------------------------------------------------------------------------

    def record(self, entry: JournalEntry) -> JournalEntry:
        """Write a new entry (its state as given, normally NEW) and commit it.

        Raises:
            sqlite3.IntegrityError: an entry with its client order id, or its agent's order id,
                exists already (look it up first).
        """
        placeholders = ", ".join("?" for _ in _ENTRY_COLUMNS)
        with self.db.transaction() as conn:
            conn.execute(
                f"INSERT INTO order_journal ({', '.join(_ENTRY_COLUMNS)}) "  # noqa: S608
                f"VALUES ({placeholders})",
                _to_row(entry, _ENTRY_COLUMNS),
            )
        return entry

    def update(self, entry: JournalEntry, **changes: Any) -> JournalEntry:
        """Write ``changes`` to ``entry`` and commit; return the entry as now stored."""
        new = replace(entry, **changes)
        names = [k for k in changes if k in _ENTRY_COLUMNS]
        if not names:
            return new
        sets = ", ".join(f"{name} = ?" for name in names)
        values = _to_row(new, names)
        with self.db.transaction() as conn:
            cursor = conn.execute(
                f"UPDATE order_journal SET {sets} "  # noqa: S608 - column names are ours
                "WHERE venue = ? AND client_order_id = ?",
                (*values, entry.venue, entry.client_order_id),
            )
            if cursor.rowcount != 1:
                raise sqlite3.IntegrityError(
                    f"no journal entry {entry.venue}/{entry.client_order_id} to update")
        return new

    def get(self, venue: str, client_order_id: str) -> JournalEntry | None:
        rows = self.db.rows(
            "SELECT * FROM order_journal WHERE venue = ? AND client_order_id = ?",
            (venue, client_order_id),
        )
        return _entry(rows[0]) if rows else None

    def by_agent_order_id(
        self, venue: str, agent_id: str, agent_order_id: str
    ) -> JournalEntry | None:
        rows = self.db.rows(
            "SELECT * FROM order_journal WHERE venue = ? AND agent_id = ? COLLATE NOCASE "
            "AND agent_order_id = ?",
            (venue, agent_id, agent_order_id),
        )
        return _entry(rows[0]) if rows else None

    def by_exchange_id(self, venue: str, exchange_order_id: str) -> JournalEntry | None:
        rows = self.db.rows(
            "SELECT * FROM order_journal WHERE venue = ? AND exchange_order_id = ?",
            (venue, exchange_order_id),
        )
        return _entry(rows[0]) if rows else None

    def entries(
        self,
        venue: str,
        states: Iterable[JournalState] | None = None,
        symbol: str | None = None,
    ) -> list[JournalEntry]:
        """Entries of ``venue`` in the order they were written, optionally filtered."""
        sql = "SELECT * FROM order_journal WHERE venue = ?"
        params: list[Any] = [venue]
        if states is not None:
            wanted = [s.value for s in states]
            sql += f" AND state IN ({', '.join('?' for _ in wanted)})"
            params.extend(wanted)
        if symbol is not None:
            sql += " AND symbol = ?"
            params.append(symbol)
        return [_entry(r) for r in self.db.rows(sql + " ORDER BY seq", tuple(params))]

    def unfinished(self, venue: str) -> list[JournalEntry]:
        """Entries whose outcome a restart must settle: never sent, in flight, or open."""
        return self.entries(venue, [s for s in JournalState if not s.final])

    def symbols(self, venue: str) -> list[str]:
        rows = self.db.rows(
            "SELECT DISTINCT symbol FROM order_journal WHERE venue = ? ORDER BY symbol", (venue,)
        )
        return [r["symbol"] for r in rows]

    # -- fills ---------------------------------------------------------------------------------

    def add_fills(self, fills: Iterable[JournalFill]) -> list[JournalFill]:
        """Store fills not seen before (by trade id) in one commit; return the new ones."""
        fills = list(fills)
        if not fills:
            return []
        placeholders = ", ".join("?" for _ in _FILL_COLUMNS)
        added = []
        with self.db.transaction() as conn:
            for fill in fills:
                cursor = conn.execute(
                    f"INSERT OR IGNORE INTO journal_fills ({', '.join(_FILL_COLUMNS)}) "  # noqa: S608
                    f"VALUES ({placeholders})",
                    _to_row(fill, _FILL_COLUMNS),
                )
                if cursor.rowcount == 1:
                    added.append(fill)
        return added

    def fills(
        self,
        venue: str,
        symbol: str | None = None,
        client_order_id: str | None = None,
        limit: int | None = None,
    ) -> list[JournalFill]:
        """Fills oldest first; with ``limit`` the newest ``limit`` of them."""
        sql = "SELECT * FROM journal_fills WHERE venue = ?"
        params: list[Any] = [venue]
        if symbol is not None:
            sql += " AND symbol = ?"
            params.append(symbol)
        if client_order_id is not None:
            sql += " AND client_order_id = ?"
            params.append(client_order_id)
        sql += " ORDER BY time_ms DESC, trade_id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self.db.rows(sql, tuple(params))
        return [_fill(r) for r in reversed(rows)]

    def fill_mark(self, venue: str) -> int:
        """A mark after every fill stored so far (``fills_after`` returns only newer ones)."""
        rows = self.db.rows(
            "SELECT COALESCE(MAX(rowid), 0) AS mark FROM journal_fills WHERE venue = ?", (venue,))
        return int(rows[0]["mark"])

    def fills_after(self, venue: str, mark: int) -> list[JournalFill]:
        """Fills stored after ``mark`` (a ``fill_mark``), in the order they were stored."""
        rows = self.db.rows(
            "SELECT * FROM journal_fills WHERE venue = ? AND rowid > ? ORDER BY rowid",
            (venue, mark))
        return [_fill(r) for r in rows]

    # -- what the reconciler remembers -----------------------------------------------------------

    def meta(self, venue: str, key: str) -> str | None:
        rows = self.db.rows(
            "SELECT value FROM journal_meta WHERE venue = ? AND key = ?", (venue, key))
        return rows[0]["value"] if rows else None

    def meta_with_prefix(self, venue: str, prefix: str) -> list[tuple[str, str]]:
        """(key, value) of every setting whose key starts with ``prefix``, in key order."""
        rows = self.db.rows(
            "SELECT key, value FROM journal_meta WHERE venue = ? AND substr(key, 1, ?) = ? "
            "ORDER BY key", (venue, len(prefix), prefix))
        return [(r["key"], r["value"]) for r in rows]

    def set_meta(self, venue: str, values: Mapping[str, str]) -> None:
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT INTO journal_meta (venue, key, value) VALUES (?, ?, ?) "
                "ON CONFLICT (venue, key) DO UPDATE SET value = excluded.value",
                [(venue, k, v) for k, v in values.items()],
            )

    # -- the account's equity history -----------------------------------------------------------

    def record_equity(self, venue: str, time_ms: int, equity: Decimal) -> None:
        """Keep the account's equity at ``time_ms`` (a later reading of the same moment wins)."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO journal_equity (venue, time_ms, equity) VALUES (?, ?, ?) "
                "ON CONFLICT (venue, time_ms) DO UPDATE SET equity = excluded.equity",
                (venue, time_ms, str(equity)),
            )

    def equity_points(self, venue: str, from_ms: int = -1) -> list[tuple[int, Decimal]]:
        """(time, equity) of every reading at or after ``from_ms``, oldest first."""
        rows = self.db.rows(
            "SELECT time_ms, equity FROM journal_equity WHERE venue = ? AND time_ms >= ? "
            "ORDER BY time_ms", (venue, from_ms))
        return [(int(r["time_ms"]), Decimal(r["equity"])) for r in rows]

    def ignore(self, venue: str, exchange_order_id: str, symbol: str, now_ms: int) -> None:
        """Remember that the person chose to leave this exchange order alone."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO journal_ignored VALUES (?, ?, ?, ?)",
                (venue, exchange_order_id, symbol, now_ms),
            )

    def ignored(self, venue: str) -> set[str]:
        rows = self.db.rows(
            "SELECT exchange_order_id FROM journal_ignored WHERE venue = ?", (venue,))
        return {r["exchange_order_id"] for r in rows}
