"""A finished backtest on screen: metrics beside buy-and-hold, equity and drawdown, the trades.

The numbers come from the one ``BacktestResult`` the engine produced (the same ones the CLI
prints and ``summary.json`` holds); this module only formats them. Two pages, each given the
whole of the Backtest view's area (the form has a page of its own): the summary (the metrics
table beside the equity of the run and of buy-and-hold, their drawdowns below, so where the
strategy lost ground against simply holding is visible at a glance) and the trades (drawn on the
price chart, entry and exit markers joined by a line coloured by the trade's result, over the
table of trades).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.backtest.metrics import Metrics, RoundTrip, drawdown_pct
from app.backtest.report import BacktestResult, refusal_warning
from app.domain.clock import ms_to_iso
from app.domain.errors import DataFileError
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
METRICS_MIN_PX = 300  # every metric's name and both values whole, beside the plots
MARKER_SIZE = 11


def fmt(value: float | int | None, decimals: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:,.{decimals}f}"


def _mono() -> QFont:
    return QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)


def cell(text: str, *, number: bool = True, colour: str | None = None) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
    if number:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        item.setFont(_mono())
    if colour:
        item.setForeground(QColor(colour))
    return item


def sign_colour(value: float | int | None) -> str | None:
    if value is None or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return palette().up if value > 0 else palette().down if value < 0 else None


def read_only_table(columns: tuple[str, ...], name: str) -> QTableWidget:
    """A table of whole rows to read and select, never to edit, its columns sharing the width."""
    table = QTableWidget(0, len(columns))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setAlternatingRowColors(True)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
    return table


def metrics_table(name: str) -> QTableWidget:
    """The metrics table: names whole, values right-aligned; its columns never cut a number."""
    table = read_only_table(("Metric", "Strategy", "Buy & hold"), name)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(True)
    table.verticalHeader().setDefaultSectionSize(22)
    return table


def fill_metrics(table: QTableWidget, columns: Sequence[tuple[Metrics, int | None]]) -> None:
    """One row per metric, one column per run (its metrics and its refused orders; None for a
    column that has none, as buy-and-hold)."""
    table.setRowCount(len(METRIC_ROWS) + 1)
    row = 0
    for label, get, decimals, signed in METRIC_ROWS:
        table.setItem(row, 0, cell(label, number=False))
        for col, (metrics, _refused) in enumerate(columns, start=1):
            value = get(metrics)
            colour = sign_colour(value) if signed else None
            table.setItem(row, col, cell(fmt(value, decimals), colour=colour))
        row += 1
        if label == "Trades":  # what was refused beside what was traded
            table.setItem(row, 0, cell(REFUSED_ROW, number=False))
            for col, (_metrics, refused) in enumerate(columns, start=1):
                if refused is None:
                    table.setItem(row, col, cell("n/a"))
                else:
                    table.setItem(row, col, cell(fmt(refused, 0),
                                                  colour=palette().down if refused else None))
            row += 1
    table.resizeColumnsToContents()
    compact_rows(table)


def compact_rows(table: QTableWidget) -> None:
    """Rows as tall as the text and a little air: every metric in view on a small screen."""
    height = table.fontMetrics().height() + 4
    for row in range(table.rowCount()):
        table.setRowHeight(row, height)


def table_width(table: QTableWidget) -> int:
    """The width that shows every column's title and values whole, with a scroll bar's room."""
    header = table.horizontalHeader()
    columns = sum(max(table.sizeHintForColumn(c), header.sectionSizeHint(c))
                  for c in range(table.columnCount()))
    return columns + 2 * table.frameWidth() + table.verticalScrollBar().sizeHint().width() + 2


def result_title(result: BacktestResult, title: str) -> str:
    start, end = int(result.time_ms[0]), int(result.time_ms[-1])
    first, last = (ms_to_iso(t)[:16].replace("T", " ") for t in (start, end))
    return f"{title}: {first} → {last} UTC, {result.time_ms.size:,} bars"


def _style_plot(plot: pg.PlotItem, label: str) -> None:
    t = palette()
    plot.setLabel("left", label, color=t.muted)
    for axis in ("left", "bottom"):
        plot.getAxis(axis).setTextPen(t.muted)
        plot.getAxis(axis).setPen(t.border)


class ReportView(QWidget):
    """The summary page of one run (empty, with a hint, until ``show_result``); its trades page
    is ``trades_view``, which the Backtest view shows as a page of its own."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("No backtest run yet: pick data and a strategy in Setup, then Start.")
        self.title.setObjectName("report_title")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-size: 14px; font-weight: 600;")
        self.note = QLabel()
        self.note.setObjectName("report_note")
        self.note.setWordWrap(True)
        set_look(self.note, "muted")
        self.metrics = metrics_table("metrics_table")
        self.metrics.setMinimumWidth(METRICS_MIN_PX)
        self.plots = pg.GraphicsLayoutWidget()
        self.plots.setObjectName("equity_chart")
        self.plots.setMinimumSize(150, 160)
        self._shown: tuple[BacktestResult, str, str, tuple[Path, ...]] | None = None
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
        self.legend = self.equity_plot.addLegend(offset=(6, 4), labelTextSize="8pt")
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.setObjectName("report_split")
        self.split.setChildrenCollapsible(False)
        self.split.addWidget(self.metrics)
        self.split.addWidget(self.plots)
        self.split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(2)
        layout.addWidget(self.title)
        layout.addWidget(self.note)
        layout.addWidget(self.split, 1)
        self.trades_view = TradesView()
        self.trades = self.trades_view.table
        self._paint_plots()

    def _paint_plots(self) -> None:
        t = palette()
        self.plots.setBackground(t.background)
        ground = QColor(t.background)
        ground.setAlpha(200)  # the curves show through, the names stay readable over them
        self.legend.setBrush(pg.mkBrush(ground))
        _style_plot(self.equity_plot, "equity")
        _style_plot(self.drawdown_plot, "drawdown %")

    def restyle(self) -> None:
        """Redraw the plots and the coloured cells in the current theme (it changed)."""
        self._paint_plots()
        self.trades_view.restyle()
        if self._shown is not None:
            self.show_result(*self._shown)

    def clear(self) -> None:
        self._shown = None
        self.metrics.setRowCount(0)
        self.equity_plot.clear()
        self.drawdown_plot.clear()
        self.note.clear()
        self.trades_view.clear()

    def show_result(self, result: BacktestResult, title: str, note: str = "",
                    price_files: Sequence[Path] = ()) -> None:
        """Show a run: its metrics and curves here, its trades on the price chart of
        ``price_files`` (the candles it ran on; none: the trades table alone)."""
        self.clear()
        self._shown = (result, title, note, tuple(price_files))
        self.title.setText(result_title(result, title))
        warned = [w for w in (refusal_warning(result), *result.warnings) if w]
        self.note.setText("\n".join(f"⚠ {line}" for line in (*warned, note) if line)
                          if warned else note)
        self.note.setVisible(bool(self.note.text()))
        self.metrics.setHorizontalHeaderLabels(["Metric", title, "Buy & hold"])
        fill_metrics(self.metrics, [(result.metrics, result.refused_orders),
                                    (result.baseline, None)])
        self._fit_metrics()
        self._fill_chart(result)
        self.trades_view.show_trades(result.trades, price_files)

    def _fit_metrics(self) -> None:
        """The metrics take the width their names and values need, the plots the rest."""
        self.metrics.setMinimumWidth(max(METRICS_MIN_PX, table_width(self.metrics)))

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


def trade_tooltip(trade: RoundTrip, decimals: int) -> str:
    """Hovering an entry or exit marker: the whole trade in words."""
    exit_text = ("still open at the end" if trade.exit_time_ms is None or trade.exit_price is None
                 else f"exit {fmt(trade.exit_price, decimals)} at "
                      f"{ms_to_iso(trade.exit_time_ms)[:16].replace('T', ' ')}")
    return (f"{trade.symbol} LONG {trade.quantity:,.6f}\n"
            f"entry {fmt(trade.entry_price, decimals)} at "
            f"{ms_to_iso(trade.entry_time_ms)[:16].replace('T', ' ')}\n{exit_text}\n"
            f"P&L {fmt(trade.pnl, 2)} ({fmt(trade.return_pct, 2)}%), {trade.bars_held} bars")


class TradesView(QWidget):
    """The run's trades on the price chart (entries ▲, exits ▼, joined by a line green for a
    win, red for a loss), over the table of trades."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.trades: list[RoundTrip] = []
        self.series: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}  # symbol: t, close, dp
        self.symbol_box = QComboBox()
        self.symbol_box.setObjectName("trades_symbol")
        self.symbol_box.currentTextChanged.connect(lambda _s: self._draw())
        self.missing = QLabel("")
        self.missing.setObjectName("trades_chart_note")
        self.missing.setWordWrap(True)
        set_look(self.missing, "muted")
        self.chart = pg.PlotWidget(axisItems={"bottom": pg.DateAxisItem(utcOffset=0)})
        self.chart.setObjectName("trades_chart")
        self.chart.setMenuEnabled(False)
        self.chart.setMinimumHeight(120)
        self.price_plot = self.chart.getPlotItem()
        self.price_plot.setClipToView(True)
        self.price_plot.setDownsampling(auto=True, mode="peak")
        self.price_plot.showGrid(x=True, y=True, alpha=0.15)
        self.price_line = self.price_plot.plot([], [])
        self.won = pg.PlotDataItem([], [], connect="pairs")  # entry to exit, a win
        self.lost = pg.PlotDataItem([], [], connect="pairs")
        for path in (self.won, self.lost):
            self.price_plot.addItem(path)
        self.entries = pg.ScatterPlotItem(hoverable=True, tip=lambda x, y, data: data,
                                          size=MARKER_SIZE, pxMode=True)
        self.exits = pg.ScatterPlotItem(hoverable=True, tip=lambda x, y, data: data,
                                        size=MARKER_SIZE, pxMode=True)
        for item in (self.entries, self.exits):
            item.setZValue(20)
            self.price_plot.addItem(item)
        self.table = read_only_table(TRADE_COLUMNS, "trades_table")
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setMinimumHeight(60)
        top = QWidget()
        column = QVBoxLayout(top)
        column.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.missing, 1)
        row.addWidget(self.symbol_box)
        column.addLayout(row)
        column.addWidget(self.chart, 1)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.setChildrenCollapsible(False)
        self.split.addWidget(top)
        self.split.addWidget(self.table)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.split)
        self.restyle()

    def restyle(self) -> None:
        t = palette()
        self.chart.setBackground(t.background)
        _style_plot(self.price_plot, "price")
        self.price_line.setPen(pg.mkPen(t.muted, width=1))
        if self.trades:
            self._draw()

    def clear(self) -> None:
        self.trades = []
        self.series = {}
        self.table.setRowCount(0)
        self.symbol_box.clear()
        self._draw()

    def show_trades(self, trades: Sequence[RoundTrip], price_files: Sequence[Path]) -> None:
        """The trades in the table, and on the close prices of ``price_files``."""
        from app.market.csv_loader import load_csv

        self.trades = list(trades)
        self.series = {}
        unreadable = []
        for path in price_files:
            try:
                loaded = load_csv(Path(path), allow_gaps=True)
            except (DataFileError, OSError):
                unreadable.append(Path(path).name)
                continue
            s = loaded.series
            self.series[s.symbol] = (s.timestamp_ms.astype(np.float64) / 1000.0,
                                     s.close.astype(np.float64), loaded.price_decimals)
        symbols = sorted(self.series) or sorted({t.symbol for t in self.trades})
        self.symbol_box.blockSignals(True)
        self.symbol_box.clear()
        self.symbol_box.addItems(symbols)
        self.symbol_box.blockSignals(False)
        self.symbol_box.setVisible(len(symbols) > 1)
        if not self.series:
            self.missing.setText("The candles this run traded on were not found: its trades "
                                 "are drawn without the price." if self.trades else "")
        elif unreadable:
            self.missing.setText(f"Not readable: {', '.join(unreadable)}.")
        else:
            self.missing.setText("")
        self.missing.setVisible(bool(self.missing.text()))
        self._fill_table()
        self._draw()

    def decimals(self, symbol: str) -> int:
        found = self.series.get(symbol)
        return found[2] if found is not None else 2

    def _fill_table(self) -> None:
        self.table.setRowCount(len(self.trades))
        for row, tr in enumerate(self.trades):
            decimals = self.decimals(tr.symbol)
            exit_time = "open" if tr.exit_time_ms is None else ms_to_iso(tr.exit_time_ms)[:16]
            cells = [
                cell(tr.symbol, number=False),
                cell(ms_to_iso(tr.entry_time_ms)[:16].replace("T", " ")),
                cell(exit_time.replace("T", " ")),
                cell(f"{tr.quantity:,.6f}"),
                cell(fmt(tr.entry_price, decimals)),
                cell(fmt(tr.exit_price, decimals)),
                cell(fmt(tr.pnl, 2), colour=sign_colour(tr.pnl)),
                cell(fmt(tr.return_pct, 2), colour=sign_colour(tr.return_pct)),
                cell(str(tr.bars_held)),
            ]
            for col, item in enumerate(cells):
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()

    def marker_tooltips(self) -> list[str]:
        """What hovering each drawn marker shows, entries first (for tests and the log)."""
        return [p.data() for item in (self.entries, self.exits) for p in item.points()]

    def _draw(self) -> None:
        t = palette()
        symbol = self.symbol_box.currentText()
        found = self.series.get(symbol)
        if found is not None:
            self.price_line.setData(found[0], found[1])
        else:
            self.price_line.setData([], [])
        shown = [tr for tr in self.trades if tr.symbol == symbol]
        decimals = self.decimals(symbol)
        tips = [trade_tooltip(tr, decimals) for tr in shown]
        self.entries.setData(
            x=[tr.entry_time_ms / 1000 for tr in shown], y=[tr.entry_price for tr in shown],
            symbol="t1", brush=pg.mkBrush(t.up), pen=pg.mkPen(t.background), data=tips)
        closed = [(tr, tip) for tr, tip in zip(shown, tips, strict=True)
                  if tr.exit_time_ms is not None and tr.exit_price is not None]
        self.exits.setData(
            x=[tr.exit_time_ms / 1000 for tr, _ in closed if tr.exit_time_ms is not None],
            y=[tr.exit_price for tr, _ in closed],
            symbol="t", brush=[pg.mkBrush(t.up if tr.pnl > 0 else t.down) for tr, _ in closed],
            pen=pg.mkPen(t.background), data=[tip for _, tip in closed])
        for path, won, colour in ((self.won, True, t.up), (self.lost, False, t.down)):
            xs: list[float] = []
            ys: list[float] = []
            for tr, _ in closed:
                if (tr.pnl > 0) is won and tr.exit_time_ms is not None and tr.exit_price:
                    xs += [tr.entry_time_ms / 1000, tr.exit_time_ms / 1000]
                    ys += [tr.entry_price, tr.exit_price]
            path.setData(xs, ys, connect="pairs")
            path.setPen(pg.mkPen(colour, width=1.6))
        self.price_plot.enableAutoRange()
