"""A finished backtest on screen: metrics beside buy-and-hold, equity and drawdown, the trades.

The numbers come from the one ``BacktestResult`` the engine produced (the same ones the CLI
prints and ``summary.json`` holds); this module only formats them. The chart is pyqtgraph: the
equity of the run and of buy-and-hold share a time axis with their drawdowns below, so where the
strategy lost ground against simply holding is visible at a glance.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.backtest.metrics import Metrics, drawdown_pct
from app.backtest.report import BacktestResult, refusal_warning
from app.domain.clock import ms_to_iso
from app.ui.theme import palette, set_look

Row = tuple[str, Callable[[Metrics], float | int | None], int, bool]
# label, value, decimals, coloured by sign
METRIC_ROWS: tuple[Row, ...] = (
    ("Final equity", lambda m: m.final_equity, 2, False),
    ("Total return %", lambda m: m.total_return_pct, 2, True),
    ("CAGR %", lambda m: m.cagr_pct, 2, True),
    ("Sharpe", lambda m: m.sharpe, 2, False),
    ("Sortino", lambda m: m.sortino, 2, False),
    ("Max drawdown %", lambda m: m.max_drawdown_pct, 2, False),
    ("Trades", lambda m: m.trades, 0, False),
    ("Win rate %", lambda m: m.win_rate_pct, 1, False),
    ("Profit factor", lambda m: m.profit_factor, 2, False),
    ("Exposure %", lambda m: m.exposure_pct, 1, False),
    ("Fees paid", lambda m: m.fees_paid, 2, False),
)
REFUSED_ROW = "Refused orders"
TRADE_COLUMNS = ("Symbol", "Entry (UTC)", "Exit (UTC)", "Quantity", "Entry price",
                 "Exit price", "P&L", "Return %", "Bars")


def fmt(value: float | int | None, decimals: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:,.{decimals}f}"


def _mono() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def _cell(text: str, *, number: bool = True, colour: str | None = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
    if number:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        item.setFont(_mono())
    if colour:
        item.setForeground(QColor(colour))
    return item


def _sign_colour(value: float | int | None) -> str | None:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return palette().up if value > 0 else palette().down if value < 0 else None


def _table(columns: tuple[str, ...], name: str) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setAlternatingRowColors(True)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
    return table


class ReportView(QWidget):
    """The report of one run; empty (with a hint) until ``show_result`` is called."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("No backtest run yet: pick data and a strategy, then Start.")
        self.title.setObjectName("report_title")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-size: 14px; font-weight: 600;")
        self.metrics = _table(("Metric", "Strategy", "Buy & hold"), "metrics_table")
        self.metrics.horizontalHeader().setSectionResizeMode(
            0, QHeaderView.ResizeMode.ResizeToContents)
        self.trades = _table(TRADE_COLUMNS, "trades_table")
        self.trades.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.trades.horizontalHeader().setStretchLastSection(True)
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.setObjectName("equity_chart")
        self._shown: tuple[BacktestResult, str, str] | None = None
        self.equity_plot = self.plots.addPlot(row=0, col=0,
                                              axisItems={"bottom": pg.DateAxisItem()})
        self.drawdown_plot = self.plots.addPlot(row=1, col=0,
                                                axisItems={"bottom": pg.DateAxisItem()})
        self.plots.ci.layout.setRowStretchFactor(0, 3)
        self.plots.ci.layout.setRowStretchFactor(1, 1)
        self.drawdown_plot.setXLink(self.equity_plot)
        for plot in (self.equity_plot, self.drawdown_plot):
            plot.showGrid(x=True, y=True, alpha=0.15)
            plot.setMenuEnabled(False)
            plot.getAxis("left").setWidth(64)
        self.equity_plot.getAxis("bottom").setStyle(showValues=False)
        self.legend = self.equity_plot.addLegend(offset=(10, 10))
        top = QWidget()
        top_layout = QVBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.addWidget(self.title)
        self.note = QLabel()
        self.note.setObjectName("report_note")
        self.note.setWordWrap(True)
        set_look(self.note, "muted")
        top_layout.addWidget(self.note)
        top_layout.addWidget(self.metrics)
        self.split = split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(self.plots)
        split.addWidget(self.trades)
        split.setSizes([300, 340, 200])
        self._top = top
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self._paint_plots()

    def _paint_plots(self) -> None:
        t = palette()
        self.plots.setBackground(t.background)
        for plot, label in ((self.equity_plot, "equity"), (self.drawdown_plot, "drawdown %")):
            plot.setLabel("left", label, color=t.muted)
            for axis in ("left", "bottom"):
                plot.getAxis(axis).setTextPen(t.muted)
                plot.getAxis(axis).setPen(t.border)

    def restyle(self) -> None:
        """Redraw the plots and the coloured cells in the current theme (it changed)."""
        self._paint_plots()
        if self._shown is not None:
            self.show_result(*self._shown)

    def clear(self) -> None:
        self._shown = None
        self.metrics.setRowCount(0)
        self.trades.setRowCount(0)
        self.equity_plot.clear()
        self.drawdown_plot.clear()
        self.note.clear()

    def show_result(self, result: BacktestResult, title: str, note: str = "") -> None:
        self.clear()
        self._shown = (result, title, note)
        start, end = int(result.time_ms[0]), int(result.time_ms[-1])
        first, last = (ms_to_iso(t)[:16].replace("T", " ") for t in (start, end))
        self.title.setText(f"{title}: {first} → {last} UTC, {result.time_ms.size:,} bars")
        warned = [w for w in (refusal_warning(result), *result.warnings) if w]
        self.note.setText("\n".join(f"⚠ {line}" for line in (*warned, note) if line)
                          if warned else note)
        self.metrics.setHorizontalHeaderLabels(["Metric", title, "Buy & hold"])
        self._fill_metrics(result)
        self._fill_chart(result)
        self._fill_trades(result)

    def _fill_metrics(self, result: BacktestResult) -> None:
        self.metrics.setRowCount(len(METRIC_ROWS) + 1)
        row = 0
        for label, get, decimals, signed in METRIC_ROWS:
            self.metrics.setItem(row, 0, _cell(label, number=False))
            for col, metrics in ((1, result.metrics), (2, result.baseline)):
                value = get(metrics)
                colour = _sign_colour(value) if signed else None
                self.metrics.setItem(row, col, _cell(fmt(value, decimals), colour=colour))
            row += 1
            if label == "Trades":  # what was refused beside what was traded
                refused = result.refused_orders
                self.metrics.setItem(row, 0, _cell(REFUSED_ROW, number=False))
                self.metrics.setItem(row, 1, _cell(fmt(refused, 0),
                                                   colour=palette().down if refused else None))
                self.metrics.setItem(row, 2, _cell("n/a"))
                row += 1
        self.metrics.resizeRowsToContents()
        # every metric in view when the window has the room: the splitter gives the table its
        # full height, but it is not pinned there (a small screen scrolls the table instead)
        table = (self.metrics.horizontalHeader().height() + 2 * self.metrics.frameWidth() + 2
                 + sum(self.metrics.rowHeight(r) for r in range(self.metrics.rowCount())))
        wanted = self._top.sizeHint().height() - self.metrics.sizeHint().height() + table
        total = sum(self.split.sizes())
        if total > 0:
            top = min(wanted, int(total * 0.6))
            rest = total - top
            self.split.setSizes([top, rest * 3 // 5, rest - rest * 3 // 5])

    def _fill_chart(self, result: BacktestResult) -> None:
        t = palette()
        x = result.time_ms.astype(np.float64) / 1000.0
        self.equity_plot.plot(x, result.baseline_equity, pen=pg.mkPen(t.muted, width=1),
                              name="buy & hold")
        self.equity_plot.plot(x, result.equity, pen=pg.mkPen(t.accent, width=1.6),
                              name="strategy")
        base_dd = -drawdown_pct(result.baseline_equity)
        dd = -drawdown_pct(result.equity)
        self.drawdown_plot.plot(x, base_dd, pen=pg.mkPen(t.muted, width=1))
        down = QColor(t.down)
        down.setAlpha(110)
        self.drawdown_plot.plot(x, dd, pen=pg.mkPen(t.down, width=1), fillLevel=0,
                                brush=pg.mkBrush(down))
        self.equity_plot.enableAutoRange()
        self.drawdown_plot.enableAutoRange()

    def _fill_trades(self, result: BacktestResult) -> None:
        trades = result.trades
        self.trades.setRowCount(len(trades))
        for row, tr in enumerate(trades):
            exit_time = "open" if tr.exit_time_ms is None else ms_to_iso(tr.exit_time_ms)[:16]
            cells = [
                _cell(tr.symbol, number=False),
                _cell(ms_to_iso(tr.entry_time_ms)[:16].replace("T", " ")),
                _cell(exit_time.replace("T", " ")),
                _cell(f"{tr.quantity:,.6f}"),
                _cell(fmt(tr.entry_price, 2)),
                _cell(fmt(tr.exit_price, 2)),
                _cell(fmt(tr.pnl, 2), colour=_sign_colour(tr.pnl)),
                _cell(fmt(tr.return_pct, 2), colour=_sign_colour(tr.return_pct)),
                _cell(str(tr.bars_held)),
            ]
            for col, item in enumerate(cells):
                self.trades.setItem(row, col, item)
        self.trades.resizeColumnsToContents()
