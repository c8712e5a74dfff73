"""How each task of a run ended, read from its workspace: a decision, or why it is not one.

Why: a task the loop marks DONE is not necessarily a decision. A model that declines ("I'm sorry,
but I can't help with trading decisions") ends its task with a text answer as a decision does;
the step limit ends a task the model never finished; and an Analyst that answers "HOLD" without
writing its analysis or its assessment has not done its job. ``kestrel eval`` counts each apart,
so none of them scores as a decision.

A task ends as (first that applies):

* ``failed``: not DONE (failed: a fault or a spent budget; cancelled; or still open when the run
  ended);
* ``refusal``: the model declined: its provider ended an answer of the task as a refusal (the
  ids in ``declined``, from the run's recording), or its final answer is worded as one
  (``app.agents.refusals``);
* ``step_limit``: DONE without a final answer of the model: only the loop's step limit finishes
  a task so (``AgentLoop._limit_reached``);
* ``incomplete``: its final answer came without the actions its task requires (``REQUIRED``);
* ``decision``: everything else.

The actions a task requires, as the role prompts ask for them (each a successful tool call of
the task):

* an Analyst's ``RUN_ANALYSIS``: an analysis in ``analysis_log.md`` (appended, or the log
  rewritten), whose newest entry states a BUY, SELL or HOLD signal (NONE says no decision could
  be made), and ``current_market_assessment.yaml`` rewritten;
* a Trader's ``NEW_MARKET_ANALYSIS_SIGNAL`` on which it placed an order: the trade recorded in
  the symbol's ``trades.yaml``;
* a Trader's ``ORDER_FILLED`` of an exit (take-profit, stop-loss or close): the trade completed
  in ``trades.yaml`` and ``performance_summary.yaml`` rewritten.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum

from app.agents.answer_blocks import written
from app.agents.native_calls import NATIVE_CALL
from app.agents.refusals import is_refusal
from app.memory.roles import ANALYSIS_LOG, MARKET_ASSESSMENT, Signal, parse_analysis_log
from app.tools.protocol.parser import parse_response

RUN_ANALYSIS = "RUN_ANALYSIS"
SIGNAL_TASK = "NEW_MARKET_ANALYSIS_SIGNAL"
FILL_TASK = "ORDER_FILLED"
EXIT_KINDS = frozenset({"TAKE_PROFIT", "STOP_LOSS", "CLOSE"})
APPEND = "append_to_agent_memory_file"
WRITE = "write_agent_memory_file"
CREATE_ORDER = "create_order"
TRADES_FILE = re.compile(r"^symbols/[^/]+/trades\.yaml$")
PERFORMANCE_FILE = re.compile(r"^symbols/[^/]+/performance_summary\.yaml$")
DECIDED = frozenset({Signal.BUY, Signal.SELL, Signal.HOLD})
_STATUS = re.compile(r"<status>([a-z]+)</status>")

# what an incomplete task left out, in words for the report
ANALYSIS_WRITTEN = "analysis in analysis_log.md"
SIGNAL_STATED = "BUY, SELL or HOLD in its analysis"
ASSESSMENT_WRITTEN = "current_market_assessment.yaml rewritten"
TRADE_RECORDED = "trade recorded in trades.yaml"
PERFORMANCE_WRITTEN = "performance_summary.yaml rewritten"


class Ending(StrEnum):
    DECISION = "decision"
    REFUSAL = "refusal"
    STEP_LIMIT = "step_limit"
    INCOMPLETE = "incomplete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class TaskEnding:
    """One task of the run, and how it ended; ``missing``: what an incomplete one left out."""

    task_id: str
    task_type: str
    role: str
    created_ms: int
    ending: Ending
    missing: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Call:
    """A call of the task that ran: its tool, its parameters as text, and whether it succeeded."""

    name: str
    params: dict[str, str] = field(default_factory=dict)
    ok: bool = False


def read_endings(db: sqlite3.Connection, declined: Collection[str] = ()) -> list[TaskEnding]:
    """Every task of the run in ``db`` (a run's ``kestrel.db``), in the order it was queued.

    Args:
        declined: the ids of tasks an answer of which the provider ended as a refusal.
    """
    conversations: dict[str, list[tuple[str, str]]] = {}
    for task_id, kind, content in db.execute(
        "SELECT task_id, kind, content FROM messages WHERE kind IN "
        "('assistant', 'native_call', 'final', 'tool_result', 'answer_blocks', "
        "'block_results') ORDER BY task_id, id"
    ):
        conversations.setdefault(task_id, []).append((kind, content))
    endings = []
    for task_id, task_type, status, created_ms, payload, role in db.execute(
        "SELECT t.task_id, t.task_type, t.status, t.created_ms, t.payload_json, a.role "
        "FROM tasks t JOIN agents a ON a.agent_id = t.agent_id ORDER BY t.seq"
    ):
        messages = conversations.get(task_id, [])
        ending, missing = _ending(status, task_type, role, payload, messages,
                                  task_id in declined)
        endings.append(TaskEnding(task_id, task_type, role, int(created_ms), ending, missing))
    return endings


def _ending(
    status: str, task_type: str, role: str, payload: str, messages: list[tuple[str, str]],
    declined: bool,
) -> tuple[Ending, tuple[str, ...]]:
    if status != "DONE":
        return Ending.FAILED, ()
    finals = [content for kind, content in messages if kind == "final"]
    if declined or any(is_refusal(text) for text in finals):
        return Ending.REFUSAL, ()
    if not finals:
        return Ending.STEP_LIMIT, ()
    missing = missing_actions(task_type, role, _payload(payload), _calls(messages))
    return (Ending.INCOMPLETE, missing) if missing else (Ending.DECISION, ())


def missing_actions(
    task_type: str, role: str, payload: dict[str, object], calls: list[_Call]
) -> tuple[str, ...]:
    """What the task's required actions (module docstring) lacks, in words; () when none."""
    done = [c for c in calls if c.ok]
    if role == "analyst" and task_type == RUN_ANALYSIS:
        analyses = [c for c in done if c.name in (APPEND, WRITE) and _path(c) == ANALYSIS_LOG]
        missing = []
        if not analyses:
            missing.append(ANALYSIS_WRITTEN)
        elif not any(_states_signal(c) for c in analyses):
            missing.append(SIGNAL_STATED)
        if not any(c.name == WRITE and _path(c) == MARKET_ASSESSMENT for c in done):
            missing.append(ASSESSMENT_WRITTEN)
        return tuple(missing)
    if role != "trader":
        return ()
    journaled = any(c.name == WRITE and TRADES_FILE.match(_path(c)) for c in done)
    if task_type == SIGNAL_TASK and any(c.name == CREATE_ORDER for c in done):
        return () if journaled else (TRADE_RECORDED,)
    if task_type == FILL_TASK and str(payload.get("exit_kind") or "NONE") in EXIT_KINDS:
        summary = any(c.name == WRITE and PERFORMANCE_FILE.match(_path(c)) for c in done)
        return tuple(what for what, ok in ((TRADE_RECORDED, journaled),
                                          (PERFORMANCE_WRITTEN, summary)) if not ok)
    return ()


def _calls(messages: list[tuple[str, str]]) -> list[_Call]:
    """Each stored call with the result that followed it (a call without one did not run)."""
    calls: list[_Call] = []
    pending: _Call | None = None
    answer = ""  # a final answer with blocks, whose writes' results come next
    for kind, content in messages:
        if kind == "answer_blocks":
            answer = content
        elif kind == "block_results" and answer:  # the blocks were the calls, made for it
            calls.extend(_Call(w.tool, {"file_path": w.file_path, "content": w.content}, w.ok)
                         for w in written(answer, content))
            answer = ""
        elif kind in ("assistant", NATIVE_CALL):  # a native call is kept as its XML
            parsed = parse_response(content).call
            pending = _Call("", {}) if parsed is None else _Call(
                parsed.name, {p.tag: p.text for p in parsed.params})
        elif kind == "tool_result" and pending is not None:
            status = _STATUS.search(content[:400])
            calls.append(_Call(pending.name, pending.params,
                               status is not None and status.group(1) == "success"))
            pending = None
    return calls


def _path(call: _Call) -> str:
    return call.params.get("file_path", "").strip().lstrip("/")


def _states_signal(call: _Call) -> bool:
    """The newest analysis entry the call wrote states a BUY, SELL or HOLD signal (its text
    given plainly, or base64-encoded)."""
    encoded = call.params.get("content_to_append_base64") or call.params.get("content_base64")
    try:
        text = call.params.get("content") if not encoded else base64.b64decode(
            "".join(encoded.split()), validate=True).decode("utf-8")
        entries = parse_analysis_log(text or "")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    return bool(entries) and entries[-1].signal in DECIDED


def _payload(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
