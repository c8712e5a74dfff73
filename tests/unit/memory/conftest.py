"""Fixtures of the memory tests: a bank on a temporary root, a replay clock, recorded events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.domain.clock import ReplayClock
from app.events import EventBus, MemoryFileChanged
from app.memory.bank import MemoryBank
from tests.unit.memory.support import START, ToolRunner


@pytest.fixture
def clock() -> ReplayClock:
    return ReplayClock(START)


@pytest.fixture
def events() -> list[MemoryFileChanged]:
    return []


@pytest.fixture
def bus(events: list[MemoryFileChanged]) -> EventBus:
    bus = EventBus()
    bus.subscribe(MemoryFileChanged, events.append)
    return bus


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "memory"


@pytest.fixture
def bank(root: Path, clock: ReplayClock, bus: EventBus) -> Iterator[MemoryBank]:
    bank = MemoryBank(root, clock, bus)
    yield bank
    bank.close()


@pytest.fixture
def run_tool(bank: MemoryBank) -> ToolRunner:
    return ToolRunner(bank)
