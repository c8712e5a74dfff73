"""A backtest's workspace commits once per bar; every other world commits each write at once.

Its memory is scratch too: recall indexes commit once per bar and files are rewritten in place.

A backtest writes ~80 rows a bar (conversations, tasks, usage, the audit trail); a transaction
for each cost more than the rows. With grouped commits its stores share one connection and a bar
commits as one transaction, each store's own unit of work a savepoint inside it (still all or
nothing). A paper or live world never groups: what its calls wrote is committed before they
return.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from app.agents.conversation_store import ConversationStore
from app.domain.clock import ReplayClock
from app.domain.errors import AccessDeniedError
from app.domain.trading import Mode
from app.memory.bank import MemoryBank, MemoryLimits
from app.memory.index import FLUSH_EVERY, RecallIndex
from app.orchestration.ids import SeededIds
from app.orchestration.queue import TaskQueue
from app.runtime.venue import VenueSpec
from app.runtime.world import WorldOptions, build_world
from app.store.db import GroupedDb
from app.store.texts import install
from app.workspace import Workspace
from tests.helpers.paths import BTC_USD_1H


def _count(db: Path, table: str) -> int:
    with install(sqlite3.connect(db)) as reader:
        return int(reader.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # noqa: S608


def test_grouped_stores_commit_together_at_each_commit_and_not_before(tmp_path: Path) -> None:
    path = tmp_path / "kestrel.db"
    grouped = GroupedDb(path)
    clock = ReplayClock(1_000)
    conversations = ConversationStore(grouped, clock, durable=False)
    queue = TaskQueue(grouped, clock, SeededIds("t"), durable=False)
    try:
        grouped.commit()
        conversations.add("a1", "t1", 0, "user", "task", "hello")
        queue.enqueue("a1", "RUN_ANALYSIS", {}, "job:1")
        assert (_count(path, "messages"), _count(path, "tasks")) == (0, 0)  # not yet committed
        grouped.commit()
        assert (_count(path, "messages"), _count(path, "tasks")) == (1, 1)
        conversations.add("a1", "t1", 1, "assistant", "final", "done")
    finally:
        conversations.close()  # a store's close leaves the shared connection to the others
        queue.close()
        grouped.finish()  # commits what is open
    assert _count(path, "messages") == 2


def test_a_failed_unit_inside_a_group_undoes_only_itself(tmp_path: Path) -> None:
    path = tmp_path / "kestrel.db"
    grouped = GroupedDb(path)
    conversations = ConversationStore(grouped, ReplayClock(1_000), durable=False)
    try:
        grouped.commit()
        conversations.add("a1", "t1", 0, "user", "task", "kept")
        with pytest.raises(RuntimeError), grouped.transaction() as conn:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('undone', 'yes')"
            )
            raise RuntimeError("the unit fails after its first write")
        grouped.commit()
    finally:
        grouped.finish()
    assert _count(path, "messages") == 1
    with install(sqlite3.connect(path)) as reader:
        assert reader.execute("SELECT COUNT(*) FROM meta WHERE key='undone'").fetchone()[0] == 0


@pytest.mark.parametrize("mode", [Mode.PAPER, Mode.LIVE])
def test_only_a_backtest_may_group_its_commits(tmp_path: Path, mode: Mode) -> None:
    workspace = Workspace.at(tmp_path / "ws").ensure()
    with pytest.raises(ValueError, match="only a backtest"):
        build_world(workspace, VenueSpec.replay([BTC_USD_1H], 0),
                    WorldOptions(mode=mode, grouped_commits=True))


def test_a_paper_worlds_writes_are_committed_when_the_call_returns(tmp_path: Path) -> None:
    workspace = Workspace.at(tmp_path / "ws").ensure()
    world = build_world(workspace, VenueSpec.replay([BTC_USD_1H], 0),
                        WorldOptions(mode=Mode.PAPER))

    async def write() -> None:
        assert world.agents is not None
        world.agents.conversations.add("a1", "t1", 0, "user", "task", "hello")
        assert _count(workspace.db_path, "messages") == 1
        await world.aclose()

    asyncio.run(write())
    assert world.grouped is None


def test_a_backtest_world_commits_a_bar_at_world_commit(tmp_path: Path) -> None:
    workspace = Workspace.at(tmp_path / "ws").ensure()
    world = build_world(workspace, VenueSpec.replay([BTC_USD_1H], 0),
                        WorldOptions(mode=Mode.BACKTEST, grouped_commits=True))

    async def bar() -> None:
        assert world.agents is not None
        world.commit()
        world.agents.conversations.add("a1", "t1", 0, "user", "task", "hello")
        assert _count(workspace.db_path, "messages") == 0
        world.commit()
        assert _count(workspace.db_path, "messages") == 1
        world.agents.conversations.add("a1", "t1", 1, "assistant", "final", "done")
        await world.aclose()  # commits the last bar's writes

    asyncio.run(bar())
    assert _count(workspace.db_path, "messages") == 2


def test_a_grouped_memory_writes_its_recall_index_before_a_search_and_commits_it_at_commit(
    tmp_path: Path,
) -> None:
    root = tmp_path / "memory"
    bank = MemoryBank(root, ReplayClock(1_000), limits=MemoryLimits(durable=False), scratch=True)
    agent = "agent-1"
    try:
        bank.write_file(agent, "notes.md", b"first\n")
        bank.commit()
        bank.write_file(agent, "more.md", b"second\n")
        index = root / ".index" / f"{agent}.sqlite3"
        bank.commit()
        assert _count(index, "files") == 0  # staged in memory: no search has needed them yet
        assert bank.recall(agent, "second")  # a search writes what is staged first
        assert _count(index, "files") == 0  # ... inside the bar's transaction
        bank.commit()
        assert _count(index, "files") == 2
        bank.append_file(agent, "more.md", b"third\n")
        for _bar in range(FLUSH_EVERY):
            bank.commit()
        assert _count(index, "chunks") == 3  # written within FLUSH_EVERY commits, searched or not
        bank.append_file(agent, "more.md", b"fourth\n")
    finally:
        bank.close()  # writes what is staged and commits
    assert _count(index, "chunks") == 4


def test_a_scratch_memory_rewrites_a_file_in_place_and_whole(tmp_path: Path) -> None:
    bank = MemoryBank(tmp_path / "memory", ReplayClock(1_000), scratch=True)
    agent = "agent-1"
    try:
        bank.write_file(agent, "view.yaml", b"a: long first version\n")
        path = bank.agent_folder(agent) / "view.yaml"
        inode = path.stat().st_ino
        bank.write_file(agent, "view.yaml", b"a: 2\n")
        assert path.read_bytes() == b"a: 2\n"  # nothing of the longer version is left
        assert path.stat().st_ino == inode  # no temporary file renamed over it
        assert bank.read_file(agent, "view.yaml").data == b"a: 2\n"
    finally:
        bank.close()


def test_a_scratch_memory_refuses_a_hard_link_and_leaves_it_untouched(tmp_path: Path) -> None:
    bank = MemoryBank(tmp_path / "memory", ReplayClock(1_000), scratch=True)
    agent = "agent-1"
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not the agent's\n")
    try:
        bank.write_file(agent, "keep.md", b"x\n")
        (bank.agent_folder(agent) / "linked.md").hardlink_to(outside)
        with pytest.raises(AccessDeniedError):
            bank.write_file(agent, "linked.md", b"overwritten\n")
    finally:
        bank.close()
    assert outside.read_bytes() == b"not the agent's\n"


def test_an_index_change_failing_inside_a_group_is_rebuilt_from_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bank = MemoryBank(tmp_path / "memory", ReplayClock(1_000), scratch=True)
    agent = "agent-1"
    try:
        bank.write_file(agent, "old.md", b"walrus\n")
        bank.commit()
        real_insert = RecallIndex._insert

        def failing_insert(self: RecallIndex, *args: object) -> None:
            monkeypatch.setattr(RecallIndex, "_insert", real_insert)  # fails once
            raise RuntimeError("the index fails half-way through a change")

        monkeypatch.setattr(RecallIndex, "_insert", failing_insert)
        bank.write_file(agent, "old.md", b"pelican\n")  # staged: the index writes it later
        bank.commit()
        # the search writes what is staged, which fails half-way (chunks deleted, none
        # inserted): the index is rebuilt from the files and the search answered from it
        assert [hit.path for hit in bank.recall(agent, "pelican")] == ["old.md"]
        assert bank.recall(agent, "walrus") == []
    finally:
        bank.close()



def test_a_backtest_memory_whose_index_cannot_write_at_close_closes_and_is_rebuilt_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "memory"
    bank = MemoryBank(root, ReplayClock(1_000), scratch=True)
    agent = "agent-1"
    bank.write_file(agent, "a.md", b"heron\n")
    bank.commit()
    bank.append_file(agent, "log.md", b"ibis\n")

    def full_disk(self: RecallIndex, *args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(RecallIndex, "_insert", full_disk)
    bank.close()  # the files hold every change; the index is only behind them
    monkeypatch.undo()
    # found again as files changed since the index's last commit (stamped with their times)
    reopened = MemoryBank(root, ReplayClock(int(time.time() * 1000) + 3_600_000))
    try:
        assert [hit.path for hit in reopened.recall(agent, "heron")] == ["a.md"]
        assert [hit.path for hit in reopened.recall(agent, "ibis")] == ["log.md"]
    finally:
        reopened.close()
