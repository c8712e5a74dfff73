"""Shared set-up: a workspace database file, a market clock and seeded ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.domain.clock import ReplayClock, parse_time
from app.events import EventBus
from app.orchestration.ids import SeededIds

START = parse_time("2024-01-02T03:00:00Z")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "kestrel.db"


@pytest.fixture
def clock() -> ReplayClock:
    return ReplayClock(START)


@pytest.fixture
def ids() -> SeededIds:
    return SeededIds("test")


@pytest.fixture
def bus() -> EventBus:
    return EventBus()
