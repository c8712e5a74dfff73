"""Backtest agents: run agent templates bar by bar over replayed history and report the result.

The agents, tools, queue and scheduler are the ones the app runs; only the clock is the replay
cursor, advanced a bar at a time and only once every running agent's inbox is idle. It steps over
the same timeline as a strategy backtest (every candle close the data has), so a candle missing
from the data is stepped over and the report counts it. Each Analyst gets a job that fires when
each bar closes; the Traders receive its signals and their fills. The report puts the agents
beside buy-and-hold, and, when the agents use a language model, beside the same templates run on
the rule engine, so what the model adds is measured, not assumed. A run that stops early on an
error, or is cancelled, still reports the bars it ran. An agent that faulted (a refused key, an
unreachable server) is named at the top of the report, because its silence would otherwise read
as a market with nothing to trade. The run's workspace commits once per bar (``grouped_commits``):
a run killed part-way is simply run again, and one that stops on an error keeps what it ran.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from app.agents.costs import CostEstimate, PriceTable, estimate_backtest
from app.agents.cutoffs import period_warnings
from app.agents.faults import RERUN_HINT, Fault, faults_of
from app.backtest.metrics import Flags
from app.backtest.report import REPORT_FILES, BacktestResult, write_report
from app.config import LLMSettings
from app.config.approval import ApprovalSettings
from app.domain.agents import AgentInfo, AgentRole
from app.domain.clock import ms_to_iso
from app.domain.errors import OperationalError
from app.domain.market import interval_ms
from app.domain.trading import Mode
from app.market.csv_loader import load_csv
from app.market.replay import ReplayMarketData
from app.orchestration.ids import SeededIds
from app.runtime.output_folder import OutputKind, prepare_output_folder
from app.runtime.providers import RULE_ENGINE, ProviderOverride
from app.runtime.replay import ReplayOutput, ReplayProgress, Timeline, build_timeline, run_replay
from app.runtime.strategy_backtest import (
    ERROR_FILE,
    BacktestStopped,
    collect_result,
    history,
    stop_reason,
    write_error_details,
)
from app.runtime.venue import VenueSpec
from app.runtime.world import World, WorldOptions, build_world
from app.workspace import Workspace

RUN_ANALYSIS = "RUN_ANALYSIS"
WORKSPACE_FOLDER = "workspace"  # the run's own workspace, in its output folder
BASELINE_FOLDER = "rule_engine"  # the rule-engine run beside a language model's
# what a run writes into its output folder: only these are replaced when it is used again
OUTPUT = OutputKind("kestrel backtest --agents", (
    *REPORT_FILES.values(), ERROR_FILE, WORKSPACE_FOLDER, BASELINE_FOLDER,
))
# per bar, an analyst makes about this many model calls, and a trader this many per signal
CALLS_PER_ANALYSIS = 8
TOKENS_IN_PER_CALL = 6_000
TOKENS_OUT_PER_CALL = 250


@dataclass
class AgentBacktestOptions:
    templates: Sequence[str]
    cash: Decimal = Decimal(10_000)
    warmup_bars: int = 60
    bars: int | None = None  # how many bars to run after the warm-up; None: to the end
    seed: str = "kestrel-backtest"
    provider_override: ProviderOverride | None = None
    # the ``[llm]`` settings the run's agents are created under (``choose_provider``): the
    # default runs each template on its own provider; ``RULE_ENGINE_BASELINE`` runs every agent
    # on the rule engine; e.g. provider="openai-compatible", model="llama3.1", base_url=... one
    # language model for all
    llm: LLMSettings = field(default_factory=LLMSettings)
    progress: Callable[[int, int], None] | None = None
    cancelled: Callable[[], bool] | None = None
    # data with missing candles is refused unless allowed, as for a strategy backtest
    allow_gaps: bool = False
    # the agents see the market blind: a neutral symbol, shifted times, rescaled prices
    # (``app.runtime.blind``); their orders are mapped back and the report is in real terms
    blind: bool = False
    # per template, settings its agents are created with beside the symbols, interval and
    # trader the run sets (e.g. {"AnalystAgent_Trend_v1": {"rsi_period": 10}}): a sweep varies
    # them; each is checked against the template when the agent is created
    template_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass
class AgentBacktestResult:
    result: BacktestResult
    agents: list[AgentInfo]
    llm_calls: int  # language-model calls only; the rule engine's are ``rule_decisions``
    tokens_in: int
    tokens_out: int
    cost: Decimal
    tool_calls: int
    files: dict[str, Path] = field(default_factory=dict)
    rule_decisions: int = 0
    faults: list[Fault] = field(default_factory=list)
    # a blind run's agents lived this much later than the market (``app.runtime.blind_map``): the
    # times in their stores (tasks, conversations, memory) are the real ones minus it
    blind_shift_ms: int = 0


RULE_ENGINE_BASELINE = LLMSettings(provider="rule-engine", model="rules")


def estimate(
    bars: int, analysts: int, model: str, prices: PriceTable, provider: str
) -> CostEstimate:
    """Before a run with a language model: calls x bars x tokens, priced."""
    return estimate_backtest(
        bars=bars, calls_per_bar=CALLS_PER_ANALYSIS * max(analysts, 1),
        input_tokens_per_call=TOKENS_IN_PER_CALL, output_tokens_per_call=TOKENS_OUT_PER_CALL,
        model=model, prices=prices, provider=provider,
    )


def _fresh_workspace(folder: Path, cash: Decimal, llm: LLMSettings) -> Workspace:
    """The run's workspace, with its settings; a previous run's was cleared, under its lock, by
    ``prepare_output_folder`` (a workspace another process writes is refused there)."""
    workspace = Workspace.at(folder).ensure()
    lines = [f'[paper]\ninitial_cash = "{cash}"\n\n[logging]\nto_file = false\n']
    changed = llm.model_dump(exclude_defaults=True)
    if changed:
        lines.append("\n[llm]\n")
        lines.extend(f"{key} = {json.dumps(value)}\n" for key, value in sorted(changed.items()))
    workspace.settings_path.write_text("".join(lines), encoding="utf-8")
    return workspace


async def run_agent_backtest(
    data_files: Sequence[Path], options: AgentBacktestOptions, out_dir: Path
) -> AgentBacktestResult:
    """Run the templates over the data; write the report and the run's workspace to ``out_dir``.

    A cancelled run returns the result of the bars it ran and writes no report: the caller
    decides what a run the person stopped shows.

    ``out_dir`` is created, or reused only when empty or made by an agent backtest before
    (``app.runtime.output_folder``): a workspace, another command's output or other files are
    refused (``OutputFolderRefused``), and left as they were.

    Raises:
        OperationalError: no analyst among the templates, or too little data for the warm-up.
        DataFileError: a data file is unusable, or has gaps and ``options.allow_gaps`` is off.
        BacktestStopped: an error stopped the run part-way; the report of the bars it ran and
            the error's details are in ``out_dir``.
    """
    prepare_output_folder(out_dir, OUTPUT)
    workspace = _fresh_workspace(out_dir / WORKSPACE_FOLDER, options.cash, options.llm)
    spec = VenueSpec.replay(data_files, 0, blind=options.blind)
    world = build_world(workspace, spec, WorldOptions(
        mode=Mode.BACKTEST, ids=SeededIds(options.seed),
        provider_override=options.provider_override, approval=ApprovalSettings(live_orders=False),
        run_id=options.seed, grouped_commits=True,
    ))
    try:
        if not options.allow_gaps:
            _refuse_gaps(history(world))
        return await _run(world, options, out_dir)
    finally:
        await world.aclose()


def _refuse_gaps(market: ReplayMarketData) -> None:
    """Raise the loader's own error (file, row, size of the gap) for a file with gaps."""
    for symbol in market.symbols():
        for interval in market.native_intervals(symbol):
            loaded = market.loaded(symbol, interval)
            if loaded.gaps:
                load_csv(loaded.path, allow_gaps=False)


async def _run(
    world: World, options: AgentBacktestOptions, out_dir: Path
) -> AgentBacktestResult:
    full = build_timeline(history(world))
    first = options.warmup_bars
    last = len(full) - 1
    if options.bars is not None:
        last = min(last, first + options.bars)
    if first >= last:
        raise OperationalError(
            f"the data has {len(full)} bars; a warm-up of {options.warmup_bars} bars "
            "leaves nothing to trade"
        )
    timeline = full.slice(first, last + 1)
    team = world.agents
    assert team is not None
    # step 0 is where the agents start: its equity point is the starting capital
    world.venue.driver.advance_to(int(timeline.time_ms[0]))
    await world.start()
    agents = await _create_agents(world, options.templates, full, options.template_settings)
    steps = len(timeline)

    async def act(_k: int, _now: int) -> None:
        await team.manager.wait_idle()
        world.commit()  # the bar's writes, in one transaction

    reached = ReplayProgress()

    def ran_so_far() -> tuple[Timeline, Flags]:
        done = 1 + reached.steps
        exposed = np.array([False, *reached.exposed[:reached.steps]], dtype=bool)
        return timeline.slice(0, done), exposed

    error: Exception | None = None
    try:
        await run_replay(timeline.slice(1, steps), world.venue, act,
                         cancelled=options.cancelled, progress=options.progress, reached=reached)
    except asyncio.CancelledError:  # interrupted (Ctrl-C): keep what ran, stop anyway
        ran, exposed = ran_so_far()
        partial = _outcome(world, agents, ran, exposed, options, "interrupted", steps)
        write_report(partial.result, out_dir)
        raise
    except Exception as exc:  # noqa: BLE001 - reported below with the bars that ran
        error = exc
    ran, exposed = ran_so_far()
    reason = "cancelled" if error is None else stop_reason(error)
    outcome = _outcome(world, agents, ran, exposed, options, reason, steps)
    if error is not None:
        write_report(outcome.result, out_dir)
        raise BacktestStopped(
            reason, done=len(ran) - 1, total=steps - 1, last_ms=int(ran.time_ms[-1]),
            report_dir=write_error_details(out_dir, error),
        ) from error
    if len(ran) == steps:
        outcome.files = write_report(outcome.result, out_dir)
    return outcome


def _outcome(
    world: World, agents: list[AgentInfo], ran: Timeline, exposed: Flags,
    options: AgentBacktestOptions, stop: str, planned: int,
) -> AgentBacktestResult:
    """The result of the steps that ran, from what the run left in its ledger and stores.

    ``stop`` says why a run that did not reach its last step ended.
    """
    team = world.agents
    assert team is not None
    world.ledger.flush()
    usage = team.conversations.usage(run_id=team.run_id)
    by_provider = team.conversations.calls_by_provider(run_id=team.run_id)
    rule_decisions = by_provider.pop("rule-engine", 0)
    model_calls = sum(by_provider.values())
    faults = faults_of(team.manager.list_agents())
    tool_calls = int(
        world.ledger.connection.execute("SELECT COUNT(*) FROM tool_calls").fetchone()[0]
    )
    settings: dict[str, Any] = {
        "agents": [f"{a.name} ({a.template}, {a.provider}:{a.model})" for a in agents],
        "cash": str(options.cash), "fee_rate": float(world.settings.paper.fee_rate),
        "start": ms_to_iso(int(ran.time_ms[0])), "end": ms_to_iso(int(ran.time_ms[-1])),
        "blind": options.blind,
    }
    stats: dict[str, Any] = {
        "llm_calls": model_calls, "rule_engine_decisions": rule_decisions,
        "tokens_in": usage.input_tokens,
        "tokens_out": usage.output_tokens, "cost_usd": str(usage.cost), "tool_calls": tool_calls,
    }
    if usage.cut_answers:  # answers the server cut at their token limit (never acted on)
        stats["cut_answers"] = usage.cut_answers
    if usage.estimated_calls:  # calls without usage from the server, counted by Kestrel
        stats["estimated_usage_calls"] = usage.estimated_calls
    if len(ran) < planned:
        stats["bars_run"], stats["bars_planned"] = len(ran) - 1, planned - 1
        stats["stopped_early"] = stop
    result = collect_result(
        world, ran, ReplayOutput(exposed, len(ran)), settings=settings, stats=stats
    )
    flags, unknown = memory_warnings(
        agents, int(ran.time_ms[0]), world.settings.llm.training_cutoff, blind=options.blind,
        answered=team.conversations.answered_models(run_id=team.run_id))
    if flags:
        stats["before_training_cutoff"] = True
    warnings = (*flags, *unknown)
    result = replace(result, faults=tuple(f.line(RERUN_HINT) for f in faults),
                     warnings=warnings)
    blind = world.venue.blind
    return AgentBacktestResult(
        result, agents, model_calls, usage.input_tokens, usage.output_tokens, usage.cost,
        tool_calls, {}, rule_decisions, faults,
        blind_shift_ms=blind.shift_ms if blind is not None else 0,
    )


def memory_warnings(
    agents: Sequence[AgentInfo], start_ms: int, override: str = "", *, blind: bool = False,
    answered: Mapping[str, Collection[str]] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Per language model of the run: a flag when its training data reaches past ``start_ms``,
    a note when its cutoff is unknown (flags first, then notes). Each agent's model is checked
    under the names its calls were ``answered`` with (agent id: names), where the table knows
    them (``checked_names``)."""
    warned: dict[str, bool] = {}
    for agent in sorted(agents, key=lambda a: a.model):
        if agent.provider == RULE_ENGINE:
            continue
        names = (answered or {}).get(agent.agent_id, ())
        for text, flag in period_warnings(agent.model, names, start_ms, override, blind=blind):
            warned.setdefault(text, flag)
    return (tuple(text for text, flag in warned.items() if flag),
            tuple(text for text, flag in warned.items() if not flag))


async def _create_agents(
    world: World, templates: Sequence[str], timeline: Timeline,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[AgentInfo]:
    """Traders first (analysts need their id), then analysts, each with a job per bar, each
    with its template's ``settings`` beside what the run sets."""
    assert world.agents is not None
    manager, scheduler = world.agents.manager, world.agents.scheduler
    known = manager.templates
    unknown = [t for t in templates if t not in known]
    if unknown:
        raise OperationalError(
            f"unknown agent template(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    interval = timeline.intervals[next(iter(timeline.intervals))]
    blind = world.venue.blind  # blind agents are configured with the names they see
    symbols = [blind.symbol(s) if blind else s for s in timeline.intervals]
    roles = {t: known[t].role for t in templates}
    if AgentRole.ANALYST not in roles.values():
        raise OperationalError("a backtest needs at least one analyst template to produce signals")
    created: list[AgentInfo] = []
    trader_id = ""
    for template in [t for t in templates if roles[t] is AgentRole.TRADER]:
        info = await manager.create_agent(
            template, f"{template} (backtest)",
            {**(settings or {}).get(template, {}), "symbols": symbols}, start=True,
            created_by="backtest",
        )
        trader_id = trader_id or info.agent_id
        created.append(info)
    step_s = interval_ms(interval) // 1000  # one bar, whatever gap the data starts with
    for template in [t for t in templates if roles[t] is AgentRole.ANALYST]:
        config: dict[str, Any] = {**(settings or {}).get(template, {}), "symbols": symbols,
                                  "interval": interval}
        if trader_id:
            config["trader_agent_id"] = trader_id
        info = await manager.create_agent(
            template, f"{template} (backtest)", config, start=True, created_by="backtest"
        )
        created.append(info)
        for symbol in symbols:
            scheduler.add_job(
                f"{info.agent_id}:{symbol}:analysis", "PERIODIC_AGENT_TRIGGER", info.agent_id,
                RUN_ANALYSIS, {"symbol": symbol, "interval": interval}, interval_s=step_s,
                created_by="backtest",
            )
    return created

