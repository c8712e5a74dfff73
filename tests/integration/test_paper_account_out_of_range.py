"""A workspace whose paper account stored more money than Kestrel keeps (opened before the
setting was limited): it opens with one clear refusal naming the stored value, nothing changed,
and ``kestrel reset-paper-account`` (asked, then confirmed) lets it trade again."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from tests.helpers.cli import Ran, run_cli

HUGE = "100000000000000000000"  # 10^20: every valuation of it failed


def kestrel(*args: str | Path) -> Ran:
    return run_cli(*args)


def store_huge_cash(db: Path) -> None:
    """What a workspace opened with ``initial_cash = 10^20`` stored (the setting now refuses it)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("UPDATE meta SET value=? WHERE key='initial_cash'", (HUGE,))
        conn.execute("UPDATE balances SET total=?", (HUGE,))
        conn.commit()
    finally:
        conn.close()


def digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def test_a_workspace_with_a_huge_stored_cash_is_refused_clearly_and_the_reset_recovers_it(
    tmp_path,
):
    workspace = tmp_path / "ws"
    first = kestrel("run", "--workspace", workspace, "--for", "1h", "--speed", "1000000")
    assert first.returncode == 0, first.stderr[-2000:]
    db = workspace / "kestrel.db"
    store_huge_cash(db)
    before = digest(db)

    refused = kestrel("run", "--workspace", workspace, "--for", "1h", "--speed", "1000000")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith(
        f"kestrel: this workspace's paper account holds an initial cash of {HUGE} USD and a USD "
        f"balance of {HUGE}, outside the range Kestrel keeps money in, 0 to 1000000000000 "
        "(money is kept to 8 decimal places"), line
    assert "Nothing was changed." in line
    assert line.endswith(f"kestrel reset-paper-account --workspace {workspace} --yes (the "
                         "database is backed up first)."), line
    assert digest(db) == before, "opening changed nothing"

    asked = kestrel("reset-paper-account", "--workspace", workspace)
    assert asked.returncode == 1
    assert "Starting it over gives it 10000 USD ([paper] initial_cash)" in asked.stdout
    assert "Nothing was changed. Add --yes" in asked.stderr
    assert digest(db) == before

    done = kestrel("reset-paper-account", "--workspace", workspace, "--yes")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "The paper account starts over with 10000 USD." in done.stdout
    backup = Path(done.stdout.split("Backed up to ")[1].split(". The paper")[0])
    kept = sqlite3.connect(backup)
    try:  # the old account is kept in the backup
        assert kept.execute("SELECT value FROM meta WHERE key='initial_cash'").fetchone() == (
            HUGE,)
    finally:
        kept.close()

    again = kestrel("run", "--workspace", workspace, "--for", "1h", "--speed", "1000000")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Balances: USD 10000. Equity 10000 USD" in again.stdout
    assert kestrel("reset-paper-account", "--workspace", workspace).stdout.strip() == (
        "Nothing to do: the paper account's money is within range.")
