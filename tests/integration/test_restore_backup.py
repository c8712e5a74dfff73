"""``kestrel restore-backup`` puts back only a backup of this workspace, and only once the person
has seen what it holds and said yes.

The live database itself, another workspace's backup (even one copied into this workspace's
backups folder), a SQLite file of another program and a file that is not SQLite are each refused
with the reason and exit 2, the workspace left byte for byte as it was: each of them once said
"Restored" and the workspace opened on a fresh 10,000 USD account while its ledger sat aside.
Before a restore the command shows the backup's time, orders, balances and equity beside the
database it replaces, and asks; the answers here come from a scripted terminal, in this process.
"""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from app.domain.clock import ms_to_iso
from app.store.backups import list_backups, take_backup
from app.workspace import Workspace
from tests.helpers.cli import run_main
from tests.helpers.files import tree

EXIT_REFUSED = 2
EXIT_DECLINED = 1


def order(quote: int) -> str:
    return (f"<create_order><symbol>BTC/USD</symbol><side>BUY</side><quote_amount>{quote}"
            "</quote_amount></create_order>")


def tool(root: Path, at: str, call: str) -> None:
    assert run_main(["tool", "--workspace", str(root), "--at", at, call]) == 0


def used_workspace(root: Path) -> tuple[Workspace, Path]:
    """A workspace with a backup holding one filled order, and a second order placed since."""
    tool(root, "2019-10-10T00:00:00Z", order(500))
    tool(root, "2019-10-10T02:00:00Z", "<get_open_positions/>")  # the order fills
    ws = Workspace.at(root)
    backup = take_backup(ws.db_path, ws.backup_dir).path
    tool(root, "2019-10-10T03:00:00Z", order(100))
    return ws, backup


def orders_in(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0])
    finally:
        conn.close()


def untouched(ws: Workspace) -> dict[str, object]:
    """The workspace as a refusal must leave it (the lock file names its last holder)."""
    return tree(ws.root, skip=frozenset({"kestrel.lock"}))


class Terminal(io.StringIO):
    """A person at a terminal, typing the lines given."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Workspace, Path]:
    return used_workspace(tmp_path / "ws")


def test_the_live_database_itself_is_refused(
    workspace: tuple[Workspace, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ws, _backup = workspace
    before = untouched(ws)

    code = run_main(["restore-backup", "--workspace", str(ws.root), "--backup", str(ws.db_path),
                     "--yes"])

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert "it is the workspace's live database itself, not a backup of it" in err
    assert untouched(ws) == before
    assert orders_in(ws.db_path) == 2


def test_a_backup_of_another_workspace_is_refused_even_in_this_ones_backups_folder(
    tmp_path: Path, workspace: tuple[Workspace, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ws, _backup = workspace
    other = Workspace.at(tmp_path / "other")
    tool(other.root, "2019-10-10T00:00:00Z", order(50))
    foreign = take_backup(other.db_path, other.backup_dir)
    before = untouched(ws)

    code = run_main(["restore-backup", "--workspace", str(ws.root), "--backup",
                     str(foreign.path), "--yes"])

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert "it is a backup of another workspace" in err
    assert other.identity() in err and ws.identity() in err
    assert untouched(ws) == before

    # copied in among this workspace's backups, as the newest: still another workspace's
    copied = ws.backup_dir / "kestrel-29991231T000000.000Z.db"
    copied.write_bytes(foreign.path.read_bytes())
    assert list_backups(ws.backup_dir)[0].path == copied
    before = untouched(ws)
    code = run_main(["restore-backup", "--workspace", str(ws.root), "--yes"])
    assert code == EXIT_REFUSED
    assert "it is a backup of another workspace" in capsys.readouterr().err
    assert untouched(ws) == before


def _notes_database(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('buy milk')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_notes_database, "it is a SQLite file but not a Kestrel database (it has no meta, "
                          "orders, fills, balances tables of a Kestrel ledger)"),
        (lambda path: path.write_text("name,price\nBTC,8000\n"),
         "it is not a SQLite database, so not a Kestrel backup"),
        (lambda path: path.write_bytes(b""), "it is empty (0 bytes)"),
    ],
    ids=["sqlite-of-another-program", "not-sqlite", "empty"],
)
def test_a_file_that_is_not_a_kestrel_database_is_refused(
    tmp_path: Path, workspace: tuple[Workspace, Path], make, said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ws, _backup = workspace
    path = tmp_path / "notes.db"
    make(path)
    before = untouched(ws)

    code = run_main(["restore-backup", "--workspace", str(ws.root), "--backup", str(path),
                     "--yes"])

    err = capsys.readouterr().err
    assert code == EXIT_REFUSED, err
    assert f"cannot restore {path}: {said}; nothing was changed" in err
    assert untouched(ws) == before


def test_the_restore_shows_what_the_backup_holds_and_restores_once_the_person_says_yes(
    workspace: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ws, backup = workspace
    taken = list_backups(ws.backup_dir)[0]
    assert taken.path == backup
    monkeypatch.setattr("sys.stdin", Terminal("yes\n"))

    code = run_main(["restore-backup", "--workspace", str(ws.root)])

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"Restore {ws.db_path} from {backup}" in out
    assert f"the backup, taken {ms_to_iso(taken.taken_ms)}: 1 order, 1 fill; balances: " \
           "BTC 0.058137, USD 9,500.00367753; equity 9,997.7732529 USD at " \
           "2019-10-10T02:00:00Z" in out
    assert "replaces the database now in place: 2 orders, 1 fill;" in out
    assert "Type yes to restore it: " in out
    assert out.index("the backup, taken") < out.index("Type yes") < out.index("Restored")
    assert orders_in(ws.db_path) == 1, "the backup's account is back"
    aside = next(ws.root.glob("kestrel.db.damaged-*"))
    assert orders_in(aside) == 2, "the replaced one is kept aside"


def test_nothing_is_restored_when_the_person_says_no(
    workspace: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ws, _backup = workspace
    before = untouched(ws)
    monkeypatch.setattr("sys.stdin", Terminal("no\n"))

    code = run_main(["restore-backup", "--workspace", str(ws.root)])

    out = capsys.readouterr().out
    assert code == EXIT_DECLINED
    assert "the backup, taken" in out and "Not restored: nothing was changed." in out
    assert untouched(ws) == before


def test_without_a_terminal_to_ask_at_nothing_is_restored_unless_yes_is_given(
    workspace: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ws, _backup = workspace
    before = untouched(ws)
    monkeypatch.setattr("sys.stdin", io.StringIO("yes\n"))  # a pipe, not a person

    code = run_main(["restore-backup", "--workspace", str(ws.root)])

    assert code == EXIT_REFUSED
    assert "confirm at a terminal, or add --yes" in capsys.readouterr().err
    assert untouched(ws) == before
    assert run_main(["restore-backup", "--workspace", str(ws.root), "--yes"]) == 0
    assert orders_in(ws.db_path) == 1


def test_a_backup_from_before_workspace_ids_is_taken_only_from_this_workspaces_folder(
    tmp_path: Path, workspace: tuple[Workspace, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ws, backup = workspace
    conn = sqlite3.connect(backup)  # as a Kestrel before ids made it
    conn.execute("DELETE FROM meta WHERE key = 'workspace_id'")
    conn.commit()
    conn.close()
    elsewhere = tmp_path / "kestrel-old.db"
    elsewhere.write_bytes(backup.read_bytes())
    before = untouched(ws)

    code = run_main(["restore-backup", "--workspace", str(ws.root), "--backup", str(elsewhere),
                     "--yes"])
    assert code == EXIT_REFUSED
    err = capsys.readouterr().err
    assert "it records no workspace id" in err and "not in this workspace's backups folder" in err
    assert untouched(ws) == before

    assert run_main(["restore-backup", "--workspace", str(ws.root), "--backup", str(backup),
                     "--yes"]) == 0
    assert "taken because it is in this workspace's backups folder" in capsys.readouterr().out
    assert orders_in(ws.db_path) == 1
