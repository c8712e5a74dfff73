"""Where a workspace trades, as its own records say: before a command opens it on a venue.

Why: a command that is not told the venue opens the workspace's ``[venue]`` setting, which can
only name the offline replay or paper on live quotes. A workspace that trades a real exchange
account keeps that in its order journal, and one that paper-trades live quotes keeps it in its
paper ledger's ``venue``; opening such a workspace on the replay would act on a paper ledger
while the person means their account. ``recorded_venue`` reads those records (read-only, without
migrating or holding the database, so it works while another process writes it), and the
commands refuse what they contradict.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from app.runtime.venue import VenueKind
from app.workspace import Workspace

# the order journal's tables; any row in them means the workspace traded (or reconciled) live
_JOURNAL_TABLES = ("order_journal", "journal_fills", "journal_meta", "journal_equity")


@dataclass(frozen=True, slots=True)
class RecordedVenue:
    """The venue a workspace's records show it trading on.

    Attributes:
        kind: ``live`` (its order journal has entries) or ``live-paper`` (its paper ledger
            trades an exchange's live quotes).
        exchange: the ccxt id of the exchange (the first one, when the journal has several).
        why: what in the workspace says so, as the end of a sentence ("its order journal holds
            2 orders on binance").
    """

    kind: VenueKind
    exchange: str
    why: str


def recorded_venue(workspace: Workspace) -> RecordedVenue | None:
    """The live account (first) or the paper-on-live-quotes account the workspace's database
    records; None for a new workspace or one that only ever used the offline replay."""
    if not workspace.db_path.is_file():
        return None
    try:
        conn = sqlite3.connect(workspace.db_path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.DatabaseError:
        return None  # opening the world says what is wrong with the file, and what to do
    try:
        conn.execute("PRAGMA busy_timeout=10000")
        live = _journal_venues(conn)
        if live:
            return RecordedVenue("live", live[0][0], _journal_why(live))
        paper = _rows(conn, "SELECT value FROM meta WHERE key = 'venue'")
    except sqlite3.DatabaseError:
        return None  # a damaged database: opening the world reports it (restore-backup)
    finally:
        conn.close()
    kind, _, exchange = str(paper[0][0]).partition(":") if paper else ("", "", "")
    if kind == "live-paper" and exchange:
        return RecordedVenue("live-paper", exchange,
                             f"its paper account trades on {exchange}'s live quotes")
    return None


def _journal_venues(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """(exchange, orders in its journal) of every exchange the journal has anything of, the one
    with most orders first."""
    orders: dict[str, int] = dict(
        _rows(conn, "SELECT venue, COUNT(*) FROM order_journal GROUP BY venue"))
    venues = set(orders)
    for table in _JOURNAL_TABLES[1:]:
        venues.update(v for (v,) in _rows(conn, f"SELECT DISTINCT venue FROM {table}"))  # noqa: S608
    return sorted(((v, int(orders.get(v, 0))) for v in venues), key=lambda p: (-p[1], p[0]))


def _journal_why(venues: list[tuple[str, int]]) -> str:
    exchange, orders = venues[0]
    why = (f"its order journal holds {orders} order{'s' if orders != 1 else ''} on {exchange}"
           if orders else f"it was opened on your {exchange} account")
    others = [v for v, _n in venues[1:]]
    if others:
        why += f" (and has traded on {', '.join(others)})"
    return why


def _rows(conn: sqlite3.Connection, sql: str) -> list[Any]:
    """The query's rows; none when the table does not exist (a database from before it)."""
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
