"""The memory bank's own behaviour: events, catching up with hand edits, async and sync faces."""

import asyncio
import os
import time
from pathlib import Path

import pytest

from app.domain.clock import ReplayClock
from app.domain.errors import InvalidParameterError
from app.events import EventBus, MemoryFileChanged
from app.memory import fsops
from app.memory.bank import MemoryBank
from tests.helpers.eventually import eventually

AGENT = "trader-1"


def kinds(events: list[MemoryFileChanged]) -> list[tuple[str, str, str]]:
    return [(e.agent_id, e.path, e.kind) for e in events]


def test_every_change_through_the_async_api_is_published(
    bank: MemoryBank, events: list[MemoryFileChanged]
) -> None:
    async def scenario() -> None:
        await bank.awrite_file(AGENT, "a.md", b"x")
        await bank.awrite_file(AGENT, "a.md", b"y")
        await bank.aappend_file(AGENT, "log.md", b"1")
        await bank.aappend_file(AGENT, "log.md", b"2")
        await bank.alog_journal_entry(AGENT, "entry")
        await bank.awrite_note(AGENT, "k", "note")
        await bank.aread_file(AGENT, "a.md")
        await bank.arecall(AGENT, "note")
        await bank.alist_files(AGENT)

    asyncio.run(scenario())
    assert kinds(events) == [
        (AGENT, "a.md", "created"),
        (AGENT, "a.md", "written"),
        (AGENT, "log.md", "created"),
        (AGENT, "log.md", "appended"),
        (AGENT, "journal/2024-02-20.md", "created"),
        (AGENT, "notes/k.md", "created"),
    ]


def test_sync_calls_from_a_worker_thread_are_handed_to_the_loop(
    bank: MemoryBank, events: list[MemoryFileChanged]
) -> None:
    async def scenario() -> None:
        await bank.alist_files(AGENT)  # the bank learns its loop
        await asyncio.to_thread(bank.write_file, AGENT, "from-thread.md", b"x")
        await eventually(lambda: events)

    asyncio.run(scenario())
    assert kinds(events) == [(AGENT, "from-thread.md", "created")]


def test_rescan_catches_up_with_files_created_edited_and_deleted_by_hand(
    bank: MemoryBank, events: list[MemoryFileChanged]
) -> None:
    bank.write_note(AGENT, "keep", "unchanged")
    bank.write_note(AGENT, "edit", "before")
    bank.write_note(AGENT, "gone", "soon deleted")
    folder = bank.agent_folder(AGENT)
    events.clear()
    (folder / "notes" / "edit.md").write_text("after the person edited theta")
    (folder / "notes" / "gone.md").unlink()
    (folder / "hand.md").write_text("written by a person iota")
    changes = asyncio.run(bank.arescan(AGENT, unknown_ms=0))
    assert sorted(kinds(changes)) == [
        (AGENT, "hand.md", "created"),
        (AGENT, "notes/edit.md", "written"),
        (AGENT, "notes/gone.md", "deleted"),
    ]
    assert sorted(kinds(events)) == sorted(kinds(changes))
    assert bank.recall(AGENT, "theta")[0].path == "notes/edit.md"
    assert bank.recall(AGENT, "iota")[0].path == "hand.md"
    assert bank.recall(AGENT, "soon") == []
    assert bank.rescan(AGENT) == []  # nothing changed since: nothing re-read


def test_a_new_bank_catches_up_on_first_use_of_an_agent(root: Path, bus: EventBus) -> None:
    folder = root / AGENT / "notes"
    folder.mkdir(parents=True)
    (folder / "seed.md").write_text("seeded lambda note")
    past = 1_600_000_000  # a file modified in 2020 is visible to a 2024 backtest
    os.utime(folder / "seed.md", (past, past))
    bank = MemoryBank(root, ReplayClock(1_708_437_600_000), bus)
    assert bank.recall(AGENT, "lambda")[0].path == "notes/seed.md"
    bank.close()


def test_hand_edits_of_unknown_age_are_stamped_with_their_mtime_so_they_never_leak(
    root: Path, bus: EventBus
) -> None:
    folder = root / AGENT
    folder.mkdir(parents=True)
    (folder / "fresh.md").write_text("edited just now mu")
    backtest = MemoryBank(root, ReplayClock(1_708_437_600_000), bus)
    assert backtest.recall(AGENT, "mu") == []
    live = MemoryBank(root, ReplayClock(time.time_ns() // 1_000_000 + 1000), bus)
    assert live.recall(AGENT, "mu")[0].path == "fresh.md"
    backtest.close()
    live.close()


def test_appending_after_a_hand_edit_reindexes_the_whole_file(bank: MemoryBank) -> None:
    bank.append_file(AGENT, "log.md", b"one nu")
    path = bank.agent_folder(AGENT) / "log.md"
    path.write_text("replaced by hand xi\n")
    bank.append_file(AGENT, "log.md", b"two")
    assert bank.recall(AGENT, "nu") == []
    assert bank.recall(AGENT, "two")[0].line == 2


def test_journal_content_cannot_forge_an_entry_header(bank: MemoryBank) -> None:
    bank.log_journal_entry(AGENT, "real\n## 2030-01-01T00:00:00Z\nforged future entry")
    text = bank.read_file(AGENT, "journal/2024-02-20.md").data.decode()
    assert "\\## 2030-01-01T00:00:00Z" in text
    assert bank.recall(AGENT, "forged")[0].line == 6


@pytest.mark.parametrize("content", ["", "   \n", "bell \x07 character"])
def test_empty_or_binary_journal_content_is_refused(bank: MemoryBank, content: str) -> None:
    with pytest.raises(InvalidParameterError):
        bank.log_journal_entry(AGENT, content)


def test_update_file_is_a_locked_read_modify_write(bank: MemoryBank) -> None:
    def add_line(current: bytes | None) -> bytes:
        return (current or b"") + b"x\n"

    async def scenario() -> None:
        await asyncio.gather(
            *(bank.aupdate_file(AGENT, "counter.txt", add_line) for _ in range(20))
        )

    asyncio.run(scenario())
    assert bank.read_file(AGENT, "counter.txt").data == b"x\n" * 20


def test_stale_temp_files_from_a_crash_are_hidden_and_cleaned(bank: MemoryBank) -> None:
    folder = bank.agent_folder(AGENT)
    folder.mkdir(parents=True)
    stale = folder / f"{fsops.TEMP_PREFIX}deadbeef"
    stale.write_text("half")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = folder / f"{fsops.TEMP_PREFIX}cafe"
    fresh.write_text("in progress elsewhere")
    assert bank.list_files(AGENT) == []
    assert not stale.exists() and fresh.exists()


def test_listing_skips_names_the_tools_could_not_open(bank: MemoryBank) -> None:
    folder = bank.agent_folder(AGENT)
    folder.mkdir(parents=True)
    (folder / "CON.md").write_text("x")
    (folder / "ok.md").write_text("x")
    assert [f.path for f in bank.list_files(AGENT)] == ["ok.md"]


def test_rescan_all_catches_up_every_agent_folder_at_start(root: Path, bus: EventBus) -> None:
    for agent in ("analyst-1", "trader-1"):
        (root / agent).mkdir(parents=True)
        (root / agent / "seed.md").write_text(f"seed of {agent}")
    (root / "not an agent").mkdir()
    bank = MemoryBank(root, ReplayClock(1_708_437_600_000), bus)
    changes = bank.rescan_all(unknown_ms=0)
    assert kinds(changes) == [
        ("analyst-1", "seed.md", "created"),
        ("trader-1", "seed.md", "created"),
    ]
    assert bank.recall("analyst-1", "seed")[0].snippet == "seed of analyst-1"
    bank.close()
