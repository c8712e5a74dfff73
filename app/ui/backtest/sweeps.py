"""The Backtest view's "Sweeps" tab: the sweeps found in the workspace's ``sweeps/`` folder (and
any folder added), and the table of the one opened, sortable by any column.

A sweep is made in the shell (``kestrel sweep --out <workspace>/sweeps/NAME``, which can run for
hours on a cluster); this tab reads its folder back (``app.sweep.listing``, ``app.sweep.table``),
so the numbers are the ones the shell printed and the cells' reports hold. A sweep still running
shows the cells finished so far; Refresh reads it again. Reading happens in a thread, off the
window's loop.

Kept in a module of its own, with one call from the view (``attach_sweeps``), so the view's own
layout can change without this tab changing with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.sweep.listing import SWEEPS_FOLDER, SweepSummary, find_sweeps
from app.sweep.table import OK, SweepTable, load_table, number
from app.ui.panels.tasks import TaskSet
from app.ui.theme import palette, set_look

LIST_COLUMNS = ("Sweep", "What", "Parameters", "Cells", "Failed", "Best Sharpe", "Best at",
                "Made", "Folder")
# the opened table's figures shown after its parameters (the files hold every column)
SHOWN_FIGURES = ("status", "sharpe", "return_pct", "vs_bh_return_pct", "max_drawdown_pct",
                 "trades", "win_rate_pct", "profit_factor", "sortino", "cagr_pct",
                 "final_equity", "bh_return_pct", "bh_sharpe", "bars", "error")
TEXT_COLUMNS = frozenset({"cell", "status", "error", "folder"})
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
TAB_TITLE = "Sweeps"


def _item(text: str, sort_value: Any = None, *, number_like: bool = False) -> QStandardItem:
    item = QStandardItem(text)
    item.setEditable(False)
    item.setData(text if sort_value is None else sort_value, SORT_ROLE)
    if number_like:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


def _shown(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def _sortable(value: Any) -> float | None:
    """A cell's value as the number it sorts by (a parameter as typed, a figure, money text)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return number(value) if isinstance(value, str) else None


class _SortableItem(QTableWidgetItem):
    """A list cell that sorts by its number (or text), not by the text it shows."""

    def __init__(self, text: str, key: Any = None) -> None:
        super().__init__(text)
        self.key = text if key is None else key
        self.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        mine, theirs = self.key, getattr(other, "key", other.text())
        if isinstance(mine, int | float) and isinstance(theirs, int | float):
            return mine < theirs
        if isinstance(mine, int | float) != isinstance(theirs, int | float):
            return isinstance(mine, int | float)  # numbers before "n/a"
        return str(mine) < str(theirs)


class SweepsView(QWidget):
    """The list of sweeps above, the opened sweep's table below.

    Args:
        roots: where sweeps are looked for (a sweep's folder, or a folder of them).
    """

    def __init__(self, roots: Sequence[Path], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sweeps_view")
        self.roots: list[Path] = [Path(r) for r in roots]
        self.sweeps: list[SweepSummary] = []
        self.table: SweepTable | None = None
        self.tasks = TaskSet(self._failed)
        self.tasks.attach(self)
        self._read = False

        self.where = QLabel("")
        self.where.setObjectName("sweeps_where")
        self.where.setWordWrap(True)
        set_look(self.where, "muted")
        self.list = QTableWidget(0, len(LIST_COLUMNS))
        self.list.setObjectName("sweeps_list")
        self.list.setHorizontalHeaderLabels(list(LIST_COLUMNS))
        self.list.verticalHeader().hide()
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.list.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.horizontalHeader().setStretchLastSection(True)
        self.list.doubleClicked.connect(lambda _index: self._open_selected())
        self.open_button = QPushButton("Open")
        self.open_button.setObjectName("open_sweep")
        self.open_button.clicked.connect(self._open_selected)
        refresh = QPushButton("Refresh")
        refresh.setObjectName("refresh_sweeps")
        refresh.clicked.connect(lambda: self.tasks.spawn(self.refresh()))
        add = QPushButton("Add folder…")
        add.setToolTip("A sweep's folder (kestrel sweep --out DIR), or a folder of sweeps")
        add.clicked.connect(self._add_folder)
        buttons = QHBoxLayout()
        buttons.addWidget(self.open_button)
        buttons.addStretch(1)
        buttons.addWidget(refresh)
        buttons.addWidget(add)
        top = QWidget()
        upper = QVBoxLayout(top)
        upper.setContentsMargins(0, 0, 0, 0)
        upper.addWidget(self.where)
        upper.addWidget(self.list, 1)
        upper.addLayout(buttons)

        self.title = QLabel("Open a sweep to see its table.")
        self.title.setObjectName("sweep_title")
        self.title.setWordWrap(True)
        self.warning = QLabel("")
        self.warning.setObjectName("sweep_warning")
        self.warning.setWordWrap(True)
        self.warning.hide()
        self.model = QStandardItemModel(0, 0, self)
        self.model.setSortRole(SORT_ROLE)
        self.cells = QTableView()
        self.cells.setObjectName("sweep_table")
        self.cells.setModel(self.model)
        self.cells.setSortingEnabled(True)
        self.cells.verticalHeader().hide()
        self.cells.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.cells.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.cells.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        bottom = QWidget()
        lower = QVBoxLayout(bottom)
        lower.setContentsMargins(0, 0, 0, 0)
        lower.addWidget(self.title)
        lower.addWidget(self.warning)
        lower.addWidget(self.cells, 1)

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(bottom)
        split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(split)
        self._say_where()

    # -- the list -------------------------------------------------------------------------------
    def showEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        """Read the folders the first time the tab is shown, not at the window's start."""
        super().showEvent(event)
        if not self._read:
            self._read = True
            self.tasks.spawn(self.refresh())

    async def refresh(self) -> list[SweepSummary]:
        """Read the sweeps' folders again (in a thread) and list them, newest first."""
        roots = list(self.roots)
        self.sweeps = await asyncio.to_thread(find_sweeps, roots)
        self._read = True
        self._fill_list()
        self._say_where()
        return self.sweeps

    def add_folder(self, folder: Path) -> None:
        """Look for sweeps in ``folder`` too (a sweep made elsewhere, or a folder of them)."""
        folder = Path(folder)
        if folder not in self.roots:
            self.roots.append(folder)
        self.tasks.spawn(self.refresh())

    def _add_folder(self) -> None:
        start = str(self.roots[0]) if self.roots else ""
        name = QFileDialog.getExistingDirectory(self, "A sweep's folder, or a folder of sweeps",
                                                start)
        if name:
            self.add_folder(Path(name))

    def _say_where(self) -> None:
        places = ", ".join(str(r) for r in self.roots)
        count = f"{len(self.sweeps)} sweep{'s' if len(self.sweeps) != 1 else ''}" \
            if self._read else "Sweeps"
        self.where.setText(f"{count} in {places}. Make one with kestrel sweep --out "
                           f"{self.roots[0] / 'NAME' if self.roots else 'DIR'} …")

    def _fill_list(self) -> None:
        self.list.setSortingEnabled(False)
        self.list.setRowCount(len(self.sweeps))
        for row, sweep in enumerate(self.sweeps):
            cells = [
                _SortableItem(sweep.folder.name), _SortableItem(sweep.what),
                _SortableItem(", ".join(sweep.parameters)),
                _SortableItem(f"{sweep.finished}/{sweep.cells}", sweep.finished),
                _SortableItem(str(sweep.failed), sweep.failed),
                _SortableItem(_shown(sweep.best_sharpe), sweep.best_sharpe),
                _SortableItem(sweep.best_where + (" (isolated peak)" if sweep.isolated_peak
                                                  else "")),
                _SortableItem(sweep.written, sweep.written_ms),
                _SortableItem(str(sweep.folder)),
            ]
            cells[0].setData(Qt.ItemDataRole.UserRole, str(sweep.folder))
            for col, item in enumerate(cells):
                self.list.setItem(row, col, item)
        self.list.setSortingEnabled(True)
        self.list.resizeColumnsToContents()

    def selected_folder(self) -> Path | None:
        rows = self.list.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.list.item(rows[0].row(), 0)
        return Path(item.data(Qt.ItemDataRole.UserRole)) if item is not None else None

    def _open_selected(self) -> None:
        folder = self.selected_folder()
        if folder is None and self.list.rowCount() == 1:
            folder = Path(self.list.item(0, 0).data(Qt.ItemDataRole.UserRole))
        if folder is not None:
            self.tasks.spawn(self.open_sweep(folder))

    # -- one sweep's table ----------------------------------------------------------------------
    async def open_sweep(self, folder: Path) -> SweepTable | None:
        """Read a sweep's table (in a thread) and show it, best first by Sharpe; a click on a
        column header sorts by that column."""
        try:
            table = await asyncio.to_thread(load_table, Path(folder), "sharpe")
        except Exception as exc:  # noqa: BLE001 - a folder that cannot be read, said in words
            self.title.setText(f"{folder} cannot be shown: {exc}")
            set_look(self.title, "error")
            return None
        self.table = table
        self._fill_table(table)
        return table

    def columns_of(self, table: SweepTable) -> list[str]:
        extra = ["llm_calls", "cost_usd"] if table.kind == "agents" else []
        return ["cell", *table.columns, *SHOWN_FIGURES, *extra, "folder"]

    def _fill_table(self, table: SweepTable) -> None:
        columns = self.columns_of(table)
        self.cells.setSortingEnabled(False)
        self.model.clear()
        self.model.setHorizontalHeaderLabels(columns)
        up, down = QColor(palette().up), QColor(palette().down)
        typed = {r["cell"]: {**r, **{c: table.values.get(r["cell"], {}).get(c, r.get(c))
                                     for c in table.columns}} for r in table.rows}
        # a column sorts by number when any of its cells is one; a cell without one sorts as
        # the lowest, so Qt never compares a number with text
        numeric = {name for name in columns if name not in TEXT_COLUMNS and any(
            _sortable(t.get(name)) is not None for t in typed.values())}
        for row in table.rows:
            items = []
            for name in columns:
                value = row.get(name)
                if name in numeric:
                    figure = _sortable(typed[row["cell"]].get(name))
                    key: Any = float("-inf") if figure is None else figure
                else:
                    figure, key = None, "" if value is None else str(value)
                item = _item(_shown(value), key, number_like=name in numeric)
                if name in ("return_pct", "vs_bh_return_pct") and figure:
                    item.setForeground(up if figure > 0 else down)
                if name == "status" and value != OK:
                    item.setForeground(down)
                    item.setToolTip(str(row.get("error") or ""))
                items.append(item)
            self.model.appendRow(items)
        self.cells.setSortingEnabled(True)
        self.cells.horizontalHeader().setSortIndicatorShown(True)
        self.cells.resizeColumnsToContents()
        failed = len(table.failed)
        running = table.total - len(table.rows)
        parts = [f"{table.folder.name}: {len(table.rows)} of {table.total} cells finished"]
        if failed:
            parts.append(f"{failed} failed")
        if running:
            parts.append(f"{running} not run yet")
        bh = [number(r.get("bh_return_pct")) for r in table.rows if r["status"] == OK]
        bh = [v for v in bh if v is not None]
        if bh:
            low, high = min(bh), max(bh)
            parts.append(f"buy & hold {low:,.2f}%" if abs(high - low) < 1e-9
                         else f"buy & hold {low:,.2f}% to {high:,.2f}%")
        self.title.setText("; ".join(parts) + f". Sorted by {table.metric}; click a column to "
                                              "sort by it.")
        set_look(self.title, "")
        if table.warnings:
            self.warning.setText("Warning: " + " ".join(table.warnings) + ".")
            set_look(self.warning, "error")
            self.warning.show()
        else:
            self.warning.hide()

    def sort_by(self, column: str, descending: bool = True) -> None:
        """Sort the opened table by a column (as a click on its header does)."""
        if self.table is None:
            return
        index = self.columns_of(self.table).index(column)
        order = Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder
        self.cells.sortByColumn(index, order)

    def column_values(self, column: str) -> list[str]:
        """What the opened table shows in ``column``, top to bottom."""
        if self.table is None:
            return []
        index = self.columns_of(self.table).index(column)
        return [self.model.item(row, index).text() for row in range(self.model.rowCount())]

    def _failed(self, exc: BaseException) -> None:
        self.title.setText(f"Unexpected error: {type(exc).__name__}: {exc}")
        set_look(self.title, "error")


def attach_sweeps(view: Any) -> SweepsView:
    """Give the Backtest view a "Sweeps" tab listing ``<workspace>/sweeps/``, last of its pages
    (``view.pages``: Setup, Summary, Trades, Past runs, Compare), so a sweep is read beside the
    single runs it is made of."""
    sweeps = SweepsView([view.workspace.root / SWEEPS_FOLDER])
    view.pages.addTab(sweeps, TAB_TITLE)
    return sweeps
