"""Two backtest runs side by side: their metrics in one table, their equity curves on one plot.

Two runs rarely start with the same cash, so the curves are drawn as the return since each run's
start, in percent: the lines then show which run did better at every moment, whatever its size.
Each run's buy-and-hold is drawn dashed in its run's colour, so a run that beat another only
because its market rose is seen for what it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.backtest.report import BacktestResult
from app.ui.backtest.report import METRICS_MIN_PX, fill_metrics, metrics_table, table_width
from app.ui.backtest.runs import PastRun
from app.ui.theme import palette, set_look

SECOND_COLOUR = "#f0b429"  # the second run's curve: apart from the accent in both themes


def return_pct(equity: np.ndarray) -> np.ndarray:
    """Each point's return since the first, in percent (a run without money stays at 0)."""
    start = float(equity[0]) if equity.size else 0.0
    if start == 0:
        return np.zeros_like(equity, dtype=np.float64)
    return (equity.astype(np.float64) / start - 1.0) * 100.0


class CompareView(QWidget):
    """Pick two past runs; read their metrics side by side and their curves on one plot.

    Signals:
        pair_chosen(object, object): the person picked the runs to compare (two ``PastRun``);
            the Backtest view reads them and calls ``show_pair``.
    """

    pair_chosen = Signal(object, object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: list[PastRun] = []
        self.shown: tuple[tuple[PastRun, BacktestResult], tuple[PastRun, BacktestResult]] | None
        self.shown = None
        self.first = QComboBox()
        self.first.setObjectName("compare_first")
        self.second = QComboBox()
        self.second.setObjectName("compare_second")
        for box in (self.first, self.second):
            box.setMinimumContentsLength(24)
            box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            box.activated.connect(lambda _i: self._chosen())
        self.hint = QLabel("Pick two runs (or select two in Past runs and press Compare).")
        self.hint.setObjectName("compare_hint")
        self.hint.setWordWrap(True)
        set_look(self.hint, "muted")
        self.metrics = metrics_table("compare_metrics")
        self.metrics.setMinimumWidth(METRICS_MIN_PX)
        self.chart = pg.PlotWidget(axisItems={"bottom": pg.DateAxisItem(utcOffset=0)})
        self.chart.setObjectName("compare_chart")
        self.chart.setMenuEnabled(False)
        self.chart.setMinimumSize(200, 140)
        self.plot = self.chart.getPlotItem()
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.legend = self.plot.addLegend(offset=(6, 4), labelTextSize="8pt")
        pick = QHBoxLayout()
        for label, box in (("A", self.first), ("B", self.second)):
            caption = QLabel(label)
            set_look(caption, "muted")
            pick.addWidget(caption)
            pick.addWidget(box, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setChildrenCollapsible(False)
        split.addWidget(self.metrics)
        split.addWidget(self.chart)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(pick)
        layout.addWidget(self.hint)
        layout.addWidget(split, 1)
        self.restyle()

    def restyle(self) -> None:
        t = palette()
        self.chart.setBackground(t.background)
        ground = QColor(t.background)
        ground.setAlpha(200)
        self.legend.setBrush(pg.mkBrush(ground))
        self.plot.setLabel("left", "return %", color=t.muted)
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).setTextPen(t.muted)
            self.plot.getAxis(axis).setPen(t.border)
        if self.shown is not None:
            self.show_pair(*self.shown)

    def set_runs(self, runs: Sequence[PastRun]) -> None:
        """Offer ``runs`` in both pickers, keeping the runs chosen where they still exist."""
        self.runs = list(runs)
        for box in (self.first, self.second):
            chosen = box.currentData()
            box.blockSignals(True)
            box.clear()
            for run in self.runs:
                box.addItem(f"{run.title} · {run.written}", str(run.folder))
                box.setItemData(box.count() - 1, str(run.folder), Qt.ItemDataRole.ToolTipRole)
            box.setCurrentIndex(max(box.findData(chosen), 0) if chosen else -1)
            box.blockSignals(False)

    def _run(self, box: QComboBox) -> PastRun | None:
        folder = box.currentData()
        return next((r for r in self.runs if str(r.folder) == folder), None)

    def _chosen(self) -> None:
        first, second = self._run(self.first), self._run(self.second)
        if first is not None and second is not None:
            self.pair_chosen.emit(first, second)

    def show_pair(self, a: tuple[PastRun, BacktestResult],
                  b: tuple[PastRun, BacktestResult]) -> None:
        """Show runs ``a`` and ``b`` (each its folder's run and its result)."""
        self.shown = (a, b)
        for box, (run, _result) in ((self.first, a), (self.second, b)):
            box.blockSignals(True)
            box.setCurrentIndex(box.findData(str(run.folder)))
            box.blockSignals(False)
        spans = {a[0].span, b[0].span}
        self.hint.setText(f"Both over {a[0].span} UTC" if len(spans) == 1
                          else f"A over {a[0].span} UTC, B over {b[0].span} UTC")
        # short headers: the runs are named above, and each one's buy-and-hold is its
        # dashed curve (and in its own report)
        self.metrics.setHorizontalHeaderLabels(["Metric", "A", "B"])
        fill_metrics(self.metrics, [(a[1].metrics, a[1].refused_orders),
                                    (b[1].metrics, b[1].refused_orders)])
        self.metrics.setMinimumWidth(max(METRICS_MIN_PX, table_width(self.metrics)))
        t = palette()
        self.plot.clear()
        self.legend.clear()
        for (run, result), colour, name in ((a, t.accent, "A"), (b, SECOND_COLOUR, "B")):
            x = result.time_ms.astype(np.float64) / 1000.0
            self.plot.plot(x, return_pct(result.equity), pen=pg.mkPen(colour, width=1.6),
                           name=f"{name}: {run.title}")
            self.plot.plot(x, return_pct(result.baseline_equity),
                           pen=pg.mkPen(colour, width=1, style=Qt.PenStyle.DashLine),
                           name=f"{name}: buy & hold")
        self.plot.enableAutoRange()

    def curves(self) -> list[str]:
        """The names of the curves drawn (for tests)."""
        return [item.name() for item in self.plot.listDataItems()]
