"""Headless agent commands: ``kestrel run``, ``kestrel chat`` and ``kestrel backtest --agents``.

They build the same agent runtime as the window, on the offline market in paper mode (backtest
mode for a backtest), so a person or a script can watch agents work, talk to the Orchestrator or
measure templates without a display. Output is plain lines: who did what, at which market time.

Exit codes of ``kestrel run`` and ``kestrel backtest --agents``: 0 done; 3
(``EXIT_AGENT_FAULTED``) the run finished but an agent FAULTED (a refused key, an unreachable
model server...), named with its reason at the top of the summary and the report; 1 and 2 as
every command (an internal error; bad input). ``kestrel chat`` shows a faulted Orchestrator, why,
and what to do, and ``/resume`` lets faulted and paused agents run again. The rule engine's
answers are counted as "rule-engine decisions", never as LLM calls.

The kill switch: both commands say at start when it is tripped (the Risk Guard then refuses every
new order) and print a trip or a reset as it happens. ``kestrel chat`` trips it with ``/kill``
and resets it with ``/reset``, each after a confirmation the person types: the terminal is a
person at their own workspace (the window cannot hold it meanwhile), so a reset is as deliberate
here as in the window's dialog. Telegram can trip it but not reset it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from app.agents.faults import (
    EXIT_AGENT_FAULTED,
    RERUN_HINT,
    Fault,
    fault_banner,
    faults_of,
    what_to_do,
)
from app.agents.runtime import AgentRuntime, build_agent_runtime, workspace_resume_ms
from app.agents.start import check_setup, plan_new_workspace, tradeable_symbol
from app.domain.agents import AgentInfo, AgentState
from app.domain.clock import ms_to_iso, parse_time
from app.events import (
    AgentStateChanged,
    ClockAdvanced,
    ConversationMessageAdded,
    NotificationRaised,
    QuestionAsked,
)
from app.telegram.start import start_telegram
from app.workspace import Workspace

DAY_MS = 86_400_000
_DURATION_UNITS = {"m": 60_000, "h": 3_600_000, "d": DAY_MS}


def parse_duration_ms(text: str) -> int:
    """``90m``, ``4h``, ``2d`` -> milliseconds."""
    text = text.strip().lower()
    if len(text) < 2 or text[-1] not in _DURATION_UNITS or not text[:-1].isdigit():
        raise ValueError(f"not a duration: {text!r}; write e.g. 30m, 4h or 2d")
    return int(text[:-1]) * _DURATION_UNITS[text[-1]]


def add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, metavar="DIR",
                        help="workspace folder (database, memory); default: this checkout's")
    parser.add_argument("--data", action="append", type=Path, default=[], metavar="FILE",
                        help="kline CSV to replay (repeatable); default: the bundled data")
    parser.add_argument("--start", metavar="TIME",
                        help="where a new workspace's replay starts (ISO 8601); default: "
                             "--days before the end of the data, once the symbols to watch "
                             "have 60 candles; a used workspace resumes")
    parser.add_argument("--days", type=int, default=30,
                        help="a new workspace starts at most this many days before the data "
                             "ends (30)")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add_runtime_arguments(parser)
    parser.add_argument("--speed", type=float, default=600.0,
                        help="simulated seconds per wall second (600: an hour in 6 s)")
    parser.add_argument("--for", dest="duration", default="24h",
                        help="how much market time to run, e.g. 12h or 3d (24h)")
    parser.add_argument("--setup", metavar="TEXT",
                        help="first tell the Orchestrator this, e.g. \"watch BTC/USDT on 1h "
                             "every 1h with a trend analyst and a trader\"")


def add_chat_arguments(parser: argparse.ArgumentParser) -> None:
    add_runtime_arguments(parser)


def _build(args: argparse.Namespace) -> AgentRuntime:
    workspace = Workspace.at(args.workspace).ensure() if args.workspace else Workspace.default()
    hold = workspace.hold_for_writing()  # before reading it: nobody else may be writing it
    quote: str | None = None
    try:
        start = workspace_resume_ms(workspace)
        if start is None:
            from app.domain.clock import ReplayClock
            from app.market.replay import ReplayMarketData
            from app.resources import sample_data_files

            probe = ReplayMarketData.from_paths(ReplayClock(0), args.data or sample_data_files())
            plan = plan_new_workspace(probe, days=args.days, setup=getattr(args, "setup", None))
            start = parse_time(args.start) if args.start else plan.start_ms
            quote = plan.quote_currency
    except BaseException:
        hold.release()
        raise
    return build_agent_runtime(
        workspace, data_files=args.data, at_ms=start, hold=hold, quote_currency=quote
    )


class TerminalNarrator:
    """Prints what the agents do as plain lines (the headless stand-in for the window)."""

    def __init__(self, runtime: AgentRuntime, out: Callable[[str], None] = print) -> None:
        self.rt = runtime
        self.out = out
        bus = runtime.bus
        bus.subscribe(ConversationMessageAdded, self._message)
        bus.subscribe(NotificationRaised, self._notification)
        bus.subscribe(QuestionAsked, self._question)
        bus.subscribe(AgentStateChanged, self._state)
        bus.subscribe(ClockAdvanced, self._clock)

    def _name(self, agent_id: str) -> str:
        info = self.rt.agents.get(agent_id)
        return info.name if info is not None else agent_id[:8]

    def _stamp(self) -> str:
        return ms_to_iso(self.rt.clock.now_ms())[:16].replace("T", " ")

    def _message(self, event: ConversationMessageAdded) -> None:
        if event.kind == "final":
            self.out(f"[{self._stamp()}] {self._name(event.agent_id)}: {event.content.strip()}")
        elif event.kind == "notice":
            self.out(f"[{self._stamp()}] {self._name(event.agent_id)} (note): {event.content}")
        elif event.kind == "tool_result" and "<status>rejected</status>" in event.content[:200]:
            self.out(f"[{self._stamp()}] {self._name(event.agent_id)}: an order was rejected")

    def _notification(self, event: NotificationRaised) -> None:
        if event.channel == "UI_ALERT":
            self.out(f"[{self._stamp()}] ALERT ({event.urgency}) {event.message}")

    def _question(self, event: QuestionAsked) -> None:
        self.out(f"[{self._stamp()}] {self._name(event.agent_id)} asks: {event.text}")
        for number, reply in enumerate(event.suggested_replies, 1):
            self.out(f"    {number}) {reply}")

    def _state(self, event: AgentStateChanged) -> None:
        if event.state in ("faulted", "stopped", "deleted") or event.reason:
            why = f": {event.reason}" if event.reason else ""
            if event.state == AgentState.FAULTED.value:
                why += f". What to do: {what_to_do(event.reason or '')}"
            self.out(f"[{self._stamp()}] {self._name(event.agent_id)} is {event.state}{why}")

    def _clock(self, event: ClockAdvanced) -> None:
        if event.fills:
            self.out(f"[{self._stamp()}] {event.fills} fill(s)")


def _print_kill_switch(runtime: AgentRuntime) -> None:
    trip = runtime.kill_switch.active()
    if trip is not None:
        print(f"KILL SWITCH TRIPPED: it was {trip.describe()}. The Risk Guard refuses every new "
              "order until a person resets it (closing and cancelling still work).")


async def _run(args: argparse.Namespace) -> int:
    duration = parse_duration_ms(args.duration)
    if args.speed <= 0:
        raise ValueError(f"--speed must be positive, got {args.speed}")
    runtime = _build(args)
    telegram = None
    try:
        if args.setup:
            check_setup(runtime.base.market, account_quote=runtime.base.broker.quote_currency,
                        now_ms=runtime.clock.now_ms(), setup=args.setup)
        TerminalNarrator(runtime)
        await runtime.start()
        telegram = await start_telegram(runtime, kill_switch=runtime.kill_switch)
        orchestrator = await runtime.ensure_orchestrator()
        print(f"Offline replay from {ms_to_iso(runtime.clock.now_ms())} at {args.speed:g}x; "
              "agents on the built-in rule engine (not an LLM) unless configured otherwise.")
        _print_kill_switch(runtime)
        if args.setup:
            runtime.manager.send_user_message(orchestrator.agent_id, args.setup)
            await runtime.manager.wait_idle()
        market = runtime.base.market
        end = min(market.end_ms(), runtime.clock.now_ms() + duration)
        runtime.driver.set_speed(args.speed)
        # a tick moves at most one candle of the finest data, so no close is skipped
        finest = min(market.loaded(s, market.finest_interval(s)).bar_ms for s in market.symbols())
        await runtime.driver.run_paced(end, max_step_ms=finest)
        await runtime.manager.wait_idle()
        faults = _print_summary(runtime)
    finally:
        if telegram is not None:
            await telegram.aclose()
        await runtime.aclose()
    return EXIT_AGENT_FAULTED if faults else 0


def _print_summary(runtime: AgentRuntime) -> list[Fault]:
    """The run's summary, opening with any faulted agent; returns the faults."""
    state = runtime.base.ledger.load()
    fills = runtime.base.ledger.fills()
    usage = runtime.conversations.usage(run_id=runtime.run_id)
    agents = runtime.manager.list_agents()
    faults = faults_of(agents)
    print()
    for line in fault_banner(faults):
        print(line)
    print(f"Market time now {ms_to_iso(runtime.clock.now_ms())}; {len(fills)} fills in total.")
    for info in agents:
        print(f"  {info.name:<28} {info.role.value:<12} {info.state.value:<16} "
              f"{info.last_action}")
    balances = ", ".join(f"{a} {v}" for a, v in sorted(state.balances.items()))
    calls = _calls_text(runtime.conversations.calls_by_provider(run_id=runtime.run_id))
    print(f"Balances: {balances}. This run: {calls}, cost ${usage.cost}.")
    return faults


def _calls_text(by_provider: dict[str, int]) -> str:
    """Model calls and rule-engine decisions, each under its own name."""
    counts = dict(by_provider)
    decisions = counts.pop("rule-engine", 0)
    return f"{sum(counts.values())} LLM calls, {decisions} rule-engine decisions"


async def _chat(args: argparse.Namespace) -> int:
    runtime = _build(args)
    try:
        TerminalNarrator(runtime)
        await runtime.start()
        orchestrator = await runtime.ensure_orchestrator()
        engine = "the built-in rule engine, not an LLM" if orchestrator.provider == (
            "rule-engine") else f"{orchestrator.provider}:{orchestrator.model}"
        symbol = tradeable_symbol(runtime.base.market,
                                  account_quote=runtime.base.broker.quote_currency,
                                  now_ms=runtime.clock.now_ms())
        hint = "" if symbol is None else (
            f" Try: watch {symbol} on 1h every 1h with a trend analyst and a trader")
        print(f"Talking to {orchestrator.name} ({engine}). Market time "
              f"{ms_to_iso(runtime.clock.now_ms())}. Commands: /advance 4h, /agents, /resume, "
              f"/kill, /reset, /quit.{hint}")
        _print_kill_switch(runtime)
        _print_fault(runtime.manager.get_agent(orchestrator.agent_id))
        while True:
            line = await asyncio.to_thread(_read_line)
            if line is None or line.strip() in ("/quit", "/exit"):
                break
            if not line.strip():
                continue
            await _chat_line(runtime, orchestrator.agent_id, line.strip())
    finally:
        await runtime.aclose()
    return 0


async def _chat_line(runtime: AgentRuntime, orchestrator_id: str, line: str) -> None:
    if line.startswith("/advance"):
        parts = line.split()
        try:
            step = parse_duration_ms(parts[1] if len(parts) > 1 else "1h")
        except ValueError as exc:
            print(exc)
            return
        end = runtime.clock.now_ms() + step
        while runtime.clock.now_ms() < end:
            runtime.driver.advance_to(min(end, runtime.clock.now_ms() + 3_600_000))
            await runtime.manager.wait_idle()
        print(f"Market time now {ms_to_iso(runtime.clock.now_ms())}.")
        return
    if line == "/agents":
        _print_summary(runtime)
        return
    if line == "/resume":
        await _resume_agents(runtime)
        return
    if line == "/kill" or line.startswith("/kill "):
        await _kill(runtime, line.removeprefix("/kill").strip())
        return
    if line == "/reset":
        await _reset(runtime)
        return
    pending = [q for q in runtime.questions.pending(orchestrator_id) if q.answer is None]
    if pending and line.isdigit():
        replies = pending[0].suggested_replies
        if 1 <= int(line) <= len(replies):
            line = replies[int(line) - 1]
    runtime.manager.send_user_message(orchestrator_id, line)
    await runtime.manager.wait_idle()
    _print_fault(runtime.manager.get_agent(orchestrator_id), waiting=True)


def _print_fault(info: AgentInfo | None, *, waiting: bool = False) -> None:
    """Say so when the agent the chat talks to is faulted or paused (the kill switch pauses
    every agent): it answers nothing until resumed."""
    if info is not None and info.state is AgentState.PAUSED and waiting:
        print(f"{info.name} is paused: your message waits in its inbox until you /resume it.")
        return
    if info is None or info.state is not AgentState.FAULTED:
        return
    reason = info.fault_reason or ""
    print(f"{info.name} is FAULTED and cannot answer: {reason or 'no reason recorded'}.")
    print(f"What to do: {what_to_do(reason, 'type /resume to let it try again')}")
    if waiting:
        print("Your message waits in its inbox and is answered once it runs again.")


async def _resume_agents(runtime: AgentRuntime) -> None:
    """``/resume``: every faulted or paused agent runs again (a failed task stays failed)."""
    stopped = [a for a in runtime.manager.list_agents()
               if a.state in (AgentState.FAULTED, AgentState.PAUSED)]
    if not stopped:
        print("No agent is faulted or paused.")
        return
    for info in stopped:
        await runtime.manager.control(info.agent_id, "resume")
        print(f"Resumed {info.name}.")
    await runtime.manager.wait_idle()


async def _kill(runtime: AgentRuntime, reason: str) -> None:
    """``/kill [reason]``: trip the kill switch once the person confirms."""
    switch = runtime.kill_switch
    trip = switch.active()
    if trip is not None:
        print(f"The kill switch is already tripped: it was {trip.describe()}.")
        return
    does = (await switch.preview()).describe()
    print(f"Tripping the kill switch {does[0].lower()}{does[1:]}")
    answer = await asyncio.to_thread(_read_line, "Type yes to trip it now: ")
    if (answer or "").strip().lower() != "yes":
        print("Not tripped.")
        return
    done = await switch.trip(reason or "tripped from kestrel chat", "the person in kestrel chat")
    print(f"Kill switch tripped. {done or ''}".strip())


async def _reset(runtime: AgentRuntime) -> None:
    """``/reset``: reset the kill switch once the person types the word."""
    switch = runtime.kill_switch
    trip = switch.active()
    if trip is None:
        print("The kill switch is not tripped.")
        return
    print(f"The kill switch was {trip.describe()}. Resetting lets new orders pass the Risk Guard "
          "again; paused agents stay paused until you /resume them.")
    answer = await asyncio.to_thread(_read_line, "Type reset to reset it: ")
    if (answer or "").strip().lower() != "reset":
        print("Not reset: the kill switch stays tripped.")
        return
    print(await switch.reset("the person in kestrel chat"))


def _read_line(prompt: str = "you> ") -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None


def run_command(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


def chat_command(args: argparse.Namespace) -> int:
    return asyncio.run(_chat(args))


def agents_backtest_command(args: argparse.Namespace) -> int:
    """``kestrel backtest --agents T…``: run the templates; print metrics beside the baselines.

    A run that calls a language model first prints its estimated calls and cost and needs
    ``--yes``; it is then repeated on the rule engine, so the model's contribution is measured.
    A run in which an agent faulted opens its summary with the fault, is not compared, and
    returns ``EXIT_AGENT_FAULTED``.
    """
    from app.agents.backtest import AgentBacktestOptions, print_progress, run_agent_backtest
    from app.agents.costs import PriceTable
    from app.agents.templates import load_templates
    from app.backtest.cli import print_gaps
    from app.backtest.report import summary_table
    from app.domain.clock import ReplayClock
    from app.market.replay import ReplayMarketData

    templates = load_templates()
    unknown = [t for t in args.agents if t not in templates]
    if unknown:
        raise ValueError(f"unknown agent template(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(templates))}")
    force = (args.provider, args.model or f"rules-{args.provider}") if args.provider else None
    kinds = {force[0]} if force else {templates[t].provider.kind for t in args.agents}
    uses_llm = bool(kinds - {"rule-engine"})
    llm = {key: value for key, value in (
        ("provider", args.provider), ("model", args.model), ("base_url", args.base_url),
        ("api_key_name", args.api_key_name)) if value}
    if uses_llm:
        market = ReplayMarketData.from_paths(ReplayClock(0), args.data)
        first = market.symbols()[0]
        size = market.loaded(first, market.finest_interval(first)).series.timestamp_ms.size
        bars = args.bars or max(0, size - args.warmup)
        kind = force[0] if force else next(iter(kinds - {"rule-engine"}))
        model = force[1] if force else next(
            templates[t].provider.model for t in args.agents
            if templates[t].provider.kind == kind)
        analysts = sum(1 for t in args.agents if templates[t].role.value == "analyst")
        from app.agents.backtest import estimate

        est = estimate(bars, analysts, model, PriceTable.load(None), kind)
        print(f"Estimate before starting: {est.describe()}")
        if not args.yes:
            print("Nothing was run. Add --yes to start this run.", file=sys.stderr)
            return 1
    options = AgentBacktestOptions(
        templates=args.agents, cash=Decimal(args.cash), warmup_bars=args.warmup,
        bars=args.bars, progress=None if args.no_progress else print_progress,
        force_provider=force, llm_settings=llm, allow_gaps=args.allow_gaps,
    )
    outcome = asyncio.run(run_agent_backtest(args.data, options, args.out))
    print(summary_table(outcome.result))
    print_gaps(outcome.result)
    print(f"\nAgents: {', '.join(a.name for a in outcome.agents)}")
    print(f"LLM calls {outcome.llm_calls} ({outcome.tokens_in} in / {outcome.tokens_out} out "
          f"tokens, ${outcome.cost}); rule-engine decisions {outcome.rule_decisions}; "
          f"tool calls {outcome.tool_calls}.")
    if outcome.faults:
        for line in fault_banner(outcome.faults, RERUN_HINT):
            print(line, file=sys.stderr)
        print(f"report: {args.out / 'summary.json'} (workspace: {args.out / 'workspace'})")
        return EXIT_AGENT_FAULTED
    if uses_llm:
        options.force_provider, options.llm_settings = ("rule-engine", "rules"), {}
        baseline = asyncio.run(run_agent_backtest(args.data, options, args.out / "rule_engine"))
        mine, rules = outcome.result.metrics, baseline.result.metrics
        print("\nSame templates on the built-in rule engine (not an LLM):")
        print(f"  total return  agents {mine.total_return_pct:.2f}%  rule engine "
              f"{rules.total_return_pct:.2f}%")
        print(f"  max drawdown  agents {mine.max_drawdown_pct:.2f}%  rule engine "
              f"{rules.max_drawdown_pct:.2f}%")
    else:
        print("These agents ran on the built-in rule engine (not an LLM): this run is the "
              "rule-engine baseline itself.")
    print(f"report: {args.out / 'summary.json'} (workspace: {args.out / 'workspace'})")
    return 0
