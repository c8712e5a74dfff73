"""The candlestick chart panel: symbol/interval pickers, indicators, trades, live updates.

It reads candles only through the ``MarketData`` port, so the same panel charts a replay, a
backtest or a live exchange. Live data arrives as calls to ``on_clock_advanced`` (the main window
makes one per replay step or tick); they are batched on a timer (``redraw_hz``, 2-10 per second)
into one re-read of the series, so a replay at 600x or a burst of ticks costs a few redraws a
second, not one per tick. A re-read keeps everything that did not change: the forming bar is
updated in place, new bars are appended, and the view follows the newest bar unless the person
has scrolled away (then "Latest" or the End key brings it back).

Where there is nothing to draw (a symbol whose data starts later than the replay, an interval the
market cannot serve) the chart says why, in a sentence over the empty plots.

Trading from the chart never sends anything from here: a dragged take profit, stop loss or
working order, and "Buy/Sell limit here" of the right-click menu, are announced as signals
(``level_moved``, ``limit_here``) that the window's trading controls turn into the person's tool
calls (``app.ui.trading.chart_trading``): the order ticket with its review, or order entry's
``modify``, both through the Risk Guard. Without those controls connected, nothing is draggable
and the menu offers no orders.

The set-up (symbol, interval, log scale, indicators and their parameters, each symbol's
drawings) is kept per workspace when a ``ChartMemory`` is given, and restored on the next start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import numpy as np
from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QMenu,
    QSizePolicy,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.domain.errors import KestrelError
from app.domain.market import interval_ms
from app.domain.trading import Fill, Order, Position, Side
from app.indicators.catalogue import default_catalogue
from app.indicators.model import Catalogue, bind_params
from app.market.port import MarketData
from app.market.series import KlineSeries
from app.ui.charts.chart_state import ChartMemory, ChartState
from app.ui.charts.chart_view import ChartView
from app.ui.charts.indicator_panes import (
    PrefixCache,
    Study,
    fit_readout,
    indicator_menu,
    placement,
    readout_text,
    study_label,
)
from app.ui.charts.levels import Level, on_tick, order_levels
from app.ui.charts.markers import build_markers
from app.ui.charts.study_dialog import StudyDialog
from app.ui.charts.style import format_price, mono_font
from app.ui.panels.style import set_banner
from app.ui.panels.tasks import REDRAWS, TaskSet
from app.ui.theme import set_look

logger = logging.getLogger(__name__)

PREFERRED_INTERVALS = ("1h", "4h", "1d")
MESSAGE_MS = 20_000  # how long an outcome stays on the chart


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def no_data_text(market: MarketData, symbol: str, interval: str) -> str:
    """Why ``symbol`` has no ``interval`` candles to chart, in a sentence."""
    head = f"No {interval} candles for {symbol} yet"
    try:
        prefix = market.prefix_source(symbol, interval)
    except KestrelError as exc:
        return f"{head}: {exc}"
    now = market.now_ms()
    if prefix is not None and len(prefix.full):
        first_open = int(prefix.full.timestamp_ms[0])
        first_close = first_open + interval_ms(interval)
        if now < first_close:
            return (f"{head}: its data begins at {_when(first_open)} (the first candle closes "
                    f"at {_when(first_close)}) and the replay is at {_when(now)}. Its candles "
                    "appear as the replay reaches them.")
    if prefix is None:
        return f"{head}: the exchange has sent none for this market so far."
    return f"{head}: the market has none at {_when(now)}."


class ChartWidget(QWidget):
    """A candlestick chart of one symbol and interval from a ``MarketData``.

    Args:
        market: where candles come from.
        symbol, interval: what to show first (default: the first symbol, 1h if it has it); a
            kept set-up's symbol and interval win when the market still has them.
        catalogue: the indicators offered (default: the whole catalogue).
        redraw_hz: the most live re-reads per second (clamped to 2-10).
        memory: where the set-up is kept (the workspace's); None: it is not kept.
        owner_name: an agent's name from its id, for the orders' tooltips.

    Signals:
        level_moved(Order, Decimal): the person dropped an order's line or tag at a new price.
        limit_here(str, Side, Decimal): "Buy/Sell limit here" was chosen: symbol, side, price.
        symbol_changed(str): another symbol is charted (the order book follows it).
    """

    level_moved = Signal(object, object)
    limit_here = Signal(str, object, object)
    symbol_changed = Signal(str)

    def __init__(
        self,
        market: MarketData,
        *,
        symbol: str | None = None,
        interval: str | None = None,
        catalogue: Catalogue | None = None,
        redraw_hz: float = 5.0,
        memory: ChartMemory | None = None,
        owner_name: Callable[[str], str | None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._market = market
        self._memory = memory
        self._state = memory.load() if memory is not None else ChartState()
        self._owner_name = owner_name
        self._trading = False
        self.context_menu: QMenu | None = None  # the right-click menu open now (tests read it)
        self.study_dialog: StudyDialog | None = None
        self._restoring = False
        self._catalogue = default_catalogue() if catalogue is None else catalogue
        self._series: KlineSeries | None = None
        self._decimals = 2
        self._lock = asyncio.Lock()
        self._tasks = TaskSet(on_error=lambda error: self.readout.setText(f"Chart error: {error}"))
        self._generation = 0
        self._fills: Sequence[Fill] = ()
        self._orders: Sequence[Order] = ()
        self._positions: Sequence[Position] = ()
        self._open_orders: Sequence[Order] = ()
        self.studies: dict[str, Study] = {}
        self._prefix_cache = PrefixCache()
        self._study_buttons: dict[str, QToolButton] = {}
        self._hovered = -1
        self._stale = False
        self.refresh_count = 0  # live re-reads done (tests and the benchmark read it)

        self.view = ChartView(self)
        self.view.hovered.connect(self._on_hovered)
        self.view.following_changed.connect(self._on_following_changed)
        self.view.levels.dropped.connect(self._level_dropped)
        self.view.context_requested.connect(self._open_context_menu)
        self.view.drawings.changed.connect(self._drawings_changed)
        self.view.drawings.placing_changed.connect(self._placing_changed)
        self._build_controls()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self._toolbar)
        layout.addWidget(self.message)
        layout.addWidget(self.readout)
        layout.addWidget(self.view, 1)
        self._message_timer = QTimer(self)
        self._message_timer.setSingleShot(True)
        self._message_timer.setInterval(MESSAGE_MS)
        self._message_timer.timeout.connect(self.message.hide)

        self._throttle = QTimer(self)
        self._throttle.setSingleShot(True)
        self._throttle.setInterval(int(1000 / min(max(redraw_hz, 2.0), 10.0)))
        self._throttle.timeout.connect(self._throttle_fired)
        follow = QShortcut(QKeySequence(Qt.Key.Key_End), self, self.follow_latest)
        follow.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        cancel = QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.view.drawings.cancel)
        cancel.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)

        kept = self._state
        self._restoring = True  # nothing is kept until the kept set-up is back in place
        if kept.symbol in market.symbols():
            symbol = kept.symbol
            if kept.interval in market.intervals(kept.symbol):
                interval = kept.interval
        self._fill_symbols(symbol, interval)
        self.log_button.setChecked(kept.log_scale)
        self.view.set_log_scale(kept.log_scale)
        self.view.drawings.load(kept.drawings.get(self.symbol, []))
        if kept.studies:
            self._tasks.spawn(self._restore_studies(kept.studies))
        else:
            self._restoring = False

    # -- controls -----------------------------------------------------------------------------

    def _build_controls(self) -> None:
        # a tool bar, not a row of widgets: on a narrow window what does not fit goes behind its
        # » button instead of widening the chart past the room the docks leave it
        self._toolbar = QToolBar(self)
        self._toolbar.setObjectName("chartBar")
        self._toolbar.setMovable(False)
        self._toolbar.setFloatable(False)
        self.symbol_box = QComboBox(self._toolbar)
        self.symbol_box.setToolTip("Symbol")
        self.interval_box = QComboBox(self._toolbar)
        self.interval_box.setToolTip("Interval")
        self.indicator_button = QToolButton(self._toolbar)
        self.indicator_button.setText("Indicators")
        self.indicator_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.indicator_button.setMenu(
            indicator_menu(
                self, self._catalogue, lambda n: self._tasks.spawn(self.add_indicator(n)))
        )
        studies = QWidget(self._toolbar)
        self._studies_bar = QHBoxLayout(studies)
        self._studies_bar.setContentsMargins(0, 0, 0, 0)
        self._studies_bar.setSpacing(2)
        self.draw_button = QToolButton(self._toolbar)
        self.draw_button.setText("Draw")
        self.draw_button.setToolTip("Draw a horizontal line or a trend line (right-click a "
                                    "drawing to delete it)")
        self.draw_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        draw_menu = QMenu(self.draw_button)
        draw_menu.addAction("Horizontal line (click the chart)",
                            lambda: self.view.drawings.begin("hline"))
        draw_menu.addAction("Trend line (click its two ends)",
                            lambda: self.view.drawings.begin("trend"))
        draw_menu.addSeparator()
        self.clear_drawings_action = draw_menu.addAction(
            "Delete every drawing on this symbol", self.view.drawings.clear)
        self.draw_button.setMenu(draw_menu)
        self.log_button = QToolButton(self._toolbar)
        self.log_button.setText("Log")
        self.log_button.setObjectName("chartLog")
        self.log_button.setCheckable(True)
        self.log_button.setToolTip("Log scale: equal moves in percent take equal heights")
        self.log_button.toggled.connect(self.set_log_scale)
        self.follow_button = QToolButton(self._toolbar)
        self.follow_button.setText("Latest ⇥")
        self.follow_button.setToolTip("Follow the newest bar (End)")
        self.follow_button.setEnabled(False)
        self.follow_button.clicked.connect(self.follow_latest)
        spacer = QWidget(self._toolbar)
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        for widget in (self.symbol_box, self.interval_box, self.indicator_button, studies,
                       spacer, self.draw_button, self.log_button, self.follow_button):
            self._toolbar.addWidget(widget)
        self.symbol_box.currentTextChanged.connect(self._symbol_picked)
        self.interval_box.currentTextChanged.connect(self._interval_picked)
        self.readout = QLabel(self)
        self.readout.setFont(mono_font(9))
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setContentsMargins(6, 0, 6, 0)
        # a long readout must not widen the window: it goes on a second line instead
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.message = QLabel(self)  # what came of the person's move, or how to draw
        self.message.setObjectName("chartMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.message.hide()

    def _fill_symbols(self, symbol: str | None, interval: str | None) -> None:
        symbols = self._market.symbols()
        self.symbol_box.blockSignals(True)
        self.symbol_box.clear()
        self.symbol_box.addItems(list(symbols))
        if symbol is not None:
            self.symbol_box.setCurrentText(symbol)
        self.symbol_box.blockSignals(False)
        self._fill_intervals(interval)

    def _fill_intervals(self, wanted: str | None) -> None:
        symbol = self.symbol_box.currentText()
        intervals = self._market.intervals(symbol) if symbol else ()
        keep = wanted or self.interval_box.currentText()
        if keep not in intervals:
            keep = next((i for i in PREFERRED_INTERVALS if i in intervals), None)
        self.interval_box.blockSignals(True)
        self.interval_box.clear()
        self.interval_box.addItems(list(intervals))
        if keep is not None:
            self.interval_box.setCurrentText(keep)
        self.interval_box.blockSignals(False)

    def _symbol_picked(self, _text: str) -> None:
        self._fill_intervals(None)
        self._symbol_shown()
        self._tasks.spawn(self.load())

    def _interval_picked(self, _text: str) -> None:
        self._save()
        self._tasks.spawn(self.load())

    def _symbol_shown(self) -> None:
        """Another symbol: its own drawings, no other symbol's levels, and the book follows."""
        self.view.drawings.load(self._state.drawings.get(self.symbol, []))
        self._update_levels()  # the other symbol's levels go (each level is one symbol's)
        self._save()
        self.symbol_changed.emit(self.symbol)

    # -- tasks --------------------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        """The readout on as many lines as the new width needs."""
        super().resizeEvent(event)
        self._show_readout(self._hovered)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt's name
        """Stop the redraw timer: a closed panel must not wake up to fetch data."""
        self._throttle.stop()
        super().closeEvent(event)

    async def wait_idle(self) -> None:
        """Wait until every load, refresh and indicator computation started so far is done."""
        await self._tasks.wait()

    # -- loading ------------------------------------------------------------------------------

    @property
    def symbol(self) -> str:
        return self.symbol_box.currentText()

    @property
    def interval(self) -> str:
        return self.interval_box.currentText()

    @property
    def series(self) -> KlineSeries | None:
        return self._series

    @property
    def following(self) -> bool:
        return self.view.following

    async def load(self, symbol: str | None = None, interval: str | None = None) -> None:
        """Show ``symbol``/``interval`` (default: the pickers' choice) from scratch.

        Raises:
            NotFoundError: from the market, for an unknown symbol or interval.
        """
        if symbol is not None and symbol != self.symbol:
            self.symbol_box.blockSignals(True)
            self.symbol_box.setCurrentText(symbol)
            self.symbol_box.blockSignals(False)
            self._fill_intervals(interval)
            self._symbol_shown()
        elif interval is not None and interval != self.interval:
            self.interval_box.blockSignals(True)
            self.interval_box.setCurrentText(interval)
            self.interval_box.blockSignals(False)
            self._save()
        self._generation += 1
        async with self._lock:
            symbol, interval = self.symbol, self.interval
            if not symbol or not interval:
                self.view.show_note(f"{symbol or 'This market'} has no candles to chart."
                                    if symbol or not self._market.symbols()
                                    else "Choose a symbol to chart.")
                return
            self._decimals = self._market.price_decimals(symbol)
            self.view.set_decimals(self._decimals)
            try:
                series = await self._market.series(symbol, interval)
            except KestrelError as exc:  # an interval the market cannot serve, say
                self.view.show_note(f"No {interval} candles for {symbol}: {exc}")
                raise
            self._apply(series, reset=True)
            await self._recompute_studies(series)

    async def refresh(self) -> None:
        """Re-read the series now: update the forming bar in place, append new bars."""
        generation = self._generation
        async with self._lock:
            if generation != self._generation or not self.symbol:
                return
            series = await self._market.series(self.symbol, self.interval)
            await REDRAWS.turn()
            if generation != self._generation:  # another symbol or interval meanwhile
                return
            self.refresh_count += 1
            self._apply(series, reset=False)
            await self._recompute_studies(series)

    def on_clock_advanced(self) -> None:
        """The market moved: re-read the series at the next throttle tick (batched)."""
        self._stale = True
        if not self._throttle.isActive():
            self._throttle.start()

    def _throttle_fired(self) -> None:
        if self._stale:
            self._stale = False
            self._tasks.spawn(self.refresh())

    def _apply(self, series: KlineSeries, reset: bool) -> None:
        old = self._series
        first_changed = 0
        if (
            not reset
            and old is not None
            and len(old)
            and (old.symbol, old.interval) == (series.symbol, series.interval)
            and len(series) >= len(old)
            and series.timestamp_ms[len(old) - 1] == old.timestamp_ms[-1]
        ):
            first_changed = len(old) - 1
        else:
            reset = True
        self._series = series
        grew = old is not None and not reset and len(series) > len(old)
        self.view.set_series(series, interval_ms(series.interval), first_changed, reset)
        if len(series) == 0:
            self.view.show_note(no_data_text(self._market, series.symbol, series.interval))
        elif self.view.note.isVisible():
            self.view.show_note("")
        if grew or reset:  # markers sit on bars: place them on the bars now shown
            self._trades_changed()
        else:
            self._update_levels()  # the last price moved
        self._show_readout(self._hovered)

    # -- indicators ---------------------------------------------------------------------------

    async def add_indicator(
        self, name: str, params: Mapping[str, int | float] | None = None
    ) -> Study:
        """Add a catalogued indicator (on price or in its own pane) and compute it.

        Raises:
            UnknownIndicatorError: ``name`` is not catalogued.
            InvalidParameterError: a parameter is unknown or out of range.
        """
        indicator = self._catalogue.get(name)
        raw = {key: str(value) for key, value in (params or {}).items()}
        values = bind_params(indicator, raw)
        label = study_label(indicator, values)
        existing = self.studies.get(label)
        if existing is not None:
            return existing
        colors_used = sum(len(s.outputs) for s in self.studies.values())
        on_price, _ = placement(indicator)
        plot = self.view.price_plot if on_price else self.view.new_pane()
        study = Study(indicator, values, plot, colors_used)
        study.to_view = self.view.price_scale.to_view_array
        self.studies[study.label] = study
        self.view.studies.append(study)
        self._add_study_button(study)
        self.view.update_legends()
        if not self._restoring:
            self._save()
        if self._series is not None:
            await self._compute_into(study, self._series)
            self.view.fit_y()
            self._show_readout(self._hovered)
        return study

    def remove_indicator(self, label: str) -> None:
        study = self.studies.pop(label)
        self.view.studies.remove(study)
        study.remove()
        if not study.on_price:
            self.view.remove_pane(study.plot)
        button = self._study_buttons.pop(label)
        self._studies_bar.removeWidget(button)
        button.deleteLater()
        self.view.update_legends()
        self.view.fit_y()
        self._show_readout(self._hovered)
        self._save()

    def edit_indicator(self, label: str) -> StudyDialog:
        """Open the dialog that edits ``label``'s parameters; accepted, the study is replaced
        by one with the new values."""
        study = self.studies[label]
        dialog = StudyDialog(study.indicator, study.params, self)
        dialog.accepted.connect(
            lambda: self._tasks.spawn(self.replace_indicator(label, dialog.values)))
        self.study_dialog = dialog
        dialog.open()
        return dialog

    async def replace_indicator(
        self, label: str, params: Mapping[str, int | float]
    ) -> Study | None:
        """Show ``label``'s indicator with ``params`` instead (the edited parameters)."""
        study = self.studies.get(label)
        if study is None:
            return None
        if study_label(study.indicator, params) == label:
            return study
        self.remove_indicator(label)
        return await self.add_indicator(study.indicator.name, params)

    async def _restore_studies(self, kept: Sequence[tuple[str, dict[str, int | float]]]) -> None:
        """The kept indicators, added again; one the catalogue refuses now is left out and
        said."""
        self._restoring = True
        try:
            for name, params in kept:
                try:
                    await self.add_indicator(name, params)
                except KestrelError as exc:
                    logger.warning("a kept indicator was left out: %s", exc)
                    self.show_message(f"The indicator {name} kept from last time was left out: "
                                      f"{exc}", "warning")
        finally:
            self._restoring = False
        self._save()

    def _add_study_button(self, study: Study) -> None:
        button = QToolButton(self._toolbar)
        button.setText(study.label)
        button.setObjectName(f"study_{study.label}")
        button.setToolTip(f"{study.indicator.name}: edit its parameters or remove it")
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(button)
        menu.addAction("Edit parameters…",
                       lambda label=study.label: self.edit_indicator(label))
        menu.addAction("Remove", lambda label=study.label: self.remove_indicator(label))
        button.setMenu(menu)
        self._studies_bar.addWidget(button)
        self._study_buttons[study.label] = button

    async def _compute_into(self, study: Study, series: KlineSeries) -> None:
        prefix = self._market.prefix_source(series.symbol, series.interval)
        columns = await self._prefix_cache.columns(study.indicator, study.params, series, prefix)
        if self._series is series and study.label in self.studies:
            study.set_values(columns, self._x_for(series))

    async def _recompute_studies(self, series: KlineSeries) -> None:
        if self.studies:
            await asyncio.gather(*(self._compute_into(s, series) for s in self.studies.values()))
            self.view.fit_y()
            self._show_readout(self._hovered)

    @staticmethod
    def _x_for(series: KlineSeries) -> np.ndarray:
        return np.arange(len(series), dtype=float)

    # -- trades and positions -----------------------------------------------------------------

    def set_trades(self, fills: Sequence[Fill], orders: Sequence[Order]) -> None:
        """Show the agents' fills and unfilled orders of the charted symbol as markers."""
        self._fills, self._orders = tuple(fills), tuple(orders)
        self._trades_changed()

    def set_position_lines(self, positions: Sequence[Position], orders: Sequence[Order]) -> None:
        """Mark each open position's average cost, its open take profit and stop loss, and the
        working orders, with a tag on the price axis and a line across the plot."""
        self._positions, self._open_orders = tuple(positions), tuple(orders)
        self._update_levels()

    def enable_trading(self, enabled: bool = True) -> None:
        """The window's trading controls listen: orders' lines can be dragged and the
        right-click menu offers limit orders."""
        self._trading = enabled
        self._update_levels()

    def _levels(self) -> list[Level]:
        levels = order_levels(self.symbol, self._positions, self._open_orders, self._decimals,
                              self._owner_name)
        if not self._trading:
            levels = [replace(level, order=None) for level in levels]
        series = self._series
        if series is not None and len(series) and series.symbol == self.symbol:
            close = float(series.close[-1])
            rising = close >= float(series.open[-1])
            levels.append(Level("last", "last", on_tick(close, self._decimals),
                                format_price(close, self._decimals), "up" if rising else "down",
                                tooltip=f"Last price of {self.symbol}"))
        return levels

    def _update_levels(self) -> None:
        self.view.set_levels(self._levels())

    def _trades_changed(self) -> None:
        series = self._series
        if series is None:
            return
        self.view.markers.set_markers(
            build_markers(self.symbol, self._fills, self._orders, series.timestamp_ms,
                          self._decimals)
        )
        self._update_levels()

    # -- trading from the chart -----------------------------------------------------------------

    def _level_dropped(self, level: Level, price: float) -> None:
        """An order's line was dropped: ask for the move (on the market's tick), or put it
        back when it did not move by a tick."""
        moved = on_tick(price, self._decimals) if price > 0 else Decimal(0)
        if level.order is None or moved <= 0 or moved == level.price:
            self.view.levels.finish_move(level.key, False)
            return
        self.show_message(f"Moving {level.tag} to {format_price(moved, self._decimals)}…",
                          "info")
        self.level_moved.emit(level.order, moved)

    def move_finished(self, order_id: str, moved: bool, text: str) -> None:
        """Say what came of moving ``order_id``'s line; refused, the line goes back."""
        self.view.levels.finish_move(order_id, moved)
        self.show_message(text, "ok" if moved else "error")

    def show_message(self, text: str, kind: str = "info") -> None:
        """A line over the chart (the outcome of a move, how to place a drawing)."""
        set_banner(self.message, kind)
        self.message.setText(text)
        self.message.show()
        self._message_timer.start()

    def _open_context_menu(self, price: float, x: float, where: QPoint) -> None:
        """The right-click menu at ``price``: a limit order there (in the ticket, reviewed
        before it is placed), drawings, and deleting the drawing under the mouse."""
        if self._series is None or len(self._series) == 0 or price <= 0:
            return
        at = on_tick(price, self._decimals)
        shown = format_price(at, self._decimals)
        menu = QMenu(self)
        menu.setObjectName("chartMenu")
        if self._trading:
            menu.addAction(f"Buy limit here at {shown}…",
                           lambda: self.limit_here.emit(self.symbol, Side.BUY, at))
            menu.addAction(f"Sell limit here at {shown}…",
                           lambda: self.limit_here.emit(self.symbol, Side.SELL, at))
            menu.addSeparator()
        menu.addAction(f"Horizontal line at {shown}",
                       lambda: self.view.drawings.add("hline", [(0, at)]))
        y = self.view.price_scale.to_view(price)
        menu.addAction("Trend line from here (click its other end)",
                       lambda: self._start_trend(x, y))
        near = self.view.drawings.near(x, y, self.view.price_plot.vb)
        if near is not None:
            what = (f"horizontal line at {format_price(near.price, self._decimals)}"
                    if near.kind == "hline" else "trend line")
            menu.addAction(f"Delete this {what}",
                           lambda key=near.drawing_id: self.view.drawings.delete(key))
        self.context_menu = menu
        menu.popup(where)

    def _start_trend(self, x: float, y: float) -> None:
        self.view.drawings.begin("trend")
        self.view.drawings.click(x, y)

    def _placing_changed(self, kind: str) -> None:
        if kind == "hline":
            self.show_message("Click the chart where the horizontal line goes (Esc cancels).")
        elif kind == "trend":
            self.show_message("Click the chart at both ends of the trend line (Esc cancels).")
        else:
            self.message.hide()

    def _drawings_changed(self) -> None:
        self._state.drawings[self.symbol] = list(self.view.drawings.drawings)
        self._save()

    # -- the kept set-up ------------------------------------------------------------------------

    def set_log_scale(self, log: bool) -> None:
        """Prices on a log scale, or not (kept with the workspace's chart)."""
        if self.log_button.isChecked() != log:
            self.log_button.setChecked(log)  # toggles back into here
            return
        self.view.set_log_scale(log)
        self._save()

    @property
    def state(self) -> ChartState:
        return self._state

    def _save(self) -> None:
        """Keep the set-up as it is now (a few hundred bytes to QSettings; cheap). Nothing is
        read off the widgets while the kept set-up is being put back: half restored, they would
        overwrite what is still to be restored (the log scale's toggle comes before the
        indicators)."""
        if self._restoring:
            return
        state = self._state
        state.symbol, state.interval = self.symbol, self.interval
        state.log_scale = self.log_button.isChecked()
        state.studies = [(s.indicator.name, dict(s.params)) for s in self.studies.values()]
        if self._memory is not None:
            self._memory.save(state)

    # -- view ---------------------------------------------------------------------------------

    def restyle(self) -> None:
        """Redraw candles, axes, markers and lines in the current theme (it changed)."""
        self.view.restyle()
        self._trades_changed()
        self._update_levels()

    def follow_latest(self) -> None:
        """Scroll back to the newest bar and keep following it."""
        self.view.show_latest()

    def _on_following_changed(self, following: bool) -> None:
        self.follow_button.setEnabled(not following)

    def _on_hovered(self, bar: int) -> None:
        self._hovered = bar
        self._show_readout(bar)

    def _show_readout(self, bar: int) -> None:
        """OHLCV of the hovered bar (the newest one when the mouse is elsewhere)."""
        series = self._series
        if series is None or len(series) == 0:
            self.readout.setText("")
            return
        if not 0 <= bar < len(series):
            bar = len(series) - 1
        text, rising = readout_text(
            series, bar, self._decimals,
            self.view.price_plot.getAxis("bottom").label_for_index(bar),
            list(self.studies.values()),
        )
        metrics = self.readout.fontMetrics()
        room = self.readout.contentsRect().width()
        self.readout.setText(fit_readout(text, lambda line: metrics.horizontalAdvance(line)
                                         <= room))
        self.readout.setToolTip(text)
        set_look(self.readout, "up" if rising else "down")
        self.view.update_legends()
