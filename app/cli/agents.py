"""Headless agent commands: ``kestrel run``, ``kestrel chat`` and ``kestrel backtest --agents``.

They build the same agent world as the window, on the venue the command line or the workspace's
``[venue]`` setting chooses (the offline replay by default, paper; ``app.cli.live`` for a live
account), or in backtest mode for a backtest, so a person or a script can watch agents work,
talk to the Orchestrator or measure templates without a display. Output is plain lines: who did
what, at which market time. The summary reads the account through the venue's broker: on a live
venue, the exchange account and its order journal, not the workspace's paper ledger.

Exit codes of ``kestrel run`` and ``kestrel backtest --agents``: 0 done; 3
(``EXIT_AGENT_FAULTED``) the run finished but an agent FAULTED (a refused key, an unreachable
model server...), named with its reason at the top of the summary and the report; 74
(``EXIT_DISK_FULL``, ``kestrel run``) the disk holding the workspace filled up: the run stopped
there (its agents stopped, the world closed) and said, in one message, where it stopped and what
it could not record; 1 and 2 as every command (an internal error; bad input). ``kestrel chat``
shows a faulted Orchestrator, why, and what to do, and ``/resume`` lets faulted and paused agents
run again. The rule engine's answers are counted as "rule-engine decisions", never as LLM calls.

Both commands say at start what the agents run on (each language model by provider and model,
the rule engine as not being one), and, on the offline replay, the training-cutoff warning of
every language model whose data may cover the replayed period (``app.runtime.engines``), again
when a model answers under a name that changes it (an alias served by a dated model).

The kill switch: both commands say at start when it is tripped (the Risk Guard then refuses every
new order) and print a trip or a reset as it happens. ``kestrel chat`` trips it with ``/kill``
and resets it with ``/reset``, each after a confirmation the person types: the terminal is a
person at their own workspace (the window cannot hold it meanwhile), so a reset is as deliberate
here as in the window's dialog. Telegram can trip it but not reset it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from app.agents.faults import (
    EXIT_AGENT_FAULTED,
    RERUN_HINT,
    Fault,
    fault_banner,
    faults_of,
    what_to_do,
)
from app.cli.common import check_cash, log_to, print_gaps
from app.cli.live import (
    LiveGrantsByName,
    add_live_arguments,
    add_venue_arguments,
    chosen_venue,
    live_banner,
    settle_mismatch,
    unknown_decision,
)
from app.domain.agents import AgentInfo, AgentState
from app.domain.clock import ms_to_iso, parse_time
from app.domain.errors import OperationalError
from app.domain.numbers import plain
from app.events import (
    AgentStateChanged,
    ClockAdvanced,
    ConversationMessageAdded,
    NotificationRaised,
    QuestionAsked,
)
from app.runtime.desk import workspace_resume_ms
from app.runtime.engines import agent_engines, replay_warnings
from app.runtime.open_world import open_world
from app.runtime.start import check_world_setup, plan_for_files, world_hint_symbol
from app.runtime.venue import VenueSpec
from app.runtime.venues import replay_extent
from app.runtime.world import World, WorldOptions, build_world
from app.store.disk_full import (
    LOG_LINES,
    DiskFullError,
    DiskFullStop,
    disk_full_error,
    disk_full_reason,
)
from app.telegram.start import start_telegram
from app.workspace import Workspace, lost_log_lines

if TYPE_CHECKING:
    from app.telegram.bot import TelegramBot

DAY_MS = 86_400_000
_DURATION_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY_MS}
REPLAY_SPEED = 600.0


def parse_duration_ms(text: str) -> int:
    """``30s``, ``90m``, ``4h``, ``2d`` -> milliseconds."""
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
    add_venue_arguments(parser)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add_runtime_arguments(parser)
    add_live_arguments(parser)
    parser.add_argument("--speed", type=float,
                        help="replay: simulated seconds per wall second (600: an hour in 6 s); "
                             "a live market runs in real time")
    parser.add_argument("--for", dest="duration", default="24h",
                        help="how much market time to run, e.g. 12h or 3d (24h); on a live "
                             "market that is wall time (e.g. 30s, 15m)")
    parser.add_argument("--setup", metavar="TEXT",
                        help="first tell the Orchestrator this, e.g. \"watch BTC/USDT on 1h "
                             "every 1h with a trend analyst and a trader\"")


def add_chat_arguments(parser: argparse.ArgumentParser) -> None:
    add_runtime_arguments(parser)
    add_live_arguments(parser)


async def _build(args: argparse.Namespace) -> World:
    workspace = Workspace.at(args.workspace).ensure() if args.workspace else Workspace.default()
    try:
        return await _build_in(args, workspace)
    except DiskFullError:
        raise
    except Exception as exc:
        reason = disk_full_reason(exc, workspace.root)
        if reason is None:
            raise
        raise disk_full_error(
            workspace.root, reason, "the workspace could not be opened, and nothing ran"
        ) from exc


async def _build_in(args: argparse.Namespace, workspace: Workspace) -> World:
    hold = workspace.hold_for_writing()  # before reading it: nobody else may be writing it
    try:
        live = chosen_venue(args, workspace)
    except BaseException:
        hold.release()
        raise
    if live is not None:
        return await open_world(workspace, live, WorldOptions(), hold=hold)
    quote: str | None = None
    try:
        start = workspace_resume_ms(workspace)
        if start is None:
            plan = plan_for_files(args.data, days=args.days, setup=getattr(args, "setup", None))
            start = parse_time(args.start) if args.start else plan.start_ms
            quote = plan.quote_currency
    except BaseException:
        hold.release()
        raise
    world = build_world(workspace, VenueSpec.replay(args.data, start, quote), WorldOptions(),
                        hold=hold)
    log_to(workspace)
    return world


class TerminalNarrator:
    """Prints what the agents do as plain lines (the headless stand-in for the window)."""

    def __init__(self, world: World, out: Callable[[str], None] = print) -> None:
        self.rt = world
        self.out = out
        bus = world.bus
        bus.subscribe(ConversationMessageAdded, self._message)
        bus.subscribe(NotificationRaised, self._notification)
        bus.subscribe(QuestionAsked, self._question)
        bus.subscribe(AgentStateChanged, self._state)
        bus.subscribe(ClockAdvanced, self._clock)

    def _name(self, agent_id: str) -> str:
        info = self.rt.team.store.get(agent_id)
        return info.name if info is not None else agent_id[:8]

    def _stamp(self) -> str:
        return ms_to_iso(self.rt.venue.clock.now_ms())[:16].replace("T", " ")

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


def _print_warnings(world: World, start_ms: int, shown: set[str] | None = None) -> set[str]:
    """Print the training-cutoff warnings of the replay from ``start_ms`` not ``shown`` yet
    (a model is checked under the names it answers with, so one may come after its first
    answer); returns every warning shown so far."""
    shown = set() if shown is None else shown
    for text in replay_warnings(world, start_ms):
        if text not in shown:
            print(f"WARNING: {text}")
            shown.add(text)
    return shown


def _print_kill_switch(world: World) -> None:
    trip = world.team.kill_switch.active()
    if trip is not None:
        print(f"KILL SWITCH TRIPPED: it was {trip.describe()}. The Risk Guard refuses every new "
              "order until a person resets it (closing and cancelling still work).")


async def _run(args: argparse.Namespace) -> int:
    """``kestrel run``. A full disk stops it wherever it is met (see ``_stop_for_full_disk``)."""
    duration = parse_duration_ms(args.duration)
    if args.speed is not None and args.speed <= 0:
        raise ValueError(f"--speed must be positive, got {args.speed}")
    world = await _build(args)
    live = not world.venue.offline
    if live and args.speed not in (None, 1):
        await world.aclose()
        raise ValueError(f"{world.venue.label} runs in real time: --speed is for the replay")
    speed = 1.0 if live else args.speed or REPLAY_SPEED
    telegram: list[TelegramBot] = []
    faults: list[Fault] = []
    try:
        faults = await world.disk.run(_run_world(world, args, speed, duration, telegram))
    except DiskFullStop:
        pass  # said below, once the world is closed and knows everything it could not write
    finally:
        for bot in telegram:
            await bot.aclose()
        await world.aclose(raise_full_disk=False)
    if world.disk.full:
        raise _stop_for_full_disk(world)
    return EXIT_AGENT_FAULTED if faults else 0


def _stop_for_full_disk(world: World) -> DiskFullError:
    """The one message of a run the disk filled under, once its world is closed: where and why,
    where the run stopped, and what could not be recorded, by name (the audit rows the ledger
    kept pending, memory writes, the closing backup, log lines) or interrupted."""
    lost, log_file = lost_log_lines()
    if lost:
        world.disk.unrecorded(LOG_LINES, f"the lines for {log_file}", count=lost)
    return world.disk.error(
        f"the run stopped at market time {ms_to_iso(_stopped_ms(world))}, its agents "
        "stopped and the workspace closed; every order and fill committed before then is in "
        "the ledger"
    )


async def _run_world(
    world: World, args: argparse.Namespace, speed: float, duration: int,
    telegram: list[TelegramBot],
) -> list[Fault]:
    """The run itself: start the agents, let the market run ``duration``, print the summary;
    returns the faulted agents. ``telegram`` receives the bot once started, for the caller to
    stop."""
    live = not world.venue.offline
    account = world.venue.is_live_account
    if args.setup:
        check_world_setup(world, args.setup)
    TerminalNarrator(world)
    grants = LiveGrantsByName(world, args.allow_live)
    if args.setup:  # the agents it names may be the setup's own, not made yet
        grants.follow()
    await _start(world, args, grants)
    if not args.setup:
        grants.require_all()
    bot = await start_telegram(world, kill_switch=world.team.kill_switch)
    if bot is not None:
        telegram.append(bot)
    orchestrator = await world.ensure_orchestrator()
    if account:
        print(live_banner(world))
    pace = "in real time" if live else f"at {speed:g}x"
    start_ms = world.venue.clock.now_ms()
    print(f"{world.venue.label} from {ms_to_iso(start_ms)} {pace}; "
          f"{agent_engines(world).words()}.")
    warned = _print_warnings(world, start_ms)
    _print_kill_switch(world)
    if args.setup:
        world.team.manager.send_user_message(orchestrator.agent_id, args.setup)
        await world.team.manager.wait_idle()
        grants.stop()
        grants.require_all()
    end = world.venue.clock.now_ms() + duration
    if world.venue.end_ms is not None:
        end = min(end, world.venue.end_ms)
    world.venue.driver.set_speed(speed)
    # a move is at most one candle of the finest data, so no close is skipped; at a speed the
    # agents cannot follow, each candle waits for them, so the run goes as fast as they decide
    await world.venue.driver.run_paced(end, max_step_ms=world.venue.bar_ms,
                                       settle=world.team.manager.wait_idle)
    await world.team.manager.wait_idle()
    faults = await _print_summary(world)
    _print_warnings(world, start_ms, warned)  # a model that answered under another name
    return faults


def _stopped_ms(world: World) -> int:
    """Where a closed world's run stopped. A replay continues, at the next run, from the last
    settle its paper account committed, which the clock may be past: it moves to a candle
    before the settle of that candle is written, and the disk may refuse that write."""
    stopped = world.venue.clock.now_ms()
    if not world.venue.offline or world.workspace is None:
        return stopped
    try:
        committed = workspace_resume_ms(world.workspace)
    except (OperationalError, sqlite3.Error):  # unreadable now: the clock is all there is
        return stopped
    return stopped if committed is None else min(stopped, committed)


async def _start(world: World, args: argparse.Namespace, grants: LiveGrantsByName) -> None:
    """Start the world's agents, after what a live account needs first: the agents
    ``--allow-live`` names granted, reconciliation (orders the journal does not know decided by
    the flags or at the terminal), and balances the journal cannot explain said with what to
    do (or accepted, on the person's word)."""
    for line in grants.grant_existing():
        print(line)
    account = world.venue.is_live_account
    await world.start(unknown_decision(args) if account else None)
    if account:
        for line in await settle_mismatch(world, args):
            print(line)


async def _print_summary(world: World) -> list[Fault]:
    """The run's summary, opening with any faulted agent; returns the faults.

    The account is read through the venue's broker: on a live venue that is the exchange
    account (its balances, equity and open orders, the journal's fills), never the workspace's
    paper ledger.
    """
    broker = world.venue.broker
    account = await broker.account()
    fills = await broker.trades(limit=None)
    usage = world.team.conversations.usage(run_id=world.team.run_id)
    agents = world.team.manager.list_agents()
    faults = faults_of(agents)
    print()
    for line in fault_banner(faults):
        print(line)
    print(f"Market time now {ms_to_iso(world.venue.clock.now_ms())}; {len(fills)} fills in total.")
    for info in agents:
        print(f"  {info.name:<28} {info.role.value:<12} {info.state.value:<16} "
              f"{info.last_action}")
    balances = ", ".join(f"{b.currency} {plain(b.total)}" for b in account.assets)
    if world.venue.is_live_account:
        balances = f"LIVE {balances}"
    orders = len(account.open_orders)
    calls = _calls_text(world.team.conversations.calls_by_provider(run_id=world.team.run_id))
    print(f"Balances: {balances}. Equity {plain(account.equity)} {account.quote_currency}, "
          f"{orders} open order{'s' if orders != 1 else ''}. This run: {calls}, "
          f"cost ${usage.cost}.")
    return faults


def _calls_text(by_provider: dict[str, int]) -> str:
    """Model calls and rule-engine decisions, each under its own name."""
    counts = dict(by_provider)
    decisions = counts.pop("rule-engine", 0)
    return f"{sum(counts.values())} LLM calls, {decisions} rule-engine decisions"


async def _chat(args: argparse.Namespace) -> int:
    world = await _build(args)
    flowing: asyncio.Task[None] | None = None
    try:
        TerminalNarrator(world)
        grants = LiveGrantsByName(world, args.allow_live)
        grants.follow()  # the person may create the agents they named in this chat
        await _start(world, args, grants)
        for name in grants.pending:
            print(f"No agent is called {name} yet: it may trade live once this chat creates it.")
        if world.venue.is_live_account:
            print(live_banner(world))
        if not world.venue.offline:  # a live market's time flows by itself: fills, due jobs
            flowing = asyncio.ensure_future(world.venue.driver.run_paced())
        orchestrator = await world.ensure_orchestrator()
        engine = "the built-in rule engine, not an LLM" if orchestrator.provider == (
            "rule-engine") else f"{orchestrator.provider}:{orchestrator.model}"
        symbol = world_hint_symbol(world)
        hint = "" if symbol is None else (
            f" Try: watch {symbol} on 1h every 1h with a trend analyst and a trader")
        advance = "/advance 4h, " if world.venue.offline else ""
        start_ms = world.venue.clock.now_ms()
        print(f"Talking to {orchestrator.name} ({engine}) on {world.venue.label}. Market time "
              f"{ms_to_iso(start_ms)}. Commands: {advance}/agents, "
              f"/resume, /kill, /reset, /quit.{hint}")
        print(f"Here: {agent_engines(world).words()}.")
        warned = _print_warnings(world, start_ms)
        _print_kill_switch(world)
        _print_fault(world.team.manager.get_agent(orchestrator.agent_id))
        while True:
            line = await asyncio.to_thread(_read_line)
            if line is None or line.strip() in ("/quit", "/exit"):
                break
            if not line.strip():
                continue
            await _chat_line(world, orchestrator.agent_id, line.strip())
            _print_warnings(world, start_ms, warned)
    finally:
        if flowing is not None:
            flowing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flowing
        await world.aclose()
    return 0


async def _chat_line(world: World, orchestrator_id: str, line: str) -> None:
    if line.startswith("/advance"):
        if not world.venue.offline:
            print(f"{world.venue.label} runs in real time: it cannot be advanced.")
            return
        parts = line.split()
        try:
            step = parse_duration_ms(parts[1] if len(parts) > 1 else "1h")
        except ValueError as exc:
            print(exc)
            return
        end = world.venue.clock.now_ms() + step
        while world.venue.clock.now_ms() < end:
            world.venue.driver.advance_to(min(end, world.venue.clock.now_ms() + 3_600_000))
            await world.team.manager.wait_idle()
        print(f"Market time now {ms_to_iso(world.venue.clock.now_ms())}.")
        return
    if line == "/agents":
        await _print_summary(world)
        return
    if line == "/resume":
        await _resume_agents(world)
        return
    if line == "/kill" or line.startswith("/kill "):
        await _kill(world, line.removeprefix("/kill").strip())
        return
    if line == "/reset":
        await _reset(world)
        return
    pending = [q for q in world.team.questions.pending(orchestrator_id) if q.answer is None]
    if pending and line.isdigit():
        replies = pending[0].suggested_replies
        if 1 <= int(line) <= len(replies):
            line = replies[int(line) - 1]
    world.team.manager.send_user_message(orchestrator_id, line)
    await world.team.manager.wait_idle()
    _print_fault(world.team.manager.get_agent(orchestrator_id), waiting=True)


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


async def _resume_agents(world: World) -> None:
    """``/resume``: every faulted or paused agent runs again (a failed task stays failed)."""
    stopped = [a for a in world.team.manager.list_agents()
               if a.state in (AgentState.FAULTED, AgentState.PAUSED)]
    if not stopped:
        print("No agent is faulted or paused.")
        return
    for info in stopped:
        await world.team.manager.control(info.agent_id, "resume")
        print(f"Resumed {info.name}.")
    await world.team.manager.wait_idle()


async def _kill(world: World, reason: str) -> None:
    """``/kill [reason]``: trip the kill switch once the person confirms."""
    switch = world.team.kill_switch
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


async def _reset(world: World) -> None:
    """``/reset``: reset the kill switch once the person types the word."""
    switch = world.team.kill_switch
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
    from app.agents.costs import PriceTable
    from app.agents.template_files import load_templates
    from app.backtest.report import summary_table
    from app.config import LLMSettings
    from app.runtime.agent_backtest import (
        BASELINE_FOLDER,
        RULE_ENGINE_BASELINE,
        AgentBacktestOptions,
        estimate,
        run_agent_backtest,
    )
    from app.runtime.progress import TerminalProgress
    from app.runtime.providers import plan_for_templates

    templates = load_templates()
    unknown = [t for t in args.agents if t not in templates]
    if unknown:
        raise ValueError(f"unknown agent template(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(templates))}")
    check_cash(Decimal(args.cash))
    llm = LLMSettings(provider=args.provider, model=args.model, base_url=args.base_url,
                      api_key_name=args.api_key_name) if args.provider else LLMSettings()
    plan = plan_for_templates([templates[t] for t in args.agents], llm)
    uses_llm = plan.is_llm
    if uses_llm:
        extent = replay_extent(args.data)
        bars = args.bars or max(0, extent.bars[extent.symbols[0]] - args.warmup)
        analysts = sum(1 for t in args.agents if templates[t].role.value == "analyst")
        est = estimate(bars, analysts, plan.model, PriceTable.load(None), plan.kind)
        print(f"Estimate before starting: {est.describe()}")
        if not args.yes:
            print("Nothing was run. Add --yes to start this run.", file=sys.stderr)
            return 1
    progress = None if args.no_progress else TerminalProgress("agents")
    options = AgentBacktestOptions(
        templates=args.agents, cash=Decimal(args.cash), warmup_bars=args.warmup,
        bars=args.bars, progress=progress, llm=llm, allow_gaps=args.allow_gaps, blind=args.blind,
    )
    try:
        outcome = asyncio.run(run_agent_backtest(args.data, options, args.out))
    finally:  # a run stopped part-way: its error starts on a line of its own
        if progress is not None:
            progress.close()
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
        options.llm = RULE_ENGINE_BASELINE
        try:
            baseline = asyncio.run(
                run_agent_backtest(args.data, options, args.out / BASELINE_FOLDER))
        finally:
            if progress is not None:
                progress.close()
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
