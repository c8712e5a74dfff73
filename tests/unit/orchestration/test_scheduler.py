"""Background jobs on the market clock: aligned, durable, one run per due time, no burst."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.domain.agents import TaskStatus
from app.domain.clock import ReplayClock, ms_to_iso, parse_time
from app.domain.errors import InvalidParameterError, MissingParameterError, NotFoundError
from app.orchestration.ids import SeededIds
from app.orchestration.queue import TaskQueue
from app.orchestration.scheduler import JobScheduler
from tests.unit.orchestration.conftest import START

HOUR = 3_600_000
T = parse_time


def make(db: Path, clock: ReplayClock, seed: str = "s") -> tuple[JobScheduler, TaskQueue]:
    queue = TaskQueue(db, clock, SeededIds(f"{seed}-q"))
    return JobScheduler(db, clock, queue, SeededIds(seed)), queue


def hourly(scheduler: JobScheduler, name: str = "BTC_1h", **kwargs):
    return scheduler.add_job(
        name, "PERIODIC_AGENT_TRIGGER", "analyst-1", "RUN_ANALYSIS",
        {"symbol": "BTC/USDT", "interval": "1h"}, **{"interval_s": 3600, **kwargs},
    )


def test_an_hourly_job_runs_on_the_hour(db: Path, clock: ReplayClock) -> None:
    clock.advance_to(T("2024-01-02T03:20:45Z"))
    scheduler, _ = make(db, clock)
    job = hourly(scheduler)
    assert ms_to_iso(job.next_run_ms) == "2024-01-02T04:00:00Z"  # type: ignore[arg-type]


def test_a_job_created_exactly_on_a_slot_first_runs_at_the_next_one(
    db: Path, clock: ReplayClock
) -> None:
    scheduler, _ = make(db, clock)  # the clock is at 03:00:00 exactly
    assert ms_to_iso(hourly(scheduler).next_run_ms) == "2024-01-02T04:00:00Z"  # type: ignore[arg-type]


def test_a_four_hour_interval_follows_the_utc_four_hour_candles(
    db: Path, clock: ReplayClock
) -> None:
    scheduler, _ = make(db, clock)
    job = hourly(scheduler, "BTC_4h", interval_s=4 * 3600)
    assert ms_to_iso(job.next_run_ms) == "2024-01-02T04:00:00Z"  # type: ignore[arg-type]
    clock.advance_to(T("2024-01-02T04:00:00Z"))
    scheduler.fire_due(clock.now_ms())
    assert ms_to_iso(scheduler.get(job.job_id).next_run_ms) == "2024-01-02T08:00:00Z"  # type: ignore[arg-type,union-attr]


def test_a_cron_job_runs_at_its_utc_times(db: Path, clock: ReplayClock) -> None:
    clock.advance_to(T("2024-01-05T10:07:00Z"))  # a Friday
    scheduler, _ = make(db, clock)
    quarter = scheduler.add_job("q", "T", "a1", "RUN_ANALYSIS", {}, cron="*/15 * * * *")
    weekday = scheduler.add_job("w", "T", "a1", "RUN_ANALYSIS", {}, cron="0  9 * * 1-5")
    assert ms_to_iso(quarter.next_run_ms) == "2024-01-05T10:15:00Z"  # type: ignore[arg-type]
    assert ms_to_iso(weekday.next_run_ms) == "2024-01-08T09:00:00Z"  # type: ignore[arg-type]
    assert weekday.cron == "0 9 * * 1-5"


def test_a_due_job_enqueues_one_task_for_its_target(db: Path, clock: ReplayClock) -> None:
    scheduler, queue = make(db, clock)
    job = hourly(scheduler)
    assert scheduler.fire_due(clock.now_ms()) == []
    clock.advance_to(START + HOUR)
    (task,) = scheduler.fire_due(clock.now_ms())
    assert (task.agent_id, task.task_type, task.source) == (
        "analyst-1", "RUN_ANALYSIS", f"job:{job.job_id}",
    )
    assert task.payload == {
        "symbol": "BTC/USDT", "interval": "1h", "scheduled_time": "2024-01-02T04:00:00Z",
    }
    assert scheduler.fire_due(clock.now_ms()) == []  # the same moment again: nothing new
    stored = scheduler.get(job.job_id)
    assert stored is not None
    assert (stored.last_run_ms, stored.next_run_ms) == (START + HOUR, START + 2 * HOUR)
    assert queue.busy("analyst-1") == 1


def test_a_job_missed_for_ten_runs_fires_once_not_a_burst(db: Path, clock: ReplayClock) -> None:
    scheduler, queue = make(db, clock)
    job = hourly(scheduler)
    clock.advance_to(START + 10 * HOUR + 25 * 60_000)  # the app was closed for ten hours
    (task,) = scheduler.fire_due(clock.now_ms())
    assert task.payload["scheduled_time"] == "2024-01-02T13:00:00Z"  # the latest slot
    assert scheduler.get(job.job_id).next_run_ms == START + 11 * HOUR  # type: ignore[union-attr]
    assert len(queue.tasks("analyst-1")) == 1


def test_a_crash_between_enqueue_and_update_never_doubles_a_run(
    db: Path, clock: ReplayClock
) -> None:
    scheduler, queue = make(db, clock)
    job = hourly(scheduler)
    clock.advance_to(START + HOUR)
    (first,) = scheduler.fire_due(clock.now_ms())
    # the update of the job did not commit: the job row still says it is due
    scheduler._db.conn.execute(
        "UPDATE jobs SET next_run_ms=?, last_run_ms=NULL WHERE job_id=?",
        (START + HOUR, job.job_id),
    )
    scheduler.close()
    restarted, queue2 = make(db, clock, "after")
    (again,) = restarted.fire_due(clock.now_ms())
    assert again.task_id == first.task_id
    assert len(queue2.tasks("analyst-1")) == 1


def test_jobs_survive_a_restart(db: Path, clock: ReplayClock) -> None:
    scheduler, _ = make(db, clock)
    job = hourly(scheduler)
    scheduler.close()
    restarted, _ = make(db, clock, "after")
    assert [j.job_id for j in restarted.jobs()] == [job.job_id]
    assert restarted.get(job.job_id) == job
    clock.advance_to(START + HOUR)
    assert len(restarted.fire_due(clock.now_ms())) == 1


def test_a_backtest_gets_its_four_hourly_runs_at_simulated_times(
    db: Path, clock: ReplayClock
) -> None:
    scheduler, _ = make(db, clock)
    hourly(scheduler, "4h", interval_s=4 * 3600)
    fired: list[str] = []
    for bar in range(1, 25):  # one simulated day, bar by bar
        clock.advance_to(START + bar * HOUR)
        fired += [t.payload["scheduled_time"] for t in scheduler.fire_due(clock.now_ms())]
    assert fired == [
        "2024-01-02T04:00:00Z", "2024-01-02T08:00:00Z", "2024-01-02T12:00:00Z",
        "2024-01-02T16:00:00Z", "2024-01-02T20:00:00Z", "2024-01-03T00:00:00Z",
    ]


def test_a_disabled_job_does_not_run_and_enabling_does_not_catch_up(
    db: Path, clock: ReplayClock
) -> None:
    scheduler, _ = make(db, clock)
    job = hourly(scheduler, enabled=False)
    assert scheduler.next_due_ms() is None
    clock.advance_to(START + 5 * HOUR + 1)
    assert scheduler.fire_due(clock.now_ms()) == []
    enabled = scheduler.set_enabled(job.job_id, True)
    assert enabled.enabled and enabled.next_run_ms == START + 6 * HOUR
    assert scheduler.fire_due(clock.now_ms()) == []
    scheduler.set_enabled(job.job_id, False)
    clock.advance_to(START + 7 * HOUR)
    assert scheduler.fire_due(clock.now_ms()) == []


def test_next_due_is_the_earliest_enabled_job(db: Path, clock: ReplayClock) -> None:
    scheduler, _ = make(db, clock)
    assert scheduler.next_due_ms() is None
    hourly(scheduler, "daily", interval_s=86_400)
    hourly(scheduler, "quarter", interval_s=900)
    assert scheduler.next_due_ms() == START + 15 * 60_000


def test_deleting_a_job_stops_it(db: Path, clock: ReplayClock) -> None:
    scheduler, _ = make(db, clock)
    job = hourly(scheduler)
    other = scheduler.add_job("eth", "T", "analyst-2", "RUN_ANALYSIS", {}, interval_s=60)
    assert [j.name for j in scheduler.jobs("analyst-2")] == ["eth"]
    assert scheduler.delete(job.job_id).job_id == job.job_id
    assert scheduler.get(job.job_id) is None
    assert [j.job_id for j in scheduler.jobs()] == [other.job_id]
    with pytest.raises(NotFoundError, match="no background job"):
        scheduler.delete(job.job_id)
    with pytest.raises(NotFoundError):
        scheduler.set_enabled(job.job_id, True)


def test_a_job_name_can_be_used_once(db: Path, clock: ReplayClock) -> None:
    scheduler, _ = make(db, clock)
    job = hourly(scheduler)
    with pytest.raises(InvalidParameterError, match="A job named 'BTC_1h' already exists") as err:
        hourly(scheduler)
    assert err.value.details == {"parameter": "job_name", "job_id": job.job_id}
    assert scheduler.get_by_name(" BTC_1h ") == job


@pytest.mark.parametrize(
    ("kwargs", "error", "parameter", "message"),
    [
        ({}, MissingParameterError, "cron_expression", "Give <cron_expression>"),
        ({"cron": "   "}, MissingParameterError, "cron_expression", "or <interval_seconds>"),
        ({"cron": "0 * * * *", "interval_s": 60}, InvalidParameterError, "interval_seconds",
         "not both"),
        ({"interval_s": 0}, InvalidParameterError, "interval_seconds", "at least 1, got 0"),
        ({"cron": "61 * * * *"}, InvalidParameterError, "cron_expression",
         "not a valid cron expression"),
        ({"cron": "every hour"}, InvalidParameterError, "cron_expression", "5 fields"),
        ({"cron": "0 0 * * * *"}, InvalidParameterError, "cron_expression", "got 6"),
        ({"cron": "0 0 30 2 *"}, InvalidParameterError, "cron_expression",
         "never matches a real date"),
    ],
)
def test_a_bad_schedule_is_refused_naming_the_parameter(
    db: Path, clock: ReplayClock, kwargs: dict, error: type, parameter: str, message: str
) -> None:
    scheduler, _ = make(db, clock)
    with pytest.raises(error, match=message) as caught:
        scheduler.add_job("j", "T", "a1", "RUN_ANALYSIS", {}, **kwargs)
    assert caught.value.details["parameter"] == parameter
    assert scheduler.jobs() == []


def test_empty_names_and_targets_are_refused(db: Path, clock: ReplayClock) -> None:
    scheduler, _ = make(db, clock)
    with pytest.raises(InvalidParameterError, match="<job_name> must not be empty"):
        scheduler.add_job(" ", "T", "a1", "X", {}, interval_s=60)
    with pytest.raises(InvalidParameterError, match="longer than 200"):
        scheduler.add_job("n" * 201, "T", "a1", "X", {}, interval_s=60)
    with pytest.raises(InvalidParameterError, match="<task_type_on_trigger>"):
        scheduler.add_job("n", "T", "a1", "", {}, interval_s=60)
    with pytest.raises(InvalidParameterError, match="<target_agent_id_on_trigger>"):
        scheduler.add_job("n", "T", "", "X", {}, interval_s=60)


def test_a_fired_task_is_an_ordinary_inbox_task(db: Path, clock: ReplayClock) -> None:
    scheduler, queue = make(db, clock)
    hourly(scheduler)
    clock.advance_to(START + HOUR)
    (task,) = scheduler.fire_due(clock.now_ms())
    taken = queue.take("analyst-1")
    assert taken is not None and taken.task_id == task.task_id
    assert taken.status is TaskStatus.TAKEN
