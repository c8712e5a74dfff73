"""Turn one agent's messages and question events into chat entries, in any order, exactly once.

The conversation arrives in pieces: the model's call, then (as a separate message) its result; a
clarification as a call, a ``QuestionAsked`` event and a parked ``question`` message; the person's
reply as an answer event and a ``user_reply`` message. The builder merges each call with its
result into one card, binds a question card to its question id (so a button can answer it), and
marks an order card that waits for approval. Every entry's key is derived from the message that
made it, so feeding a message twice (history read while live events were buffered) changes
nothing: history and the live stream meet without duplicates or gaps.

Qt-free: a page of history is built in a worker thread with its own builder, then adopted.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from app.agents import answer_blocks
from app.agents.loop import CLARIFY_TOOL
from app.agents.rule_engine.transcript import params_of, parse_task
from app.domain.agents import Question, QuestionKind
from app.tools.protocol.free_text import DISPLAY
from app.tools.protocol.parser import parse_response
from app.ui.chat.entries import (
    AWAITING,
    RUNNING,
    AnswerEntry,
    Entry,
    FillEntry,
    Message,
    NoticeEntry,
    PersonEntry,
    QuestionEntry,
    TaskEntry,
    ToolEntry,
    call_params,
    question_id_of,
)

QuestionLookup = Callable[[str], Question | None]


@dataclass(slots=True)
class Delta:
    """What changed: ``added`` cards go at the end (an existing one moves there), ``updated``
    ones are redrawn where they are."""

    added: list[Entry] = field(default_factory=list)
    updated: list[Entry] = field(default_factory=list)

    def merge(self, other: Delta) -> Delta:
        self.added.extend(other.added)
        self.updated.extend(other.updated)
        return self

    def __bool__(self) -> bool:
        return bool(self.added or self.updated)


class ConversationBuilder:
    """The entries of one agent's chat, indexed by key and by question id.

    Args:
        agent_id: the agent whose chat this is.
        questions: finds a stored question by id (its text, replies and answer), for questions
            known only from a parked message.
    """

    def __init__(self, agent_id: str, questions: QuestionLookup) -> None:
        self.agent_id = agent_id
        self._questions = questions
        self.entries: dict[str, Entry] = {}
        self._by_question: dict[str, QuestionEntry] = {}

    # -- messages ------------------------------------------------------------------------------

    def feed(self, m: Message) -> Delta:
        """Apply one stored message; a message already applied changes nothing."""
        match m.kind:
            case "task":
                return self._task(m)
            # a call written in the answer, one made through the API's native tool calling
            # (stored as its XML), or an answer the server cut (shown as an unreadable call:
            # its error result follows under the same step)
            case "assistant" | "native_call" | "cut_answer":
                return self._assistant(m)
            case "tool_result":
                return self._result(m)
            case "question":
                return self._parked(m)
            case "user_reply":
                return self._reply(m)
            case "final":
                return self._final(m)
            case "commentary":  # the prose a model wrote around its call: its words, shown so
                return self._commentary(m)
            case "answer_blocks":  # the answer shows as "final" once its blocks are written
                return Delta()
            case "block_results":  # the memory writes made for the answer, in one line
                return self._blocks_written(m)
            case _:  # "notice", and any kind added later: the person sees it as a system line
                return self._notice(m)

    def feed_all(self, messages: Iterable[Message]) -> Delta:
        delta = Delta()
        for message in messages:
            delta.merge(self.feed(message))
        return delta

    def _add(self, entry: Entry) -> Delta:
        self.entries[entry.key] = entry
        if isinstance(entry, QuestionEntry) and entry.question_id:
            self._by_question[entry.question_id] = entry
        return Delta(added=[entry])

    def _task(self, m: Message) -> Delta:
        key = f"task:{m.task_id}"
        existing = self.entries.get(key)
        if isinstance(existing, PersonEntry) and existing.queued:
            existing.queued = False  # the agent starts on it now: it moves below what came first
            existing.origin, existing.market_ms = m, m.market_ms
            return Delta(added=[existing]).merge(self._carried(m, parse_task(m.content).data))
        if existing is not None:
            return Delta()
        facts = parse_task(m.content)
        if facts.is_user_message or facts.task_type == "UNREADABLE_TASK":
            delta = self._add(PersonEntry(key, m.agent_id, m.task_id, m.market_ms, m,
                                          text=facts.text))
        else:
            delta = self._add(TaskEntry(
                key, m.agent_id, m.task_id, m.market_ms, m, task_type=facts.task_type,
                source=facts.source, payload=dict(facts.payload), raw=m.content,
            ))
        return delta.merge(self._carried(m, facts.data))

    def _carried(self, m: Message, data: tuple[tuple[str, object], ...]) -> Delta:
        """What the task carried (fetched for the agent before it started), as one line."""
        key = f"task:{m.task_id}:data"
        if not data or key in self.entries:
            return Delta()
        carried = ", ".join(tool for tool, _ in data)
        return self._add(NoticeEntry(key, m.agent_id, m.task_id, m.market_ms, m,
                                     text=f"Data fetched with the task: {carried}."))

    def _assistant(self, m: Message) -> Delta:
        key = f"{m.task_id}:{m.step}"
        if key in self.entries:
            return Delta()
        parsed = parse_response(m.content, free_text=DISPLAY)
        thinking = parsed.thinking or ""
        call = parsed.call
        if call is not None and call.name == CLARIFY_TOOL:
            values = params_of(call.params)
            replies = values.get("suggested_replies") or []
            return self._add(QuestionEntry(
                key, m.agent_id, m.task_id, m.market_ms, m,
                text=str(values.get("question_text") or "").strip(),
                replies=tuple(str(r).strip() for r in replies if str(r).strip()),
                hint=str(values.get("expected_response_format_hint") or "TEXT").strip(),
                thinking=thinking,
            ))
        # a call, or a malformed one (its error result follows under the same step)
        name = call.name if call is not None else (parsed.tool_name or "unreadable call")
        return self._add(ToolEntry(
            key, m.agent_id, m.task_id, m.market_ms, m, tool_name=name,
            params=call_params(call) if call is not None else (), thinking=thinking,
            call_xml=m.content,
        ))

    def _result(self, m: Message) -> Delta:
        key = f"{m.task_id}:{m.step}"
        entry = self.entries.get(key)
        if isinstance(entry, QuestionEntry) and entry.origin is not None:
            # the clarification call itself failed (an empty question, say): a tool card instead
            parsed = parse_response(entry.origin.content, free_text=DISPLAY)
            tool = ToolEntry(
                key, m.agent_id, m.task_id, entry.market_ms, entry.origin, tool_name=CLARIFY_TOOL,
                params=call_params(parsed.call) if parsed.call is not None else (),
                thinking=entry.thinking, call_xml=entry.origin.content,
            )
            tool.set_result(m.content)
            self.entries[key] = tool
            return Delta(updated=[tool])
        if isinstance(entry, ToolEntry):
            if entry.result_xml:
                return Delta()
            entry.set_result(m.content)
            return Delta(updated=[entry])
        orphan = ToolEntry(key, m.agent_id, m.task_id, m.market_ms, m)  # its call is not shown
        orphan.set_result(m.content)
        return self._add(orphan)

    def _parked(self, m: Message) -> Delta:
        question_id, kind, _reason = question_id_of(m.content)
        if not question_id:
            return Delta()
        entry = self.entries.get(f"{m.task_id}:{m.step}")
        delta = Delta()
        if kind == "clarification" and isinstance(entry, QuestionEntry):
            if not entry.question_id and question_id not in self._by_question:
                self._bind(entry, question_id)
                delta.updated.append(entry)
            return delta
        if kind == "approval" and isinstance(entry, ToolEntry) and entry.status == RUNNING:
            entry.status = AWAITING
            delta.updated.append(entry)
        if question_id not in self._by_question:
            found = self._questions(question_id)
            if found is not None:
                delta.merge(self.asked(found))
        return delta

    def _reply(self, m: Message) -> Delta:
        key = f"{m.task_id}:{m.step}:reply"
        if key in self.entries:
            return Delta()
        delta = self._add(PersonEntry(key, m.agent_id, m.task_id, m.market_ms, m,
                                      text=m.content, reply=True))
        question = self.entries.get(f"{m.task_id}:{m.step}")
        if isinstance(question, QuestionEntry) and question.answer is None:
            question.answer = m.content.strip()
            delta.updated.append(question)
        return delta

    def _final(self, m: Message) -> Delta:
        key = f"{m.task_id}:{m.step}:final"
        if key in self.entries:
            return Delta()
        parsed = parse_response(m.content, free_text=DISPLAY)
        text = parsed.text if parsed.text is not None else m.content
        return self._add(AnswerEntry(key, m.agent_id, m.task_id, m.market_ms, m, text=text,
                                     thinking=parsed.thinking or ""))

    def _commentary(self, m: Message) -> Delta:
        key = f"{m.task_id}:{m.step}:commentary"
        if key in self.entries:
            return Delta()
        return self._add(AnswerEntry(key, m.agent_id, m.task_id, m.market_ms, m,
                                     text=m.content.strip()))

    def _blocks_written(self, m: Message) -> Delta:
        key = f"{m.task_id}:{m.step}:{m.kind}"
        if key in self.entries:
            return Delta()
        return self._add(NoticeEntry(key, m.agent_id, m.task_id, m.market_ms, m,
                                     text=answer_blocks.summary(m.content)))

    def _notice(self, m: Message) -> Delta:
        key = f"{m.task_id}:{m.step}:{m.kind}:{zlib.crc32(m.content.encode('utf-8'))}"
        if key in self.entries:
            return Delta()
        return self._add(NoticeEntry(key, m.agent_id, m.task_id, m.market_ms, m,
                                     text=m.content.strip()))

    # -- questions -----------------------------------------------------------------------------

    def _bind(self, entry: QuestionEntry, question_id: str) -> None:
        """Give a clarification card its question id, with the answer if it already has one."""
        entry.question_id = question_id
        self._by_question[question_id] = entry
        found = self._questions(question_id)
        if found is not None:
            _fill(entry, found)

    def asked(self, q: Question, market_ms: int | None = None) -> Delta:
        """A question the agent waits on (``QuestionAsked``, or a pending one at opening)."""
        entry = self._by_question.get(q.question_id)
        if entry is None and q.kind is QuestionKind.CLARIFICATION:
            entry = next(
                (e for e in reversed(self.entries.values()) if isinstance(e, QuestionEntry)
                 and e.task_id == q.task_id and not e.question_id),
                None,
            )
            if entry is not None:
                self._bind(entry, q.question_id)
        if entry is None:
            created = QuestionEntry(f"q:{q.question_id}", q.agent_id, q.task_id,
                                    market_ms if market_ms is not None else q.asked_ms, None,
                                    question_id=q.question_id)
            _fill(created, q)
            return self._add(created)
        _fill(entry, q)
        return Delta(updated=[entry])

    def answered(self, question_id: str, answer: str) -> Delta:
        entry = self._by_question.get(question_id)
        if entry is None or entry.answer == answer:
            return Delta()
        entry.answer = answer
        return Delta(updated=[entry])

    def question(self, question_id: str) -> QuestionEntry | None:
        return self._by_question.get(question_id)

    def pending_question(self) -> QuestionEntry | None:
        """The newest clarification still waiting for the person (what typed text answers)."""
        for entry in reversed(self._by_question.values()):
            if entry.pending and entry.question_kind == QuestionKind.CLARIFICATION.value:
                return entry
        return None

    # -- the person's own message, history pages, trimming -------------------------------------

    def queued(self, task_id: str, text: str, market_ms: int) -> Delta:
        """The person just sent ``text`` as a new task: show it before the agent starts on it."""
        key = f"task:{task_id}"
        if key in self.entries:
            return Delta()
        return self._add(PersonEntry(key, self.agent_id, task_id, market_ms, None, text=text,
                                     queued=True))

    def fill(self, entry: FillEntry) -> Delta:
        """A fill's card, once (a fill seen live and again in a page of history is one card)."""
        if entry.key in self.entries:
            return Delta()
        return self._add(entry)

    def adopt(self, page: ConversationBuilder) -> list[Entry]:
        """Take the entries of an earlier page that this chat does not have yet, in order."""
        taken = []
        for key, entry in page.entries.items():
            if key in self.entries:
                continue
            if isinstance(entry, QuestionEntry) and entry.question_id in self._by_question:
                continue
            self._add(entry)
            taken.append(entry)
        return taken

    def forget(self, keys: Iterable[str]) -> None:
        """Drop entries whose cards were trimmed off the top."""
        for key in keys:
            entry = self.entries.pop(key, None)
            if isinstance(entry, QuestionEntry) and entry.question_id:
                self._by_question.pop(entry.question_id, None)


def by_time(entries: list[Entry], fills: list[FillEntry]) -> list[Entry]:
    """``entries`` in their order with ``fills`` (oldest first) put where their time falls: a
    fill goes before the first entry made after it."""
    out: list[Entry] = []
    waiting = list(fills)
    for entry in entries:
        made = entry.market_ms
        while waiting and made is not None and (waiting[0].market_ms or 0) < made:
            out.append(waiting.pop(0))
        out.append(entry)
    out.extend(waiting)
    return out


def _fill(entry: QuestionEntry, q: Question) -> None:
    entry.question_kind = q.kind.value
    entry.text = q.text or entry.text
    entry.replies = q.suggested_replies or entry.replies
    entry.hint = q.format_hint or entry.hint
    if q.answer is not None:
        entry.answer = q.answer
