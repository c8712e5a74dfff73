"""Benchmark: model calls, input tokens and cost per decision, before and after answer blocks.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_decisions.py [--hours 168] [--price-as gpt-4o]

or ``pytest tests/benchmarks/bench_decisions.py -s`` (the full run, asserting the targets).

A *decision* is one task an agent finished: an hourly analysis, a trade signal or a fill for the
Trader, a chat request for the Orchestrator. The world is the one ``kestrel run`` builds, on
the bundled BTC/USDT hourly data: the person asks the Orchestrator to watch BTC/USDT with a
trend analyst and a trader, the market moves ``--hours`` hours, then the person asks "status".
Decisions are reported by kind as well as by role: a *HOLD bar* is an analysis that sent no
signal, a *signal bar* one that did; a *trade* is a Trader's signal task that placed an order
(or closed a position), a *no trade* one that did not, a *fill* an ORDER_FILLED task.

The model is ``GoodModel``: it answers as a well-behaved LLM would, with the rule engine's
policies (they decide from a task's data block when it has one and call the tools otherwise),
and it is counted the way an OpenAI-compatible API counts: input tokens are cl100k tokens of the
system prompt and every message (plus the chat format's 4 per message and 3 per request),
output tokens those of the answer, and cached tokens the prefix shared with the agent's previous
request, from 1,024 tokens in steps of 128 (OpenAI's prompt caching rule). The world prices
every call with ``resources/prices.yaml`` as ``--price-as`` (default gpt-4o) and stores it in
``llm_usage``, which is what is read back here.

Arms, measured in the same run with the same prompts:

* ``before``: the protocol before answer blocks: the Analyst appends its log entry and rewrites
  its assessment with calls of their own, the Trader records, summarises and journals with calls
  of their own, memory content travels as base64 both ways (the policies' ``blocks=False``, the
  task data's ``notes_as: BASE64``);
* ``after``: the final answer carries those writes as blocks the runtime makes, and memory files
  travel as text;
* ``no data``: ``before`` without the templates' task data at all (the baseline of the change
  before), for context.

Every call of the ``after`` run is recorded (``RecordingProvider``) and the run is replayed from
the recording (``ReplayProvider``): the replay must make the same decisions, and each replayed
decision costs nothing. A last part times the built-in rule engine (not an LLM) over the same
hours in both protocols.
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

from app.agents.context_window import tools_text  # noqa: E402
from app.agents.llm.port import (  # noqa: E402
    LLMProvider,
    LLMRequest,
    LLMResponse,
    LLMUsage,
    StreamCallback,
)
from app.agents.llm.replay import RecordingProvider, ReplayProvider  # noqa: E402
from app.agents.rules.engine import NO_TOKENS, RuleEngineProvider, decide  # noqa: E402
from app.agents.rules.transcript import read_transcript  # noqa: E402
from app.agents.templates import DEFAULT_CONTEXT_TOKENS, AgentTemplate  # noqa: E402
from app.domain.agents import AgentInfo  # noqa: E402
from app.runtime.world import World  # noqa: E402
from tests.benchmarks.bench_agents import cl100k  # noqa: E402
from tests.helpers.agents import SETUP_COMMAND, advance_hours, agent_world, settle  # noqa: E402

pytestmark = pytest.mark.benchmark

ROLES = ("analyst", "trader", "orchestrator")
KINDS = ("HOLD bar", "signal bar", "trade", "no trade", "fill", "chat")
ARMS = ("no data", "before", "after")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CACHE_MIN = 1_024
CACHE_STEP = 128
PER_MESSAGE = 4
PER_REQUEST = 3
SECONDS_PER_CALL = 2.0  # a real model's latency, for the backtest-hours estimate
BACKTEST_BARS = 500
HOURS = 168  # a week: enough signals for a few trades and fills
# the targets: a HOLD bar in 1.5 calls and 12k input tokens on average, a trade in 4 calls
TARGET_HOLD_CALLS = 1.5
TARGET_HOLD_TOKENS = 12_000
TARGET_TRADE_CALLS = 4


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
    blocks: bool = True  # the protocol: answer blocks (after) or a call per write (before)
    name: str = "openai-compatible"
    is_llm: bool = True

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse:
        answer = decide(self.policy, request.agent_id, request.agent_config,
                        read_transcript(request.messages), blocks=self.blocks,
                        system=request.system).render()
        parts = [(request.system, self.tokens(request.system) + PER_MESSAGE)]
        parts += [(m.content, self.tokens(m.content) + PER_MESSAGE) for m in request.messages]
        # the tools offered natively are part of the prompt, as a server counts them
        tools = self.tokens(tools_text(request.tools)) if request.tools else 0
        total = sum(n for _, n in parts) + tools + PER_REQUEST
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


class CallsRuleEngine(RuleEngineProvider):
    """The built-in rule engine in the protocol before answer blocks (a call per write)."""

    async def complete(
        self, request: LLMRequest, on_delta: StreamCallback | None = None
    ) -> LLMResponse:
        answer = decide(request.model, request.agent_id, request.agent_config,
                        read_transcript(request.messages), blocks=False, system=request.system)
        return LLMResponse(answer.render(), NO_TOKENS, request.model, self.name, 0.0)


@dataclass
class Figures:
    """What a group of decisions cost: how many, their model calls, tokens and dollars, and the
    calls of the costliest one."""

    decisions: int = 0
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    most_calls: int = 0

    def per(self, value: float | Decimal) -> float:
        return float(value) / self.decisions if self.decisions else 0.0

    def add(self, calls: int, tokens_in: int, cached: int, tokens_out: int, cost: Decimal) -> None:
        self.decisions += 1
        self.calls += calls
        self.input_tokens += tokens_in
        self.cached_tokens += cached
        self.output_tokens += tokens_out
        self.cost += cost
        self.most_calls = max(self.most_calls, calls)


@dataclass
class Run:
    label: str
    roles: dict[str, Figures] = field(default_factory=dict)
    kinds: dict[str, Figures] = field(default_factory=dict)
    # each role's orders, signals and agents created, in order (agents run concurrently, so
    # only the order within one agent is fixed)
    decisions: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    wall_s: float = 0.0
    largest: int = 0  # input tokens of the largest request


def prepare(world: World, arm: str) -> None:
    """No spending cap in any arm (at gpt-4o prices the analyst's $5 runs out after about 38
    analyses without task data, which would end that arm early); the task data of each arm."""
    for name, template in list(world.agents.manager.templates.items()):
        limits = template.limits.model_copy(update={"budget_usd": None})
        update: dict[str, Any] = {"limits": limits}
        if arm == "no data":
            update["task_data"] = None
        elif arm == "before" and template.task_data is not None:
            update["task_data"] = template.task_data.model_copy(update={"notes_as": "BASE64"})
        world.agents.manager.templates[name] = template.model_copy(update=update)


Override = Callable[[AgentInfo, AgentTemplate], LLMProvider | None]


async def scenario(folder: Path, hours: int, override: Override | None, arm: str) -> float:
    world = agent_world(folder, provider_override=override)
    try:
        await world.start()
        prepare(world, arm)
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


ACTS = {"dispatch": ("<dispatch_task_to_agent>", "<send_notification>"),
        "order": ("<create_order>", "<close_position>")}


def kind_of(task_type: str, answers: str) -> str:
    """A finished task's kind, from its type and the calls its model answers made."""
    if task_type == "RUN_ANALYSIS":
        return "signal bar" if any(a in answers for a in ACTS["dispatch"]) else "HOLD bar"
    if task_type == "NEW_MARKET_ANALYSIS_SIGNAL":
        return "trade" if any(a in answers for a in ACTS["order"]) else "no trade"
    if task_type == "ORDER_FILLED":
        return "fill"
    return "chat"


def read_run(label: str, folder: Path, wall_s: float) -> Run:
    run = Run(label, {role: Figures() for role in ROLES}, {k: Figures() for k in KINDS},
              wall_s=wall_s)
    conn = sqlite3.connect(folder / "kestrel.db")
    try:
        roles = dict(conn.execute("SELECT agent_id, role FROM agents").fetchall())
        usage: dict[str, tuple[int, int, int, int, Decimal]] = {}
        for task_id, calls, tokens_in, cached, tokens_out, costs in conn.execute(
            "SELECT task_id, COUNT(*), SUM(input_tokens), SUM(cached_tokens), "
            "SUM(output_tokens), GROUP_CONCAT(cost, ' ') FROM llm_usage GROUP BY task_id"
        ):
            cost = sum((Decimal(c) for c in (costs or "").split()), Decimal(0))
            usage[task_id] = (calls, tokens_in or 0, cached or 0, tokens_out or 0, cost)
        answers: dict[str, list[str]] = {}
        for task_id, content in conn.execute(
            "SELECT task_id, content FROM messages WHERE kind IN ('assistant', 'answer_blocks', "
            "'final') ORDER BY id"
        ):
            answers.setdefault(task_id, []).append(content)
        for task_id, agent_id, task_type in conn.execute(
            "SELECT task_id, agent_id, task_type FROM tasks WHERE status='DONE'"
        ):
            spent = usage.get(task_id, (0, 0, 0, 0, Decimal(0)))
            run.roles[roles[agent_id]].add(*spent)
            run.kinds[kind_of(task_type, "\n".join(answers.get(task_id, [])))].add(*spent)
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
    finally:
        conn.close()
    return run


def measure(hours: int, price_as: str) -> dict[str, Any]:
    tokens = Tokens()
    runs: dict[str, Run] = {}
    with tempfile.TemporaryDirectory(prefix="bench-decisions-") as tmp:
        root = Path(tmp)
        for arm in ARMS:
            previous: dict[str, list[tuple[str, int]]] = {}
            label = arm.replace(" ", "_")
            recording = root / f"{label}.jsonl"

            def override(info: AgentInfo, template: AgentTemplate,
                         previous: dict[str, list[tuple[str, int]]] = previous,
                         recording: Path = recording, blocks: bool = arm == "after",
                         ) -> LLMProvider:
                model = GoodModel(template.provider.model, tokens, previous, price_as, blocks)
                return RecordingProvider(model, recording)

            folder = root / label
            wall = asyncio.run(scenario(folder, hours, override, arm))
            runs[arm] = read_run(arm, folder, wall)
        player = ReplayProvider(root / "after.jsonl")
        folder = root / "replayed"
        wall = asyncio.run(scenario(folder, hours, lambda _i, _t: player, "after"))
        runs["replayed"] = read_run("replayed", folder, wall)
        rules = {"before": float("inf"), "after": float("inf")}
        calls_engine = CallsRuleEngine()
        engines: dict[str, Override | None] = {
            "before": lambda _i, _t: calls_engine, "after": None}
        for number in range(2):  # alternated, the faster of two: the machine is shared
            for arm, engine in engines.items():
                wall = asyncio.run(scenario(root / f"rules-{arm}-{number}", hours, engine, arm))
                rules[arm] = min(rules[arm], wall)
    return {"runs": runs, "rules": rules, "hours": hours, "price_as": price_as}


def _ratio(after: float, before: float) -> str:
    return f"{after / before:.2f}" if before else "-"


def report(r: dict[str, Any]) -> str:
    runs = r["runs"]
    before, after, replayed = runs["before"], runs["after"], runs["replayed"]
    row = "   {:<13}{:>10}{:>9}{:>8}{:>8}{:>10}{:>10}{:>7}{:>10}{:>9}{:>7}"
    header = [
        row.format("", "decisions", "calls/d", "", "most", "input", "tok/d", "",
                   "cost/d $", "", ""),
        row.format("", "", "before", "after", "after", "before", "after", "ratio", "before",
                   "after", "ratio"),
    ]

    def line(name: str, b: Figures, a: Figures) -> str:
        return row.format(
            name, f"{b.decisions}/{a.decisions}", f"{b.per(b.calls):.2f}", f"{a.per(a.calls):.2f}",
            a.most_calls, f"{b.per(b.input_tokens):,.0f}", f"{a.per(a.input_tokens):,.0f}",
            _ratio(a.per(a.input_tokens), b.per(b.input_tokens)), f"{b.per(b.cost):.4f}",
            f"{a.per(a.cost):.4f}", _ratio(a.per(a.cost), b.per(b.cost)))

    lines = [
        f"decisions over {r['hours']} simulated hours (BTC/USDT 1h, a trend analyst and a "
        f"trader), GoodModel priced as {r['price_as']}; before: a call per memory write, base64; "
        "after: answer blocks, text",
        "  by kind",
        *header,
        *(line(kind, before.kinds[kind], after.kinds[kind]) for kind in KINDS),
        "  by role",
        *header,
        *(line(role, before.roles[role], after.roles[role]) for role in ROLES),
    ]
    for run in (runs["no data"], before, after):
        total_calls = sum(f.calls for f in run.roles.values())
        cost = sum((f.cost for f in run.roles.values()), Decimal(0))
        cached = sum(f.cached_tokens for f in run.roles.values())
        tokens_in = sum(f.input_tokens for f in run.roles.values())
        tokens_out = sum(f.output_tokens for f in run.roles.values())
        lines.append(f"   {run.label}: {total_calls} model calls, {tokens_in:,} input tokens "
                     f"({cached / max(tokens_in, 1):.0%} cached), {tokens_out:,} output tokens, "
                     f"${cost:.4f}; largest request {run.largest:,} tokens "
                     f"(budget {DEFAULT_CONTEXT_TOKENS:,})")
    for label in ("before", "after"):
        calls = runs[label].roles["analyst"].per(runs[label].roles["analyst"].calls)
        lines.append(
            f"   a {BACKTEST_BARS}-bar analyst backtest at {SECONDS_PER_CALL:g} s per call, "
            f"{label}: {calls * BACKTEST_BARS * SECONDS_PER_CALL / 3600:.1f} h of model time")
    hold, trade = after.kinds["HOLD bar"], after.kinds["trade"]
    met = (hold.per(hold.calls) <= TARGET_HOLD_CALLS
           and hold.per(hold.input_tokens) <= TARGET_HOLD_TOKENS
           and 0 < trade.most_calls <= TARGET_TRADE_CALLS)
    lines.append(
        f"   targets: a HOLD bar in <= {TARGET_HOLD_CALLS:g} calls and <= {TARGET_HOLD_TOKENS:,} "
        f"input tokens on average, a trade in <= {TARGET_TRADE_CALLS} calls; measured "
        f"{hold.per(hold.calls):.2f} calls and {hold.per(hold.input_tokens):,.0f} tokens per "
        f"HOLD bar, at most {trade.most_calls} calls per trade -> {'MET' if met else 'MISSED'}")
    same = after.decisions == before.decisions == runs["no data"].decisions
    lines.append(f"   the same orders, signals and agents in every arm: {same}")
    replay_cost = sum((f.cost for f in replayed.roles.values()), Decimal(0))
    lines.append(f"   replayed from the recording: same decisions "
                 f"{replayed.decisions == after.decisions}, cost ${replay_cost:.4f}")
    rules = r["rules"]
    lines.append(f"   rule engine (not an LLM), best wall time of two: before "
                 f"{rules['before']:.2f} s, after {rules['after']:.2f} s, ratio "
                 f"{rules['after'] / rules['before']:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=int, default=HOURS)
    parser.add_argument("--price-as", default="gpt-4o")
    args = parser.parse_args(argv)
    print(report(measure(args.hours, args.price_as)))
    return 0


def test_answer_blocks_cut_calls_and_tokens_per_hold_bar_and_per_trade() -> None:
    result = measure(HOURS, "gpt-4o")
    print(report(result))
    runs = result["runs"]
    before, after, replayed = runs["before"], runs["after"], runs["replayed"]
    assert after.decisions == before.decisions == runs["no data"].decisions == replayed.decisions
    hold, trade = after.kinds["HOLD bar"], after.kinds["trade"]
    assert hold.decisions > 100 and trade.decisions > 0
    assert hold.per(hold.calls) <= TARGET_HOLD_CALLS
    assert hold.per(hold.input_tokens) <= TARGET_HOLD_TOKENS
    assert trade.most_calls <= TARGET_TRADE_CALLS
    for kind in ("HOLD bar", "signal bar", "trade", "fill"):
        b, a = before.kinds[kind], after.kinds[kind]
        assert a.decisions == b.decisions, kind
        if a.decisions:
            assert a.per(a.calls) < b.per(b.calls), kind
            assert a.per(a.input_tokens) < b.per(b.input_tokens), kind
    for role in ROLES:  # answer blocks cost less; task data, before them, already did
        assert after.roles[role].per(after.roles[role].cost) <= before.roles[role].per(
            before.roles[role].cost), role
        assert before.roles[role].per(before.roles[role].calls) < runs["no data"].roles[
            role].per(runs["no data"].roles[role].calls), role


if __name__ == "__main__":
    raise SystemExit(main())
