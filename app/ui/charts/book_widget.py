"""The order book panel: a price ladder and a cumulative depth chart, updated live.

Books can arrive many times a second; the panel keeps only the newest and applies it on a timer
(``redraw_hz``, 2-10 per second). Nothing is rebuilt per update: the ladder's model has a fixed
row count (asks, the spread row, bids) and announces changed cells with ``dataChanged``, and the
depth chart's two curves get new points, so updates never flicker. Prices stay ``Decimal`` from
the book to the text, so the spread and cumulative sizes shown are exact.

Switching to another symbol empties the ladder and the depth chart at once and fetches that
symbol's book: the old symbol's prices are never shown under the new name. A symbol whose market
has no book yet (a replay before its data starts) says why in the header. Clicking a level puts its
price in the order ticket (``price_clicked``; the window's trading controls do it).
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.domain.errors import KestrelError
from app.domain.market import OrderBook
from app.market.port import MarketData
from app.ui.charts.axis import PriceAxisItem
from app.ui.charts.ladder import COLUMNS, LadderModel, LadderRow, SizeBarDelegate, cumulative
from app.ui.charts.style import format_price, mono_font, qcolor
from app.ui.panels.tasks import REDRAWS, TaskSet


class DepthChart(pg.PlotWidget):
    """Cumulative bid and ask sizes against price, as two filled step areas."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(
            parent=parent,
            axisItems={"bottom": PriceAxisItem("bottom"), "right": PriceAxisItem(compact=True)},
        )
        plot = self.getPlotItem()
        plot.hideAxis("left")
        plot.showAxis("right")
        plot.hideButtons()
        plot.setMenuEnabled(False)
        plot.setMouseEnabled(x=False, y=False)
        # no grid: pyqtgraph redraws an axis grid over the whole plot on every repaint, which
        # made a repaint cost ~10 ms instead of ~2.5 ms at ten books a second
        plot.showGrid(x=False, y=False)
        for name in ("bottom", "right"):
            plot.getAxis(name).setStyle(tickFont=mono_font(8))
        self.bids = pg.PlotDataItem(fillLevel=0.0)
        self.asks = pg.PlotDataItem(fillLevel=0.0)
        self.mid = pg.InfiniteLine(angle=90)
        for item in (self.bids, self.asks):
            plot.addItem(item)
        plot.addItem(self.mid, ignoreBounds=True)
        self.restyle()

    def restyle(self) -> None:
        """Paint in the current theme's colours."""
        self.setBackground(qcolor("background"))
        plot = self.getPlotItem()
        for name in ("bottom", "right"):
            axis = plot.getAxis(name)
            axis.setPen(pg.mkPen(qcolor("grid")))
            axis.setTextPen(pg.mkPen(qcolor("axis")))
        for item, color_name in ((self.bids, "up"), (self.asks, "down")):
            fill = qcolor(color_name)
            fill.setAlpha(70)
            # a 1-pixel cosmetic pen: Qt's fast path (a 1.5 px pen made a repaint ~3x dearer)
            item.setPen(pg.mkPen(qcolor(color_name), width=1))
            item.setBrush(fill)
        self.mid.setPen(pg.mkPen(qcolor("muted"), style=Qt.PenStyle.DotLine))

    @staticmethod
    def steps(rows: list[LadderRow]) -> tuple[np.ndarray, np.ndarray]:
        """Step outline of one side: from zero at the best price out to the deepest level."""
        if not rows:
            return np.zeros(0), np.zeros(0)
        prices = np.array([float(r.price) for r in rows])
        totals = np.array([float(r.total) for r in rows])
        x = np.repeat(prices, 2)
        y = np.empty(len(x))
        y[0] = 0.0
        y[1::2] = totals
        y[2::2] = totals[:-1]
        return x, y

    def set_book(self, bids: list[LadderRow], asks: list[LadderRow], decimals: int) -> None:
        self.getPlotItem().getAxis("bottom").set_decimals(decimals)
        for item, rows in ((self.bids, bids), (self.asks, asks)):
            x, y = self.steps(rows)
            item.setData(x, y)
        self.mid.setVisible(bool(bids and asks))
        if bids and asks:
            low, high = float(bids[-1].price), float(asks[-1].price)
            deepest = float(max(bids[-1].total, asks[-1].total))
            self.mid.setPos((float(bids[0].price) + float(asks[0].price)) / 2)
            self.setXRange(low, high, padding=0.02)
            self.setYRange(0.0, deepest * 1.05, padding=0)


class BookWidget(QWidget):
    """Ladder above, depth chart below, for one symbol of a ``MarketData``.

    Args:
        market: where books come from (``refresh``); books may also be pushed (``update_book``).
        symbol: the symbol shown (default: the market's first).
        depth: levels a side.
        redraw_hz: the most redraws per second (clamped to 2-10).

    Signals:
        price_clicked(Decimal): the person clicked a level of the ladder: its price.
    """

    price_clicked = Signal(object)

    def __init__(
        self,
        market: MarketData,
        *,
        symbol: str | None = None,
        depth: int = 15,
        redraw_hz: float = 5.0,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._market = market
        self.symbol = symbol if symbol is not None else market.symbols()[0]
        self.depth = depth
        self._pending: OrderBook | None = None
        self.book: OrderBook | None = None
        self.applied_count = 0  # books actually drawn (batched); tests read it
        self.unavailable = ""  # why the symbol has no book now ("" while it has one)
        self._tasks = TaskSet(on_error=lambda error: self.header.setText(
            f"{self.symbol}  order book unavailable: {error}"))

        self.header = QLabel(self)
        self.header.setFont(mono_font(9))
        self.header.setWordWrap(True)  # a narrow dock wraps it rather than scrolling sideways
        self.model = LadderModel(depth, market.price_decimals(self.symbol))
        self.ladder = QTableView(self)
        self.ladder.setModel(self.model)
        self.ladder.setItemDelegate(SizeBarDelegate(self.ladder))
        self.ladder.setFont(mono_font(9))
        self.ladder.verticalHeader().setVisible(False)
        self.ladder.verticalHeader().setDefaultSectionSize(18)
        self.ladder.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.ladder.setShowGrid(False)
        self.ladder.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.ladder.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.ladder.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        # the ladder's size hint (every row) would squeeze the depth chart; share by stretch
        self.ladder.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Ignored)
        self.ladder.setSpan(self.model.spread_row, 0, 1, len(COLUMNS))
        self.ladder.setToolTip("Click a price to put it in the order ticket")
        self.ladder.setCursor(Qt.CursorShape.PointingHandCursor)
        self.ladder.clicked.connect(self._level_clicked)
        self.depth_chart = DepthChart(self)
        # small enough for a 720-pixel screen's bottom dock to keep rows of the ladder in view
        self.depth_chart.setMinimumHeight(60)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(self.ladder)
        splitter.addWidget(self.depth_chart)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        self._centred = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.header)
        layout.addWidget(splitter, 1)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(int(1000 / min(max(redraw_hz, 2.0), 10.0)))
        self._timer.timeout.connect(self._tick)
        self._fetch_wanted = False
        self._update_header()

    def restyle(self) -> None:
        """Redraw the ladder and the depth chart in the current theme (it changed)."""
        self.model.recolor()
        self.ladder.itemDelegate().recolor()
        self.ladder.viewport().update()
        self.depth_chart.restyle()

    def set_symbol(self, symbol: str) -> None:
        """Show another symbol: the ladder and the depth chart are emptied now (no price of the
        old symbol stays under the new name) and the new symbol's book is fetched."""
        if symbol == self.symbol and self.book is not None:
            return
        self.symbol = symbol
        self.model.decimals = self._market.price_decimals(symbol)
        self._pending = None
        self._centred = False
        self.unavailable = ""
        self._clear()
        self._update_header()
        self.on_clock_advanced()  # fetched at the next tick, even while the replay is paused

    def _clear(self) -> None:
        self.book = None
        self.model.set_book(OrderBook(self.symbol, 0, (), ()))
        self.depth_chart.set_book([], [], self.model.decimals)

    def _level_clicked(self, index: QModelIndex) -> None:
        level = self.model.row_at(index.row())
        if level is not None:
            self.price_clicked.emit(Decimal(level.price))

    def update_book(self, book: OrderBook) -> None:
        """Queue ``book`` for the next redraw; books queued before it are skipped."""
        if book.symbol != self.symbol:
            return
        self._pending = book
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Draw the newest queued book now."""
        book, self._pending = self._pending, None
        if book is None:
            return
        self.book = book
        self.model.set_book(book)
        self.depth_chart.set_book(
            cumulative(book.bids, "bid", self.depth),
            cumulative(book.asks, "ask", self.depth),
            self.model.decimals,
        )
        self.applied_count += 1
        self._update_header()
        if not self._centred:  # once per symbol: later the person's scrolling is left alone
            self._centred = True
            spread_index = self.model.index(self.model.spread_row, 0)
            self.ladder.scrollTo(spread_index, QAbstractItemView.ScrollHint.PositionAtCenter)

    async def refresh(self) -> None:
        """Fetch the symbol's book from the market and queue it."""
        self.update_book(await self._market.order_book(self.symbol, self.depth))

    def on_clock_advanced(self) -> None:
        """The market moved: fetch and draw a new book at the next timer tick (batched)."""
        self._fetch_wanted = True
        if not self._timer.isActive():
            self._timer.start()

    def _tick(self) -> None:
        if self._fetch_wanted:
            self._fetch_wanted = False
            self._tasks.spawn(self._fetch_and_draw())
        self.flush()

    async def _fetch_and_draw(self) -> None:
        symbol = self.symbol
        try:
            book = await self._market.order_book(symbol, self.depth)
        except KestrelError as exc:  # no book for this symbol now (no candles yet): say why
            if symbol == self.symbol:
                if self.book is not None:
                    self._clear()
                self.unavailable = str(exc)
                self._update_header()
            return
        await REDRAWS.turn()
        if book.symbol == self.symbol:
            self.unavailable = ""
            self._pending = book
            self.flush()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        """Stop the redraw timer: a closed panel must not wake up to fetch data."""
        self._timer.stop()
        super().closeEvent(event)

    def _update_header(self) -> None:
        book = self.book
        note = "  synthetic (derived from candles)" if book is not None and book.synthetic else ""
        if book is None or book.symbol != self.symbol:
            why = f": none yet. {self.unavailable}" if self.unavailable else ""
            self.header.setText(f"{self.symbol}  order book{why}")
            return
        bid, ask = book.best_bid, book.best_ask
        d = self.model.decimals
        bid_text = format_price(bid, d) if bid is not None else "—"
        ask_text = format_price(ask, d) if ask is not None else "—"
        self.header.setText(f"{self.symbol}  bid {bid_text}  ask {ask_text}{note}")
