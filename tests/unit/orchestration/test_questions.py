"""Questions an agent waits on: kept across restarts, answered once, announced for the GUI."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.domain.agents import QuestionKind
from app.domain.clock import ReplayClock
from app.domain.errors import InvalidParameterError, NotFoundError
from app.events import EventBus, QuestionAnswered, QuestionAsked
from app.orchestration.ids import SeededIds
from app.orchestration.questions import QuestionStore
from tests.unit.orchestration.conftest import START


def make(db: Path, clock: ReplayClock, bus: EventBus | None = None, seed: str = "q"):
    return QuestionStore(db, clock, SeededIds(seed), bus)


def test_a_question_keeps_its_replies_and_hint_for_the_gui(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    asked: list[QuestionAsked] = []
    bus.subscribe(QuestionAsked, asked.append)
    store = make(db, clock, bus)
    question = store.ask(
        "soa", "task-1", QuestionKind.CLARIFICATION, " Which interval? ",
        ["1h", "4h", " "], "TEXT",
    )
    assert (question.text, question.suggested_replies, question.format_hint) == (
        "Which interval?", ("1h", "4h"), "TEXT",
    )
    assert question.asked_ms == START and question.answer is None
    assert asked == [
        QuestionAsked(question.question_id, "soa", "task-1", "clarification", "Which interval?",
                      ("1h", "4h"), "TEXT")
    ]
    assert make(db, clock, seed="other").get(question.question_id) == question


def test_a_pending_question_survives_a_restart_and_is_answered_after_it(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    answered: list[QuestionAnswered] = []
    store = make(db, clock)
    question = store.ask("soa", "task-1", QuestionKind.CLARIFICATION, "Which symbol?")
    store.close()  # the app closes

    bus.subscribe(QuestionAnswered, answered.append)
    restarted = make(db, clock, bus, seed="after")
    assert [q.question_id for q in restarted.pending("soa")] == [question.question_id]
    clock.advance_to(START + 60_000)
    done = restarted.answer(question.question_id, "  BTC/USDT ")
    assert (done.answer, done.answered_ms) == ("BTC/USDT", START + 60_000)
    assert answered == [QuestionAnswered(question.question_id, "soa", "BTC/USDT")]
    assert restarted.pending() == []


def test_a_question_is_answered_once(db: Path, clock: ReplayClock) -> None:
    store = make(db, clock)
    question = store.ask("soa", "t", QuestionKind.CLARIFICATION, "Proceed?", ["Yes", "No"])
    store.answer(question.question_id, "Yes")
    with pytest.raises(
        InvalidParameterError, match="already answered at 2024-01-02T03:00:00Z with 'Yes'"
    ):
        store.answer(question.question_id, "No")
    assert store.get(question.question_id).answer == "Yes"  # type: ignore[union-attr]


def test_an_empty_answer_or_unknown_question_is_refused(db: Path, clock: ReplayClock) -> None:
    store = make(db, clock)
    question = store.ask("soa", "t", QuestionKind.CLARIFICATION, "Proceed?")
    with pytest.raises(InvalidParameterError, match="answer is empty"):
        store.answer(question.question_id, "  \n")
    with pytest.raises(NotFoundError, match="no question with id 'nope'"):
        store.answer("nope", "yes")
    assert store.get(question.question_id).answer is None  # type: ignore[union-attr]


def test_an_empty_question_is_refused(db: Path, clock: ReplayClock) -> None:
    with pytest.raises(InvalidParameterError, match="question_text"):
        make(db, clock).ask("soa", "t", QuestionKind.CLARIFICATION, " ")


def test_pending_lists_unanswered_questions_oldest_first(db: Path, clock: ReplayClock) -> None:
    store = make(db, clock)
    first = store.ask("soa", "t1", QuestionKind.CLARIFICATION, "one")
    clock.advance_to(START + 1)
    approval = store.ask("trader", "t2", QuestionKind.APPROVAL, "Buy 1 BTC?",
                         details={"client_order_id": "k-1", "notional": "42000"})
    clock.advance_to(START + 2)
    third = store.ask("soa", "t3", QuestionKind.CLARIFICATION, "three")
    store.answer(first.question_id, "ok")
    assert [q.question_id for q in store.pending()] == [approval.question_id, third.question_id]
    assert [q.question_id for q in store.pending("soa")] == [third.question_id]
    stored = store.get(approval.question_id)
    assert stored is not None and stored.kind is QuestionKind.APPROVAL
    assert stored.details == {"client_order_id": "k-1", "notional": "42000"}


def test_for_task_gives_the_latest_question_of_a_task(db: Path, clock: ReplayClock) -> None:
    store = make(db, clock)
    assert store.for_task("t1") is None
    store.ask("soa", "t1", QuestionKind.CLARIFICATION, "first")
    clock.advance_to(START + 5)
    latest = store.ask("soa", "t1", QuestionKind.CLARIFICATION, "second")
    store.ask("soa", "t2", QuestionKind.CLARIFICATION, "other task")
    assert store.for_task("t1") == latest


def test_asking_again_with_the_same_call_key_returns_the_first_question(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    asked: list[QuestionAsked] = []
    bus.subscribe(QuestionAsked, asked.append)
    store = make(db, clock, bus)
    first = store.ask("soa", "t1", QuestionKind.CLARIFICATION, "Which?", key="t1:3")
    again = store.ask("soa", "t1", QuestionKind.CLARIFICATION, "Which?", key="t1:3")
    assert again.question_id == first.question_id
    assert len(store.pending()) == 1 and len(asked) == 1
