"""An agent backtest does not pay for what only a live desk needs, and its cost does not grow as
it runs: its memory never waits for the disk or a worker thread, its audit rows are written in
batches, and a Trader's growing trade record is not parsed again at every turn. A paper or live
workspace keeps every write durable."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from app.domain.trading import Mode
from app.memory.roles import TradesFile, load_yaml
from app.memory.store import MemoryStore
from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.helpers.paths import BTC_USDT_1H

TEMPLATES = ["AnalystAgent_Trend_v1", "TraderAgent_Default_v1"]


def test_an_agent_backtest_writes_memory_without_fsync_and_on_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    threads: set[int] = set()
    real_fsync, real_write, real_append = os.fsync, MemoryStore._write, MemoryStore._append

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    def write(self: MemoryStore, *args: object) -> object:
        threads.add(threading.get_ident())
        return real_write(self, *args)  # type: ignore[arg-type]

    def append(self: MemoryStore, *args: object) -> object:
        threads.add(threading.get_ident())
        return real_append(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(MemoryStore, "_write", write)
    monkeypatch.setattr(MemoryStore, "_append", append)
    options = AgentBacktestOptions(templates=TEMPLATES, bars=20)
    outcome = asyncio.run(run_agent_backtest([BTC_USDT_1H], options, tmp_path / "out"))
    assert outcome.result.time_ms.size == 21
    assert threads == {threading.get_ident()}, "memory work ran in a worker thread"
    assert synced == []
    log = tmp_path / "out" / "workspace" / "memory"
    assert sum(1 for _ in log.rglob("analysis_log.md")) == 1  # the memory was really written


@pytest.mark.parametrize("mode", [Mode.PAPER, Mode.LIVE])
def test_a_paper_or_live_workspace_keeps_its_memory_and_audit_durable(
    tmp_path: Path, mode: Mode
) -> None:
    world = tool_world(Workspace.at(tmp_path / "ws"), [BTC_USDT_1H], mode=mode)
    try:
        assert world.memory.limits.durable and not world.memory.inline
        assert world.ledger._audit_batch == 1  # noqa: SLF001 - each tool call commits at once
    finally:
        world.close()


def test_a_growing_trade_record_is_parsed_once_per_content() -> None:
    text = "symbol: BTC/USDT\ntrades: []\n"
    assert load_yaml(TradesFile, text) is load_yaml(TradesFile, text)
