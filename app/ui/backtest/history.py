"""The Backtest view's "Past runs" page: every run found in its folders, newest first.

A row is a run's folder read back (``runs``): when it was made, what ran, over which range, and
its result beside buy-and-hold. Open shows one in the report pages; Compare puts two side by
side. Runs made from the shell are listed once their folder is added (the folder of one run, or
a folder of runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.backtest.report import cell, fmt, read_only_table, sign_colour
from app.ui.backtest.runs import PastRun
from app.ui.theme import set_look

# what a person compares first comes first: the narrow view shows the run and its result
COLUMNS = ("Run", "Return %", "Buy & hold %", "Trades", "Max drawdown %", "Range (UTC)", "Bars",
           "Made", "Folder")


class RunsView(QWidget):
    """The list of past runs with Open, Compare, Refresh and Add folder.

    Signals:
        open_requested(object): show this ``PastRun`` in the report pages.
        compare_requested(object, object): compare these two runs.
        refresh_requested(): read the folders again.
        folder_added(object): the person added a folder (a ``Path``) to look for runs in.
    """

    open_requested = Signal(object)
    compare_requested = Signal(object, object)
    refresh_requested = Signal()
    folder_added = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[PastRun] = []
        self.where = QLabel("")
        self.where.setObjectName("runs_where")
        self.where.setWordWrap(True)
        set_look(self.where, "muted")
        self.table = read_only_table(COLUMNS, "runs_table")
        # two are picked to compare
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.table.doubleClicked.connect(lambda _index: self._open())
        self.open_button = QPushButton("Open")
        self.open_button.setObjectName("open_run")
        self.open_button.setToolTip("Show the selected run's report and trades")
        self.open_button.clicked.connect(self._open)
        self.compare_button = QPushButton("Compare")
        self.compare_button.setObjectName("compare_runs")
        self.compare_button.setToolTip("Select two runs (Ctrl+click) to compare them")
        self.compare_button.clicked.connect(self._compare)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh_requested)
        add = QPushButton("Add folder…")
        add.setToolTip("A run's output folder made in the shell (kestrel backtest --out DIR), "
                       "or a folder of such folders")
        add.clicked.connect(self._add_folder)
        buttons = QHBoxLayout()
        for button in (self.open_button, self.compare_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(refresh)
        buttons.addWidget(add)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.where)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        self._selection_changed()

    def show_runs(self, runs: Sequence[PastRun], roots: Sequence[Path]) -> None:
        """List ``runs`` (found in ``roots``), keeping the selected ones selected."""
        chosen = {str(r.folder) for r in self.selected()}
        self.runs = list(runs)
        self.table.setRowCount(len(self.runs))
        for row, run in enumerate(self.runs):
            cells = [
                cell(run.title, number=False),
                cell(fmt(run.total_return_pct, 2), colour=sign_colour(run.total_return_pct)),
                cell(fmt(run.baseline_return_pct, 2),
                     colour=sign_colour(run.baseline_return_pct)),
                cell(fmt(run.trades, 0)), cell(fmt(run.max_drawdown_pct, 2)),
                cell(run.span, number=False), cell(f"{run.bars:,}"),
                cell(run.written, number=False), cell(str(run.folder), number=False),
            ]
            cells[0].setToolTip(f"{run.title}\nmade by {run.command}\n{run.folder}")
            cells[-1].setToolTip(str(run.folder))
            for col, item in enumerate(cells):
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()
        self.table.clearSelection()
        mode = self.table.selectionMode()
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.MultiSelection)
        for row, run in enumerate(self.runs):
            if str(run.folder) in chosen:
                self.table.selectRow(row)
        self.table.setSelectionMode(mode)
        count = len(self.runs)
        self.where.setText(f"{count} run{'s' if count != 1 else ''} found in "
                           + ", ".join(str(r) for r in roots) + ".")
        self._selection_changed()

    def selected(self) -> list[PastRun]:
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        return [self.runs[r] for r in rows if r < len(self.runs)]

    def select(self, *folders: Path) -> None:
        """Select the runs of these folders (as Ctrl+clicks would)."""
        wanted = {str(f) for f in folders}
        self.table.clearSelection()
        mode = self.table.selectionMode()
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.MultiSelection)
        for row, run in enumerate(self.runs):
            if str(run.folder) in wanted:
                self.table.selectRow(row)
        self.table.setSelectionMode(mode)

    def _selection_changed(self) -> None:
        count = len(self.selected())
        self.open_button.setEnabled(count == 1)
        self.compare_button.setEnabled(count == 2)

    def _open(self) -> None:
        chosen = self.selected()
        if len(chosen) == 1:
            self.open_requested.emit(chosen[0])

    def _compare(self) -> None:
        chosen = self.selected()
        if len(chosen) == 2:
            self.compare_requested.emit(chosen[0], chosen[1])

    def _add_folder(self) -> None:
        name = QFileDialog.getExistingDirectory(self, "A backtest's output folder")
        if name:
            self.folder_added.emit(Path(name))
