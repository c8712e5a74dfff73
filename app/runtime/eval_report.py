"""What ``kestrel eval`` measured, read from each window's ledger and recording, and its report.

Per window and over all windows: how many of the model's answers the toolset took (a call that
ran, or a final answer) and what the refused ones were refused for (the error code of the result
the model got back), per transport (calls written as XML, calls made through the API's native
tool calling); the answers the server cut at their token limit; model calls and tokens per
decision (a decision is a task the agent finished: an analysis of a bar, an answer to a signal
or a fill), and how many calls had their tokens counted by Kestrel because the server reported
none; whether the server cut prompts (kept only their end); cost and latency per call
(from the recording, so a replay reports the original run's); how often its decisions matched
the rule engine's on the same bars (the analyst's signal, the trader's orders); its trades and,
beside them, its refused orders (so no trade because every order was refused never reads as a
quiet market); and its return beside the rule engine's and buy-and-hold.

How each of the model's tasks ended (``task_endings``) is counted too: a decision, a refusal
(the model declined, in its words or by its provider's stop reason), a stop at the step limit,
a task ended without its required actions (an analysis never written, no signal stated), or a
failure. Only answers in tasks that ended as decisions count as valid, and a bar on which a task
of the model did not end as a decision never agrees with the rule engine. A run that stopped on a
fault says STOPPED and why at the top of both files. The training-cutoff warning checks the model
under the names the server answered with (an alias answers as the dated model it serves).
Nothing here depends on wall time or the output folder, so a replay writes byte-identical JSON
and Markdown.
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
from typing import Any

import numpy as np

from app.agents.context_window import PROMPT_CUT_NOTICE
from app.agents.costs import PriceTable
from app.agents.cutoffs import period_warnings
from app.agents.llm.port import CUT, REFUSAL, LLMUsage
from app.agents.llm.replay import Recording
from app.config import LLMSettings
from app.domain.clock import parse_time
from app.market.series import Times
from app.runtime.agent_backtest import AgentBacktestResult
from app.runtime.task_endings import Ending, TaskEnding, read_endings
from app.store.texts import install

REPORT_JSON = "eval.json"
REPORT_MD = "eval.md"
REPORT_PNG = "eval.png"
SIGNAL_TASK = "NEW_MARKET_ANALYSIS_SIGNAL"
_ERROR_CODE = re.compile(r"<error_code>([^<]+)</error_code>")
_STATUS = re.compile(r"<status>([a-z]+)</status>")


@dataclass(frozen=True)
class WindowRun:
    """One window's two runs: the model's and the rule engine's, with their output folders."""

    name: str
    start: str
    model: AgentBacktestResult
    model_dir: Path
    baseline: AgentBacktestResult
    baseline_dir: Path
    recording: Path


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


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _pct(part: float, whole: float) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def _figures(answers: Answers, calls: Calls, agree: tuple[int, int, int, int]) -> dict[str, Any]:
    bars, analyst, trader, both = agree
    latencies = calls.latencies
    return {
        "responses": answers.responses,
        "valid_call_rate_pct": _pct(answers.accepted, answers.responses),
        "refused": sum(answers.refused.values()),
        "refusals_by_code": dict(sorted(answers.refused.items())),
        "rejected_by_risk_guard": answers.rejected_by_risk,
        "transports": {
            name: {"calls": made, "valid_call_rate_pct": _pct(took, made)}
            for name, (made, took) in answers.calls.items() if made
        },
        "cut_answers": max(calls.cut, answers.cut),
        "prompts_cut": answers.prompts_cut,
        "tasks": answers.tasks,
        "decisions": answers.decisions,
        "decision_rate_pct": _pct(answers.decisions, answers.tasks),
        "refusals": answers.endings[Ending.REFUSAL.value],
        "refusals_by_provider": answers.provider_refusals,
        "step_limit_stops": answers.endings[Ending.STEP_LIMIT.value],
        "incomplete_tasks": answers.endings[Ending.INCOMPLETE.value],
        "missing_actions": dict(sorted(answers.missing.items())),
        "failed_tasks": answers.endings[Ending.FAILED.value],
        "model_calls": calls.calls,
        "calls_per_decision": _ratio(calls.calls or answers.responses, answers.decisions),
        "tokens_in": calls.tokens_in,
        "tokens_out": calls.tokens_out,
        "estimated_usage_calls": calls.estimated,
        "tokens_per_decision": _ratio(calls.tokens_in + calls.tokens_out, answers.decisions),
        "cost_usd": None if calls.unpriced and not calls.cost else str(calls.cost),
        "unpriced_calls": calls.unpriced,
        "latency_ms_mean": round(float(np.mean(latencies)), 1) if latencies else None,
        "latency_ms_p95": round(float(np.percentile(latencies, 95)), 1) if latencies else None,
        "bars": bars,
        "analyst_agreement_pct": _pct(analyst, bars),
        "trader_agreement_pct": _pct(trader, bars),
        "agreement_pct": _pct(both, bars),
    }


@dataclass
class EvalReport:
    """The report: per window and in total; ``write`` puts it in files, ``table`` on a screen."""

    data: dict[str, Any]

    def write(self, out: Path) -> dict[str, Path]:
        out.mkdir(parents=True, exist_ok=True)
        files = {"json": out / REPORT_JSON, "markdown": out / REPORT_MD, "chart": out / REPORT_PNG}
        files["json"].write_text(json.dumps(self.data, indent=2) + "\n", encoding="utf-8")
        files["markdown"].write_text(self.markdown(), encoding="utf-8")
        if self.data["windows"]:
            write_chart(self.data, files["chart"])
        return files

    def rows(self) -> list[tuple[str, ...]]:
        head = ("window", "bars", "decided %", "refusals", "valid %", "calls/dec", "tokens/dec",
                "ms/call", "cost $", "agree %", "trades", "refused", "return %", "rules %",
                "hold %")
        rows: list[tuple[str, ...]] = [head]
        for item in [*self.data["windows"], self.data["total"]]:
            f = item["figures"]
            rows.append((
                item["name"], str(f["bars"]), _show(f["decision_rate_pct"]), str(f["refusals"]),
                _show(f["valid_call_rate_pct"]),
                _show(f["calls_per_decision"]), _show(f["tokens_per_decision"], 0),
                _show(f["latency_ms_mean"], 0), _show(f["cost_usd"], 4),
                _show(f["agreement_pct"]), _show(item.get("trades"), 0),
                _show(item.get("refused_orders"), 0), _show(item.get("return_pct")),
                _show(item.get("rule_engine_return_pct")), _show(item.get("buy_and_hold_pct")),
            ))
        return rows

    def stopped_line(self) -> str | None:
        """STOPPED and why, for a run that stopped on a fault (its report holds the windows
        before the fault); None for a run that ran every window."""
        reason = self.data.get("stopped")
        return None if not reason else f"STOPPED: {reason}"

    def table(self) -> str:
        rows = self.rows()
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        stopped = self.stopped_line()
        lines = [self.title(), *([stopped] if stopped else []), *self.data["warnings"], ""]
        for row in rows:
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        lines += ["", self.tasks_line(), self.transport_line(), self.refusals_line()]
        return "\n".join(lines)

    def title(self) -> str:
        subject = self.data["subject"]
        blind = " (blind)" if self.data["blind"] else ""
        return (f"Eval of {subject['provider']}:{subject['model'] or 'rules'}{blind} as Analyst "
                f"and Trader over {len(self.data['windows'])} window(s)")

    def transport_line(self) -> str:
        """Which transport the tools took and how valid each one's calls were; cut answers,
        cut prompts and estimated usage when there were any."""
        figures = self.data["total"]["figures"]
        mode = self.data["subject"].get("tool_transport", "xml")
        names = {"xml": "XML calls", "native": "native calls"}
        used = [f"{names[name]} {t['calls']}, {_show(t['valid_call_rate_pct'])}% valid"
                for name, t in figures["transports"].items()]
        parts = [f"Tool transport: {mode} ({'; '.join(used) or 'no calls'})"]
        if figures["cut_answers"]:
            parts.append(f"{figures['cut_answers']} answer(s) cut at the token limit")
        if figures["prompts_cut"]:
            parts.append(f"the server cut the prompt of {figures['prompts_cut']} agent(s)")
        if figures["estimated_usage_calls"]:
            parts.append(f"{figures['estimated_usage_calls']} call(s) without usage from the "
                         "server, counted by Kestrel (estimated)")
        return "; ".join(parts) + "."

    def tasks_line(self) -> str:
        """How the tasks ended: decisions, and each other ending counted apart."""
        f = self.data["total"]["figures"]
        if f["tasks"] and f["decisions"] == f["tasks"]:
            return f"Tasks: {f['tasks']}, every one ended in a decision."
        by_provider = (f" ({f['refusals_by_provider']} by the provider's stop reason)"
                       if f["refusals_by_provider"] else "")
        line = (f"Tasks: {f['tasks']}, {f['decisions']} ended in a decision; not decisions: "
                f"{f['refusals']} refusals{by_provider}, {f['step_limit_stops']} stopped at the "
                f"step limit, {f['incomplete_tasks']} without their required actions, "
                f"{f['failed_tasks']} failed or unfinished.")
        if f["missing_actions"]:
            line += " Left out: " + ", ".join(
                f"{what} ({count})" for what, count in f["missing_actions"].items()) + "."
        return line

    def refusals_line(self) -> str:
        refused = self.data["total"]["figures"]["refusals_by_code"]
        if not refused:
            return "Answers the toolset refused: none."
        return "Answers the toolset refused, by error code: " + ", ".join(
            f"{code} {count}" for code, count in refused.items())

    def markdown(self) -> str:
        rows = self.rows()
        lines = [f"# {self.title()}", ""]
        stopped = self.stopped_line()
        if stopped:
            lines += [f"> **{stopped}**", ""]
        lines += [f"> WARNING: {w}" for w in self.data["warnings"]]
        lines += ["", "| " + " | ".join(rows[0]) + " |",
                  "|" + "|".join("---" for _ in rows[0]) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        lines += ["", self.tasks_line(), "", self.transport_line(), "", self.refusals_line(), "",
                  "decided %: tasks that ended in a decision; refusals: tasks the model "
                  "declined (in its words, or by its provider's stop reason). valid %: answers "
                  "the toolset took (a call that ran, or a final answer) in tasks that ended in "
                  "a decision. calls/dec, tokens/dec: model calls and tokens per decision. "
                  "agree %: bars on which the analyst's signal and the trader's orders matched "
                  "the rule engine's (a bar with a task that did not end in a decision never "
                  "matches). trades: the model's round trips; refused: its orders (entries, "
                  "exits, closes) the broker, order entry or the Risk Guard refused. return %: "
                  "the model's agents; rules %: the rule engine on the same bars; hold %: "
                  "buy-and-hold.", ""]
        return "\n".join(lines)


def _show(value: Any, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{float(value):,.{digits}f}"


def build_report(
    subject: LLMSettings, runs: list[WindowRun], *, blind: bool = False,
    period_start: str | None = None, stopped: str | None = None,
) -> EvalReport:
    """The report of the windows in ``runs``.

    Args:
        period_start: where the evaluated period starts (ISO), for the training-cutoff warning:
            the first window's start, also when the run stopped before any window was done;
            default: the earliest of ``runs``.
        stopped: why the run stopped before its last window (a fault), said at the top.
    """
    prices = PriceTable.load(None)
    windows: list[dict[str, Any]] = []
    all_answers, all_calls = Answers(), Calls()
    agree_total = (0, 0, 0, 0)
    for run in runs:
        calls = read_calls(run.recording, subject, prices)
        declined = read_declined(run.recording)
        endings = read_endings_of(run.model_dir, declined)
        answers = read_answers(run.model_dir, endings, declined)
        time_ms = run.model.result.time_ms[1:]  # the bars decided on (step 0 is the start)
        mine = read_decisions(run.model_dir, time_ms, run.model.blind_shift_ms, endings)
        rules = read_decisions(run.baseline_dir, run.baseline.result.time_ms[1:],
                               endings=read_endings_of(run.baseline_dir))
        pairs = list(zip(mine, rules, strict=True))
        agree = (len(mine), sum(a.agrees(b, slice(0, 1)) for a, b in pairs),
                 sum(a.agrees(b, slice(1, 2)) for a, b in pairs),
                 sum(a.agrees(b) for a, b in pairs))
        all_answers.add(answers)
        all_calls.add(calls)
        agree_total = (agree_total[0] + agree[0], agree_total[1] + agree[1],
                       agree_total[2] + agree[2], agree_total[3] + agree[3])
        windows.append({
            "name": run.name, "start": run.start,
            "figures": _figures(answers, calls, agree),
            "return_pct": round(run.model.result.metrics.total_return_pct, 4),
            "rule_engine_return_pct": round(run.baseline.result.metrics.total_return_pct, 4),
            "buy_and_hold_pct": round(run.model.result.baseline.total_return_pct, 4),
            "trades": run.model.result.metrics.trades,
            "refused_orders": run.model.result.refused_orders,
            "refused_orders_by": run.model.result.refused,
            "disagreements": [
                {"bar": i, "model": a.shown(), "rule_engine": b.shown()}
                for i, (a, b) in enumerate(pairs) if not a.agrees(b)
            ][:20],
        })
    total: dict[str, Any] = {
        "name": "all", "figures": _figures(all_answers, all_calls, agree_total),
        "trades": sum(w["trades"] for w in windows),
        "refused_orders": _total(w["refused_orders"] for w in windows),
        "return_pct": _mean(w["return_pct"] for w in windows),
        "rule_engine_return_pct": _mean(w["rule_engine_return_pct"] for w in windows),
        "buy_and_hold_pct": _mean(w["buy_and_hold_pct"] for w in windows),
    }
    warnings: list[str] = []
    before_cutoff = False
    starts = [parse_time(period_start)] if period_start else [parse_time(r.start) for r in runs]
    if subject.provider != "rule-engine" and starts:
        for text, flag in period_warnings(subject.model, all_calls.answered, min(starts),
                                          subject.training_cutoff, blind=blind):
            warnings.append(text)
            before_cutoff = before_cutoff or flag
    if all_answers.prompts_cut:
        warnings.append(
            f"The model's server cut the prompt of {all_answers.prompts_cut} agent(s): it kept "
            "only the end, without the system prompt, so these answers are not the model's "
            "work with Kestrel's instructions. Give the server a larger context (Ollama: "
            "OLLAMA_CONTEXT_LENGTH) and set [llm] context_tokens to it.")
    subject_data = subject.model_dump(include={
        "provider", "model", "base_url", "tool_transport", "context_tokens",
        "max_output_tokens"})
    subject_data["answered_as"] = sorted(all_calls.answered)
    return EvalReport({
        "subject": subject_data, "blind": blind, "stopped": stopped, "warnings": warnings,
        "before_training_cutoff": before_cutoff, "windows": windows, "total": total,
    })


def _total(counts: Any) -> int | None:
    """The sum of the windows' counts; None when a window's was not counted."""
    items = list(counts)
    return None if any(c is None for c in items) else sum(items)


def _mean(values: Any) -> float | None:
    items = list(values)
    return round(sum(items) / len(items), 4) if items else None


def write_chart(data: dict[str, Any], path: Path) -> None:
    """Per window: return of the model, the rule engine and buy-and-hold, and agreement."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    windows = data["windows"]
    names = [w["name"] for w in windows]
    x = np.arange(len(names))
    figure, (returns, agreement) = plt.subplots(1, 2, figsize=(10, 4))
    try:
        width = 0.27
        for offset, key, label in ((-width, "return_pct", "model"),
                                   (0.0, "rule_engine_return_pct", "rule engine"),
                                   (width, "buy_and_hold_pct", "buy & hold")):
            returns.bar(x + offset, [w[key] for w in windows], width, label=label)
        returns.set_xticks(x, names)
        returns.set_ylabel("return %")
        returns.axhline(0, color="grey", linewidth=0.6)
        returns.legend()
        returns.set_title("Return per window")
        valid = [w["figures"]["valid_call_rate_pct"] or 0 for w in windows]
        agree = [w["figures"]["agreement_pct"] or 0 for w in windows]
        agreement.bar(x - 0.2, valid, 0.4, label="valid answers %")
        agreement.bar(x + 0.2, agree, 0.4, label="agrees with rule engine %")
        agreement.set_xticks(x, names)
        agreement.set_ylim(0, 105)
        agreement.legend(loc="lower right")
        agreement.set_title("Protocol and decisions")
        figure.suptitle(EvalReport(data).title(), fontsize=10)
        figure.tight_layout()
        figure.savefig(path, dpi=100, metadata={"Software": None})
    finally:
        plt.close(figure)
