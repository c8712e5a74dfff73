"""Stops Kestrel holds itself, on a market whose exchange can hold no stop-loss order.

Where the exchange lists neither a stop-market nor a stop-limit order type, and the person has
allowed it (``[trading] kestrel_stops``), order entry keeps a lot's stop loss here instead of on
the exchange, and its own market watch sells the lot when the price reaches it. Such a stop
protects only while Kestrel runs, which every view that shows one says. One active stop per owner
and symbol: setting another replaces it. A stop fired, cancelled or replaced keeps its row, so
what Kestrel did with each is on record.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from pathlib import Path

from app.domain.agents import agent_key
from app.store.db import StoreDb, store_db


class HeldStopState(StrEnum):
    ACTIVE = "ACTIVE"
    FIRED = "FIRED"  # the price reached it and the lot was sold (``order_id``)
    CANCELLED = "CANCELLED"  # replaced, or its lot closed another way
    FAILED = "FAILED"  # it fired, and selling the lot was refused (the person was alerted)


@dataclass(frozen=True, slots=True)
class HeldStop:
    stop_id: int
    owner: str
    symbol: str
    quantity: Decimal
    stop_price: Decimal
    created_ms: int
    state: HeldStopState
    order_id: str | None = None
    reason: str = ""


class HeldStops:
    """The ``held_stops`` table, with the active stops kept in memory (read at every tick)."""

    def __init__(self, db_path: Path | str | StoreDb, *, durable: bool = True) -> None:
        self._db = store_db(db_path, durable=durable)
        self._active = [s for s in self._all() if s.state is HeldStopState.ACTIVE]

    def close(self) -> None:
        self._db.close()

    def active(self, symbol: str | None = None, owner: str | None = None) -> list[HeldStop]:
        return [s for s in self._active if (symbol is None or s.symbol == symbol)
                and (owner is None or agent_key(s.owner) == agent_key(owner))]

    def hold(self, owner: str, symbol: str, quantity: Decimal, stop_price: Decimal,
             now_ms: int) -> HeldStop:
        """Hold a stop for ``owner``'s lot of ``symbol``, replacing the one it had."""
        with self._db.transaction() as conn:
            for old in self.active(symbol, owner):
                conn.execute("UPDATE held_stops SET state=?, reason=? WHERE stop_id=?",
                             (HeldStopState.CANCELLED.value, "replaced", old.stop_id))
            cursor = conn.execute(
                "INSERT INTO held_stops (owner, symbol, quantity, stop_price, created_ms, state) "
                "VALUES (?,?,?,?,?,?)",
                (owner, symbol, str(quantity), str(stop_price), now_ms,
                 HeldStopState.ACTIVE.value))
            stop_id = int(cursor.lastrowid or 0)
        self._active = [s for s in self._active
                        if not (s.symbol == symbol and agent_key(s.owner) == agent_key(owner))]
        held = HeldStop(stop_id, owner, symbol, quantity, stop_price, now_ms,
                        HeldStopState.ACTIVE)
        self._active.append(held)
        return held

    def end(self, stop: HeldStop, state: HeldStopState, reason: str,
            order_id: str | None = None) -> None:
        with self._db.transaction() as conn:
            conn.execute("UPDATE held_stops SET state=?, reason=?, order_id=? WHERE stop_id=?",
                         (state.value, reason, order_id, stop.stop_id))
        self._active = [s for s in self._active if s.stop_id != stop.stop_id]

    def _all(self) -> list[HeldStop]:
        rows = self._db.conn.execute(
            "SELECT stop_id, owner, symbol, quantity, stop_price, created_ms, state, order_id, "
            "reason FROM held_stops ORDER BY stop_id").fetchall()
        return [HeldStop(int(r[0]), str(r[1]), str(r[2]), Decimal(r[3]), Decimal(r[4]),
                         int(r[5]), HeldStopState(r[6]), r[7], str(r[8])) for r in rows]
