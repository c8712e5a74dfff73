"""The durable inbox: taken once, acknowledged, redelivered after a crash, never delivered twice."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from app.domain.agents import TaskStatus
from app.domain.clock import ReplayClock
from app.domain.errors import NotFoundError
from app.events import EventBus, TaskFinished, TaskQueued
from app.orchestration.ids import SeededIds
from app.orchestration.queue import TaskQueue, TaskStateError
from tests.helpers.eventually import PATIENCE_S
from tests.unit.orchestration.conftest import START

HOUR = 3_600_000


def make(db: Path, clock: ReplayClock, seed: str = "q", bus: EventBus | None = None) -> TaskQueue:
    return TaskQueue(db, clock, SeededIds(seed), bus)


def test_a_task_is_taken_once_and_oldest_first(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    first = queue.enqueue("analyst", "RUN_ANALYSIS", {"symbol": "BTC/USDT"}, "job:j1")
    clock.advance_to(START + 1000)
    second = queue.enqueue("analyst", "RUN_ANALYSIS", {"symbol": "ETH/USDT"}, "job:j1")
    queue.enqueue("trader", "ORDER_FILLED", {}, "system")

    taken = queue.take("analyst")
    assert taken is not None and taken.task_id == first.task_id
    assert (taken.status, taken.attempts, taken.taken_ms) == (TaskStatus.TAKEN, 1, START + 1000)
    assert taken.payload == {"symbol": "BTC/USDT"}
    again = queue.take("analyst")
    assert again is not None and again.task_id == second.task_id
    assert queue.take("analyst") is None
    assert queue.get(first.task_id).status is TaskStatus.TAKEN  # type: ignore[union-attr]


def test_a_taken_task_is_committed_before_take_returns(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    task = queue.enqueue("a1", "USER_MESSAGE", {"text": "hello"}, "user")
    queue.take("a1")
    other = make(db, clock, seed="other")  # a second connection, as after a restart
    seen = other.get(task.task_id)
    assert seen is not None and seen.status is TaskStatus.TAKEN and seen.attempts == 1


def test_the_task_keeps_every_field_it_was_given(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    payload = {"text": "½ Bitcoin – 比特币 <&>", "nested": {"levels": [1, 2.5, None]}}
    task = queue.enqueue(
        "trader", "NEW_MARKET_ANALYSIS_SIGNAL", payload, "agent:analyst", reply_to="analyst",
        reply_expected=True,
    )
    stored = make(db, clock, "x").get(task.task_id)
    assert stored is not None
    assert stored.payload == payload
    assert (stored.source, stored.reply_to, stored.reply_expected) == (
        "agent:analyst", "analyst", True,
    )
    assert (stored.created_ms, stored.status, stored.attempts) == (START, TaskStatus.QUEUED, 0)


def test_a_repeated_dedupe_key_returns_the_first_task_and_adds_nothing(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    queued: list[TaskQueued] = []
    bus.subscribe(TaskQueued, queued.append)
    queue = make(db, clock, bus=bus)
    first = queue.enqueue("t1", "SIGNAL", {"n": 1}, "agent:a", dedupe_key="dispatch:k1")
    repeat = queue.enqueue("t1", "SIGNAL", {"n": 2}, "agent:a", dedupe_key="dispatch:k1")
    assert repeat.task_id == first.task_id and repeat.payload == {"n": 1}
    assert len(queue.tasks("t1")) == 1
    assert [e.task_id for e in queued] == [first.task_id]


def test_task_queued_is_announced_after_the_row_is_committed(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    reader = make(db, clock, "reader")
    seen: list[TaskStatus | None] = []

    def check(event: TaskQueued) -> None:
        task = reader.get(event.task_id)
        seen.append(None if task is None else task.status)

    bus.subscribe(TaskQueued, check)
    make(db, clock, bus=bus).enqueue("a1", "RUN_ANALYSIS", {}, "system")
    assert seen == [TaskStatus.QUEUED]


def test_completing_acknowledges_the_task_with_its_result(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    finished: list[TaskFinished] = []
    bus.subscribe(TaskFinished, finished.append)
    queue = make(db, clock, bus=bus)
    task = queue.enqueue("a1", "RUN_ANALYSIS", {}, "system")
    queue.take("a1")
    clock.advance_to(START + 5000)
    done = queue.complete(task.task_id, "BTC looks bullish")
    assert (done.status, done.result, done.done_ms) == (TaskStatus.DONE, "BTC looks bullish",
                                                        START + 5000)
    assert finished == [TaskFinished(task.task_id, "a1", "DONE", "BTC looks bullish")]
    with pytest.raises(TaskStateError, match="already DONE"):
        queue.complete(task.task_id, "again")
    with pytest.raises(TaskStateError, match="already DONE"):
        queue.fail(task.task_id, "late")


def test_a_failed_task_keeps_the_reason(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    task = queue.enqueue("a1", "RUN_ANALYSIS", {}, "system")
    queue.take("a1")
    failed = queue.fail(task.task_id, "step limit of 20 reached")
    assert make(db, clock, "r").get(task.task_id).result == "step limit of 20 reached"  # type: ignore[union-attr]
    assert failed.status is TaskStatus.FAILED


def test_an_unknown_task_is_not_found(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    assert queue.get("nope") is None
    for action in (queue.park, queue.unpark, queue.cancel):
        with pytest.raises(NotFoundError, match="no task with id 'nope'"):
            action("nope")
    with pytest.raises(NotFoundError):
        queue.complete("nope", "x")


def test_a_parked_task_waits_for_the_person_and_resumes(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    task = queue.enqueue("soa", "USER_MESSAGE", {"text": "watch BTC"}, "user")
    with pytest.raises(TaskStateError, match="only a task that is TAKEN can become WAITING"):
        queue.park(task.task_id)
    queue.take("soa")
    parked = queue.park(task.task_id)
    assert parked.status is TaskStatus.WAITING
    assert queue.busy("soa") == 0  # a waiting agent does not hold the backtest clock
    assert queue.take("soa") is None
    clock.advance_to(START + HOUR)
    resumed = queue.unpark(task.task_id)
    assert (resumed.status, resumed.attempts, resumed.taken_ms) == (
        TaskStatus.TAKEN, 1, START + HOUR,
    )
    with pytest.raises(TaskStateError, match="only a task that is WAITING can become TAKEN"):
        queue.unpark(task.task_id)


def test_recover_redelivers_taken_tasks_and_keeps_waiting_ones(
    db: Path, clock: ReplayClock
) -> None:
    queue = make(db, clock)
    running = queue.enqueue("trader", "NEW_MARKET_ANALYSIS_SIGNAL", {"side": "BUY"}, "agent:a")
    waiting = queue.enqueue("soa", "USER_MESSAGE", {"text": "hi"}, "user")
    done = queue.enqueue("trader", "ORDER_FILLED", {}, "system")
    queued = queue.enqueue("trader", "RUN_ANALYSIS", {}, "system")
    for agent in ("trader", "soa", "trader"):
        queue.take(agent)
    queue.park(waiting.task_id)
    queue.complete(done.task_id, "ok")
    queue.close()  # the app dies here

    restarted = make(db, clock, "after")
    changed = restarted.recover()
    assert [(t.task_id, t.status) for t in changed] == [(running.task_id, TaskStatus.QUEUED)]
    statuses = {t.task_id: t.status for t in restarted.tasks()}
    assert statuses == {
        running.task_id: TaskStatus.QUEUED, waiting.task_id: TaskStatus.WAITING,
        done.task_id: TaskStatus.DONE, queued.task_id: TaskStatus.QUEUED,
    }
    again = restarted.take("trader")
    assert again is not None and again.task_id == running.task_id and again.attempts == 2


def test_a_task_that_keeps_crashing_fails_after_three_starts(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    finished: list[TaskFinished] = []
    bus.subscribe(TaskFinished, finished.append)
    task = make(db, clock).enqueue("trader", "EXECUTE", {}, "user")
    for attempt in range(1, 4):
        queue = make(db, clock, f"run{attempt}", bus)
        queue.recover()
        clock.advance_to(START + attempt * HOUR)
        taken = queue.take("trader")
        assert taken is not None and taken.attempts == attempt
        queue.close()  # dies before completing
    last = make(db, clock, "final", bus)
    (failed,) = last.recover()
    assert failed.status is TaskStatus.FAILED
    assert failed.result is not None
    assert failed.result.startswith("failed 3 times; last start 2024-01-02T06:00:00Z")
    assert last.take("trader") is None
    assert finished[-1].task_id == task.task_id and finished[-1].status == "FAILED"


def test_the_attempt_limit_is_configurable(db: Path, clock: ReplayClock) -> None:
    queue = TaskQueue(db, clock, SeededIds("m"), max_attempts=1)
    queue.enqueue("a", "X", {}, "user")
    queue.take("a")
    (failed,) = TaskQueue(db, clock, SeededIds("n"), max_attempts=1).recover()
    assert failed.status is TaskStatus.FAILED and failed.result.startswith("failed 1 times")  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="at least 1"):
        TaskQueue(db, clock, SeededIds("o"), max_attempts=0)


def test_stopping_an_agent_cancels_its_queued_and_waiting_tasks(
    db: Path, clock: ReplayClock
) -> None:
    queue = make(db, clock)
    waiting = queue.enqueue("a1", "USER_MESSAGE", {"text": "?"}, "user")
    queue.take("a1")
    queue.park(waiting.task_id)
    running = queue.enqueue("a1", "RUN_ANALYSIS", {}, "system")
    queue.take("a1")
    queued = queue.enqueue("a1", "RUN_ANALYSIS", {}, "system")
    other = queue.enqueue("a2", "RUN_ANALYSIS", {}, "system")
    cancelled = queue.cancel_pending("a1")
    assert {t.task_id for t in cancelled} == {waiting.task_id, queued.task_id}
    assert all(t.status is TaskStatus.CANCELLED for t in cancelled)
    assert queue.get(running.task_id).status is TaskStatus.TAKEN  # type: ignore[union-attr]
    assert queue.get(other.task_id).status is TaskStatus.QUEUED  # type: ignore[union-attr]
    assert queue.get(queued.task_id).result == "the agent was stopped"  # type: ignore[union-attr]


def test_busy_counts_queued_and_taken_tasks(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    assert queue.busy() == 0
    a = queue.enqueue("a1", "X", {}, "user")
    queue.enqueue("a1", "X", {}, "user")
    queue.enqueue("a2", "X", {}, "user")
    queue.take("a1")
    assert (queue.busy(), queue.busy("a1"), queue.busy("a2"), queue.busy("a3")) == (3, 2, 1, 0)
    queue.complete(a.task_id, "ok")
    assert queue.busy("a1") == 1


def test_tasks_can_be_listed_by_agent_and_status(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    made = [queue.enqueue("a1" if i % 2 else "a2", "X", {"i": i}, "user") for i in range(6)]
    queue.take("a1")
    assert [t.payload["i"] for t in queue.tasks("a1")] == [5, 3, 1]
    assert [t.payload["i"] for t in queue.tasks("a1", newest_first=False)] == [1, 3, 5]
    assert [t.payload["i"] for t in queue.tasks(statuses=[TaskStatus.TAKEN])] == [1]
    assert [t.payload["i"] for t in queue.tasks(limit=2)] == [5, 4]
    assert queue.tasks(statuses=[]) == []
    assert len(queue.tasks()) == len(made)


def test_a_control_task_is_stored_as_done_with_its_outcome(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    task = queue.record_done("a2", "PAUSE_AGENT", {}, "agent:soa", "agent is now paused",
                             dedupe_key="dispatch:t:1")
    assert (task.status, task.result, task.attempts) == (TaskStatus.DONE, "agent is now paused", 1)
    assert queue.busy("a2") == 0 and queue.take("a2") is None
    same = queue.record_done("a2", "PAUSE_AGENT", {}, "agent:soa", "x", dedupe_key="dispatch:t:1")
    assert same.task_id == task.task_id and same.result == "agent is now paused"
    assert queue.get_by_dedupe_key("dispatch:t:1").task_id == task.task_id  # type: ignore[union-attr]


def test_two_takers_on_one_file_never_take_the_same_task(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    clock = ReplayClock(START)
    producer = make(db, clock, "p")
    made = {producer.enqueue("a1", "X", {"i": i}, "user").task_id for i in range(200)}
    taken: list[str] = []
    lock = threading.Lock()

    def worker(seed: str) -> None:
        queue = make(db, clock, seed)
        while (task := queue.take("a1")) is not None:
            with lock:
                taken.append(task.task_id)
        queue.close()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == sorted(made)


def test_wait_returns_at_once_when_a_task_is_queued(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)
    queue.enqueue("a1", "X", {}, "user")

    async def main() -> None:
        async with asyncio.timeout(PATIENCE_S):  # a wake-up, or the test fails
            await queue.wait("a1")

    asyncio.run(main())


def test_wait_wakes_on_enqueue_for_that_agent_only(db: Path, clock: ReplayClock) -> None:
    queue = make(db, clock)

    async def main() -> None:
        woken: list[str] = []

        async def waiter(agent: str) -> None:
            await queue.wait(agent)
            woken.append(agent)

        tasks = [asyncio.create_task(waiter("a1")), asyncio.create_task(waiter("a2"))]
        await asyncio.sleep(0)
        assert woken == []
        queue.enqueue("a1", "X", {}, "user")
        async with asyncio.timeout(PATIENCE_S):  # a wake-up, or the test fails
            await tasks[0]
        await asyncio.sleep(0)
        assert woken == ["a1"] and not tasks[1].done()
        tasks[1].cancel()
        with pytest.raises(asyncio.CancelledError):
            await tasks[1]

    asyncio.run(main())


def test_an_enqueue_from_a_worker_thread_wakes_the_waiting_agent(
    db: Path, clock: ReplayClock
) -> None:
    queue = make(db, clock)

    async def main() -> None:
        waiting = asyncio.create_task(queue.wait("a1"))
        await asyncio.sleep(0)
        await asyncio.to_thread(queue.enqueue, "a1", "X", {}, "user")
        async with asyncio.timeout(PATIENCE_S):  # a wake-up, or the test fails
            await waiting

    asyncio.run(main())


def test_recovery_wakes_an_agent_waiting_for_work(db: Path, clock: ReplayClock) -> None:
    make(db, clock).enqueue("a1", "X", {}, "user")
    make(db, clock, "b").take("a1")
    queue = make(db, clock, "c")

    async def main() -> None:
        waiting = asyncio.create_task(queue.wait("a1"))
        await asyncio.sleep(0)
        assert not waiting.done()
        queue.recover()
        async with asyncio.timeout(PATIENCE_S):  # a wake-up, or the test fails
            await waiting

    asyncio.run(main())


def test_the_same_queue_can_be_waited_on_from_a_new_event_loop(
    db: Path, clock: ReplayClock
) -> None:
    queue = make(db, clock)

    async def wait_then_enqueue() -> None:
        waiting = asyncio.create_task(queue.wait("a1"))
        await asyncio.sleep(0)
        task = queue.enqueue("a1", "X", {}, "user")
        async with asyncio.timeout(PATIENCE_S):  # a wake-up, or the test fails
            await waiting
        queue.take("a1")
        queue.complete(task.task_id, "ok")

    asyncio.run(wait_then_enqueue())
    asyncio.run(wait_then_enqueue())  # e.g. the app's loop restarted, or the next test
