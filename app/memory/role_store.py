"""Read and write the role files of ``roles`` through a ``MemoryBank``, under its locks.

Going through the bank (not the filesystem) keeps the sandbox, the atomic writes, the recall index
and the change events for these files too. Read-modify-write updates run under the file's lock, so
two tasks recording trades of one symbol at once lose neither.
"""

from __future__ import annotations

from app.memory.bank import MemoryBank, WriteOutcome
from app.memory.roles import (
    ANALYSIS_LOG,
    MARKET_ASSESSMENT,
    AnalysisEntry,
    MarketAssessment,
    PerformanceSummary,
    SymbolAssessment,
    TradeRecord,
    TradesFile,
    load_yaml,
    parse_analysis_log,
    performance_path,
    render_analysis_entry,
    summarise,
    to_yaml,
    trades_path,
)


async def load_trades(bank: MemoryBank, agent_id: str, symbol: str) -> TradesFile:
    """The symbol's trades file; an empty one when the Trader has none yet."""
    content = await bank.aread_file(agent_id, trades_path(symbol))
    if not content.exists:
        return TradesFile(symbol=symbol)
    return load_yaml(TradesFile, content.data.decode("utf-8"))


async def load_performance(
    bank: MemoryBank, agent_id: str, symbol: str
) -> PerformanceSummary | None:
    content = await bank.aread_file(agent_id, performance_path(symbol))
    if not content.exists:
        return None
    return load_yaml(PerformanceSummary, content.data.decode("utf-8"))


async def record_trade(
    bank: MemoryBank, agent_id: str, symbol: str, trade: TradeRecord
) -> PerformanceSummary:
    """Add or update a trade in ``trades.yaml`` and rewrite ``performance_summary.yaml``."""
    updated: list[TradesFile] = []

    def upsert(current: bytes | None) -> bytes:
        trades = (
            TradesFile(symbol=symbol)
            if current is None
            else load_yaml(TradesFile, current.decode("utf-8"))
        )
        updated.append(trades.upsert(trade))
        return to_yaml(updated[-1]).encode("utf-8")

    await bank.aupdate_file(agent_id, trades_path(symbol), upsert)
    summary = summarise(updated[-1], bank.clock.now_ms())
    await bank.awrite_file(agent_id, performance_path(symbol), to_yaml(summary).encode("utf-8"))
    return summary


async def append_analysis(bank: MemoryBank, agent_id: str, entry: AnalysisEntry) -> WriteOutcome:
    """Append one entry to ``analysis_log.md``."""
    block = render_analysis_entry(entry).encode("utf-8")
    return await bank.aappend_file(agent_id, ANALYSIS_LOG, block)


async def load_analysis_log(bank: MemoryBank, agent_id: str) -> list[AnalysisEntry]:
    content = await bank.aread_file(agent_id, ANALYSIS_LOG)
    return parse_analysis_log(content.data.decode("utf-8")) if content.exists else []


async def update_assessment(
    bank: MemoryBank, agent_id: str, symbol: str, assessment: SymbolAssessment
) -> MarketAssessment:
    """Replace one symbol's view in ``current_market_assessment.yaml``, keeping the others."""
    result: list[MarketAssessment] = []

    def merge(current: bytes | None) -> bytes:
        base = (
            MarketAssessment(updated_at=assessment.assessed_at)
            if current is None
            else load_yaml(MarketAssessment, current.decode("utf-8"))
        )
        result.append(base.with_symbol(symbol, assessment))
        return to_yaml(result[-1]).encode("utf-8")

    await bank.aupdate_file(agent_id, MARKET_ASSESSMENT, merge)
    return result[-1]


async def load_assessment(bank: MemoryBank, agent_id: str) -> MarketAssessment | None:
    content = await bank.aread_file(agent_id, MARKET_ASSESSMENT)
    if not content.exists:
        return None
    return load_yaml(MarketAssessment, content.data.decode("utf-8"))
