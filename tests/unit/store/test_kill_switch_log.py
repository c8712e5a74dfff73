"""The kill switch's record in a real SQLite file: a trip and a reset survive reopening, each trip
is kept in order with its reset, and every commit is forced to disk."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.domain.kill_switch import TripCause
from app.store.kill_switch_log import KillSwitchLog, NotTrippedError
from app.store.ledger import Ledger

WALL = 1_800_000_000_000
MARKET = 1_570_000_000_000


def _trip(log: KillSwitchLog, reason: str = "manual stop", key: str = "", at: int = WALL):
    return log.trip(cause=TripCause.MANUAL if not key else TripCause.DRAWDOWN, cause_key=key,
                    reason=reason, by="the person", tripped_ms=at, market_ms=MARKET)


def test_a_trip_survives_closing_and_reopening_the_database(tmp_path: Path) -> None:
    db = tmp_path / "kestrel.db"
    log = KillSwitchLog(db)
    trip, new = _trip(log)
    assert new and log.active() == trip
    log.close()

    again = KillSwitchLog(db)
    assert again.active() == trip
    assert again.active().reason == "manual stop" and again.active().actions is None
    again.record_actions(trip.trip_id, "Cancelled 2 open orders, paused 3 agents.")
    again.close()
    assert KillSwitchLog(db).active().actions == "Cancelled 2 open orders, paused 3 agents."


def test_a_reset_survives_reopening_and_the_history_keeps_every_trip(tmp_path: Path) -> None:
    db = tmp_path / "kestrel.db"
    log = KillSwitchLog(db)
    first, _ = _trip(log, "first", at=WALL)
    reset = log.reset(by="the person in the window", reset_ms=WALL + 60_000, market_ms=MARKET)
    assert reset.reset_by == "the person in the window" and not reset.active
    second, _ = _trip(log, "second", key="drawdown:10000", at=WALL + 120_000)
    log.close()

    again = KillSwitchLog(db)
    assert again.active() == second
    history = again.history()
    assert [t.reason for t in history] == ["second", "first"]
    assert history[1].reset_ms == WALL + 60_000
    assert history[1].reset_by == "the person in the window"
    assert history[0].cause is TripCause.DRAWDOWN and history[0].active
    assert again.answered_keys() == {"drawdown:10000"}
    again.reset(by="me", reset_ms=WALL + 180_000, market_ms=MARKET)
    again.close()
    assert KillSwitchLog(db).active() is None


def test_tripping_a_tripped_switch_writes_nothing_and_returns_the_trip_in_force(
    tmp_path: Path,
) -> None:
    log = KillSwitchLog(tmp_path / "kestrel.db")
    first, _ = _trip(log, "first")
    again, new = _trip(log, "second", at=WALL + 1)
    assert not new and again == first
    assert [t.reason for t in log.history()] == ["first"]


def test_resetting_an_armed_switch_is_refused_with_a_reason(tmp_path: Path) -> None:
    log = KillSwitchLog(tmp_path / "kestrel.db")
    with pytest.raises(NotTrippedError, match="not tripped"):
        log.reset(by="me", reset_ms=WALL, market_ms=MARKET)


def test_its_commits_are_forced_to_disk_even_beside_a_paper_ledger(tmp_path: Path) -> None:
    db = tmp_path / "kestrel.db"
    ledger = Ledger(db, durable=False)  # a paper account's connection: synchronous=NORMAL
    log = KillSwitchLog(db)
    full, normal = 2, 1
    assert log._db.conn.execute("PRAGMA synchronous").fetchone()[0] == full
    assert ledger.connection.execute("PRAGMA synchronous").fetchone()[0] == normal
    _trip(log)
    # another connection (another process, after a crash) reads the committed trip
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT reason FROM kill_switch_trips WHERE reset_ms IS NULL"
                        ).fetchone() == ("manual stop",)
    conn.close()
    log.close()
    ledger.close()
