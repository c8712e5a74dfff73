"""Questions agents wait on: clarifications and order approvals, durable in ``questions``.

The question is committed before ``QuestionAsked`` goes out and before the agent's task is parked,
so a question survives an app restart and the reply from the chat (or later Telegram) still
resumes the agent. The suggested replies and the format hint are kept for the GUI's quick-reply
buttons. A question is answered once; a second answer is refused and says what the first was.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.domain.agents import Question, QuestionKind
from app.domain.clock import Clock, ms_to_iso
from app.domain.errors import InvalidParameterError, NotFoundError
from app.events import Event, EventBus, QuestionAnswered, QuestionAsked
from app.orchestration.ids import IdFactory, keyed_id
from app.redaction import redact
from app.store.db import StoreDb, store_db

_COLUMNS = (
    "question_id, agent_id, task_id, kind, text, suggested_json, format_hint, asked_ms, answer, "
    "answered_ms, details_json"
)


class QuestionStore:
    def __init__(
        self,
        db_path: Path | str | StoreDb,
        clock: Clock,
        ids: IdFactory,
        bus: EventBus | None = None,
        *,
        durable: bool = True,
    ) -> None:
        self._db = store_db(db_path, durable=durable)
        self._clock = clock
        self._ids = ids
        self._bus = bus

    def close(self) -> None:
        self._db.close()

    def ask(
        self,
        agent_id: str,
        task_id: str,
        kind: QuestionKind,
        text: str,
        suggested_replies: Sequence[str] = (),
        format_hint: str = "TEXT",
        details: dict[str, Any] | None = None,
        *,
        key: str | None = None,
    ) -> Question:
        """Store a question for the person and announce it.

        Args:
            key: the asking tool call's key; asking again with the same key (a task redelivered
                after a crash) returns the question already stored instead of a second one.

        Raises:
            InvalidParameterError: the question text is empty.
        """
        text = redact(text.strip())
        if not text:
            raise InvalidParameterError(
                "<question_text> must not be empty: write the question to ask the person.",
                details={"parameter": "question_text"},
            )
        question = Question(
            question_id=keyed_id(f"question:{key}") if key else self._ids.new(),
            agent_id=agent_id, task_id=task_id, kind=QuestionKind(kind), text=text,
            suggested_replies=tuple(r.strip() for r in suggested_replies if r.strip()),
            format_hint=format_hint.strip() or "TEXT", asked_ms=self._clock.now_ms(),
            details=dict(details or {}),
        )
        with self._db.transaction() as conn:
            existing = _first(_select(conn, "question_id=?", (question.question_id,)))
            if existing is not None:
                return existing
            self._db.insert("questions", {
                "question_id": question.question_id, "agent_id": agent_id, "task_id": task_id,
                "kind": question.kind.value, "text": text,
                "suggested_json": json.dumps(list(question.suggested_replies), ensure_ascii=False),
                "format_hint": question.format_hint, "asked_ms": question.asked_ms,
                "answer": None, "answered_ms": None,
                "details_json": json.dumps(question.details, sort_keys=True, ensure_ascii=False),
            })
        self._announce(
            QuestionAsked(
                question.question_id, agent_id, task_id, question.kind.value, text,
                question.suggested_replies, question.format_hint,
            )
        )
        return question

    def answer(self, question_id: str, answer: str) -> Question:
        """Record the person's answer (once) and announce it, so the waiting agent resumes.

        Raises:
            NotFoundError: no such question.
            InvalidParameterError: an empty answer, or the question was already answered.
        """
        answer = answer.strip()
        if not answer:
            raise InvalidParameterError(
                "The answer is empty; write a reply to the question.",
                details={"parameter": "answer", "question_id": question_id},
            )
        with self._db.transaction() as conn:
            question = _first(_select(conn, "question_id=?", (question_id,)))
            if question is None:
                raise NotFoundError(
                    f"There is no question with id {question_id!r}.",
                    details={"question_id": question_id},
                )
            if question.answered_ms is not None:
                raise InvalidParameterError(
                    f"Question {question_id} was already answered at "
                    f"{ms_to_iso(question.answered_ms)} with {question.answer!r}.",
                    details={
                        "parameter": "answer", "question_id": question_id,
                        "answered_at": ms_to_iso(question.answered_ms),
                        "answer": question.answer,
                    },
                )
            question.answer, question.answered_ms = answer, self._clock.now_ms()
            conn.execute(
                "UPDATE questions SET answer=?, answered_ms=? WHERE question_id=?",
                (answer, question.answered_ms, question_id),
            )
        self._announce(QuestionAnswered(question_id, question.agent_id, answer))
        return question

    def pending(self, agent_id: str | None = None) -> list[Question]:
        """Unanswered questions, oldest first (of one agent, or of all)."""
        with self._db.lock:
            if agent_id is None:
                return _select(self._db.conn, "answered_ms IS NULL ORDER BY asked_ms, rowid", ())
            return _select(
                self._db.conn,
                "agent_id=? AND answered_ms IS NULL ORDER BY asked_ms, rowid",
                (agent_id,),
            )

    def get(self, question_id: str) -> Question | None:
        with self._db.lock:
            return _first(_select(self._db.conn, "question_id=?", (question_id,)))

    def for_task(self, task_id: str) -> Question | None:
        """The latest question a task asked (what its parked agent waits on)."""
        with self._db.lock:
            return _first(
                _select(self._db.conn, "task_id=? ORDER BY asked_ms DESC, rowid DESC LIMIT 1",
                        (task_id,))
            )

    def _announce(self, event: Event) -> None:
        if self._bus is not None:
            self._bus.publish_nowait(event)


def _select(conn: sqlite3.Connection, clause: str, args: tuple[Any, ...]) -> list[Question]:
    sql = f"SELECT {_COLUMNS} FROM questions WHERE {clause}"  # noqa: S608 - clauses are ours
    return [_question(row) for row in conn.execute(sql, args).fetchall()]


def _first(found: list[Question]) -> Question | None:
    return found[0] if found else None


def _question(row: tuple[Any, ...]) -> Question:
    return Question(
        question_id=row[0], agent_id=row[1], task_id=row[2], kind=QuestionKind(row[3]),
        text=row[4], suggested_replies=tuple(json.loads(row[5])), format_hint=row[6],
        asked_ms=row[7], answer=row[8], answered_ms=row[9], details=json.loads(row[10]),
    )
