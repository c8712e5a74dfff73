"""Order entry's record of each order as it was asked, by owner and client order id.

A repeated call must be the same order whatever the market did in between: an order given as a
quote amount is worth a different quantity ten seconds later. So the request is kept as it was
given (symbol, side, type, base quantity or quote amount, prices), written before the order is
sent, and a repeat is compared with it, never with a quantity the broker derived. The task that
asked is kept too: a later step of the same task that repeats the order word for word is one
intention, not two. What became of the order is the broker's to say (``Broker.placement``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.domain.agents import agent_key
from app.store.db import StoreDb, store_db


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One order request as order entry received it.

    Attributes:
        request: the request as given, in a canonical text form (equal text, same order).
        explicit: the caller chose the client order id (otherwise it came from the tool call).
    """

    owner: str
    client_order_id: str
    task_id: str
    explicit: bool
    request: str
    created_ms: int


class OrderRequests:
    """The ``order_requests`` table of one workspace (or of memory, for a world without one)."""

    def __init__(self, db_path: Path | str | StoreDb, *, durable: bool = True) -> None:
        self._db = store_db(db_path, durable=durable)

    def close(self) -> None:
        self._db.close()

    def get(self, owner: str, client_order_id: str) -> RequestRecord | None:
        row = self._db.conn.execute(
            "SELECT owner, client_order_id, task_id, explicit, request, created_ms "
            "FROM order_requests WHERE owner=? AND client_order_id=?",
            (agent_key(owner), client_order_id),
        ).fetchone()
        return None if row is None else _record(row)

    def of_task(self, owner: str, task_id: str) -> list[RequestRecord]:
        """The requests one task of ``owner`` made, oldest first."""
        rows = self._db.conn.execute(
            "SELECT owner, client_order_id, task_id, explicit, request, created_ms "
            "FROM order_requests WHERE owner=? AND task_id=? ORDER BY created_ms, rowid",
            (agent_key(owner), task_id),
        ).fetchall()
        return [_record(row) for row in rows]

    def record(self, entry: RequestRecord) -> None:
        """Keep a request before its order is sent (a repeat keeps the first)."""
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO order_requests (owner, client_order_id, task_id, "
                "explicit, request, created_ms) VALUES (?,?,?,?,?,?)",
                (agent_key(entry.owner), entry.client_order_id, entry.task_id,
                 int(entry.explicit), entry.request, entry.created_ms),
            )


def _record(row: tuple[object, ...]) -> RequestRecord:
    owner, client_id, task_id, explicit, request, created = row
    return RequestRecord(str(owner), str(client_id), str(task_id), bool(explicit), str(request),
                         int(str(created)))
