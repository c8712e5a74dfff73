"""Documented layouts of the role memory files Part D asks for, as typed, round-trippable schemas.

Part D tells the Trader to consult ``trades.yaml`` and ``performance_summary.yaml`` *for the symbol*
before acting on a signal, and the Analyst to append to ``analysis_log.md`` and rewrite
``current_market_assessment.yaml``. Everyone who reads these files (the agents through
``read_agent_memory_file``, the rule-engine roles, the GUI, a person) relies on one shape, so it is
defined here once. Layout inside the agent's folder::

    symbols/<SYMBOLKEY>/trades.yaml               TradesFile   (Trader; SYMBOLKEY e.g. BTCUSDT)
    symbols/<SYMBOLKEY>/trades_archive/*.yaml     TradesFile   (older closed trades, rolled over)
    symbols/<SYMBOLKEY>/performance_summary.yaml  PerformanceSummary
    analysis_log.md                               AnalysisEntry blocks (Analyst)
    current_market_assessment.yaml                MarketAssessment

YAML is written with ``yamltext.dump``; money and prices are decimal strings (``"43000.5"``), never
floats, and times ISO 8601 UTC strings. Each analysis-log entry is a ``## <ISO time> · …`` header
(so recall gives it its own market time) followed by a fenced ``yaml`` block holding the entry.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from decimal import Decimal
from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from app import yamltext
from app.domain.clock import ms_to_iso, parse_time
from app.domain.trading import Side
from app.memory.text import ENTRY_HEADER, entry_header

SCHEMA_VERSION = 1
ANALYSIS_LOG = "analysis_log.md"
MARKET_ASSESSMENT = "current_market_assessment.yaml"
_FENCED_YAML = re.compile(r"^```yaml\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def symbol_key(symbol: str) -> str:
    """The folder name of a symbol: ``BTC/USDT`` -> ``BTCUSDT``, ``X/Y:Z`` -> ``XY_Z``.

    Raises:
        ValueError: the symbol holds more than letters, digits, ``/``, ``:``, ``-`` and ``_``.
    """
    key = symbol.strip().upper().replace("/", "").replace(":", "_")
    if not re.fullmatch(r"[A-Z0-9][A-Z0-9_-]{0,39}", key):
        raise ValueError(f"{symbol!r} is not a trading symbol such as 'BTC/USDT'")
    return key


def trades_path(symbol: str) -> str:
    return f"symbols/{symbol_key(symbol)}/trades.yaml"


def performance_path(symbol: str) -> str:
    return f"symbols/{symbol_key(symbol)}/performance_summary.yaml"


def trades_archive_dir(symbol: str) -> str:
    return f"symbols/{symbol_key(symbol)}/trades_archive"


def _iso(value: str) -> str:
    parse_time(value)  # raises ValueError naming the accepted forms
    return value


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TradeRecord(_Schema):
    """One trade of the symbol: entry, exit (once closed), the signal behind it and the lesson."""

    trade_id: str = Field(min_length=1, max_length=80)
    side: Side
    quantity: Decimal = Field(gt=0)
    entry_price: Decimal = Field(gt=0)
    opened_at: str
    exit_price: Decimal | None = Field(default=None, gt=0)
    closed_at: str | None = None
    fees: Decimal = Decimal(0)
    realized_pnl: Decimal | None = None
    signal_source: str | None = None  # the Analyst agent that sent the signal
    signal: str = ""  # e.g. "RSI(14)=27 oversold + MACD bullish cross on 1h"
    confidence: Decimal | None = Field(default=None, ge=0, le=1)
    reasoning: str = ""  # why the Trader acted on the signal
    reflection: str | None = None  # the post-trade lesson
    order_ids: list[str] = Field(default_factory=list)
    stop_loss: Decimal | None = Field(default=None, gt=0)  # the planned exits, set on entry
    take_profit: Decimal | None = Field(default=None, gt=0)

    @field_validator("opened_at", "closed_at")
    @classmethod
    def _times(cls, value: str | None) -> str | None:
        return None if value is None else _iso(value)

    @property
    def closed(self) -> bool:
        return self.realized_pnl is not None


class ArchivedTrades(_Schema):
    """The closed trades moved out of ``trades.yaml`` into its archive files, as totals.

    A Trader that rewrote every trade it ever made on each fill made the file, the signal's task
    and each rewrite grow without end (1 MiB, the size limit, after about 840 trades). The file
    keeps the open trades and the latest closed ones; the totals here keep the summary, the
    win rate and the losing streak counting every trade, and ``files`` says where the rest are.
    """

    files: list[str] = Field(default_factory=list)  # oldest first
    trades: int = Field(default=0, ge=0)
    wins: int = Field(default=0, ge=0)
    losses: int = Field(default=0, ge=0)
    net_pnl: Decimal = Decimal(0)
    gross_profit: Decimal = Decimal(0)
    gross_loss: Decimal = Decimal(0)
    largest_win: Decimal | None = None
    largest_loss: Decimal | None = None
    max_consecutive_losses: int = Field(default=0, ge=0)
    trailing_losses: int = Field(default=0, ge=0)  # the losing streak the archive ends with

    def plus(self, pnls: list[Decimal]) -> ArchivedTrades:
        """These totals with more closed trades' realised P&L added, oldest first."""
        wins = [p for p in pnls if p > 0]
        losses = [p for p in pnls if p <= 0]
        streak, longest = self.trailing_losses, self.max_consecutive_losses
        for pnl in pnls:
            streak = streak + 1 if pnl <= 0 else 0
            longest = max(longest, streak)
        largest_win = [*wins, *([self.largest_win] if self.largest_win is not None else [])]
        largest_loss = [*losses, *([self.largest_loss] if self.largest_loss is not None else [])]
        return self.model_copy(update={
            "trades": self.trades + len(pnls),
            "wins": self.wins + len(wins),
            "losses": self.losses + len(losses),
            "net_pnl": self.net_pnl + sum(pnls, Decimal(0)),
            "gross_profit": self.gross_profit + sum(wins, Decimal(0)),
            "gross_loss": self.gross_loss - sum(losses, Decimal(0)),
            "largest_win": max(largest_win) if largest_win else None,
            "largest_loss": min(largest_loss) if largest_loss else None,
            "max_consecutive_losses": longest,
            "trailing_losses": streak,
        })


class TradesFile(_Schema):
    """``symbols/<KEY>/trades.yaml``: the open and the latest closed trades of one symbol,
    oldest first; ``archived`` counts the older ones, moved to ``trades_archive/``."""

    schema_version: Literal[1] = SCHEMA_VERSION
    symbol: str
    archived: ArchivedTrades | None = None
    trades: list[TradeRecord] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _without_empty_archive(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A file that never rolled over reads as it always did, without ``archived: null``."""
        data: dict[str, Any] = handler(self)
        if data.get("archived") is None:
            data.pop("archived", None)
        return data

    @property
    def closed_pnls(self) -> list[Decimal]:
        return [t.realized_pnl for t in self.trades if t.realized_pnl is not None]

    @property
    def totals(self) -> ArchivedTrades:
        """Every closed trade of the symbol counted, archived ones and those in the file."""
        return (self.archived or ArchivedTrades()).plus(self.closed_pnls)

    def oldest_closed(self, keep: int) -> list[TradeRecord]:
        """The closed trades but the latest ``keep``, oldest first: what a roll-over moves."""
        closed = [t for t in self.trades if t.closed]
        return closed[: max(0, len(closed) - keep)]

    def without(self, moved: list[TradeRecord], path: str) -> TradesFile:
        """This file once ``moved`` (closed trades of it) are archived at ``path``: without them,
        their totals added under ``archived``. Open trades always stay."""
        # by identity, not trade id: a file edited by hand may repeat an id, and an open trade
        # sharing one with an archived trade must stay
        gone = {id(t) for t in moved}
        before = self.archived or ArchivedTrades()
        archived = before.plus([t.realized_pnl for t in moved if t.realized_pnl is not None])
        return self.model_copy(update={
            "archived": archived.model_copy(update={"files": [*before.files, path]}),
            "trades": [t for t in self.trades if id(t) not in gone],
        })

    def upsert(self, trade: TradeRecord) -> TradesFile:
        """A copy with ``trade`` replacing the one of the same id, or appended."""
        kept = [t for t in self.trades if t.trade_id != trade.trade_id]
        if len(kept) == len(self.trades):
            return self.model_copy(update={"trades": [*self.trades, trade]})
        return self.model_copy(
            update={"trades": [trade if t.trade_id == trade.trade_id else t for t in self.trades]}
        )


class PerformanceSummary(_Schema):
    """``symbols/<KEY>/performance_summary.yaml``: the Trader's record with the symbol so far."""

    schema_version: Literal[1] = SCHEMA_VERSION
    symbol: str
    updated_at: str
    total_trades: int = Field(ge=0)
    open_trades: int = Field(ge=0)
    wins: int = Field(ge=0)
    losses: int = Field(ge=0)
    win_rate_pct: Decimal | None = None
    net_pnl: Decimal = Decimal(0)
    gross_profit: Decimal = Decimal(0)
    gross_loss: Decimal = Decimal(0)
    profit_factor: Decimal | None = None
    average_win: Decimal | None = None
    average_loss: Decimal | None = None
    largest_win: Decimal | None = None
    largest_loss: Decimal | None = None
    max_consecutive_losses: int = Field(default=0, ge=0)
    lessons: list[str] = Field(default_factory=list)

    @field_validator("updated_at")
    @classmethod
    def _time(cls, value: str) -> str:
        return _iso(value)


def summarise(
    trades: TradesFile, now_ms: int, lessons: list[str] | None = None
) -> PerformanceSummary:
    """Compute the performance summary of a symbol's trades (closed trades count for P&L),
    archived ones included."""
    totals = trades.totals
    closed = totals.wins + totals.losses
    wins, losses = totals.wins, totals.losses
    return PerformanceSummary(
        symbol=trades.symbol,
        updated_at=ms_to_iso(now_ms),
        total_trades=(trades.archived.trades if trades.archived else 0) + len(trades.trades),
        open_trades=len(trades.trades) - len(trades.closed_pnls),
        wins=wins,
        losses=losses,
        win_rate_pct=round(Decimal(100) * wins / closed, 2) if closed else None,
        net_pnl=totals.net_pnl,
        gross_profit=totals.gross_profit,
        gross_loss=totals.gross_loss,
        profit_factor=(
            round(totals.gross_profit / totals.gross_loss, 4) if totals.gross_loss else None
        ),
        average_win=round(totals.gross_profit / wins, 8) if wins else None,
        average_loss=round(-totals.gross_loss / losses, 8) if losses else None,
        largest_win=totals.largest_win,
        largest_loss=totals.largest_loss,
        max_consecutive_losses=totals.max_consecutive_losses,
        lessons=list(lessons or [t.reflection for t in trades.trades if t.reflection][-10:]),
    )


class Signal(StrEnum):
    BUY = "BUY"
    SELL = "SELL"
    HOLD = "HOLD"
    NONE = "NONE"


class AnalysisEntry(_Schema):
    """One analysis in ``analysis_log.md``: what was seen, what it means, how sure."""

    time: str
    symbol: str
    interval: str
    signal: Signal
    confidence: Decimal = Field(ge=0, le=1)
    indicators: dict[str, str] = Field(default_factory=dict)  # e.g. {"RSI(14)": "28.4"}
    observations: str = ""  # K-line observations
    reasoning: str = ""
    dispatched_to: str | None = None  # the Trader the signal was sent to, if any

    @field_validator("time")
    @classmethod
    def _time(cls, value: str) -> str:
        return _iso(value)


class SymbolAssessment(_Schema):
    """The Analyst's current view of one symbol."""

    trend: Literal["UP", "DOWN", "SIDEWAYS"]
    regime: str = ""  # e.g. "ranging, Bollinger bands narrowing, ADX 18"
    bias: Signal
    confidence: Decimal = Field(ge=0, le=1)
    support: list[Decimal] = Field(default_factory=list)
    resistance: list[Decimal] = Field(default_factory=list)
    indicators: dict[str, str] = Field(default_factory=dict)
    summary: str = ""
    assessed_at: str

    @field_validator("assessed_at")
    @classmethod
    def _time(cls, value: str) -> str:
        return _iso(value)


class MarketAssessment(_Schema):
    """``current_market_assessment.yaml``: the latest assessment of every watched symbol."""

    schema_version: Literal[1] = SCHEMA_VERSION
    updated_at: str
    symbols: dict[str, SymbolAssessment] = Field(default_factory=dict)

    @field_validator("updated_at")
    @classmethod
    def _time(cls, value: str) -> str:
        return _iso(value)

    def with_symbol(self, symbol: str, assessment: SymbolAssessment) -> MarketAssessment:
        return self.model_copy(
            update={
                "symbols": {**self.symbols, symbol: assessment},
                "updated_at": assessment.assessed_at,
            }
        )


# Documents recently written or read, by (schema, text). The agents read back, every bar or
# signal, the files they wrote the step before; the schemas are frozen, updated by copying, and
# round-trip (``load_yaml(type(d), to_yaml(d)) == d``), so the text's document is handed back
# instead of parsed again.
_KNOWN_SIZE = 64
_known: OrderedDict[tuple[type[BaseModel], str], BaseModel] = OrderedDict()
_known_lock = threading.Lock()


def _remember(model: type[BaseModel], text: str, document: BaseModel) -> None:
    if not model.model_config.get("frozen"):
        return
    with _known_lock:
        _known[(model, text)] = document
        _known.move_to_end((model, text))
        while len(_known) > _KNOWN_SIZE:
            _known.popitem(last=False)


def to_yaml(model: BaseModel) -> str:
    """Serialise a schema as YAML with ``yamltext.dump`` (decimals as strings, order kept)."""
    data: Any = model.model_dump(mode="json")
    text = yamltext.dump(data, width=100)
    _remember(type(model), text, model)
    return text


def load_yaml[M: BaseModel](model: type[M], text: str) -> M:
    """Parse YAML text into a schema (a text written or read recently is not parsed again).

    Raises:
        ValueError: invalid YAML or a document that does not match the schema (pydantic's
            ``ValidationError`` is a ``ValueError``).
    """
    with _known_lock:
        known = _known.get((model, text))
        if known is not None:
            _known.move_to_end((model, text))
            return known  # type: ignore[return-value]  # stored under its own schema
    document = parse_yaml(model, text)
    _remember(model, text, document)
    return document


def parse_yaml[M: BaseModel](model: type[M], text: str) -> M:
    """``load_yaml`` without its memory of recent documents: always parses.

    Raises:
        ValueError: as ``load_yaml``.
    """
    try:
        data = yamltext.load(text)
    except yamltext.YAMLError as exc:
        raise ValueError(f"not valid YAML: {exc}") from None
    return model.model_validate(data)


def render_analysis_entry(entry: AnalysisEntry) -> str:
    """The Markdown block of one analysis: a timestamped header and the entry as fenced YAML."""
    header = entry_header(parse_time(entry.time))
    title = f"{header} · {entry.symbol} {entry.interval} · {entry.signal.value}"
    return f"\n{title} (confidence {entry.confidence})\n\n```yaml\n{to_yaml(entry)}```\n"


def parse_analysis_log(text: str) -> list[AnalysisEntry]:
    """Read back every entry of an ``analysis_log.md`` written by ``render_analysis_entry``.

    Raises:
        ValueError: an entry's YAML block is missing, unparsable or off-schema (names the line).
    """
    entries = []
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if ENTRY_HEADER.match(line)]
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        block = "\n".join(lines[start:end])
        match = _FENCED_YAML.search(block)
        if match is None:
            raise ValueError(f"analysis log entry at line {start + 1} has no ```yaml block")
        try:
            entries.append(load_yaml(AnalysisEntry, match.group(1)))
        except ValueError as exc:
            raise ValueError(f"analysis log entry at line {start + 1}: {exc}") from None
    return entries
