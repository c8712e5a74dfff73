"""Benchmark: model calls, input tokens and cost per decision, without and with task data.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_decisions.py [--hours 48] [--price-as gpt-4o]

or ``pytest tests/benchmarks/bench_decisions.py -s`` (the full run, asserting the targets).

A *decision* is one task an agent finished: an hourly analysis, a trade signal or a fill for the
Trader, a chat request for the Orchestrator. The world is the one ``kestrel run`` builds, on
the bundled BTC/USDT hourly data: the person asks the Orchestrator to watch BTC/USDT with a
trend analyst and a trader, the market moves ``--hours`` hours, then the person asks "status".

The model is ``GoodModel``: it answers as a well-behaved LLM would, with the rule engine's
policies (they decide from a task's data block when it has one and call the tools otherwise),
and it is counted the way an OpenAI-compatible API counts: input tokens are cl100k tokens of the
system prompt and every message (plus the chat format's 4 per message and 3 per request),
output tokens those of the answer, and cached tokens the prefix shared with the agent's previous
request, from 1,024 tokens in steps of 128 (OpenAI's prompt caching rule). The world prices
every call with ``resources/prices.yaml`` as ``--price-as`` (default gpt-4o) and stores it in
``llm_usage``, which is what is read back here.

Baseline, measured in the same run: the same scenario with the templates' ``task_data`` removed
(``before``). Every call of the ``after`` run is recorded (``RecordingProvider``) and the run is
replayed from the recording (``ReplayProvider``): the replay must make the same decisions, and
each replayed decision costs nothing. A last part times the built-in rule engine (not an LLM)
over the same hours with and without task data.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from app.agents.llm.port import (  # noqa: E402
    LLMProvider,
    LLMRequest,
    LLMResponse,
    LLMUsage,
    StreamCallback,
)
from app.agents.llm.replay import RecordingProvider, ReplayProvider  # noqa: E402
from app.agents.rules.engine import decide  # noqa: E402
from app.agents.rules.transcript import read_transcript  # noqa: E402
from app.agents.templates import DEFAULT_CONTEXT_TOKENS, AgentTemplate  # noqa: E402
from app.domain.agents import AgentInfo  # noqa: E402
from app.runtime.world import World  # noqa: E402
from app.tools.protocol.parser import parse_response  # noqa: E402
from tests.benchmarks.bench_agents import cl100k  # noqa: E402
from tests.helpers.agents import SETUP_COMMAND, advance_hours, agent_world, settle  # noqa: E402

pytestmark = pytest.mark.benchmark

ROLES = ("analyst", "trader", "orchestrator")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CACHE_MIN = 1_024
CACHE_STEP = 128
PER_MESSAGE = 4
PER_REQUEST = 3
SECONDS_PER_CALL = 2.0  # a real model's latency, for the backtest-hours estimate
BACKTEST_BARS = 500
TARGET_ANALYST_CALLS = 3.0  # issue 17: an analysis decided in three calls or fewer


class Tokens:
    """cl100k counts, memoised: every request resends the conversation so far."""

    def __init__(self) -> None:
        self._encoding = cl100k()
        self._seen: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        count = self._seen.get(text)
        if count is None:
            count = len(self._encoding.encode(text, disallowed_special=()))
            self._seen[text] = count
        return count


@dataclass
class GoodModel:
    """The rule engine's policy for the agent's template, answering as a priced LLM."""

    policy: str
    tokens: Tokens
    previous: dict[str, list[tuple[str, int]]]  # agent id -> its last request, message by message
    model: str = "gpt-4o"
    name: str = "openai-compatible"
    is_llm: bool = True

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse:
        answer = decide(self.policy, request.agent_id, request.agent_config,
                        read_transcript(request.messages)).render()
        parts = [(request.system, self.tokens(request.system) + PER_MESSAGE)]
        parts += [(m.content, self.tokens(m.content) + PER_MESSAGE) for m in request.messages]
        total = sum(n for _, n in parts) + PER_REQUEST
        shared = 0
        for (now, n), (before, _) in zip(parts, self.previous.get(request.agent_id, []),
                                         strict=False):
            if now != before:
                break
            shared += n
        cached = shared // CACHE_STEP * CACHE_STEP if shared >= CACHE_MIN else 0
        self.previous[request.agent_id] = parts
        usage = LLMUsage(total, self.tokens(answer), cached)
        return LLMResponse(answer, usage, self.model, self.name, 0.0)

    async def aclose(self) -> None:
        return None


@dataclass
class RoleFigures:
    decisions: int = 0
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)

    def per(self, value: float | Decimal) -> float:
        return float(value) / self.decisions if self.decisions else 0.0


@dataclass
class Run:
    label: str
    roles: dict[str, RoleFigures] = field(default_factory=dict)
    # each role's orders, signals and agents created, in order (agents run concurrently, so
    # only the order within one agent is fixed)
    decisions: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    to_decide: dict[str, list[int]] = field(default_factory=dict)  # role -> calls per task
    wall_s: float = 0.0
    largest: int = 0  # input tokens of the largest request


def prepare(world: World, data: bool) -> None:
    """No spending cap in either run (at gpt-4o prices the analyst's $5 runs out after about 38
    analyses without task data, which would end the baseline early), and task data only in the
    run that has it."""
    for name, template in list(world.agents.manager.templates.items()):
        limits = template.limits.model_copy(update={"budget_usd": None})
        update: dict[str, Any] = {"limits": limits}
        if not data:
            update["task_data"] = None
        world.agents.manager.templates[name] = template.model_copy(update=update)


Override = Callable[[AgentInfo, AgentTemplate], LLMProvider | None]


async def scenario(folder: Path, hours: int, override: Override | None, data: bool) -> float:
    world = agent_world(folder, provider_override=override)
    try:
        await world.start()
        prepare(world, data)
        started = time.perf_counter()
        orchestrator = await world.ensure_orchestrator()
        world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
        await settle(world)
        await advance_hours(world, hours)
        world.agents.manager.send_user_message(orchestrator.agent_id, "status")
        await settle(world, timeout_s=600)
        return time.perf_counter() - started
    finally:
        await world.aclose()


def read_run(label: str, folder: Path, wall_s: float) -> Run:
    run = Run(label, {role: RoleFigures() for role in ROLES}, wall_s=wall_s)
    conn = sqlite3.connect(folder / "kestrel.db")
    try:
        roles = dict(conn.execute("SELECT agent_id, role FROM agents").fetchall())
        for agent_id, done in conn.execute(
            "SELECT agent_id, COUNT(*) FROM tasks WHERE status='DONE' GROUP BY agent_id"
        ):
            run.roles[roles[agent_id]].decisions += done
        for agent_id, calls, tokens_in, cached, tokens_out, costs in conn.execute(
            "SELECT agent_id, COUNT(*), SUM(input_tokens), SUM(cached_tokens), "
            "SUM(output_tokens), GROUP_CONCAT(cost, ' ') FROM llm_usage GROUP BY agent_id"
        ):
            figures = run.roles[roles[agent_id]]
            figures.calls += calls
            figures.input_tokens += tokens_in or 0
            figures.cached_tokens += cached or 0
            figures.output_tokens += tokens_out or 0
            figures.cost += sum((Decimal(c) for c in (costs or "").split()), Decimal(0))
        run.largest = conn.execute("SELECT MAX(input_tokens) FROM llm_usage").fetchone()[0] or 0
        names: dict[str, str] = {}  # ids in order of appearance: runs differ in ids drawn

        def plain_ids(text: str) -> str:
            return _UUID.sub(lambda m: names.setdefault(m.group(0), f"id{len(names)}"), text)

        for agent, tool, params in conn.execute(
            "SELECT agent_id, tool_name, params_json FROM tool_calls WHERE tool_name IN "
            "('create_order', 'close_position', 'dispatch_task_to_agent', "
            "'set_position_tp_sl_orders', 'create_new_agent_instance') ORDER BY id"
        ):
            run.decisions.setdefault(roles[agent], []).append((tool, plain_ids(params)))
        answers: dict[tuple[str, str], list[str]] = {}
        for agent, task, content in conn.execute(
            "SELECT agent_id, task_id, content FROM messages WHERE kind IN ('assistant', "
            "'final') ORDER BY id"
        ):
            answers.setdefault((roles[agent], task), []).append(content)
        for (role, _task), steps in answers.items():
            run.to_decide.setdefault(role, []).append(calls_to_decide(steps))
    finally:
        conn.close()
    return run


READS = ("get_", "calculate_", "read_", "list_", "describe_", "recall_")


def calls_to_decide(answers: list[str]) -> int:
    """The model calls of a task up to and including its first that acts (writes, signals,
    orders, answers): the reads before it are what the decision waited for."""
    for number, answer in enumerate(answers, start=1):
        call = parse_response(answer).call
        if call is None or not call.name.startswith(READS):
            return number
    return len(answers)


def measure(hours: int, price_as: str) -> dict[str, Any]:
    tokens = Tokens()
    runs: dict[str, Run] = {}
    with tempfile.TemporaryDirectory(prefix="bench-decisions-") as tmp:
        root = Path(tmp)
        for label, data in (("before", False), ("after", True)):
            previous: dict[str, list[tuple[str, int]]] = {}
            recording = root / f"{label}.jsonl"

            def override(info: AgentInfo, template: AgentTemplate,
                         previous: dict[str, list[tuple[str, int]]] = previous,
                         recording: Path = recording) -> LLMProvider:
                model = GoodModel(template.provider.model, tokens, previous, price_as)
                return RecordingProvider(model, recording)

            folder = root / label
            wall = asyncio.run(scenario(folder, hours, override, data))
            runs[label] = read_run(label, folder, wall)
        player = ReplayProvider(root / "after.jsonl")
        folder = root / "replayed"
        wall = asyncio.run(scenario(folder, hours, lambda _i, _t: player, True))
        runs["replayed"] = read_run("replayed", folder, wall)
        rules: dict[str, float] = {}
        for label, data in (("before", False), ("after", True)):
            rules[label] = asyncio.run(scenario(root / f"rules-{label}", hours, None, data))
    return {"runs": runs, "rules": rules, "hours": hours, "price_as": price_as}


def report(r: dict[str, Any]) -> str:
    before, after, replayed = (r["runs"][k] for k in ("before", "after", "replayed"))
    row = "   {:<13}{:>10}{:>10}{:>9}{:>14}{:>14}{:>9}{:>12}{:>12}{:>9}"
    lines = [
        f"decisions over {r['hours']} simulated hours (BTC/USDT 1h, a trend analyst and a "
        f"trader), GoodModel priced as {r['price_as']}; baseline: the same run without task data",
        row.format("role", "decisions", "calls/d", "", "input tok/d", "", "", "cost/d $", "",
                   ""),
        row.format("", "", "before", "after", "before", "after", "ratio", "before", "after",
                   "ratio"),
    ]
    for role in ROLES:
        b, a = before.roles[role], after.roles[role]
        lines.append(row.format(
            role, f"{b.decisions}/{a.decisions}", f"{b.per(b.calls):.2f}",
            f"{a.per(a.calls):.2f}", f"{b.per(b.input_tokens):,.0f}",
            f"{a.per(a.input_tokens):,.0f}",
            f"{a.per(a.input_tokens) / max(b.per(b.input_tokens), 1):.2f}",
            f"{b.per(b.cost):.4f}", f"{a.per(a.cost):.4f}",
            f"{a.per(a.cost) / max(b.per(b.cost), 1e-12):.2f}",
        ))
    for run in (before, after):
        total_calls = sum(f.calls for f in run.roles.values())
        cost = sum((f.cost for f in run.roles.values()), Decimal(0))
        cached = sum(f.cached_tokens for f in run.roles.values())
        tokens_in = sum(f.input_tokens for f in run.roles.values())
        lines.append(f"   {run.label}: {total_calls} model calls, {tokens_in:,} input tokens "
                     f"({cached / max(tokens_in, 1):.0%} cached), ${cost:.4f}; largest request "
                     f"{run.largest:,} tokens (budget {DEFAULT_CONTEXT_TOKENS:,})")
    for role in ROLES:
        b_to, a_to = before.to_decide.get(role, [0]), after.to_decide.get(role, [0])
        lines.append(f"   {role}: model calls until the decision (reads, then the first act): "
                     f"before {sum(b_to) / len(b_to):.2f}, after {sum(a_to) / len(a_to):.2f}")
    a_calls = after.roles["analyst"].per(after.roles["analyst"].calls)
    b_calls = before.roles["analyst"].per(before.roles["analyst"].calls)
    a_decide = after.to_decide.get("analyst", [0])
    for label, calls in (("before", b_calls), ("after", a_calls)):
        lines.append(
            f"   a {BACKTEST_BARS}-bar analyst backtest at {SECONDS_PER_CALL:g} s per call, "
            f"{label}: {calls * BACKTEST_BARS * SECONDS_PER_CALL / 3600:.1f} h of model time")
    worst = max(a_decide)
    lines.append(f"   target: every analysis decided within {TARGET_ANALYST_CALLS:g} calls; "
                 f"slowest {worst} -> {'MET' if worst <= TARGET_ANALYST_CALLS else 'MISSED'} "
                 f"(all its calls: {a_calls:.2f} per analysis, with the log, the assessment and "
                 "any signal)")
    same = after.decisions == before.decisions
    lines.append(f"   the same orders, signals and agents with and without data: {same}")
    replay_cost = sum((f.cost for f in replayed.roles.values()), Decimal(0))
    lines.append(f"   replayed from the recording: same decisions "
                 f"{replayed.decisions == after.decisions}, cost ${replay_cost:.4f}")
    rules = r["rules"]
    lines.append(f"   rule engine (not an LLM), wall time: before {rules['before']:.2f} s, after "
                 f"{rules['after']:.2f} s, ratio {rules['after'] / rules['before']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=int, default=48)
    parser.add_argument("--price-as", default="gpt-4o")
    args = parser.parse_args(argv)
    print(report(measure(args.hours, args.price_as)))
    return 0


def test_task_data_cuts_calls_tokens_and_cost_per_decision() -> None:
    result = measure(48, "gpt-4o")
    print(report(result))
    before, after, replayed = (result["runs"][k] for k in ("before", "after", "replayed"))
    assert after.decisions == before.decisions == replayed.decisions
    analyst_b, analyst_a = before.roles["analyst"], after.roles["analyst"]
    assert max(after.to_decide["analyst"]) <= TARGET_ANALYST_CALLS
    assert analyst_a.per(analyst_a.input_tokens) < analyst_b.per(analyst_b.input_tokens) / 2
    for role in ROLES:
        b, a = before.roles[role], after.roles[role]
        assert a.decisions == b.decisions > 0
        assert a.per(a.calls) < b.per(b.calls), role
        assert a.per(a.cost) < b.per(b.cost), role


if __name__ == "__main__":
    raise SystemExit(main())
