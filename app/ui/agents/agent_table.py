"""The agent list's rows, columns and table model.

A row joins what the panel knows of one agent: its stored ``AgentInfo``, the type of the task it
works on, its LLM usage and its P&L. Columns are ``record_model.Column`` descriptions so every
number is printed, coloured and sorted by the same rules as the account panel's tables (sorting by
raw keys, never by printed text).

Unlike the account tables, this model is updated several times a second while the person works
in it, so ``merge`` updates rows in place by agent id (inserting and removing only what changed)
and re-applies the person's sort; a reset would drop their selection on every refresh.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QBrush, QFont, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QTableView

from app.agents.conversation_store import UsageTotals
from app.agents.health import Failing
from app.domain.agents import AgentInfo, AgentRole, AgentState, Task
from app.trading.agent_pnl import AgentPnL
from app.ui.agents.lifecycle import (
    ATTENTION,
    engine_text,
    engine_tooltip,
    state_color,
    state_text,
    state_tooltip,
)
from app.ui.panels.record_model import Column, Index, RecordTableModel
from app.ui.panels.style import COLORS, format_fixed, format_quantity, format_time, pnl_color

COST_DECIMALS = 4  # LLM calls cost fractions of a cent
HEADER_PADDING_PX = 6  # the header section's side padding in the panel style sheet
MAX_COLUMN_PX = 260  # a long action is elided; the tooltip has it whole
MAX_STATE_PX = 180  # so a long fault reason cannot push P&L out of a narrow dock
SCANNED = 3  # name, state, P&L: the columns a narrow dock must show whole
MIN_NAME_PX = 80
NOT_STARTED = "not started"
NOT_STARTED_TIP = ("No agent runs yet: start-up waits for you (exchange orders the journal does "
                   "not know). The state it was saved in applies once it starts.")


@dataclass(frozen=True, slots=True)
class AgentRow:
    """One agent as the table shows it."""

    info: AgentInfo
    template_label: str
    task: Task | None
    usage: UsageTotals
    pnl: AgentPnL | None
    started: bool = True  # False while start-up waits (a live account's unknown orders)
    failing: Failing | None = None  # its last tasks failed in a row (``app.agents.health``)

    @property
    def agent_id(self) -> str:
        return self.info.agent_id


@dataclass(frozen=True)
class AgentColumn(Column[AgentRow]):
    """A column that may draw some rows bold (states that need the person)."""

    bold: Callable[[AgentRow], bool] | None = None


def humanize_task(task_type: str) -> str:
    """``NEW_MARKET_ANALYSIS_SIGNAL`` as ``new market analysis signal``."""
    return task_type.replace("_", " ").lower()


def _task_text(row: AgentRow) -> str:
    return "—" if row.task is None else humanize_task(row.task.task_type)


def _task_tip(row: AgentRow) -> str:
    if row.task is None:
        return "Not working on a task now."
    return f"{row.task.task_type} (task {row.task.task_id}, from {row.task.source})"


def _tokens_text(row: AgentRow) -> str:
    usage = row.usage
    if usage.input_tokens == 0 and usage.output_tokens == 0:
        return "—"
    return f"{usage.input_tokens:,} / {usage.output_tokens:,}"


def _calls_text(row: AgentRow) -> str:
    """The agent's calls under their right name: the rule engine's are not model calls."""
    what = "rule-engine decisions" if row.info.provider == "rule-engine" else "model calls"
    return f"{row.usage.calls:,} {what}"


def _tokens_tip(row: AgentRow) -> str:
    usage = row.usage
    return (
        f"{_calls_text(row)} · {usage.input_tokens:,} input tokens · "
        f"{usage.output_tokens:,} output tokens"
    )


def _in_error(row: AgentRow) -> bool:
    """Running, but its tasks keep failing: shown as "error", never as a plain "running"."""
    return row.started and row.failing is not None and row.info.state in (
        AgentState.RUNNING, AgentState.WAITING_FOR_USER)


def _state_text(row: AgentRow) -> str:
    if not row.started:
        return NOT_STARTED
    if _in_error(row):
        assert row.failing is not None
        return f"error: {row.failing.count} tasks failed in a row"
    return state_text(row.info)


def _state_tip(row: AgentRow) -> str:
    if not row.started:
        return NOT_STARTED_TIP
    if _in_error(row):
        assert row.failing is not None
        return (f"Running, but {row.failing.words()}.\nIt tries again at each task; pause or "
                "stop it, or give it what it lacks.")
    return state_tooltip(row.info)


def _state_color(row: AgentRow) -> str:
    if _in_error(row):
        return COLORS["down"]
    return state_color(row.info.state if row.started else AgentState.PAUSED)


def _pnl_key(row: AgentRow) -> Decimal:
    return Decimal("-Infinity") if row.pnl is None else row.pnl.total


def agent_columns(money: int, currency: str) -> list[AgentColumn]:
    """The agent table's columns; ``money`` is the account currency's decimals."""

    def pnl_text(row: AgentRow) -> str:
        if row.pnl is None:
            return "—"
        text = format_fixed(row.pnl.total, money, sign=True)
        return text if row.pnl.fully_priced else f"{text} *"

    def pnl_tip(row: AgentRow) -> str:
        if row.pnl is None:
            if row.info.role is AgentRole.TRADER:
                return "No fill yet."
            return "This agent does not trade."
        pnl = row.pnl
        lines = [
            f"Realized {format_fixed(pnl.realized, money, sign=True)} {currency} "
            f"(net of {format_fixed(pnl.fees, money)} {currency} fees, {pnl.fills} fills)",
            f"Unrealized {format_fixed(pnl.unrealized, money, sign=True)} {currency}",
        ]
        for held in pnl.open:
            price = "no price visible" if held.price is None else f"last {held.price:,}"
            lines.append(f"  open {format_quantity(held.quantity)} {held.symbol} · {price}")
        if not pnl.fully_priced:
            lines.append("* an open quantity has no visible price and is left out")
        return "\n".join(lines)

    def pnl_color_of(row: AgentRow) -> str | None:
        return None if row.pnl is None else pnl_color(row.pnl.total)

    # what a desk scans for comes first (a narrow dock shows name, state and P&L), what
    # describes the agent follows
    return [
        AgentColumn("Name", lambda r: r.info.name,
                    tooltip=lambda r: f"{r.info.name}\nid {r.agent_id}",  # whole when elided
                    key=lambda r: r.info.name.casefold()),
        AgentColumn("State", _state_text, tooltip=_state_tip, color=_state_color,
                    key=lambda r: r.info.state.value,
                    bold=lambda r: r.info.state in ATTENTION or _in_error(r)),
        AgentColumn(f"P&L ({currency})", pnl_text, numeric=True, color=pnl_color_of,
                    key=_pnl_key, tooltip=pnl_tip),
        AgentColumn("Current task", _task_text, tooltip=_task_tip),
        AgentColumn("Last action", lambda r: r.info.last_action or "—",
                    tooltip=lambda r: r.info.last_action or "No action yet."),
        AgentColumn("At (UTC)", lambda r: format_time(r.info.last_action_ms, seconds=False),
                    numeric=True, key=lambda r: r.info.last_action_ms or -1,
                    color=lambda _r: COLORS["muted"]),
        AgentColumn("Role", lambda r: r.info.role.value),
        AgentColumn("Provider / model", lambda r: engine_text(r.info.provider, r.info.model),
                    tooltip=lambda r: engine_tooltip(r.info.provider, r.info.model)),
        AgentColumn("Template", lambda r: r.template_label, tooltip=lambda r: r.info.template),
        AgentColumn("Tokens in / out", _tokens_text, numeric=True, tooltip=_tokens_tip,
                    key=lambda r: r.usage.input_tokens + r.usage.output_tokens),
        AgentColumn("Cost (USD)", lambda r: format_fixed(r.usage.cost, COST_DECIMALS),
                    numeric=True, key=lambda r: r.usage.cost,
                    tooltip=_calls_text),
    ]


class AgentTableModel(RecordTableModel[AgentRow]):
    """Agent rows keyed by agent id, updated in place so selection and sort survive refreshes."""

    def __init__(self, columns: Sequence[AgentColumn], mono: QFont | None = None) -> None:
        super().__init__(columns, mono)
        self._sorted_by: tuple[int, Qt.SortOrder] | None = None

    def row_of(self, agent_id: str) -> int | None:
        for number, row in enumerate(self.rows):
            if row.agent_id == agent_id:
                return number
        return None

    def merge(self, rows: Sequence[AgentRow]) -> None:
        """Show ``rows``: changed rows update in place, gone ones are removed, new ones added."""
        wanted = {row.agent_id: row for row in rows}
        changed = False
        for number in range(len(self.rows) - 1, -1, -1):
            if self.rows[number].agent_id not in wanted:
                self.beginRemoveRows(QModelIndex(), number, number)
                del self.rows[number]
                self.endRemoveRows()
        last = self.columnCount() - 1
        for number, old in enumerate(self.rows):
            new = wanted.pop(old.agent_id)
            if new != old:
                changed = True
                self.rows[number] = new
                self.dataChanged.emit(self.index(number, 0), self.index(number, last))
        if wanted:
            changed = True
            first = len(self.rows)
            self.beginInsertRows(QModelIndex(), first, first + len(wanted) - 1)
            self.rows.extend(wanted.values())
            self.endInsertRows()
        if changed and self._sorted_by is not None:
            self.sort(*self._sorted_by)  # removing rows cannot break the order

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if 0 <= column < len(self.columns):
            self._sorted_by = (column, order)
        super().sort(column, order)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.FontRole and index.isValid():
            column = self.columns[index.column()]
            bold = column.bold if isinstance(column, AgentColumn) else None
            if bold is not None and bold(self.rows[index.row()]):
                font = QFont(self._mono) if column.numeric and self._mono else QFont()
                font.setBold(True)
                return font
        return super().data(index, role)


class KeepColorDelegate(QStyledItemDelegate):
    """Draw a selected cell in its own colour: a state or a P&L must not turn plain white
    just because the person selected the row to act on it."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: Index) -> None:
        super().initStyleOption(option, index)
        brush = index.data(Qt.ItemDataRole.ForegroundRole)
        if isinstance(brush, QBrush) and option.state & QStyle.StateFlag.State_Selected:
            option.palette.setBrush(QPalette.ColorRole.HighlightedText, brush)


def fit_columns(view: QTableView, model: AgentTableModel) -> None:
    """Size each column to its cells and title, capped. The header's own size hint is not used:
    it reserves room for a sort arrow in every column, which wastes a third of a narrow dock.

    Name, state and P&L (the first three) must show without scrolling: when they are wider
    than the view, the name gives up the difference (elided, down to ``MIN_NAME_PX``; its
    tooltip says it whole)."""
    header = view.horizontalHeader()
    metrics = header.fontMetrics()
    for column, spec in enumerate(model.columns):
        title = metrics.horizontalAdvance(spec.title) + 2 * HEADER_PADDING_PX
        cells = view.sizeHintForColumn(column)
        limit = MAX_STATE_PX if spec.title == "State" else MAX_COLUMN_PX
        header.resizeSection(column, min(max(title, cells) + 8, limit))
    over = sum(header.sectionSize(c) for c in range(SCANNED)) - view.viewport().width()
    if over > 0:
        header.resizeSection(0, max(MIN_NAME_PX, header.sectionSize(0) - over))
