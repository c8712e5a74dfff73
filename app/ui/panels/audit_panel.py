"""The audit panel: every tool call of every agent, filterable, with its parameters and result.

The rows come from the audit trail's read API (``app.store.audit_trail``: the ledger's tool calls,
read off the loop and incrementally, only ids above the last one seen), first in full and then,
throttled, after ``ToolCallCompleted`` events, so a backtest's thousand calls a second arrive as a
few batches. The bulky parts of a call (its
parameters and the full result XML) are read only for the selected row.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from PySide6.QtCore import QItemSelection, Qt, QTimer
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.events import EventBus, ToolCallCompleted
from app.store.audit_trail import AuditTrailReader, ToolCallDetail, ToolCallRow
from app.ui.names import AgentNames
from app.ui.panels.audit_model import ToolCallFilter, ToolCallModel, format_duration
from app.ui.panels.style import format_time, mono_font
from app.ui.panels.tasks import BusLink, TaskSet, Throttle
from app.ui.theme import set_look

STATUSES = ("success", "error", "rejected")
ALL = "All"
# shorter and at least as wide as these, the details go beside the table (see resizeEvent)
SHORT_PX = 360
WIDE_PX = 720


class AuditPanel(QWidget):
    """Table of tool calls with agent/tool/status/text filters and a details view."""

    def __init__(
        self, reader: AuditTrailReader, bus: EventBus | None, parent: QWidget | None = None,
        *, names: AgentNames | None = None,
    ) -> None:
        """``names``: who each agent id is (the window's resolver; default: ids shortened)."""
        super().__init__(parent)
        self.reader = reader
        self.names = names or AgentNames()
        self.model = ToolCallModel(self.names)
        self.proxy = ToolCallFilter(self.model)
        self._agents: set[str] = set()
        self._tools: set[str] = set()
        self._detail_seq = 0
        self._reading = asyncio.Lock()
        self.detail: ToolCallDetail | None = None
        self.tasks = TaskSet(on_error=lambda exc: self.count_label.setText(f"Error: {exc}"))
        self._build()
        self.throttle = Throttle(self.refresh, self.tasks, interval_ms=250, parent=self)
        self.link = BusLink(bus)
        self.link.subscribe(ToolCallCompleted, lambda _event: self.throttle.request())
        self.link.attach(self)
        self.tasks.attach(self)
        reader = self.reader
        self.destroyed.connect(lambda *_: reader.close())
        self.throttle.request()

    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(6, 6, 6, 6)
        filters = QHBoxLayout()
        self.agent_filter = self._combo("Agent")
        self.tool_filter = self._combo("Tool")
        self.status_filter = self._combo("Status")
        for status in STATUSES:
            self.status_filter.addItem(status, status)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search agent, tool, error code, parameters…")
        self.search.setClearButtonEnabled(True)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(200)
        self._search_timer.timeout.connect(self.apply_filters)
        self.search.textChanged.connect(lambda _text: self._search_timer.start())
        self.search.returnPressed.connect(self.apply_filters)
        self.count_label = QLabel("")
        set_look(self.count_label, "muted")
        for label, widget in (
            ("Agent", self.agent_filter), ("Tool", self.tool_filter),
            ("Status", self.status_filter),
        ):
            caption = QLabel(label)
            set_look(caption, "muted")
            filters.addWidget(caption)
            filters.addWidget(widget)
        filters.addWidget(self.search, 1)
        filters.addWidget(self.count_label)
        root.addLayout(filters)

        self.table = QTableView()
        self.table.setMinimumHeight(48)
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setFont(mono_font(9))
        header = self.table.horizontalHeader()
        widths = (150, 130, 170, 80, 170, 90)
        for column, width in enumerate(widths):
            header.resizeSection(column, width)
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)

        self.details = details = QSplitter(Qt.Orientation.Horizontal)
        self.detail_title = QLabel("Select a call to see its parameters and result")
        set_look(self.detail_title, "muted")
        self.params_view = self._text_view("Parameters", details)
        self.result_view = self._text_view("Result XML", details)
        details.setStretchFactor(0, 2)
        details.setStretchFactor(1, 3)
        bottom = QWidget()
        bottom_layout = QVBoxLayout(bottom)
        bottom_layout.setContentsMargins(0, 0, 0, 0)
        bottom_layout.addWidget(self.detail_title)
        bottom_layout.addWidget(details, 1)
        self.split = split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(bottom)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        root.addWidget(split, 1)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        """In a short, wide dock (below the chart on a 1366x768 screen) the selected call's
        details go beside the table, so the table keeps the dock's height: under it, it showed
        two calls."""
        size = event.size()
        wanted = (Qt.Orientation.Horizontal
                  if size.height() < SHORT_PX and size.width() >= WIDE_PX
                  else Qt.Orientation.Vertical)
        if self.split.orientation() != wanted:
            self.split.setOrientation(wanted)
            # beside the table, the parameters go over the result
            self.details.setOrientation(Qt.Orientation.Vertical
                                        if wanted is Qt.Orientation.Horizontal
                                        else Qt.Orientation.Horizontal)
            room = size.width() if wanted is Qt.Orientation.Horizontal else size.height()
            self.split.setSizes([room * 3 // 5, room - room * 3 // 5])
        super().resizeEvent(event)

    def _combo(self, what: str) -> QComboBox:
        combo = QComboBox()
        combo.addItem(ALL, None)
        combo.setToolTip(f"Show calls of one {what.lower()} only")
        combo.setMinimumContentsLength(10)
        combo.currentIndexChanged.connect(lambda _i: self.apply_filters())
        return combo

    def _text_view(self, title: str, into: QSplitter) -> QPlainTextEdit:
        box = QWidget()
        into.addWidget(box)
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        caption = QLabel(title)
        caption.setStyleSheet("font-size: 8pt;")
        set_look(caption, "muted")
        view = QPlainTextEdit()
        view.setMinimumHeight(36)  # a small screen's bottom dock: the table keeps the room
        view.setReadOnly(True)
        view.setFont(mono_font(9))
        view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        layout.addWidget(caption)
        layout.addWidget(view, 1)
        return view

    # ------------------------------------------------------------------ data

    async def refresh(self) -> None:
        """Load the calls recorded since the last refresh (all of them the first time).

        One read at a time: the window's start-up read and the throttled reads after tool calls
        may be asked for together (a resumed agent calls tools while the history loads), and two
        reads from the same ``last_id`` would list the same calls twice.
        """
        async with self._reading:
            rows = await self.reader.tool_calls(after_id=self.model.last_id)
            self._add(rows)

    def _add(self, rows: list[ToolCallRow]) -> None:
        if rows:
            self.model.append(rows)
            self._grow(self.agent_filter, self._agents, {r.agent_id for r in rows},
                       self.names.name, self.names.tooltip)
            self._grow(self.tool_filter, self._tools, {r.tool_name for r in rows})
        self._update_count()

    @staticmethod
    def _grow(combo: QComboBox, known: set[str], seen: set[str],
              label: Callable[[str], str] = str, tip: Callable[[str], str] = str) -> None:
        """Add newly seen values to a filter (shown by ``label``, kept as data), keeping it
        sorted by what it shows and its selection."""
        new = seen - known
        if not new:
            return
        known |= new
        chosen = combo.currentData()
        combo.blockSignals(True)
        combo.clear()
        combo.addItem(ALL, None)
        for value in sorted(known, key=lambda v: (label(v).casefold(), v)):
            combo.addItem(label(value), value)
            combo.setItemData(combo.count() - 1, tip(value), Qt.ItemDataRole.ToolTipRole)
        combo.setCurrentIndex(max(combo.findData(chosen), 0) if chosen is not None else 0)
        combo.blockSignals(False)

    def apply_filters(self) -> None:
        def pick(combo: QComboBox) -> str | None:
            value = combo.currentData()
            return None if value is None else str(value)

        self.proxy.set_filters(
            agent=pick(self.agent_filter),
            tool=pick(self.tool_filter),
            status=pick(self.status_filter),
            text=self.search.text(),
        )
        self._update_count()

    def _update_count(self) -> None:
        shown, total = self.proxy.rowCount(), self.model.rowCount()
        self.count_label.setText(
            f"{total:,} calls" if shown == total else f"{shown:,} of {total:,} calls"
        )

    # ------------------------------------------------------------------ details

    def _selection_changed(self, selected: QItemSelection, _deselected: QItemSelection) -> None:
        rows = {index.row() for index in selected.indexes()}
        if len(rows) != 1:
            return
        self.tasks.spawn(self.show_call(self.proxy.call_id(rows.pop())))

    async def show_call(self, call_id: int) -> None:
        """Show one call's parameters (pretty JSON) and full result XML."""
        self._detail_seq += 1
        seq = self._detail_seq
        detail = await self.reader.tool_call_detail(call_id)
        if seq != self._detail_seq:
            return  # another row was selected while this one was read
        self.detail = detail
        if detail is None:
            self.detail_title.setText(f"Call #{call_id} is no longer in the ledger.")
            self.params_view.clear()
            self.result_view.clear()
            return
        row = next((e[0] for e in self.model.entries if e[0].call_id == call_id), None)
        if row is not None:
            error = f" · {row.error_code}" if row.error_code else ""
            self.detail_title.setText(
                f"#{call_id} · {row.tool_name} · {self.names.name(row.agent_id)} "
                f"({row.agent_id}) · {format_time(row.started_ms)} · "
                f"{row.status}{error} · {format_duration(row.duration_ms)}"
            )
        self.params_view.setPlainText(json.dumps(detail.params, indent=2, ensure_ascii=False))
        self.result_view.setPlainText(detail.result_xml)

