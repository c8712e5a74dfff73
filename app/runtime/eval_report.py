"""What ``kestrel eval`` measured, over each window's ledger and recording (read by
``eval_reading``), and its report.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.agents.costs import PriceTable
from app.agents.cutoffs import period_warnings
from app.config import LLMSettings
from app.domain.clock import parse_time
from app.runtime.agent_backtest import AgentBacktestResult
from app.runtime.eval_reading import (
    Answers,
    Calls,
    read_answers,
    read_calls,
    read_decisions,
    read_declined,
    read_endings_of,
)
from app.runtime.task_endings import Ending

REPORT_JSON = "eval.json"
REPORT_MD = "eval.md"
REPORT_PNG = "eval.png"


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
