"""``build_world``: the one composition function, from a workspace and a venue to a running world.

The window, every headless command, both backtests and the tests build their world here, so they
run the same tools, Risk Guard, stores and agents; only the venue (``VenueSpec``) and a few
options differ:

- a workspace's world (the desk, ``kestrel run``/``chat``/``tool``/``mcp-serve``, the agent
  backtest's own workspace) keeps everything in the workspace's ``kestrel.db`` and memory folder,
  holds the workspace for writing (one process at a time), and settles its paper account up to
  the cursor when it opens;
- a read-only world reads a workspace another process writes: its ledger cannot be written, the
  account is shown as that process last committed it, and its tool calls are kept in memory;
- a world without a workspace (the strategy backtest, ``kestrel demo``) keeps its ledger in
  memory, batching the audit trail, and has no agents;
- ``agents=False`` leaves the agent side out (a one-off tool call, an MCP client's session).

Every commit of a LIVE account is forced to disk (it must survive a power cut); paper and backtest
commits survive a killed app (WAL) without an fsync each, which on a slow disk would stall the
window once per tool call. Each statement of a paper or live world commits before the call that
made it returns. Only a backtest may ask for grouped commits (``WorldOptions.grouped_commits``):
its stores then share one connection and everything written between two ``World.commit`` calls
(one bar) commits together, because a backtest's crash safety is its partial report, not each
statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.agents.agent_store import AgentStore
from app.agents.approval_log import ApprovalLog
from app.agents.conversation_store import ConversationStore
from app.agents.costs import PriceTable
from app.agents.health import AgentHealth
from app.agents.loop import LoopServices
from app.agents.loop_share import LoopShare, NoShare
from app.agents.manager import AgentManager
from app.agents.rules.engine import RuleEngineProvider
from app.agents.template_files import load_templates
from app.agents.templates import AgentTemplate
from app.config import Settings
from app.config.approval import ApprovalSettings
from app.config.email import PASSWORD_KEY as EMAIL_PASSWORD_KEY
from app.domain.agents import AgentInfo, AgentRole, Channel, TaskStatus
from app.domain.errors import OperationalError
from app.domain.kill_switch import TripCause
from app.domain.trading import Mode
from app.events import EventBus, OrderFilled
from app.indicators.engine import IndicatorEngine
from app.mcp.hub import McpHub, attach_mcp
from app.memory.bank import MemoryBank, MemoryLimits
from app.orchestration.email_channel import EmailNotifier
from app.orchestration.ids import IdFactory, RandomIds
from app.orchestration.kill_switch import KillSwitch
from app.orchestration.notify import (
    BusNotifier,
    NotificationService,
    Notifier,
    PersonAlert,
    UnconfiguredNotifier,
)
from app.orchestration.questions import QuestionStore
from app.orchestration.queue import TaskQueue
from app.orchestration.scheduler import JobScheduler
from app.risk.config import build_guard
from app.risk.guard import RiskDecisionRecorder, RiskGuard
from app.runtime.blind import BlindGuard
from app.runtime.fills import FillRouter
from app.runtime.providers import (
    Pricer,
    ProviderCache,
    ProviderChoice,
    ProviderOverride,
    choose_provider,
)
from app.runtime.recorders import (
    AnnouncingRecorder,
    AnnouncingRiskRecorder,
    SqliteRiskRecorder,
    SqliteToolCallRecorder,
    report_unwritten,
)
from app.runtime.venue import Venue, VenueSpec
from app.runtime.venues import VenueContext, open_venue
from app.secrets import SecretStore
from app.store.checkpointer import WalCheckpointer
from app.store.db import GroupedDb
from app.store.disk_full import BACKUPS, DiskFullWatch
from app.store.held_stops import HeldStops
from app.store.kill_switch_log import KillSwitchLog
from app.store.ledger import Ledger
from app.store.order_requests import OrderRequests
from app.store.writer import WriterHold
from app.tools.account_tools import AccountTools
from app.tools.executor import MemoryRecorder, ToolCallRecorder, ToolExecutor
from app.tools.indicator_tools import IndicatorTools
from app.tools.market_tools import MarketTools
from app.tools.memory_tools import MemoryTools
from app.tools.orchestration_tools import OrchestrationTools
from app.tools.registry import ToolRegistry
from app.tools.trade_tools import TradeTools
from app.trading.entry import OrderEntry
from app.trading.held_stop_watch import watch_held_stops
from app.workspace import Workspace

if TYPE_CHECKING:
    from app.runtime.live_settings import SettingsOutcome
    from app.runtime.live_startup import DecideUnknown

ORCHESTRATOR_TEMPLATE = "SystemOrchestrator_v1"
# Audit rows (tool calls, risk decisions) of a world in memory wait for the next order/fill commit
# or this many rows: a transaction per call would cost more than the call. Such a world is simply
# run again after a crash, so a lost tail costs nothing there.
AUDIT_BATCH = 256


@dataclass(frozen=True)
class WorldOptions:
    """What differs between the worlds ``build_world`` makes (see the module docstring).

    Attributes:
        settings: use these instead of the workspace's ``settings.toml`` (a backtest's own).
        agents: build the agent side (stores, queue, scheduler, manager, fill routing).
        memory: give the world the agents' memory folders and the memory tools.
        memory_root: a world without a workspace keeps memory here (``kestrel demo``'s journal).
        read_only: open a workspace another process writes, without writing anything.
        announce: publish orders, fills, tool calls and clock moves on the bus; off for a
            strategy backtest nobody watches (a bar then costs a little less).
        record_tool_calls: keep the audit trail in the ledger (else the last calls in memory).
        recorder: tool calls go here instead (tests).
        ids, run_id: deterministic ids and run id (a backtest's seed).
        provider_override: tests' scripted providers (asked before the real ones).
        force_provider: every new agent on this (kind, model), whatever the settings say
            (tests' scripted providers); the rule is ``app.runtime.providers.choose_provider``.
        approval: the approval policy instead of the settings' (a backtest approves nothing).
        loop_share: how agent steps leave time to a window on the same event loop.
        secrets: the keyring (tests give their own).
        extra_notifiers: channels beyond the configured ones (tests).
        grouped_commits: the workspace's stores share one connection and commit together at
            each ``World.commit`` (a backtest's bar), not statement by statement; only for
            ``Mode.BACKTEST`` with a workspace.
    """

    mode: Mode = Mode.PAPER
    settings: Settings | None = None
    agents: bool = True
    memory: bool = True
    memory_root: Path | None = None
    read_only: bool = False
    announce: bool = True
    record_tool_calls: bool = True
    recorder: ToolCallRecorder | None = None
    ids: IdFactory | None = None
    run_id: str | None = None
    provider_override: ProviderOverride | None = None
    force_provider: tuple[str, str] | None = None
    approval: ApprovalSettings | None = None
    loop_share: LoopShare | None = None
    secrets: SecretStore | None = None
    extra_notifiers: Mapping[Channel, Notifier] | None = None
    grouped_commits: bool = False


@dataclass
class AgentTeam:
    """The agents' side of a world: their stores, inboxes, jobs, questions and the manager."""

    ids: IdFactory
    store: AgentStore
    conversations: ConversationStore
    approvals: ApprovalLog
    queue: TaskQueue
    scheduler: JobScheduler
    questions: QuestionStore
    notifications: NotificationService
    manager: AgentManager
    services: LoopServices
    fills: FillRouter
    providers: ProviderCache
    kill_switch: KillSwitch
    run_id: str
    checkpointer: WalCheckpointer
    mcp: McpHub | None = None  # None: no MCP server configured (the SDK is never imported)
    health: AgentHealth | None = None  # whose tasks keep failing (not in a backtest)

    @property
    def rule_engine(self) -> RuleEngineProvider:
        return self.providers.rule_engine

    def close_stores(self) -> None:
        for store in (self.store, self.conversations, self.approvals, self.queue,
                      self.scheduler, self.questions, self.notifications):
            store.close()


@dataclass
class World:
    """Everything one workspace (or one backtest) runs on one venue.

    ``venue`` holds the ports (clock, market, broker) and the driver; ``agents`` is None in a
    world built without agents.
    """

    workspace: Workspace | None
    settings: Settings
    venue: Venue
    bus: EventBus
    ledger: Ledger
    memory: MemoryBank | None
    guard: RiskGuard
    registry: ToolRegistry
    executor: ToolExecutor
    orders: OrderEntry  # the one order path of every front
    hold: WriterHold | None = None  # None: read-only, or a world in memory
    # the kill switch's trips, whose entry block order entry applies (None: a world in memory,
    # which has no kill switch)
    kill_log: KillSwitchLog | None = None
    agents: AgentTeam | None = None
    grouped: GroupedDb | None = None  # the stores' one connection, with grouped commits
    # the world's account of a full disk: what tripped it, what could not be recorded
    disk: DiskFullWatch = field(default_factory=lambda: DiskFullWatch(None))

    @property
    def read_only(self) -> bool:
        return self.ledger.read_only

    @property
    def team(self) -> AgentTeam:
        """The agent side, for the fronts that built the world with agents (``agents`` typed as
        always there, so a world built without them fails here, saying so)."""
        if self.agents is None:
            raise OperationalError("this world was built without agents")
        return self.agents

    def commit(self) -> None:
        """Commit everything written since the last call in one transaction (a world with
        grouped commits; in any other world each write has committed already)."""
        if self.grouped is not None:
            self.ledger.flush()
            self.grouped.commit()
            if self.memory is not None:
                self.memory.commit()

    async def prepare(self, decide_unknown: DecideUnknown | None = None) -> None:
        """What must happen before anything acts on the account, agents started or not (a
        one-off tool call on a live account too): the venue's ``before_agents`` (a live
        account reconciles with its exchange; orders there the journal does not know are put
        to the person), whose mismatches trip the kill switch, and the completion of a trip
        the last run committed but did not finish (it pauses that run's agents).

        Raises:
            UnknownOrdersUndecided: such orders exist and no decision was given.
        """
        if self.venue.before_agents is not None:
            await self.venue.before_agents(decide_unknown)
        if self.agents is not None:
            await self.agents.kill_switch.complete_unfinished()

    async def start(self, decide_unknown: DecideUnknown | None = None) -> None:
        """Start the agents (a world without agents has nothing to start), after what the venue
        must do first: a live account reconciles with its exchange, and orders there that the
        journal does not know are put to the person (``decide_unknown``).

        Raises:
            UnknownOrdersUndecided: such orders exist and no decision was given; no agent runs.
        """
        team = self.agents
        if team is None:
            return
        await self.prepare(decide_unknown)
        await team.manager.start()
        await team.fills.catch_up(self.venue.broker)
        # what exists now (modules, market data, caches) lives as long as the app: keep it out
        # of the garbage collector's full passes, which would otherwise stall the loop ~50-100 ms
        gc.freeze()

    def orchestrator(self) -> AgentInfo | None:
        if self.agents is None:
            return None
        for info in self.agents.manager.list_agents():
            if info.role is AgentRole.ORCHESTRATOR:
                return info
        return None

    async def ensure_orchestrator(self) -> AgentInfo:
        """The Orchestrator the chat talks to; created on first use."""
        found = self.orchestrator()
        if found is not None:
            return found
        assert self.agents is not None, "a world without agents has no Orchestrator"
        return await self.agents.manager.create_agent(
            ORCHESTRATOR_TEMPLATE, "Orchestrator", {}, start=True, created_by="system"
        )

    def apply_settings(self, new: Settings) -> SettingsOutcome:
        """Apply settings saved while running; what waits for a restart is named (see
        ``app.runtime.live_settings``)."""
        from app.runtime.live_settings import apply_settings

        return apply_settings(self, new)

    def close(self, *, final_backup: bool = False, raise_full_disk: bool = True) -> None:
        """Close the stores and let the next writer in (``final_backup``: see ``WriterHold``).

        A world with agents closes with ``aclose`` (its agents must stop on the loop first).

        Raises:
            DiskFullError: the disk filled up (``disk``), naming what was not recorded; with
                ``raise_full_disk`` False the caller says it itself.
        """
        if self.agents is not None:
            raise RuntimeError("a world with agents closes with 'await world.aclose()'")
        self._close_stores(final_backup=final_backup)
        self._raise_full_disk(raise_full_disk)

    def _raise_full_disk(self, wanted: bool) -> None:
        """Once closed: a full disk is said, with what it kept from being written, never left
        to a log line or dropped (``wanted`` False: the caller says it, as ``kestrel run``)."""
        if wanted and self.disk.full:
            raise self.disk.error("the workspace was closed")

    def _close_stores(self, *, final_backup: bool) -> None:
        """Close every store, each even when one before it failed. On a full disk a store that
        cannot write what it keeps pending names it to ``disk`` instead of raising: the audit
        rows the ledger could not write, the closing backup that could not be taken."""
        closes: list[Callable[[], None]] = []
        if self.memory is not None:
            closes.append(self.memory.close)
        if self.kill_log is not None:
            closes.append(self.kill_log.close)
        closes.append(self.orders.requests.close)
        if self.orders.held is not None:
            closes.append(self.orders.held.close)
        closes.append(self._close_ledger)
        if self.grouped is not None:
            closes.append(self.grouped.finish)
        try:
            failure: BaseException | None = None
            for close in closes:
                try:
                    close()
                except Exception as exc:
                    if not self.disk.check(exc) and failure is None:
                        failure = exc
            if failure is not None:
                raise failure
        finally:
            if self.hold is not None:
                self.hold.release(final_backup=final_backup)
                keeper = self.hold.keeper
                if (final_backup and keeper is not None and keeper.disk_full is not None
                        and self.disk.full):
                    self.disk.unrecorded(BACKUPS, f"the closing backup of {self.ledger.path}")

    def _close_ledger(self) -> None:
        try:
            self.ledger.close()
        except Exception as exc:
            if not self.disk.check(exc):
                raise
            report_unwritten(self.ledger, self.disk)

    async def aclose(self, *, raise_full_disk: bool = True) -> None:
        """Stop the agents, close the venue's connections and every store, then let the next
        writer in (after a last backup, off the loop).

        Raises:
            DiskFullError: as ``close``.
        """
        team = self.agents
        try:
            if team is not None:
                await team.manager.aclose()
                if self.disk.full:
                    self._name_interrupted(team)
                if team.mcp is not None:
                    await team.mcp.aclose()  # stops the servers' processes
                await team.providers.aclose()
                team.close_stores()
                team.checkpointer.stop()
            await self.venue.aclose()
            if self.memory is not None:
                await self.memory.finish_work()  # writes the cancelled agents left in threads
        finally:
            # the last backup of the run can take seconds on a large database: not on the
            # loop; then the workspace is free for the next writer
            await asyncio.to_thread(self._close_stores, final_backup=team is not None)
        self._raise_full_disk(raise_full_disk)


    def _name_interrupted(self, team: AgentTeam) -> None:
        """On a full disk: name the agents (for the message) and the tasks they were stopped
        in (taken, so the next start runs them again)."""
        try:
            for info in team.store.all():
                self.disk.agent_names[info.agent_id] = info.name
            for task in team.queue.tasks(statuses=[TaskStatus.TAKEN]):
                self.disk.interrupted(task.task_type, task.agent_id)
        except Exception as exc:  # reading, not writing: a full disk should not refuse it
            if not self.disk.check(exc):
                raise


def build_world(
    workspace: Workspace | None,
    spec: VenueSpec | None = None,
    options: WorldOptions | None = None,
    *,
    bus: EventBus | None = None,
    hold: WriterHold | None = None,
) -> World:
    """Build the world of ``workspace`` (None: a backtest in memory) on the venue ``spec`` asks
    for (default: the replay of the bundled data with everything visible).

    Call ``await world.start()`` inside the event loop to run its agents.

    Args:
        bus: the event bus panels already listen on; default: a new one.
        hold: this process's hold on the workspace when the caller took it first (to read the
            workspace before building); the world owns it from here on, and releases it if
            building fails.

    Raises:
        WorkspaceBusyError: another process writes the workspace (not when read-only).
        DamagedDatabaseError: the workspace database is damaged (left untouched).
        OperationalError: the workspace or its settings cannot be used, or the replay cursor is
            before the point its paper account was already settled to.
        DataFileError: a data file is unusable.
    """
    spec = spec or VenueSpec()
    options = options or WorldOptions()
    if workspace is None and (options.agents or options.read_only or hold is not None):
        raise ValueError("a world without a workspace has no agents, is never read-only and "
                         "holds nothing")
    if options.read_only and hold is not None:
        raise ValueError("a read-only world holds no workspace")
    if options.grouped_commits and (workspace is None or options.mode is not Mode.BACKTEST
                                    or options.read_only):
        raise ValueError("only a backtest's own workspace may group its commits")
    with contextlib.ExitStack() as cleanup:
        if hold is None and workspace is not None and not options.read_only:
            # a backtest's own workspace (grouped commits) is its output: not backed up
            hold = workspace.hold_for_writing(backups=not options.grouped_commits)
        if hold is not None:
            cleanup.callback(hold.release)
        world = _assemble(workspace, spec, options, bus or EventBus(), hold, cleanup)
        cleanup.pop_all()
    return world


def _assemble(
    workspace: Workspace | None,
    spec: VenueSpec,
    options: WorldOptions,
    bus: EventBus,
    hold: WriterHold | None,
    cleanup: contextlib.ExitStack,
) -> World:
    """Build every part, registering each one's undoing with ``cleanup`` as it is made."""
    settings = options.settings or (workspace.settings() if workspace else Settings())
    disk = DiskFullWatch(workspace.root if workspace is not None else None)
    bus.handled = disk.check
    if hold is not None and hold.keeper is not None:
        hold.keeper.disk = disk
    if spec.kind == "live":  # real money: LIVE everywhere (durable commits, approval policy)
        options = replace(options, mode=Mode.LIVE)
    checkpointer: WalCheckpointer | None = None
    if workspace is not None and options.agents:
        # started before any store connects, so none of their commits (made on the event loop)
        # checkpoints the WAL; this thread does
        checkpointer = WalCheckpointer(workspace.db_path)
        checkpointer.disk = disk
        checkpointer.start()
        cleanup.callback(checkpointer.stop)
    # A backtest's audit rows (tool calls, risk decisions) wait for the next order or fill
    # commit: a transaction per tool call costs more than the call, and a broken-off run is run
    # again. Its memory, made again the same way, skips the fsync and the worker thread per
    # write (the loop waits for each call anyway).
    backtest = options.mode is Mode.BACKTEST
    grouped: GroupedDb | None = None
    if options.grouped_commits:
        assert workspace is not None
        grouped = GroupedDb(workspace.db_path)
        cleanup.callback(grouped.finish)
    if workspace is None:
        ledger = Ledger(":memory:", durable=False, audit_batch=AUDIT_BATCH)
    else:
        ledger = Ledger(grouped or workspace.db_path, durable=options.mode is Mode.LIVE,
                        read_only=options.read_only, audit_batch=AUDIT_BATCH if backtest else 1)
    cleanup.callback(ledger.close)
    announce = options.announce
    venue = open_venue(spec, VenueContext(
        ledger, settings.paper, options.mode, events=bus.publish_nowait if announce else None,
        bus=bus if announce else None,
        resume=workspace is not None and not options.read_only,
        workspace=None if workspace is None else workspace.db_path,
    ))
    memory: MemoryBank | None = None
    memory_root = workspace.memory_root if workspace is not None else options.memory_root
    if options.memory and memory_root is not None:
        flat = backtest and workspace is not None  # not the person's own memory (the demo's)
        memory = MemoryBank(memory_root, venue.clock, bus if announce else None,
                            limits=MemoryLimits(durable=not flat), inline=flat,
                            scratch=options.grouped_commits, disk=disk)
        cleanup.callback(memory.close)
    kill_log: KillSwitchLog | None = None
    if workspace is not None:
        kill_log = KillSwitchLog(grouped or workspace.db_path, read_only=options.read_only)
        cleanup.callback(kill_log.close)
    risk_recorder: RiskDecisionRecorder = SqliteRiskRecorder(ledger)
    if announce:
        risk_recorder = AnnouncingRiskRecorder(risk_recorder, bus)
    guard = build_guard(settings.risk, risk_recorder)
    market, broker = venue.market, venue.broker
    alert = PersonAlert()  # told where to send once the agents' notifications exist
    target: GroupedDb | Path | str = ":memory:"  # a world in memory, or one that only reads
    if grouped is not None:
        target = grouped
    elif workspace is not None and not options.read_only:
        target = workspace.db_path
    requests = OrderRequests(target, durable=options.mode is Mode.LIVE)
    cleanup.callback(requests.close)
    held = HeldStops(target, durable=options.mode is Mode.LIVE)
    cleanup.callback(held.close)
    # a blind venue's orders are judged in real terms, their refusals told in blind ones
    entry_guard = guard if venue.blind is None else BlindGuard(guard, venue.blind,
                                                               venue.real_broker)
    orders = OrderEntry(
        broker, entry_guard, requests, approval=options.approval or settings.approval,
        halted=kill_log.active if kill_log is not None else (lambda: None),
        traded_symbols=traded_symbols(venue, ledger), alert=alert.send,
        kestrel_stops=settings.trading.kestrel_stops, now_ms=venue.clock.now_ms, held=held,
    )
    if announce:
        watch_held_stops(orders, bus)
    registry = ToolRegistry([
        *MarketTools(market).specs(),
        *IndicatorTools(market, IndicatorEngine()).specs(),
        *AccountTools(broker, orders.held_stops).specs(),
        *TradeTools(orders).specs(),
        *(MemoryTools(memory).specs() if memory is not None else ()),
    ])
    recorder = options.recorder
    if recorder is None:
        recorder = (MemoryRecorder() if options.read_only or not options.record_tool_calls
                    else SqliteToolCallRecorder(ledger, disk))
    if announce:
        recorder = AnnouncingRecorder(recorder, bus)
    executor = ToolExecutor(registry, recorder, venue.clock,
                            default_timeout_s=settings.tools.default_timeout_s, disk=disk)
    world = World(workspace, settings, venue, bus, ledger, memory, guard, registry, executor,
                  orders, hold, kill_log, grouped=grouped, disk=disk)
    if options.agents:
        assert workspace is not None and memory is not None and checkpointer is not None
        world.agents = _team(world, workspace, options, checkpointer, cleanup)
        alert.notifications = world.agents.notifications
    return world


def _team(
    world: World,
    workspace: Workspace,
    options: WorldOptions,
    checkpointer: WalCheckpointer,
    cleanup: contextlib.ExitStack,
) -> AgentTeam:
    """The agents' side over ``world``'s tools, in ``workspace``'s database."""
    settings, bus, venue = world.settings, world.bus, world.venue
    clock, broker = venue.clock, venue.broker
    db = world.grouped or workspace.db_path
    ids = options.ids or RandomIds()
    # Every commit survives a killed app (WAL). Only a LIVE account also forces each commit of its
    # orders, tasks, jobs and questions to disk against a power cut: paper money and a backtest
    # are simply run on, and an fsync per tool call would stall the window on a slow disk.
    # Conversations, usage and "last action" are written several times per agent step and are
    # never forced: losing the newest of them to a power cut only makes a task repeat a step,
    # and the order and dispatch tools recognise a repeated step by its call key.
    durable = options.mode is Mode.LIVE
    agents = AgentStore(db, clock, bus, durable=False)
    cleanup.callback(agents.close)
    conversations = ConversationStore(db, clock, bus, durable=False)
    cleanup.callback(conversations.close)
    approvals = ApprovalLog(db, clock, durable=durable)
    cleanup.callback(approvals.close)
    queue = TaskQueue(db, clock, ids, bus, durable=durable)
    cleanup.callback(queue.close)
    scheduler = JobScheduler(db, clock, queue, ids, durable=durable)
    cleanup.callback(scheduler.close)
    questions = QuestionStore(db, clock, ids, bus, durable=durable)
    cleanup.callback(questions.close)
    secrets = options.secrets or SecretStore()
    notifiers = notifiers_for(settings, secrets, bus)
    notifiers.update(options.extra_notifiers or {})
    notifications = NotificationService(db, clock, ids, notifiers, durable=durable)
    cleanup.callback(notifications.close)
    services = LoopServices(
        clock=clock, executor=world.executor, agents=agents, conversations=conversations,
        queue=queue, questions=questions, approvals=approvals,
        pricer=Pricer(PriceTable.load(workspace.root / "prices.yaml")), bus=bus,
        mode=options.mode, run_id=options.run_id or uuid.uuid4().hex,
        run_budget_usd=settings.agents.run_budget_usd,
        quote_currency=broker.quote_currency,
        disguise=venue.blind.text if venue.blind is not None else None,
        share=options.loop_share or NoShare(),
    )
    providers = ProviderCache(settings.llm, secrets, RuleEngineProvider(),
                              options.provider_override)
    force = options.force_provider

    def provider_choice(template: AgentTemplate) -> tuple[str, str]:
        if force is not None:
            return force
        choice: ProviderChoice = choose_provider(template, providers.llm)
        return choice.kind, choice.model

    mcp_hub: McpHub | None = None

    def mcp_grants(info: AgentInfo) -> frozenset[str]:
        return frozenset() if mcp_hub is None else mcp_hub.grants(info.agent_id, info.template)

    assert world.memory is not None
    manager = AgentManager(
        services, load_templates(extra_folders=[workspace.root / "agents"]), world.registry,
        world.memory, providers.for_agent, ids.new, scheduler, provider_choice=provider_choice,
        extra_permissions=mcp_grants, disk=world.disk, llm_settings=lambda: providers.llm,
    )
    if options.mode is not Mode.BACKTEST and venue.blind is None:
        from app.runtime.start import refuse_untradeable  # it reads the world being built

        # the check ``kestrel run --setup`` makes: no agent is made for a market it cannot trade
        manager.symbol_check = lambda symbols, interval: refuse_untradeable(world, symbols,
                                                                            interval)
    for spec in OrchestrationTools(manager, queue, scheduler, notifications, questions).specs():
        world.registry.register(spec)
    # after every core tool: an MCP tool may never take a core tool's name
    mcp_hub = attach_mcp(
        world.registry, settings.mcp, workspace.root, secrets,
        lambda: int(time.time() * 1000),
    )
    if mcp_hub is not None:
        mcp_hub.approvals.subscribe(manager.refresh_profiles)
    fills = FillRouter(queue, agents)
    bus.subscribe(OrderFilled, fills.on_filled)
    venue.driver.on_advance(scheduler.fire_due)
    venue.driver.speed = settings.agents.replay_speed
    assert world.kill_log is not None
    kill_switch = KillSwitch(
        world.kill_log, world.orders, manager, clock=clock, risk=settings.risk,
        notifications=notifications, bus=bus,
    )
    # a lot order entry can neither protect nor close halts trading
    world.orders.halt = lambda reason, by: kill_switch.trip(reason, by,
                                                            cause=TripCause.UNPROTECTED)
    # the loss halts trip the switch after each settle; a backtest measures templates under the
    # halts' refusals and is never halted as a whole
    kill_switch.watch(bus, None if options.mode is Mode.BACKTEST else broker.risk_view)
    health = None
    if options.mode is not Mode.BACKTEST:  # a backtest reports its errors in its report
        health = AgentHealth(queue, conversations, agents, notifications, bus)
        health.recover()
    return AgentTeam(
        ids, agents, conversations, approvals, queue, scheduler, questions, notifications,
        manager, services, fills, providers, kill_switch, services.run_id, checkpointer, mcp_hub,
        health,
    )


def traded_symbols(venue: Venue, ledger: Ledger) -> Callable[[], set[str]]:
    """The symbols the account ever traded, as the agents name them (blind names when blind)."""
    blind = venue.blind
    if blind is None:
        return ledger.traded_symbols
    return lambda: {blind.symbol(s) for s in ledger.traded_symbols()}


def notifiers_for(
    settings: Settings, secrets: SecretStore, bus: EventBus
) -> dict[Channel, Notifier]:
    """UI alerts and the tray go out on the bus; e-mail when configured; Telegram through the bot
    once ``app.telegram.start.start_telegram`` has started it, until then it says why not."""
    notifiers: dict[Channel, Notifier] = {
        Channel.UI_ALERT: BusNotifier(Channel.UI_ALERT, bus),
        Channel.TRAY: BusNotifier(Channel.TRAY, bus),
        Channel.TELEGRAM: UnconfiguredNotifier(
            Channel.TELEGRAM,
            "the Telegram bot has not started yet" if settings.telegram.enabled else
            "Telegram is off: turn it on and set the bot token in Settings > Telegram",
        ),
    }
    if settings.email is not None:
        notifiers[Channel.EMAIL] = EmailNotifier(
            settings.email, lambda: secrets.get(EMAIL_PASSWORD_KEY),
            secrets.how_to_set(EMAIL_PASSWORD_KEY, "Settings > E-mail"),
        )
    else:
        notifiers[Channel.EMAIL] = UnconfiguredNotifier(
            Channel.EMAIL, "e-mail is not configured: add the SMTP server in Settings > E-mail"
        )
    return notifiers
