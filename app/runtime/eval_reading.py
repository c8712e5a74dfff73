"""What ``kestrel eval`` reads back from a window's runs: the model's answers and what became of
them, how its tasks ended, what it decided on each bar, and its calls as the recording holds
them.

Everything is read from the run's own workspace database (opened read-only) and its recording,
never from the live objects of the run, so a replay of a recording reads the original run's
figures, and the report (``eval_report``) is a function of these readings alone.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import numpy as np

from app.agents.context_window import PROMPT_CUT_NOTICE
from app.agents.costs import PriceTable
from app.agents.llm.port import CUT, REFUSAL, LLMUsage
from app.agents.llm.replay import Recording
from app.config import LLMSettings
from app.market.series import Times
from app.runtime.task_endings import Ending, TaskEnding, read_endings
from app.store.texts import install

SIGNAL_TASK = "NEW_MARKET_ANALYSIS_SIGNAL"
_ERROR_CODE = re.compile(r"<error_code>([^<]+)</error_code>")
_STATUS = re.compile(r"<status>([a-z]+)</status>")

# the kind of each stored answer: the transport of a call, or a cut answer
_ANSWER_KINDS = {"assistant": "xml", "native_call": "native", "cut_answer": "cut"}
TRANSPORTS = ("xml", "native")


@dataclass
class Answers:
    """The model's answers in one run and what became of them.

    ``calls`` counts, per transport ("xml", "native"), the calls made and those the toolset
    took; ``cut`` the answers the server cut at their token limit (each refused, ANSWER_CUT);
    ``prompts_cut`` the agents told that the server cut their prompt; ``tasks`` and
    ``endings`` how the tasks ended (``task_endings``), ``missing`` the required actions left out.
    """

    responses: int = 0
    accepted: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    rejected_by_risk: int = 0
    decisions: int = 0
    cut: int = 0
    calls: dict[str, list[int]] = field(
        default_factory=lambda: {name: [0, 0] for name in TRANSPORTS})
    prompts_cut: int = 0
    tasks: int = 0
    endings: Counter[str] = field(default_factory=Counter)
    missing: Counter[str] = field(default_factory=Counter)
    provider_refusals: int = 0

    def add(self, other: Answers) -> None:
        self.responses += other.responses
        self.accepted += other.accepted
        self.refused.update(other.refused)
        self.rejected_by_risk += other.rejected_by_risk
        self.decisions += other.decisions
        self.cut += other.cut
        for name, (made, took) in other.calls.items():
            self.calls[name][0] += made
            self.calls[name][1] += took
        self.prompts_cut += other.prompts_cut
        self.tasks += other.tasks
        self.endings.update(other.endings)
        self.missing.update(other.missing)
        self.provider_refusals += other.provider_refusals


def _db(run_dir: Path) -> sqlite3.Connection:
    path = run_dir / "workspace" / "kestrel.db"
    return install(sqlite3.connect(f"file:{path}?mode=ro", uri=True))


def read_declined(recording: Path) -> set[str]:
    """The tasks an answer of which the provider ended as a refusal (the recording keeps each
    answer's finish reason, so a replay counts the original run's)."""
    if not recording.is_file():
        return set()
    return {str(exchange.get("task_id", ""))
            for exchange in Recording.load(recording).exchanges.values()
            if exchange["response"].get("finish_reason") == REFUSAL}


def read_endings_of(run_dir: Path, declined: set[str] | None = None) -> list[TaskEnding]:
    """How each task of the run in ``run_dir`` ended (``task_endings``)."""
    with _db(run_dir) as db:
        return read_endings(db, declined or set())


def read_answers(run_dir: Path, endings: Sequence[TaskEnding] = (),
                 declined: set[str] | None = None) -> Answers:
    """Each answer of the run's agents and the result it got: a stored call is followed by its
    result; a final answer ends its task, and one with blocks is a single answer, refused
    when a block was (its corrected answer is another). An answer counts as taken (valid) only
    in a task that ended as a decision: a refusal, a task stopped at the step limit or one that
    left out its required actions is no valid answer to its task, however well-formed its
    calls."""
    answers = Answers()
    decided = {e.task_id for e in endings if e.ending is Ending.DECISION}
    answers.tasks = len(endings)
    for ending in endings:
        if ending.ending is not Ending.DECISION:
            answers.endings[ending.ending.value] += 1
        answers.missing.update(ending.missing)
    answers.provider_refusals = sum(
        1 for e in endings if e.ending is Ending.REFUSAL and e.task_id in (declined or set()))
    with _db(run_dir) as db:
        rows = db.execute(
            "SELECT task_id, kind, content FROM messages WHERE kind IN "
            "('assistant', 'native_call', 'cut_answer', 'final', 'tool_result', "
            "'answer_blocks', 'block_results') ORDER BY task_id, id").fetchall()
        answers.prompts_cut = int(db.execute(
            "SELECT COUNT(*) FROM messages WHERE kind = 'notice' AND content LIKE ?",
            (PROMPT_CUT_NOTICE + "%",)).fetchone()[0])
    answers.decisions = len(decided)
    waiting = ""  # the kind of the answer whose result comes next
    closed = ""  # a task whose answer with blocks was all written (its 'final' is that answer)
    for task, kind, content in rows:
        if kind == "answer_blocks":  # one answer, whatever its blocks: refused if one was
            answers.responses += 1
            waiting = "blocks"
        elif kind == "block_results" and waiting == "blocks":
            codes = _ERROR_CODE.findall(content)
            if codes:
                answers.refused[codes[0]] += 1
            else:
                answers.accepted += task in decided
                closed = task
            waiting = ""
        elif kind == "final":
            if closed != task:
                answers.responses += 1
                answers.accepted += task in decided
            waiting = closed = ""
        elif kind in _ANSWER_KINDS:
            answers.responses += 1
            waiting = _ANSWER_KINDS[kind]
            if waiting == "cut":
                answers.cut += 1
            else:
                answers.calls[waiting][0] += 1
        elif waiting:  # the result of the answer just made
            status = _STATUS.search(content[:400])
            if status is not None and status.group(1) == "error":
                code = _ERROR_CODE.search(content)
                answers.refused[code.group(1) if code else "UNKNOWN"] += 1
            else:
                answers.accepted += task in decided
                if waiting in answers.calls:
                    answers.calls[waiting][1] += 1
                if status is not None and status.group(1) == "rejected":
                    answers.rejected_by_risk += 1
            waiting = ""
    return answers


@dataclass(frozen=True, slots=True)
class BarDecision:
    """What the agents decided on one bar: the analyst's signal and the trader's orders, and,
    when a task created in the bar did not end as a decision, how it ended instead."""

    signal: str
    orders: str
    undecided: str = ""

    def agrees(self, other: BarDecision, part: slice = slice(0, 2)) -> bool:
        """Both decided, and the same (``part``: 0 the signal, 1 the orders, both)."""
        if self.undecided or other.undecided:
            return False
        return (self.signal, self.orders)[part] == (other.signal, other.orders)[part]

    def shown(self) -> list[str]:
        signal = f"no decision: {self.undecided}" if self.undecided else self.signal
        return [signal, self.orders]


def read_decisions(
    run_dir: Path, time_ms: Times, shift_ms: int = 0,
    endings: Sequence[TaskEnding] = (),
) -> list[BarDecision]:
    """Per bar of the run: the analyst's signal (BUY, SELL or HOLD) and the trader's orders
    (sides placed in that bar, or NONE); a bar on which a task of the agents did not end as a
    decision says how it ended (the first such task's ending). ``shift_ms``: how much earlier a
    blind run's agents stamped their tasks (the orders are in the real ledger's time)."""
    signals = ["HOLD"] * time_ms.size
    orders: list[list[str]] = [[] for _ in range(time_ms.size)]
    undecided = [""] * time_ms.size
    for ending in endings:
        bar = _bar(time_ms, ending.created_ms + shift_ms)
        if bar >= 0 and ending.ending is not Ending.DECISION and not undecided[bar]:
            undecided[bar] = ending.ending.value
    with _db(run_dir) as db:
        for created, payload in db.execute(
            "SELECT created_ms, payload_json FROM tasks WHERE task_type = ? ORDER BY seq",
            (SIGNAL_TASK,),
        ):
            bar = _bar(time_ms, created + shift_ms)
            try:
                side = str(json.loads(payload).get("side", "?")).upper()
            except (ValueError, AttributeError):
                side = "?"
            if bar >= 0:
                signals[bar] = side
        for created, side, kind in db.execute(
            "SELECT created_ms, side, order_type FROM orders ORDER BY seq"
        ):
            bar = _bar(time_ms, created)
            if bar >= 0:
                orders[bar].append(f"{side.upper()} {kind.upper()}")
    return [BarDecision(s, ", ".join(sorted(o)) or "NONE", u)
            for s, o, u in zip(signals, orders, undecided, strict=True)]


def _bar(time_ms: Times, at_ms: int) -> int:
    return int(np.searchsorted(time_ms, at_ms, side="right")) - 1


@dataclass
class Calls:
    """The model's calls as the recording holds them: ``cut`` were cut by the server at their
    token limit, ``estimated`` had their tokens counted by Kestrel (the server reported none)."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Decimal = Decimal(0)
    unpriced: int = 0
    latencies: list[float] = field(default_factory=list)
    cut: int = 0
    estimated: int = 0
    answered: set[str] = field(default_factory=set)  # the model names the server answered with

    def add(self, other: Calls) -> None:
        self.calls += other.calls
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.cost += other.cost
        self.unpriced += other.unpriced
        self.latencies += other.latencies
        self.cut += other.cut
        self.estimated += other.estimated
        self.answered |= other.answered


def read_calls(recording: Path, subject: LLMSettings, prices: PriceTable) -> Calls:
    calls = Calls()
    if not recording.is_file():
        return calls
    for (_agent, _index), exchange in sorted(Recording.load(recording).exchanges.items()):
        answer = exchange["response"]
        usage = LLMUsage(**answer["usage"])
        calls.calls += 1
        calls.tokens_in += usage.input_tokens
        calls.tokens_out += usage.output_tokens
        calls.latencies.append(float(answer.get("latency_ms", 0.0)))
        calls.cut += answer.get("finish_reason") == CUT
        calls.estimated += bool(answer.get("usage_estimated"))
        if answer.get("model"):
            calls.answered.add(str(answer["model"]))
        cost = prices.price(str(answer.get("model") or subject.model), usage,
                            provider=subject.provider, base_url=subject.base_url or None)
        if cost is None:
            calls.unpriced += 1
        else:
            calls.cost += cost
    return calls
