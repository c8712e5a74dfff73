"""The on-disk sandbox: symlinks, hard links, special files and swaps are refused at use time."""

import os
import threading
from pathlib import Path

import pytest

from app.domain.errors import AccessDeniedError, InvalidParameterError, ToolError
from app.memory.bank import MemoryBank

AGENT = "trader-1"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("do not touch")
    return secret


@pytest.fixture
def folder(bank: MemoryBank) -> Path:
    path = bank.agent_folder(AGENT)
    (path / "notes").mkdir(parents=True)
    return path


def test_a_symlinked_file_is_never_read_written_or_appended(
    bank: MemoryBank, folder: Path, outside: Path
) -> None:
    (folder / "notes" / "link.md").symlink_to(outside)
    for action in (
        lambda: bank.read_file(AGENT, "notes/link.md"),
        lambda: bank.write_file(AGENT, "notes/link.md", b"overwrite"),
        lambda: bank.append_file(AGENT, "notes/link.md", b"append"),
    ):
        with pytest.raises(AccessDeniedError) as caught:
            action()
        assert caught.value.details["reason"] == "symlink"
    assert outside.read_text() == "do not touch"


def test_a_symlinked_folder_in_the_middle_of_a_path_is_refused(
    bank: MemoryBank, folder: Path, outside: Path
) -> None:
    (folder / "linked").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(AccessDeniedError):
        bank.read_file(AGENT, "linked/secret.txt")
    with pytest.raises(AccessDeniedError):
        bank.write_file(AGENT, "linked/new.md", b"x")
    with pytest.raises(AccessDeniedError):
        bank.list_files(AGENT, "linked")
    assert sorted(p.name for p in outside.parent.iterdir()) == ["secret.txt"]


def test_an_agent_folder_that_is_a_symlink_is_refused(
    bank: MemoryBank, root: Path, outside: Path
) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "mallory").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(AccessDeniedError):
        bank.read_file("mallory", "secret.txt")
    with pytest.raises(AccessDeniedError):
        bank.write_file("mallory", "x.md", b"x")


def test_a_hard_link_to_a_file_outside_is_refused(
    bank: MemoryBank, folder: Path, outside: Path
) -> None:
    os.link(outside, folder / "notes" / "hard.md")
    for action in (
        lambda: bank.read_file(AGENT, "notes/hard.md"),
        lambda: bank.append_file(AGENT, "notes/hard.md", b"x"),
        lambda: bank.write_file(AGENT, "notes/hard.md", b"x"),
    ):
        with pytest.raises(AccessDeniedError) as caught:
            action()
        assert caught.value.details["reason"] == "hard_link"
    assert outside.read_text() == "do not touch"


def test_links_and_special_files_are_neither_listed_nor_recalled(
    bank: MemoryBank, folder: Path, outside: Path
) -> None:
    (folder / "notes" / "link.md").symlink_to(outside)
    os.link(outside, folder / "notes" / "hard.md")
    os.mkfifo(folder / "notes" / "pipe.md")
    (folder / "notes" / "real.md").write_text("touch nothing here")
    changes = bank.rescan(AGENT, unknown_ms=0)  # seeded by hand: visible from any market time
    assert [(c.path, c.kind) for c in changes] == [("notes/real.md", "created")]
    assert [f.path for f in bank.list_files(AGENT)] == ["notes/real.md"]
    assert [h.path for h in bank.recall(AGENT, "touch")] == ["notes/real.md"]


def test_a_fifo_is_refused_without_blocking(bank: MemoryBank, folder: Path) -> None:
    os.mkfifo(folder / "notes" / "pipe.md")
    with pytest.raises(AccessDeniedError):
        bank.read_file(AGENT, "notes/pipe.md")


def test_a_folder_is_not_read_as_a_file_and_a_file_is_not_a_folder(
    bank: MemoryBank, folder: Path
) -> None:
    (folder / "plan.md").write_text("x")
    with pytest.raises(InvalidParameterError):
        bank.read_file(AGENT, "notes")
    with pytest.raises(InvalidParameterError):
        bank.write_file(AGENT, "plan.md/child.md", b"x")


def test_a_symlink_swapped_in_during_use_never_leaks_or_damages_outside(
    bank: MemoryBank, folder: Path, outside: Path
) -> None:
    """A thread keeps swapping ``swap`` between a real folder and a symlink to the outside while
    the bank reads and writes through it: every call either works inside or is refused."""
    real = folder / "swap_real"
    real.mkdir()
    (real / "f.md").write_text("inside")
    swap = folder / "swap"
    stop = threading.Event()

    def swapper() -> None:
        while not stop.is_set():
            for target in (real, outside.parent):
                tmp = folder / "swap.tmp"
                try:
                    tmp.symlink_to(target, target_is_directory=True)
                    os.replace(tmp, swap)
                except OSError:
                    pass

    (outside.parent / "f.md").write_text("outside")
    thread = threading.Thread(target=swapper)
    thread.start()
    outcomes = set()
    try:
        for i in range(300):
            try:
                content = bank.read_file(AGENT, "swap/f.md")
                assert content.data != b"outside"
                bank.write_file(AGENT, "swap/g.md", f"{i}".encode())
                outcomes.add("worked")
            except ToolError as exc:
                outcomes.add(exc.code.value)
    finally:
        stop.set()
        thread.join()
    assert outcomes <= {"worked", "ACCESS_DENIED"}
    assert "ACCESS_DENIED" in outcomes
    assert (outside.parent / "f.md").read_text() == "outside"
    assert not (outside.parent / "g.md").exists()


def test_the_recall_index_lives_outside_every_agent_folder(bank: MemoryBank, root: Path) -> None:
    bank.log_journal_entry(AGENT, "entry")
    assert (root / ".index" / f"{AGENT}.sqlite3").is_file()
    assert [f.path for f in bank.list_files(AGENT)] == ["journal/2024-02-20.md"]
