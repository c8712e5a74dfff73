"""Assemble the full tool path for a replay: clock, market, ledger, broker, guard, tools, executor.

A backtest, the look-ahead test, the parity test and the benchmark all build their world here, so
they exercise exactly the path an agent uses: XML parse -> executor -> Risk Guard -> PaperBroker ->
SQLite ledger. Nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from app.config.risk import RiskConfig, all_in_backtest_config
from app.domain.clock import ReplayClock
from app.domain.trading import Mode
from app.exchange.paper import PaperBroker
from app.indicators.engine import IndicatorEngine
from app.market.csv_loader import LoadedFile, load_csv
from app.market.replay import ReplayMarketData
from app.risk.config import build_guard
from app.risk.guard import RiskGuard
from app.store.ledger import Ledger
from app.store.recorders import SqliteRiskRecorder, SqliteToolCallRecorder
from app.tools.account_tools import build_account_tools
from app.tools.executor import MemoryRecorder, ToolCallRecorder, ToolExecutor
from app.tools.indicator_tools import build_indicator_tools
from app.tools.market_tools import build_market_tools
from app.tools.registry import ToolRegistry
from app.tools.trade_tools import build_trade_tools

# Audit rows (tool calls, risk decisions) wait for the next order/fill commit or this many rows: a
# transaction per call would cost more than the call. A replay runs in memory and is simply run
# again after a crash, so a lost tail costs nothing there.
AUDIT_BATCH = 256


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """The simulated exchange's costs. ``fee_rate`` is both maker and taker fee (0.001 = 0.1%)."""

    cash: Decimal = Decimal(10_000)
    fee_rate: Decimal = Decimal("0.001")
    slippage_bps: Decimal = Decimal(2)


@dataclass
class Session:
    clock: ReplayClock
    market: ReplayMarketData
    ledger: Ledger
    broker: PaperBroker
    guard: RiskGuard
    registry: ToolRegistry
    executor: ToolExecutor


def load_files(paths: Sequence[Path], *, allow_gaps: bool = False) -> list[LoadedFile]:
    """Load and validate every data file; a gap is an error unless ``allow_gaps``.

    Raises:
        DataFileError: naming the file, row and field.
    """
    return [load_csv(Path(p), allow_gaps=allow_gaps) for p in paths]


def build_session(
    files: Sequence[LoadedFile],
    *,
    broker_settings: BrokerSettings | None = None,
    risk: RiskConfig | None = None,
    ledger_path: Path | str = ":memory:",
    record_tool_calls: bool = True,
    start_ms: int | None = None,
) -> Session:
    """Wire one backtest world over loaded files.

    Args:
        risk: defaults to ``all_in_backtest_config()``.
        ledger_path: the SQLite ledger (":memory:" for tests); a backtest does not need the
            power-loss durability of a live account, so commits are ``synchronous=NORMAL``.
        record_tool_calls: store every call in the ledger's audit table (else keep the last
            10,000 in memory).
        start_ms: the clock's first position; default the first moment any candle is visible.
    """
    costs = broker_settings or BrokerSettings()
    probe = ReplayMarketData(ReplayClock(0), files)
    clock = ReplayClock(probe.start_ms() if start_ms is None else start_ms)
    market = ReplayMarketData(clock, files)
    ledger = Ledger(ledger_path, durable=False, audit_batch=AUDIT_BATCH)
    broker = PaperBroker(
        market, clock, ledger,
        initial_cash=costs.cash, mode=Mode.BACKTEST,
        fee_maker=costs.fee_rate, fee_taker=costs.fee_rate, slippage_bps=costs.slippage_bps,
    )
    guard = build_guard(risk or all_in_backtest_config(), SqliteRiskRecorder(ledger))
    specs = [
        *build_market_tools(market),
        *build_indicator_tools(market, IndicatorEngine()),
        *build_account_tools(broker),
        *build_trade_tools(broker, guard),
    ]
    registry = ToolRegistry(specs)
    recorder: ToolCallRecorder = (
        SqliteToolCallRecorder(ledger) if record_tool_calls else MemoryRecorder()
    )
    executor = ToolExecutor(registry, recorder, clock)
    return Session(clock, market, ledger, broker, guard, registry, executor)
