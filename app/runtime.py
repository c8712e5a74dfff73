"""Assemble the offline runtime: replay clock, market, memory, paper account, tools and executor.

One place wires the services together so the CLI, the tests and (later) the GUI build the same
thing. The workspace's paper account lives in its SQLite ledger and moves forward with the replay
cursor: each start settles every candle that closed since the account was last settled, and a cursor
earlier than that is refused, because history an account has already traded through cannot change.

A runtime that writes holds the workspace (``Workspace.hold_for_writing``): one process at a time.
A read-only runtime is for reading a workspace another process writes: its ledger cannot be
written, the account is shown as that process last committed it (not settled to the cursor), and
its tool calls are kept in memory, not in the workspace's audit trail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.backtest.session import AUDIT_BATCH
from app.domain.clock import ReplayClock, ms_to_iso
from app.domain.errors import OperationalError
from app.domain.trading import Mode
from app.events import EventBus
from app.exchange.paper import PaperBroker
from app.indicators.engine import IndicatorEngine
from app.market.replay import ReplayMarketData
from app.memory.bank import MemoryBank, MemoryLimits
from app.resources import sample_data_files
from app.risk.config import build_guard
from app.store.kill_switch_log import KillSwitchLog
from app.store.ledger import Ledger
from app.store.recorders import AnnouncingRecorder, SqliteRiskRecorder, SqliteToolCallRecorder
from app.store.writer import WriterHold
from app.tools.account_tools import build_account_tools
from app.tools.executor import MemoryRecorder, ToolCallRecorder, ToolExecutor
from app.tools.indicator_tools import build_indicator_tools
from app.tools.market_tools import build_market_tools
from app.tools.memory_tools import build_memory_tools
from app.tools.registry import ToolRegistry
from app.tools.trade_tools import build_trade_tools
from app.workspace import Workspace


@dataclass
class OfflineRuntime:
    """Everything a headless caller needs to run any tool against replayed data."""

    workspace: Workspace
    clock: ReplayClock
    market: ReplayMarketData
    memory: MemoryBank
    ledger: Ledger
    broker: PaperBroker
    registry: ToolRegistry
    executor: ToolExecutor
    kill_switch_log: KillSwitchLog  # the kill switch's trips; the guard's first rule reads it
    hold: WriterHold | None = None  # None: a read-only runtime

    @property
    def read_only(self) -> bool:
        return self.hold is None

    def close(self, *, final_backup: bool = False) -> None:
        """Close the stores and let the next writer in (``final_backup``: see ``WriterHold``)."""
        try:
            self.memory.close()
            self.kill_switch_log.close()
            self.ledger.close()
        finally:
            if self.hold is not None:
                self.hold.release(final_backup=final_backup)


def build_offline_runtime(
    workspace: Workspace,
    data_files: Sequence[Path] = (),
    at_ms: int | None = None,
    recorder: ToolCallRecorder | None = None,
    bus: EventBus | None = None,
    mode: Mode = Mode.PAPER,
    hold: WriterHold | None = None,
    read_only: bool = False,
    quote_currency: str | None = None,
) -> OfflineRuntime:
    """Replay ``data_files`` (default: the bundled sample data) with the cursor at ``at_ms``.

    Without ``at_ms`` the cursor sits at the end of the data, so every candle is visible.
    ``quote_currency`` is the currency a new paper account is kept in (default: the quote of
    the data's first symbol); an existing account keeps the one it was opened in.

    Args:
        hold: this process's hold on the workspace, taken by the caller; default: taken here.
            The runtime owns it from here on (released by ``close`` or when building fails).
        read_only: open without writing anything (see the module docstring); takes no hold.

    Raises:
        WorkspaceBusyError: another process writes the workspace (not when ``read_only``).
        DamagedDatabaseError: the workspace database is damaged (left untouched).
        OperationalError: the workspace cannot be used, or the cursor is before the point the
            workspace's paper account was already settled to.
        DataFileError: a data file is unusable.
    """
    if read_only and hold is not None:
        raise ValueError("a read-only runtime holds no workspace")
    if not read_only and hold is None:
        hold = workspace.hold_for_writing()
    ledger: Ledger | None = None
    memory: MemoryBank | None = None
    kill_log: KillSwitchLog | None = None
    try:
        settings = workspace.settings()
        files = list(data_files) or sample_data_files()
        clock = ReplayClock(0)
        market = ReplayMarketData.from_paths(clock, files)
        clock.advance_to(market.end_ms() if at_ms is None else at_ms)
        # Every commit of a LIVE account is forced to disk (it must survive a power cut); paper
        # and backtest commits survive a killed app (WAL) without an fsync each, which on a slow
        # disk would stall the window once per tool call. A backtest's audit rows (tool calls,
        # risk decisions) also wait for the next order or fill commit, as in a strategy
        # backtest: a transaction per tool call cost more than the call, and a broken-off run is
        # run again.
        backtest = mode is Mode.BACKTEST
        ledger = Ledger(
            workspace.db_path, durable=mode is Mode.LIVE, read_only=read_only,
            audit_batch=AUDIT_BATCH if backtest else 1,
        )
        row = ledger.connection.execute(
            "SELECT value FROM meta WHERE key='quote_currency'"
        ).fetchone()
        opened_in = row[0] if row is not None else None
        broker = PaperBroker(
            market,
            clock,
            ledger,
            initial_cash=settings.paper.initial_cash,
            quote_currency=opened_in or quote_currency,
            mode=mode,
            fee_maker=settings.paper.fee_rate,
            fee_taker=settings.paper.fee_rate,
            slippage_bps=settings.paper.slippage_bps,
        )
        if clock.now_ms() < broker.settled_ms:
            raise OperationalError(
                f"the paper account in {workspace.db_path} is already settled to "
                f"{ms_to_iso(broker.settled_ms)}; the replay cursor cannot go back to "
                f"{ms_to_iso(clock.now_ms())}. Use a later --at or another --workspace."
            )
        if not read_only:
            broker.settle()
        # A backtest's memory, like its ledger, is simply made again by running it again: no
        # fsync per write, and no worker thread per call on a loop that waits for each call.
        memory = MemoryBank(
            workspace.memory_root, clock, bus,
            limits=MemoryLimits(durable=not backtest), inline=backtest,
        )
        kill_log = KillSwitchLog(workspace.db_path, read_only=read_only)
        guard = build_guard(settings.risk, SqliteRiskRecorder(ledger), kill_log.active)
        registry = ToolRegistry(
            [
                *build_market_tools(market),
                *build_indicator_tools(market, IndicatorEngine()),
                *build_account_tools(broker),
                *build_trade_tools(broker, guard),
                *build_memory_tools(memory),
            ]
        )
    except BaseException:
        if memory is not None:
            memory.close()
        if kill_log is not None:
            kill_log.close()
        try:
            if ledger is not None:
                ledger.close()
        finally:
            if hold is not None:
                hold.release()
        raise
    if read_only:
        recorder = recorder or MemoryRecorder()
    recorder = recorder or SqliteToolCallRecorder(ledger)
    if bus is not None:
        recorder = AnnouncingRecorder(recorder, bus)
    executor = ToolExecutor(
        registry,
        recorder,
        clock,
        default_timeout_s=settings.tools.default_timeout_s,
    )
    return OfflineRuntime(
        workspace, clock, market, memory, ledger, broker, registry, executor, kill_log, hold
    )
