"""Assemble the agent runtime over the offline market: stores, queue, scheduler, notifications,
questions, the orchestration tools, the manager and the market driver.

The CLI (``kestrel run``, ``chat``, ``backtest --agents``), the GUI and the tests all build this one
thing, so they run the same agents through the same tools. Everything durable lives in the
workspace's ``kestrel.db``; the replay clock starts where the workspace's paper account was settled.
"""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from app.agents.agent_store import AgentStore
from app.agents.approval_log import ApprovalLog
from app.agents.conversation_store import ConversationStore
from app.agents.costs import PriceTable
from app.agents.driver import MarketDriver
from app.agents.fills import FillRouter
from app.agents.llm.factory import build_provider
from app.agents.llm.port import LLMProvider, LLMUsage
from app.agents.loop import LoopServices
from app.agents.loop_share import LoopShare, NoShare
from app.agents.manager import AgentManager
from app.agents.rules.engine import RuleEngineProvider
from app.agents.templates import AgentTemplate, load_templates
from app.config import LLMSettings, Settings
from app.config.approval import ApprovalSettings
from app.domain.agents import AgentInfo, AgentRole, Channel
from app.domain.clock import ReplayClock
from app.domain.trading import Mode
from app.events import EventBus
from app.mcp.hub import McpHub, attach_mcp
from app.orchestration.email_channel import EmailNotifier
from app.orchestration.ids import IdFactory, RandomIds
from app.orchestration.notify import (
    BusNotifier,
    NotificationService,
    Notifier,
    UnconfiguredNotifier,
)
from app.orchestration.questions import QuestionStore
from app.orchestration.queue import TaskQueue
from app.orchestration.scheduler import JobScheduler
from app.runtime import OfflineRuntime, build_offline_runtime
from app.secrets import SecretStore
from app.store.checkpointer import WalCheckpointer
from app.store.db import connect
from app.store.writer import WriterHold
from app.tools.orchestration_tools import build_orchestration_tools
from app.workspace import Workspace

ORCHESTRATOR_TEMPLATE = "SystemOrchestrator_v1"
ProviderOverride = Callable[[AgentInfo, AgentTemplate], LLMProvider | None]


class _Pricer:
    """Prices a call: the rule engine and replays cost nothing; other models from the table."""

    def __init__(self, table: PriceTable) -> None:
        self.table = table

    def cost(self, provider: LLMProvider, model: str, usage: LLMUsage) -> Decimal | None:
        if provider.name in ("rule-engine", "replay"):
            return Decimal(0)
        return self.table.price(
            model, usage, provider=provider.name, base_url=getattr(provider, "base_url", None)
        )


@dataclass
class AgentRuntime:
    base: OfflineRuntime
    bus: EventBus
    ids: IdFactory
    agents: AgentStore
    conversations: ConversationStore
    approvals: ApprovalLog
    queue: TaskQueue
    scheduler: JobScheduler
    questions: QuestionStore
    notifications: NotificationService
    manager: AgentManager
    driver: MarketDriver
    rule_engine: RuleEngineProvider
    run_id: str
    providers: dict[tuple[str, str, str, str], LLMProvider]
    checkpointer: WalCheckpointer
    mcp: McpHub | None = None  # None: no MCP server configured (the SDK is never imported)

    @property
    def clock(self) -> ReplayClock:
        return self.base.clock

    async def start(self) -> None:
        await self.manager.start()
        # what exists now (modules, market data, caches) lives as long as the app: keep it out
        # of the garbage collector's full passes, which would otherwise stall the loop ~50-100 ms
        gc.freeze()

    def orchestrator(self) -> AgentInfo | None:
        for info in self.manager.list_agents():
            if info.role is AgentRole.ORCHESTRATOR:
                return info
        return None

    async def ensure_orchestrator(self) -> AgentInfo:
        """The Orchestrator the chat talks to; created on first use."""
        found = self.orchestrator()
        if found is not None:
            return found
        return await self.manager.create_agent(
            ORCHESTRATOR_TEMPLATE, "Orchestrator", {}, start=True, created_by="system"
        )

    async def aclose(self) -> None:
        try:
            await self.manager.aclose()
            if self.mcp is not None:
                await self.mcp.aclose()  # stops the servers' processes
            for provider in self.providers.values():
                await provider.aclose()
            for store in (self.agents, self.conversations, self.approvals, self.queue,
                          self.scheduler, self.questions, self.notifications):
                store.close()
            self.checkpointer.stop()
        finally:
            # the last backup of the run can take seconds on a large database: not on the
            # loop; then the workspace is free for the next writer
            await asyncio.to_thread(self.base.close, final_backup=True)


def workspace_resume_ms(workspace: Workspace) -> int | None:
    """Where a used workspace's replay continues (its paper account's last settle), else None."""
    if not workspace.db_path.exists():
        return None
    conn = connect(workspace.db_path)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='settled_ms'").fetchone()
    finally:
        conn.close()
    return int(row[0]) if row is not None and int(row[0]) >= 0 else None


def build_agent_runtime(
    workspace: Workspace,
    *,
    data_files: Sequence[Path] = (),
    at_ms: int | None = None,
    bus: EventBus | None = None,
    mode: Mode = Mode.PAPER,
    ids: IdFactory | None = None,
    provider_override: ProviderOverride | None = None,
    secrets: SecretStore | None = None,
    extra_notifiers: dict[Channel, Notifier] | None = None,
    run_id: str | None = None,
    approval: ApprovalSettings | None = None,
    force_provider: tuple[str, str] | None = None,
    loop_share: LoopShare | None = None,
    hold: WriterHold | None = None,
) -> AgentRuntime:
    """Build everything; call ``await runtime.start()`` inside the event loop to run agents.

    Args:
        loop_share: how agent steps leave time to a window on the same event loop (the desk's);
            headless runs leave it out.
        hold: this process's hold on the workspace when the caller took it first (to read the
            workspace before building); the runtime owns it from here on.

    Raises:
        WorkspaceBusyError: another process writes the workspace.
        DamagedDatabaseError: the workspace database is damaged (left untouched).
    """
    bus = bus or EventBus()
    ids = ids or RandomIds()
    hold = hold or workspace.hold_for_writing()
    # started before any store connects, so none of their commits (made on the event loop)
    # checkpoints the WAL; this thread does
    checkpointer = WalCheckpointer(workspace.db_path)
    try:
        checkpointer.start()
    except BaseException:
        hold.release()
        raise
    base: OfflineRuntime | None = None
    try:
        base = build_offline_runtime(
            workspace, data_files, at_ms=at_ms, bus=bus, mode=mode, hold=hold
        )
        settings = workspace.settings()
        db = workspace.db_path
        clock = base.clock
        # Every commit survives a killed app (WAL). Only a LIVE account also forces each commit
        # of its orders, tasks, jobs and questions to disk against a power cut: paper money and
        # a backtest are simply run on, and an fsync per tool call would stall the window on a
        # slow disk. Conversations, usage and "last action" are written several times per agent
        # step and are never forced: losing the newest of them to a power cut only makes a task
        # repeat a step, and the order and dispatch tools recognise a repeated step by its call
        # key.
        durable = mode is Mode.LIVE
        agents = AgentStore(db, clock, bus, durable=False)
        conversations = ConversationStore(db, clock, bus, durable=False)
        approvals = ApprovalLog(db, clock, durable=durable)
        queue = TaskQueue(db, clock, ids, bus, durable=durable)
        scheduler = JobScheduler(db, clock, queue, ids, durable=durable)
        questions = QuestionStore(db, clock, ids, bus, durable=durable)
        secrets = secrets or SecretStore()
        notifiers = _notifiers(settings, secrets, bus)
        notifiers.update(extra_notifiers or {})
        notifications = NotificationService(db, clock, ids, notifiers, durable=durable)
        rule_engine = RuleEngineProvider()
        prices = PriceTable.load(workspace.root / "prices.yaml")
        broker = base.broker

        async def last_price(symbol: str) -> Decimal | None:
            try:
                return await broker.last_price(broker.canonical_symbol(symbol))
            except Exception:  # noqa: BLE001 - an unknown symbol: the order tool will say so
                return None

        def traded_symbols() -> set[str]:
            rows = base.ledger.connection.execute("SELECT DISTINCT symbol FROM fills").fetchall()
            return {row[0] for row in rows}

        services = LoopServices(
            clock=clock, executor=base.executor, agents=agents, conversations=conversations,
            queue=queue, questions=questions, approvals=approvals, pricer=_Pricer(prices), bus=bus,
            mode=mode, run_id=run_id or uuid.uuid4().hex, approval=approval or settings.approval,
            last_price=last_price, traded_symbols=traded_symbols,
            run_budget_usd=settings.agents.run_budget_usd, share=loop_share or NoShare(),
        )
        templates = load_templates(extra_folders=[workspace.root / "agents"])
        built: dict[tuple[str, str, str, str], LLMProvider] = {}

        def provider_for(info: AgentInfo, template: AgentTemplate) -> LLMProvider:
            if provider_override is not None:
                chosen = provider_override(info, template)
                if chosen is not None:
                    return chosen
            return _provider(info, template, settings.llm, secrets, rule_engine, built)

        def provider_choice(template: AgentTemplate) -> tuple[str, str]:
            if force_provider is not None:
                return force_provider
            if settings.llm.provider in ("template", ""):
                return template.provider.kind, template.provider.model
            return settings.llm.provider, settings.llm.model or template.provider.model

        mcp_hub: McpHub | None = None

        def mcp_grants(info: AgentInfo) -> frozenset[str]:
            return frozenset() if mcp_hub is None else mcp_hub.grants(info.agent_id,
                                                                       info.template)

        manager = AgentManager(
            services, templates, base.registry, base.memory, provider_for, ids.new, scheduler,
            provider_choice=provider_choice, extra_permissions=mcp_grants,
        )
        for spec in build_orchestration_tools(
            manager, queue, scheduler, notifications, questions, clock
        ):
            base.registry.register(spec)
        # after every core tool: an MCP tool may never take a core tool's name
        mcp_hub = attach_mcp(
            base.registry, settings.mcp, workspace.root, secrets.get,
            lambda: int(time.time() * 1000),
        )
        if mcp_hub is not None:
            mcp_hub.approvals.subscribe(manager.refresh_profiles)
        fills = FillRouter(base.ledger, queue, agents)
        driver = MarketDriver(clock, broker, scheduler, fills, manager, bus)
        driver.speed = settings.agents.replay_speed
        return AgentRuntime(
            base, bus, ids, agents, conversations, approvals, queue, scheduler, questions,
            notifications, manager, driver, rule_engine, services.run_id, built, checkpointer,
            mcp_hub,
        )
    except BaseException:
        try:
            checkpointer.stop()
        finally:
            if base is not None:
                base.close()  # releases the hold too
            else:
                hold.release()  # a no-op when build_offline_runtime released it
        raise


EMAIL_PASSWORD_KEY = "email.password"  # noqa: S105 - the keyring entry name, not a secret


def _notifiers(settings: Settings, secrets: SecretStore, bus: EventBus) -> dict[Channel, Notifier]:
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
            settings.email, lambda: secrets.get(EMAIL_PASSWORD_KEY)
        )
    else:
        notifiers[Channel.EMAIL] = UnconfiguredNotifier(
            Channel.EMAIL, "e-mail is not configured: add the SMTP server in Settings > E-mail"
        )
    return notifiers


def _provider(
    info: AgentInfo,
    template: AgentTemplate,
    llm: LLMSettings,
    secrets: SecretStore,
    rule_engine: RuleEngineProvider,
    built: dict[tuple[str, str, str, str], LLMProvider],
) -> LLMProvider:
    """The agent's own provider (as stored when it was created) with its keyring entry."""
    kind = info.provider
    if kind == "rule-engine":
        return rule_engine
    base_url = template.provider.base_url or ""
    key_name = template.provider.api_key_name or ""
    if llm.provider == kind:
        base_url = llm.base_url or base_url
        key_name = llm.api_key_name or key_name
    key = (kind, info.model, base_url, key_name)
    provider = built.get(key)
    if provider is None:
        provider = build_provider(
            kind, model=info.model, base_url=base_url or None,
            api_key=secrets.get(key_name) if key_name else None, timeout_s=llm.timeout_s,
            max_retries=llm.max_retries, stream=llm.stream, rule_engine=rule_engine,
        )
        built[key] = provider
    return provider
