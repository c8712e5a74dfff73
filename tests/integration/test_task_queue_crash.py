"""A process killed (SIGKILL) while working on a task: at the next start the task is redelivered,
and the dispatch it had already made is not made a second time.

The worker is a real subprocess over the same SQLite file; it takes the Orchestrator's task,
dispatches a signal to the Trader through the real tool and executor, and is killed before it
acknowledges the task.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from app.domain.agents import TaskStatus
from app.domain.clock import ReplayClock
from app.orchestration.ids import SeededIds
from app.orchestration.notify import NotificationService
from app.orchestration.questions import QuestionStore
from app.orchestration.queue import TaskQueue
from app.orchestration.scheduler import JobScheduler
from app.tools.executor import MemoryRecorder, ToolExecutor
from app.tools.orchestration_tools import OrchestrationTools
from app.tools.registry import ToolRegistry
from app.tools.spec import AgentContext
from tests.unit.orchestration.fakes import FakeDirectory

REPO = Path(__file__).resolve().parents[2]
START = 1_704_164_400_000  # 2024-01-02T03:00:00Z

SETUP = textwrap.dedent(
    """
    import asyncio
    from app.domain.clock import ReplayClock
    from app.orchestration.ids import SeededIds
    from app.orchestration.notify import NotificationService
    from app.orchestration.questions import QuestionStore
    from app.orchestration.queue import TaskQueue
    from app.orchestration.scheduler import JobScheduler
    from app.tools.executor import MemoryRecorder, ToolExecutor
    from app.tools.orchestration_tools import OrchestrationTools
    from app.tools.registry import ToolRegistry
    from tests.unit.orchestration.fakes import FakeDirectory

    def world(db, seed):
        clock = ReplayClock(1704164400000)
        ids = SeededIds(seed)
        directory = FakeDirectory(clock, SeededIds("agents"))
        soa = directory.add("Orchestrator", "SystemOrchestrator_v1")
        trader = directory.add("Trader", "TraderAgent_Default_v1")
        queue = TaskQueue(db, clock, ids)
        specs = OrchestrationTools(
            directory, queue, JobScheduler(db, clock, queue, ids),
            NotificationService(db, clock, ids, {}), QuestionStore(db, clock, ids),
        ).specs()
        return queue, ToolExecutor(ToolRegistry(specs), MemoryRecorder(), clock), soa, trader
    """
)

WORKER = SETUP + textwrap.dedent(
    """
    import sys, time
    from app.tools.spec import AgentContext

    queue, executor, soa, trader = world(sys.argv[1], "worker")
    task = queue.take(soa.agent_id)
    print("TAKEN", task.task_id, flush=True)
    ctx = AgentContext(agent_id=soa.agent_id, task_id=task.task_id, call_key=task.task_id + ":1")
    xml = sys.argv[2].replace("TRADER", trader.agent_id)
    result = asyncio.run(executor.execute_text(ctx, xml))
    print("DISPATCHED", result.data[0].attr("dispatched_task_id"), flush=True)
    time.sleep(60)  # killed here: the task is never acknowledged
    """
)

LOOP_WORKER = textwrap.dedent(
    """
    import sys
    from app.domain.clock import ReplayClock
    from app.orchestration.ids import SeededIds
    from app.orchestration.queue import TaskQueue

    queue = TaskQueue(sys.argv[1], ReplayClock(0), SeededIds("loop"), durable=False)
    print("READY", flush=True)
    for i in range(1_000_000):
        queue.enqueue("a1", "X", {"i": i}, "user", dedupe_key=f"k{i}")
        task = queue.take("a1")
        if i % 3:
            queue.complete(task.task_id, "ok")
    """
)

DISPATCH = (
    "<dispatch_task_to_agent><target_agent_id>TRADER</target_agent_id>"
    "<task_type>NEW_MARKET_ANALYSIS_SIGNAL</task_type>"
    '<task_payload_json>{"symbol": "BTC/USDT", "signal": "BUY"}</task_payload_json>'
    "</dispatch_task_to_agent>"
)


def test_a_killed_task_is_redelivered_and_its_dispatch_is_not_repeated(tmp_path: Path) -> None:
    db = tmp_path / "kestrel.db"
    clock = ReplayClock(START)
    directory = FakeDirectory(clock, SeededIds("agents"))  # the same ids as the worker's
    soa = directory.add("Orchestrator", "SystemOrchestrator_v1")
    trader = directory.add("Trader", "TraderAgent_Default_v1")
    before = TaskQueue(db, clock, SeededIds("parent"))
    original = before.enqueue(soa.agent_id, "USER_MESSAGE", {"text": "buy BTC"}, "user")
    before.close()

    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(db), DISPATCH], cwd=REPO, stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["TAKEN", original.task_id]
        dispatched_line = proc.stdout.readline().split()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert dispatched_line[0] == "DISPATCHED"
    first_dispatch = dispatched_line[1]

    # the next start of the app
    queue = TaskQueue(db, clock, SeededIds("restart"))
    crashed = queue.get(original.task_id)
    assert crashed is not None and (crashed.status, crashed.attempts) == (TaskStatus.TAKEN, 1)
    (recovered,) = queue.recover()
    assert (recovered.task_id, recovered.status) == (original.task_id, TaskStatus.QUEUED)
    again = queue.take(soa.agent_id)
    assert again is not None and again.task_id == original.task_id and again.attempts == 2

    # the redelivered task runs the same step again: the same call key, no second signal
    ids = SeededIds("restart-services")
    specs = OrchestrationTools(
        directory, queue, JobScheduler(db, clock, queue, ids),
        NotificationService(db, clock, ids, {}), QuestionStore(db, clock, ids),
    ).specs()
    executor = ToolExecutor(ToolRegistry(specs), MemoryRecorder(), clock)
    ctx = AgentContext(agent_id=soa.agent_id, task_id=again.task_id,
                       call_key=f"{again.task_id}:1")
    result = asyncio.run(
        executor.execute_text(ctx, DISPATCH.replace("TRADER", trader.agent_id))
    )
    assert result is not None and result.status == "success", result and result.xml
    assert result.data[0].attr("dispatched_task_id") == first_dispatch
    inbox = queue.tasks(trader.agent_id)
    assert [t.task_id for t in inbox] == [first_dispatch]
    assert inbox[0].status is TaskStatus.QUEUED

    queue.complete(again.task_id, "signal sent")
    assert queue.busy(soa.agent_id) == 0


def test_a_kill_at_any_moment_loses_no_task_and_leaves_none_half_taken(tmp_path: Path) -> None:
    db = tmp_path / "kestrel.db"
    TaskQueue(db, ReplayClock(0), SeededIds("init")).close()
    proc = subprocess.Popen(
        [sys.executable, "-c", LOOP_WORKER, str(db)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        time.sleep(random.uniform(0.2, 0.6))  # noqa: S311 - a kill time, not a secret
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()

    queue = TaskQueue(db, ReplayClock(0), SeededIds("after"))
    made = queue.tasks(limit=10**7, newest_first=False)
    assert made, "the worker made no task before it was killed"
    assert [t.payload["i"] for t in made] == list(range(len(made)))  # no gap, no duplicate
    queue.recover()
    statuses = {t.status for t in queue.tasks(limit=10**7)}
    assert TaskStatus.TAKEN not in statuses
    last = len(made)
    # repeating every enqueue after the crash adds nothing already there
    for i in range(last + 3):
        queue.enqueue("a1", "X", {"i": i}, "user", dedupe_key=f"k{i}")
    assert len(queue.tasks(limit=10**7)) == last + 3
