"""A real tool registry (the offline world's tools plus the orchestration tools) and the bundled
templates, shared by the prompt tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.agents.template_files import load_templates
from app.agents.templates import AgentTemplate
from app.domain.agents import Channel
from app.events import EventBus
from app.orchestration.ids import SeededIds
from app.orchestration.notify import BusNotifier, NotificationService
from app.orchestration.questions import QuestionStore
from app.orchestration.queue import TaskQueue
from app.orchestration.scheduler import JobScheduler
from app.tools.orchestration_tools import OrchestrationTools
from app.tools.registry import ToolRegistry
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.unit.orchestration.fakes import FakeDirectory


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolRegistry]:
    folder: Path = tmp_path_factory.mktemp("workspace")
    world = tool_world(Workspace(folder))
    db, bus, ids = folder / "orchestration.db", EventBus(), SeededIds("prompt-tests")
    queue = TaskQueue(db, world.venue.clock, ids, bus)
    scheduler = JobScheduler(db, world.venue.clock, queue, ids)
    questions = QuestionStore(db, world.venue.clock, ids, bus)
    notifications = NotificationService(
        db, world.venue.clock, ids, {Channel.UI_ALERT: BusNotifier(Channel.UI_ALERT, bus)}
    )
    directory = FakeDirectory(world.venue.clock, ids)
    for spec in OrchestrationTools(directory, queue, scheduler, notifications, questions).specs():
        world.registry.register(spec)
    yield world.registry
    for store in (queue, scheduler, questions, notifications):
        store.close()
    world.close()


@pytest.fixture(scope="module")
def templates() -> dict[str, AgentTemplate]:
    return load_templates()
