"""The durable task queue: every agent's inbox, one SQLite ``tasks`` table.

A task is taken in one ``BEGIN IMMEDIATE`` transaction (status TAKEN, attempts + 1) and committed
before the agent starts on it; it is acknowledged (DONE/FAILED) when the agent finishes. If the app
dies in between, ``recover`` at the next start puts every TAKEN task back to QUEUED, so it is
redelivered; tools that create things key them on the task's call keys, so the repeat finds what
the first attempt made. A task that keeps dying is failed after ``max_attempts`` starts instead of
crashing the app forever. WAITING tasks (parked on a person's answer) survive restarts unchanged.

Waiting for work uses one ``asyncio.Event`` per agent, set by ``enqueue``: nothing polls.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.domain.agents import Task, TaskStatus
from app.domain.clock import Clock, ms_to_iso
from app.domain.errors import KestrelError, NotFoundError
from app.events import Event, EventBus, TaskFinished, TaskQueued
from app.orchestration.ids import IdFactory
from app.redaction import redact
from app.store.db import StoreDb, store_db

DEFAULT_MAX_ATTEMPTS = 3

_COLUMNS = (
    "task_id, agent_id, task_type, payload_json, source, created_ms, status, reply_to, "
    "reply_expected, attempts, taken_ms, done_ms, result"
)
_FINAL = frozenset({TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED})


class TaskStateError(KestrelError):
    """A task was asked to move in a way its status does not allow (e.g. completing it twice)."""


class TaskQueue:
    """The inboxes of all agents in one workspace database.

    Args:
        db_path: the workspace's ``kestrel.db`` (``":memory:"`` for a queue nobody else reads).
        clock: the market clock; created/taken/done times are its times.
        ids: where task ids come from.
        bus: receives ``TaskQueued`` and ``TaskFinished``, each after its commit.
        max_attempts: starts a task may have before a crash-looping task is failed.
        durable: ``synchronous=FULL`` (survives power loss) or NORMAL (survives a killed process).
    """

    def __init__(
        self,
        db_path: Path | str | StoreDb,
        clock: Clock,
        ids: IdFactory,
        bus: EventBus | None = None,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        durable: bool = True,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self._db = store_db(db_path, durable=durable)
        self._clock = clock
        self._ids = ids
        self._bus = bus
        self.max_attempts = max_attempts
        self._events: dict[str, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def close(self) -> None:
        self._db.close()

    # --- producing -------------------------------------------------------------------------

    def enqueue(
        self,
        agent_id: str,
        task_type: str,
        payload: dict[str, Any],
        source: str,
        *,
        reply_to: str | None = None,
        reply_expected: bool = False,
        dedupe_key: str | None = None,
    ) -> Task:
        """Put a task in ``agent_id``'s inbox and wake the agent.

        With a ``dedupe_key`` already used, the task made the first time is returned and nothing
        is added: a dispatch or a job firing repeated after a crash delivers once.
        """
        payload_json = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        with self._db.transaction() as conn:
            if dedupe_key is not None:
                existing = self._select_one(conn, "dedupe_key=?", (dedupe_key,))
                if existing is not None:
                    return existing
            task = Task(
                task_id=self._ids.new(), agent_id=agent_id, task_type=task_type,
                payload=json.loads(payload_json), source=source, created_ms=self._clock.now_ms(),
                reply_to=reply_to, reply_expected=reply_expected,
            )
            conn.execute(
                "INSERT INTO tasks (task_id, agent_id, task_type, payload_json, source, reply_to,"
                " reply_expected, status, attempts, created_ms, dedupe_key)"
                " VALUES (?,?,?,?,?,?,?,?,0,?,?)",
                (
                    task.task_id, agent_id, task_type, payload_json, source, reply_to,
                    int(reply_expected), TaskStatus.QUEUED.value, task.created_ms, dedupe_key,
                ),
            )
        self.wake(agent_id)
        self._announce(TaskQueued(task.task_id, agent_id, task_type, source))
        return task

    def record_done(
        self,
        agent_id: str,
        task_type: str,
        payload: dict[str, Any],
        source: str,
        result: str,
        *,
        dedupe_key: str | None = None,
    ) -> Task:
        """Store a task that was carried out at once (pause/resume/stop) as already DONE.

        It never enters the inbox; the row is the audit trail and gives the dispatch a task id.
        """
        result = redact(result)
        payload_json = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        with self._db.transaction() as conn:
            if dedupe_key is not None:
                existing = self._select_one(conn, "dedupe_key=?", (dedupe_key,))
                if existing is not None:
                    return existing
            now = self._clock.now_ms()
            task_id = self._ids.new()
            conn.execute(
                "INSERT INTO tasks (task_id, agent_id, task_type, payload_json, source,"
                " reply_expected, status, attempts, created_ms, taken_ms, done_ms, result,"
                " dedupe_key) VALUES (?,?,?,?,?,0,?,1,?,?,?,?,?)",
                (
                    task_id, agent_id, task_type, payload_json, source, TaskStatus.DONE.value,
                    now, now, now, result, dedupe_key,
                ),
            )
        self._announce(TaskFinished(task_id, agent_id, TaskStatus.DONE.value, result))
        return self._require(task_id)

    # --- consuming -------------------------------------------------------------------------

    def take(self, agent_id: str) -> Task | None:
        """Take the oldest QUEUED task of ``agent_id``, committed as TAKEN before it is returned."""
        with self._db.transaction() as conn:
            task = self._select_one(
                conn, "agent_id=? AND status=? ORDER BY seq LIMIT 1",
                (agent_id, TaskStatus.QUEUED.value),
            )
            if task is None:
                return None
            task.status = TaskStatus.TAKEN
            task.attempts += 1
            task.taken_ms = self._clock.now_ms()
            conn.execute(
                "UPDATE tasks SET status=?, attempts=?, taken_ms=? WHERE task_id=?",
                (task.status.value, task.attempts, task.taken_ms, task.task_id),
            )
        return task

    async def wait(self, agent_id: str) -> None:
        """Return once a task may be ready for ``agent_id`` (at once if one is queued).

        Only enqueues through this queue object (and ``wake``/``recover``) wake a waiter; a task
        written by another process is seen at the next ``take``.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # events belong to one loop; a new loop starts afresh
            self._events.clear()
            self._loop = loop
        event = self._events.setdefault(agent_id, asyncio.Event())
        event.clear()
        if self.busy_queued(agent_id):
            return
        await event.wait()

    def wake(self, agent_id: str) -> None:
        """Wake whoever waits on ``agent_id``'s inbox (from any thread)."""
        event = self._events.get(agent_id)
        if event is None:
            return
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            event.set()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    def park(self, task_id: str) -> Task:
        """TAKEN -> WAITING: the agent waits for a person; the task survives restarts as is."""
        return self._move(task_id, {TaskStatus.TAKEN}, TaskStatus.WAITING)

    def unpark(self, task_id: str) -> Task:
        """WAITING -> TAKEN: the person answered and the agent carries on with the task."""
        return self._move(task_id, {TaskStatus.WAITING}, TaskStatus.TAKEN, taken=True)

    def complete(self, task_id: str, result: str | None = None) -> Task:
        """Acknowledge a finished task (DONE) with the agent's answer."""
        return self._finish(task_id, TaskStatus.DONE, result)

    def fail(self, task_id: str, reason: str) -> Task:
        """Mark a task FAILED with the reason (shown to the person and to a waiting sender)."""
        return self._finish(task_id, TaskStatus.FAILED, reason)

    def cancel(self, task_id: str, reason: str = "cancelled") -> Task:
        return self._finish(task_id, TaskStatus.CANCELLED, reason)

    def cancel_pending(self, agent_id: str, reason: str = "the agent was stopped") -> list[Task]:
        """Cancel every QUEUED and WAITING task of an agent (it was stopped or deleted)."""
        pending = (TaskStatus.QUEUED.value, TaskStatus.WAITING.value)
        reason = redact(reason)
        with self._db.transaction() as conn:
            tasks = self._select(conn, "agent_id=? AND status IN (?,?) ORDER BY seq",
                                 (agent_id, *pending))
            now = self._clock.now_ms()
            conn.execute(
                "UPDATE tasks SET status=?, done_ms=?, result=?"
                " WHERE agent_id=? AND status IN (?,?)",
                (TaskStatus.CANCELLED.value, now, reason, agent_id, *pending),
            )
        for task in tasks:
            task.status, task.done_ms, task.result = TaskStatus.CANCELLED, now, reason
            self._announce(TaskFinished(task.task_id, agent_id, task.status.value, reason))
        return tasks

    def recover(self) -> list[Task]:
        """At start-up: redeliver every task a dead process had TAKEN.

        Each becomes QUEUED again, unless it has already been started ``max_attempts`` times, in
        which case it is FAILED with the reason (a task that kills the app must not do so
        forever). Returns every task changed, with its new status.
        """
        changed: list[Task] = []
        with self._db.transaction() as conn:
            now = self._clock.now_ms()
            for task in self._select(conn, "status=? ORDER BY seq", (TaskStatus.TAKEN.value,)):
                if task.attempts >= self.max_attempts:
                    last = "unknown" if task.taken_ms is None else ms_to_iso(task.taken_ms)
                    task.status, task.done_ms = TaskStatus.FAILED, now
                    task.result = (
                        f"failed {task.attempts} times; last start {last}: the app stopped each "
                        "time before the task finished, so it is not tried again"
                    )
                    conn.execute(
                        "UPDATE tasks SET status=?, done_ms=?, result=? WHERE task_id=?",
                        (task.status.value, now, task.result, task.task_id),
                    )
                else:
                    task.status, task.taken_ms = TaskStatus.QUEUED, None
                    conn.execute(
                        "UPDATE tasks SET status=?, taken_ms=NULL WHERE task_id=?",
                        (task.status.value, task.task_id),
                    )
                changed.append(task)
        for task in changed:
            if task.status is TaskStatus.QUEUED:
                self.wake(task.agent_id)
            else:
                self._announce(
                    TaskFinished(task.task_id, task.agent_id, task.status.value, task.result)
                )
        return changed

    # --- reading ---------------------------------------------------------------------------

    def get(self, task_id: str) -> Task | None:
        with self._db.lock:
            return self._select_one(self._db.conn, "task_id=?", (task_id,))

    def get_by_dedupe_key(self, dedupe_key: str) -> Task | None:
        with self._db.lock:
            return self._select_one(self._db.conn, "dedupe_key=?", (dedupe_key,))

    def tasks(
        self,
        agent_id: str | None = None,
        statuses: Iterable[TaskStatus] | None = None,
        limit: int = 100,
        *,
        newest_first: bool = True,
    ) -> list[Task]:
        where, args = ["1=1"], []
        if agent_id is not None:
            where.append("agent_id=?")
            args.append(agent_id)
        if statuses is not None:
            wanted = [TaskStatus(s).value for s in statuses]
            if not wanted:
                return []
            where.append(f"status IN ({','.join('?' * len(wanted))})")
            args.extend(wanted)
        order = "DESC" if newest_first else "ASC"
        clause = f"{' AND '.join(where)} ORDER BY seq {order} LIMIT ?"
        with self._db.lock:
            return self._select(self._db.conn, clause, (*args, limit))

    def busy(self, agent_id: str | None = None) -> int:
        """How many tasks are QUEUED or TAKEN (of one agent, or of all): 0 means idle."""
        sql = "SELECT COUNT(*) FROM tasks WHERE status IN (?,?)"
        args: tuple[Any, ...] = (TaskStatus.QUEUED.value, TaskStatus.TAKEN.value)
        if agent_id is not None:
            sql += " AND agent_id=?"
            args += (agent_id,)
        with self._db.lock:
            return int(self._db.conn.execute(sql, args).fetchone()[0])

    def busy_queued(self, agent_id: str) -> bool:
        with self._db.lock:
            row = self._db.conn.execute(
                "SELECT 1 FROM tasks WHERE agent_id=? AND status=? LIMIT 1",
                (agent_id, TaskStatus.QUEUED.value),
            ).fetchone()
        return row is not None

    # --- internals -------------------------------------------------------------------------

    def _require(self, task_id: str) -> Task:
        task = self.get(task_id)
        if task is None:
            raise NotFoundError(f"There is no task with id {task_id!r}.",
                                details={"task_id": task_id})
        return task

    def _move(
        self, task_id: str, allowed: set[TaskStatus], new: TaskStatus, *, taken: bool = False
    ) -> Task:
        with self._db.transaction() as conn:
            task = self._locked_task(conn, task_id)
            if task.status not in allowed:
                raise TaskStateError(
                    f"task {task_id} is {task.status}; only a task that is "
                    f"{' or '.join(sorted(allowed))} can become {new}"
                )
            task.status = new
            if taken:
                task.taken_ms = self._clock.now_ms()
            conn.execute(
                "UPDATE tasks SET status=?, taken_ms=? WHERE task_id=?",
                (new.value, task.taken_ms, task_id),
            )
        return task

    def _finish(self, task_id: str, status: TaskStatus, result: str | None) -> Task:
        result = None if result is None else redact(result)
        with self._db.transaction() as conn:
            task = self._locked_task(conn, task_id)
            if task.status in _FINAL:
                raise TaskStateError(
                    f"task {task_id} is already {task.status} (at {ms_to_iso(task.done_ms or 0)})"
                    f"; it cannot become {status}"
                )
            task.status, task.done_ms, task.result = status, self._clock.now_ms(), result
            conn.execute(
                "UPDATE tasks SET status=?, done_ms=?, result=? WHERE task_id=?",
                (status.value, task.done_ms, result, task_id),
            )
        self._announce(TaskFinished(task_id, task.agent_id, status.value, result))
        return task

    def _locked_task(self, conn: sqlite3.Connection, task_id: str) -> Task:
        task = self._select_one(conn, "task_id=?", (task_id,))
        if task is None:
            raise NotFoundError(f"There is no task with id {task_id!r}.",
                                details={"task_id": task_id})
        return task

    @staticmethod
    def _select(conn: sqlite3.Connection, clause: str, args: tuple[Any, ...]) -> list[Task]:
        sql = f"SELECT {_COLUMNS} FROM tasks WHERE {clause}"  # noqa: S608 - clauses are ours
        return [_task(row) for row in conn.execute(sql, args).fetchall()]

    def _select_one(
        self, conn: sqlite3.Connection, clause: str, args: tuple[Any, ...]
    ) -> Task | None:
        found = self._select(conn, clause, args)
        return found[0] if found else None

    def _announce(self, event: Event) -> None:
        if self._bus is not None:
            self._bus.publish_nowait(event)


def _task(row: tuple[Any, ...]) -> Task:
    return Task(
        task_id=row[0], agent_id=row[1], task_type=row[2], payload=json.loads(row[3]),
        source=row[4], created_ms=row[5], status=TaskStatus(row[6]), reply_to=row[7],
        reply_expected=bool(row[8]), attempts=row[9], taken_ms=row[10], done_ms=row[11],
        result=row[12],
    )
