"""The candlestick chart panel: symbol/interval pickers, indicators, trades, live updates.

It reads candles only through the ``MarketData`` port, so the same panel charts a replay, a
backtest or a live exchange. Live data arrives as calls to ``on_clock_advanced`` (the main window
makes one per replay step or tick); they are batched on a timer (``redraw_hz``, 2-10 per second)
into one re-read of the series, so a replay at 600x or a burst of ticks costs a few redraws a
second, not one per tick. A re-read keeps everything that did not change: the forming bar is
updated in place, new bars are appended, and the view follows the newest bar unless the person
has scrolled away (then "Latest" or the End key brings it back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent, QKeySequence, QResizeEvent, QShortcut
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.domain.market import interval_ms
from app.domain.trading import Fill, Order, Position
from app.indicators.catalogue import default_catalogue
from app.indicators.model import Catalogue, bind_params
from app.market.port import MarketData
from app.market.series import KlineSeries
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
from app.ui.charts.markers import build_markers, position_lines
from app.ui.charts.style import mono_font
from app.ui.panels.tasks import REDRAWS, TaskSet
from app.ui.theme import set_look

PREFERRED_INTERVALS = ("1h", "4h", "1d")


class ChartWidget(QWidget):
    """A candlestick chart of one symbol and interval from a ``MarketData``.

    Args:
        market: where candles come from.
        symbol, interval: what to show first (default: the first symbol, 1h if it has it).
        catalogue: the indicators offered (default: the whole catalogue).
        redraw_hz: the most live re-reads per second (clamped to 2-10).
    """

    def __init__(
        self,
        market: MarketData,
        *,
        symbol: str | None = None,
        interval: str | None = None,
        catalogue: Catalogue | None = None,
        redraw_hz: float = 5.0,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._market = market
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
        self._build_controls()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self._toolbar)
        layout.addWidget(self.readout)
        layout.addWidget(self.view, 1)

        self._throttle = QTimer(self)
        self._throttle.setSingleShot(True)
        self._throttle.setInterval(int(1000 / min(max(redraw_hz, 2.0), 10.0)))
        self._throttle.timeout.connect(self._throttle_fired)
        follow = QShortcut(QKeySequence(Qt.Key.Key_End), self, self.follow_latest)
        follow.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)

        self._fill_symbols(symbol, interval)

    # -- controls -----------------------------------------------------------------------------

    def _build_controls(self) -> None:
        self._toolbar = QWidget(self)
        bar = QHBoxLayout(self._toolbar)
        bar.setContentsMargins(4, 2, 4, 2)
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
        self._studies_bar = QHBoxLayout()
        self._studies_bar.setSpacing(2)
        self.follow_button = QToolButton(self._toolbar)
        self.follow_button.setText("Latest ⇥")
        self.follow_button.setToolTip("Follow the newest bar (End)")
        self.follow_button.setEnabled(False)
        self.follow_button.clicked.connect(self.follow_latest)
        for widget in (self.symbol_box, self.interval_box, self.indicator_button):
            bar.addWidget(widget)
        bar.addLayout(self._studies_bar)
        bar.addStretch(1)
        bar.addWidget(self.follow_button)
        self.symbol_box.currentTextChanged.connect(self._symbol_picked)
        self.interval_box.currentTextChanged.connect(self._interval_picked)
        self.readout = QLabel(self)
        self.readout.setFont(mono_font(9))
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setContentsMargins(6, 0, 6, 0)
        # a long readout must not widen the window: it goes on a second line instead
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

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
        self._tasks.spawn(self.load())

    def _interval_picked(self, _text: str) -> None:
        self._tasks.spawn(self.load())

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
        elif interval is not None and interval != self.interval:
            self.interval_box.blockSignals(True)
            self.interval_box.setCurrentText(interval)
            self.interval_box.blockSignals(False)
        self._generation += 1
        async with self._lock:
            symbol, interval = self.symbol, self.interval
            series = await self._market.series(symbol, interval)
            self._decimals = self._market.price_decimals(symbol)
            self.view.set_decimals(self._decimals)
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
        if grew or reset:  # markers sit on bars: place them on the bars now shown
            self._trades_changed()
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
        self.studies[study.label] = study
        self.view.studies.append(study)
        self._add_study_button(study)
        self.view.update_legends()
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

    def _add_study_button(self, study: Study) -> None:
        button = QToolButton(self._toolbar)
        button.setText(f"{study.label} ✕")
        button.setToolTip(f"Remove {study.label}")
        button.clicked.connect(lambda _=False, label=study.label: self.remove_indicator(label))
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
        """Draw each open position's entry and its open take-profit / stop-loss orders."""
        self._positions, self._open_orders = tuple(positions), tuple(orders)
        self.view.markers.set_lines(
            position_lines(self.symbol, self._positions, self._open_orders, self._decimals)
        )

    def _trades_changed(self) -> None:
        series = self._series
        if series is None:
            return
        self.view.markers.set_markers(
            build_markers(self.symbol, self._fills, self._orders, series.timestamp_ms,
                          self._decimals)
        )
        self.view.markers.set_lines(
            position_lines(self.symbol, self._positions, self._open_orders, self._decimals)
        )
        self.view.layout_markers()

    # -- view ---------------------------------------------------------------------------------

    def restyle(self) -> None:
        """Redraw candles, axes, markers and lines in the current theme (it changed)."""
        self.view.restyle()
        self._trades_changed()

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
