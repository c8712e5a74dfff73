"""Background jobs: every N seconds or on a cron expression, on the market clock, in SQLite.

Whoever drives time (the runtime's wall-clock timer, the backtest's bar loop) calls ``fire_due``
with the clock's time; a backtest therefore gets its 4-hourly jobs at simulated times. Each due job
enqueues one task keyed ``job:<id>:<slot>``, so a crash between the enqueue and the update of the
job never delivers a slot twice, and then moves to the first slot strictly after now, so a job
missed for ten runs during downtime fires once, not in a burst.

Interval jobs run at whole multiples of the interval since 1970-01-01 UTC (hourly = on the hour,
when the candle closes; 4h = 00:00, 04:00, ...). Cron expressions are standard five-field ones,
read in UTC.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from croniter import CroniterBadDateError, CroniterError, croniter

from app.domain.agents import Job, Task
from app.domain.clock import Clock, ms_to_iso
from app.domain.errors import InvalidParameterError, MissingParameterError, NotFoundError
from app.orchestration.ids import IdFactory
from app.orchestration.queue import TaskQueue
from app.store.db import StoreDb, store_db

MAX_NAME_LENGTH = 200
_COLUMNS = (
    "job_id, name, job_type, target_agent_id, task_type, payload_json, enabled, created_ms, "
    "next_run_ms, cron, interval_s, last_run_ms, created_by"
)


def _invalid(parameter: str, message: str, **details: Any) -> InvalidParameterError:
    return InvalidParameterError(message, details={"parameter": parameter, **details})


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def check_cron(expression: str) -> str:
    """Return the expression stripped if it is a five-field cron expression that ever fires.

    Raises:
        InvalidParameterError: naming ``cron_expression``, what is wrong and an example.
    """
    text = " ".join(expression.split())
    fields = text.split(" ")
    if not text.startswith("@") and len(fields) != 5:
        raise _invalid(
            "cron_expression",
            f"<cron_expression> must have 5 fields (minute hour day-of-month month day-of-week, "
            f"in UTC), e.g. '0 */4 * * *' for every 4 hours; got {len(fields)} in {text!r}.",
        )
    try:
        croniter(text, _utc(0)).get_next(datetime)
    except CroniterBadDateError:
        raise _invalid(
            "cron_expression", f"<cron_expression> {text!r} never matches a real date."
        ) from None
    except (CroniterError, ValueError, KeyError) as exc:
        raise _invalid(
            "cron_expression",
            f"<cron_expression> {text!r} is not a valid cron expression ({exc}). Use 5 fields "
            "(minute hour day-of-month month day-of-week), e.g. '*/15 * * * *'.",
        ) from None
    return text


class JobScheduler:
    """The ``jobs`` table and the rule for when each job next runs."""

    def __init__(
        self,
        db_path: Path | str | StoreDb,
        clock: Clock,
        queue: TaskQueue,
        ids: IdFactory,
        *,
        durable: bool = True,
    ) -> None:
        self._db = store_db(db_path, durable=durable)
        self._clock = clock
        self._queue = queue
        self._ids = ids

    def close(self) -> None:
        self._db.close()

    def add_job(
        self,
        name: str,
        job_type: str,
        target_agent_id: str,
        task_type: str,
        payload: dict[str, Any],
        *,
        cron: str | None = None,
        interval_s: int | None = None,
        enabled: bool = True,
        created_by: str = "",
    ) -> Job:
        """Create a job; it first runs at the first slot strictly after the clock's now.

        Raises:
            MissingParameterError: neither a cron expression nor an interval.
            InvalidParameterError: both, a bad expression or interval, or a name already used
                (each message names the parameter, as the tool calls it).
        """
        name = name.strip()
        if not name:
            raise _invalid("job_name", "<job_name> must not be empty.")
        if len(name) > MAX_NAME_LENGTH:
            raise _invalid("job_name", f"<job_name> is longer than {MAX_NAME_LENGTH} characters.")
        if not task_type.strip():
            raise _invalid("task_type_on_trigger", "<task_type_on_trigger> must not be empty.")
        if not target_agent_id.strip():
            raise _invalid(
                "target_agent_id_on_trigger", "<target_agent_id_on_trigger> must not be empty."
            )
        cron = cron.strip() if cron is not None and cron.strip() else None
        if cron is None and interval_s is None:
            raise MissingParameterError(
                "Give <cron_expression> (e.g. '0 */4 * * *') or <interval_seconds> (e.g. 3600) "
                "to say when the job runs.",
                details={"parameter": "cron_expression"},
            )
        if cron is not None and interval_s is not None:
            raise _invalid(
                "interval_seconds",
                "Give either <cron_expression> or <interval_seconds>, not both.",
            )
        if cron is not None:
            cron = check_cron(cron)
        elif interval_s is not None and interval_s < 1:
            raise _invalid(
                "interval_seconds",
                f"<interval_seconds> must be at least 1, got {interval_s}.",
                minimum=1,
                got=interval_s,
            )
        now = self._clock.now_ms()
        job = Job(
            job_id=self._ids.new(), name=name, job_type=job_type.strip(),
            target_agent_id=target_agent_id.strip(), task_type=task_type.strip(),
            payload=dict(payload), enabled=enabled, created_ms=now, next_run_ms=None, cron=cron,
            interval_s=interval_s, created_by=created_by,
        )
        job.next_run_ms = next_after(job, now)
        with self._db.transaction() as conn:
            taken = conn.execute("SELECT job_id FROM jobs WHERE name=?", (name,)).fetchone()
            if taken is not None:
                raise _invalid(
                    "job_name",
                    f"A job named {name!r} already exists (id {taken[0]}); choose another "
                    "<job_name>, or delete that job first.",
                    job_id=taken[0],
                )
            self._db.insert("jobs", {
                "job_id": job.job_id, "name": job.name, "job_type": job.job_type,
                "target_agent_id": job.target_agent_id, "task_type": job.task_type,
                "payload_json": json.dumps(job.payload, sort_keys=True, ensure_ascii=False),
                "enabled": int(enabled), "created_ms": now, "next_run_ms": job.next_run_ms,
                "cron": cron, "interval_s": interval_s, "last_run_ms": None,
                "created_by": created_by,
            })
        return job

    def set_enabled(self, job_id: str, enabled: bool) -> Job:
        """Enable or disable a job; enabling runs it next at the first slot after now (a slot
        missed while disabled is not made up)."""
        with self._db.transaction() as conn:
            job = self._require(conn, job_id)
            job.enabled = enabled
            if enabled:
                job.next_run_ms = next_after(job, self._clock.now_ms())
            conn.execute(
                "UPDATE jobs SET enabled=?, next_run_ms=? WHERE job_id=?",
                (int(enabled), job.next_run_ms, job_id),
            )
        return job

    def delete(self, job_id: str) -> Job:
        with self._db.transaction() as conn:
            job = self._require(conn, job_id)
            conn.execute("DELETE FROM jobs WHERE job_id=?", (job_id,))
        return job

    def get(self, job_id: str) -> Job | None:
        with self._db.lock:
            return _first(self._select(self._db.conn, "job_id=?", (job_id,)))

    def get_by_name(self, name: str) -> Job | None:
        with self._db.lock:
            return _first(self._select(self._db.conn, "name=?", (name.strip(),)))

    def jobs(self, target_agent_id: str | None = None) -> list[Job]:
        with self._db.lock:
            if target_agent_id is None:
                return self._select(self._db.conn, "1=1 ORDER BY created_ms, name", ())
            return self._select(
                self._db.conn, "target_agent_id=? ORDER BY created_ms, name", (target_agent_id,)
            )

    def next_due_ms(self) -> int | None:
        """When the earliest enabled job is due (what a timer should sleep until)."""
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT MIN(next_run_ms) FROM jobs WHERE enabled=1"
            ).fetchone()
        return None if row[0] is None else int(row[0])

    def fire_due(self, now_ms: int) -> list[Task]:
        """Enqueue one task for every enabled job due at ``now_ms``; return those tasks.

        The task stands for the latest slot at or before now (``scheduled_time`` in its payload);
        slots missed before it are skipped, not replayed.
        """
        with self._db.lock:
            due = self._select(
                self._db.conn,
                "enabled=1 AND next_run_ms IS NOT NULL AND next_run_ms<=? "
                "ORDER BY next_run_ms, name",
                (now_ms,),
            )
        fired: list[Task] = []
        for job in due:
            assert job.next_run_ms is not None  # noqa: S101 - selected on it
            slot = latest_at_or_before(job, now_ms, job.next_run_ms)
            payload = {**job.payload, "scheduled_time": ms_to_iso(slot)}
            task = self._queue.enqueue(
                job.target_agent_id, job.task_type, payload, f"job:{job.job_id}",
                dedupe_key=f"job:{job.job_id}:{slot}",
            )
            with self._db.transaction() as conn:
                # only if nobody moved the job meanwhile (disabled, deleted, fired elsewhere)
                conn.execute(
                    "UPDATE jobs SET next_run_ms=?, last_run_ms=? WHERE job_id=? AND next_run_ms=?",
                    (next_after(job, now_ms), slot, job.job_id, job.next_run_ms),
                )
            fired.append(task)
        return fired

    def _require(self, conn: sqlite3.Connection, job_id: str) -> Job:
        job = _first(self._select(conn, "job_id=?", (job_id,)))
        if job is None:
            raise NotFoundError(
                f"There is no background job with id {job_id!r}.", details={"job_id": job_id}
            )
        return job

    @staticmethod
    def _select(conn: sqlite3.Connection, clause: str, args: tuple[Any, ...]) -> list[Job]:
        sql = f"SELECT {_COLUMNS} FROM jobs WHERE {clause}"  # noqa: S608 - clauses are ours
        return [_job(row) for row in conn.execute(sql, args).fetchall()]


def next_after(job: Job, now_ms: int) -> int:
    """The first run of ``job`` strictly after ``now_ms``."""
    if job.interval_s is not None:
        step = job.interval_s * 1000
        return (now_ms // step + 1) * step
    assert job.cron is not None  # noqa: S101 - add_job guarantees one of the two
    found = croniter(job.cron, _utc(now_ms)).get_next(datetime)
    return int(found.timestamp() * 1000)


def latest_at_or_before(job: Job, now_ms: int, earliest_ms: int) -> int:
    """The most recent slot of ``job`` at or before ``now_ms`` (never before ``earliest_ms``)."""
    if job.interval_s is not None:
        step = job.interval_s * 1000
        return max(now_ms // step * step, earliest_ms)
    assert job.cron is not None  # noqa: S101 - add_job guarantees one of the two
    found = croniter(job.cron, _utc(now_ms + 1)).get_prev(datetime)
    return max(int(found.timestamp() * 1000), earliest_ms)


def _first(jobs: list[Job]) -> Job | None:
    return jobs[0] if jobs else None


def _job(row: tuple[Any, ...]) -> Job:
    return Job(
        job_id=row[0], name=row[1], job_type=row[2], target_agent_id=row[3], task_type=row[4],
        payload=json.loads(row[5]), enabled=bool(row[6]), created_ms=row[7], next_run_ms=row[8],
        cron=row[9], interval_s=row[10], last_run_ms=row[11], created_by=row[12],
    )
