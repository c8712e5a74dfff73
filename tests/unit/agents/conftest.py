"""A real tool registry (the offline runtime's tools plus the orchestration tools) and the bundled
templates, shared by the prompt tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.agents.templates import AgentTemplate, load_templates
from app.domain.agents import Channel
from app.events import EventBus
from app.orchestration.ids import SeededIds
from app.orchestration.notify import BusNotifier, NotificationService
from app.orchestration.questions import QuestionStore
from app.orchestration.queue import TaskQueue
from app.orchestration.scheduler import JobScheduler
from app.runtime import build_offline_runtime
from app.tools.orchestration_tools import build_orchestration_tools
from app.tools.registry import ToolRegistry
from app.workspace import Workspace
from tests.unit.orchestration.fakes import FakeDirectory


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolRegistry]:
    folder: Path = tmp_path_factory.mktemp("workspace")
    runtime = build_offline_runtime(Workspace(folder))
    db, bus, ids = folder / "orchestration.db", EventBus(), SeededIds("prompt-tests")
    queue = TaskQueue(db, runtime.clock, ids, bus)
    scheduler = JobScheduler(db, runtime.clock, queue, ids)
    questions = QuestionStore(db, runtime.clock, ids, bus)
    notifications = NotificationService(
        db, runtime.clock, ids, {Channel.UI_ALERT: BusNotifier(Channel.UI_ALERT, bus)}
    )
    directory = FakeDirectory(runtime.clock, ids)
    for spec in build_orchestration_tools(
        directory, queue, scheduler, notifications, questions, runtime.clock
    ):
        runtime.registry.register(spec)
    yield runtime.registry
    for store in (queue, scheduler, questions, notifications):
        store.close()
    runtime.close()


@pytest.fixture(scope="module")
def templates() -> dict[str, AgentTemplate]:
    return load_templates()
