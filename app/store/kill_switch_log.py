"""The ``kill_switch_trips`` table: every trip of the kill switch and its reset, durably.

One row per trip, in order; the switch is tripped exactly while the newest row has no reset. So
the state and its history are one record, and a trip or a reset is a single committed write.
Every commit here is forced to disk (``synchronous=FULL``) whatever the account's mode: a halt
that a power cut could undo would be no halt at all.

The trip in force is kept in memory too, because the Risk Guard asks for it before every order;
only this process writes the workspace (``Workspace.hold_for_writing``), so the copy cannot go
stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.domain.errors import KestrelError
from app.domain.kill_switch import Trip, TripCause
from app.store.db import StoreDb, store_db

_COLUMNS = ("trip_id, cause, cause_key, reason, tripped_by, tripped_ms, market_ms, actions, "
            "reset_ms, reset_by")


class NotTrippedError(KestrelError):
    """A reset was asked for while the switch is not tripped."""


class KillSwitchLog:
    """The kill switch's record in the workspace database.

    Args:
        db_path: the workspace's ``kestrel.db``.
        read_only: read a workspace another process writes (``trip`` and ``reset`` then fail).

    Raises:
        OperationalError: the database cannot be opened (see ``StoreDb``).
    """

    def __init__(self, db_path: Path | str | StoreDb, *, read_only: bool = False) -> None:
        self._db = store_db(db_path, durable=True, read_only=read_only)
        self._active = self._newest_open()

    def close(self) -> None:
        self._db.close()

    def active(self) -> Trip | None:
        """The trip in force, or ``None`` when the switch is armed (from memory: cheap)."""
        return self._active

    def trip(
        self,
        *,
        cause: TripCause,
        cause_key: str,
        reason: str,
        by: str,
        tripped_ms: int,
        market_ms: int,
    ) -> tuple[Trip, bool]:
        """Record a trip, committed to disk before this returns.

        Returns:
            The trip in force and whether it is this one (False: the switch was already
            tripped, by the trip returned; nothing was written).
        """
        with self._db.transaction() as conn:
            found = _first(conn.execute(
                f"SELECT {_COLUMNS} FROM kill_switch_trips WHERE reset_ms IS NULL "  # noqa: S608
                "ORDER BY trip_id DESC LIMIT 1").fetchall())
            if found is not None:
                self._active = found
                return found, False
            cursor = conn.execute(
                "INSERT INTO kill_switch_trips (cause, cause_key, reason, tripped_by, tripped_ms,"
                " market_ms) VALUES (?,?,?,?,?,?)",
                (cause.value, cause_key, reason, by, tripped_ms, market_ms),
            )
            trip_id = int(cursor.lastrowid or 0)
        self._active = Trip(trip_id, cause, cause_key, reason, by, tripped_ms, market_ms)
        return self._active, True

    def record_actions(self, trip_id: int, actions: str) -> None:
        """Keep what the trip did (its actions have completed)."""
        with self._db.transaction() as conn:
            conn.execute("UPDATE kill_switch_trips SET actions=? WHERE trip_id=?",
                         (actions, trip_id))
        self._active = self._newest_open()

    def reset(self, *, by: str, reset_ms: int, market_ms: int) -> Trip:
        """End the trip in force; returns it as reset.

        Raises:
            NotTrippedError: the switch is not tripped.
        """
        with self._db.transaction() as conn:
            found = _first(conn.execute(
                f"SELECT {_COLUMNS} FROM kill_switch_trips WHERE reset_ms IS NULL "  # noqa: S608
                "ORDER BY trip_id DESC LIMIT 1").fetchall())
            if found is None:
                raise NotTrippedError("The kill switch is not tripped; there is nothing to reset.")
            conn.execute(
                "UPDATE kill_switch_trips SET reset_ms=?, reset_market_ms=?, reset_by=? "
                "WHERE trip_id=?", (reset_ms, market_ms, by, found.trip_id))
        self._active = None
        return Trip(found.trip_id, found.cause, found.cause_key, found.reason, found.by,
                    found.tripped_ms, found.market_ms, found.actions, reset_ms, by)

    def history(self, limit: int = 50) -> list[Trip]:
        """The latest trips, newest first."""
        with self._db.lock:
            rows = self._db.conn.execute(
                f"SELECT {_COLUMNS} FROM kill_switch_trips "  # noqa: S608 - our columns
                "ORDER BY trip_id DESC LIMIT ?", (limit,)).fetchall()
        return [_trip(row) for row in rows]

    def answered_keys(self) -> set[str]:
        """The cause keys of every automatic trip so far: breaches already answered by a trip."""
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT DISTINCT cause_key FROM kill_switch_trips WHERE cause_key != ''"
            ).fetchall()
        return {row[0] for row in rows}

    def _newest_open(self) -> Trip | None:
        with self._db.lock:
            return _first(self._db.conn.execute(
                f"SELECT {_COLUMNS} FROM kill_switch_trips WHERE reset_ms IS NULL "  # noqa: S608
                "ORDER BY trip_id DESC LIMIT 1").fetchall())


def _first(rows: list[tuple[Any, ...]]) -> Trip | None:
    return _trip(rows[0]) if rows else None


def _trip(row: tuple[Any, ...]) -> Trip:
    return Trip(
        trip_id=row[0], cause=TripCause(row[1]), cause_key=row[2], reason=row[3], by=row[4],
        tripped_ms=row[5], market_ms=row[6], actions=row[7], reset_ms=row[8], reset_by=row[9],
    )
