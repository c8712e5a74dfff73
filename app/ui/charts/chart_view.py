"""The chart's plotting surface: price and volume plots, indicator panes, crosshair, view logic.

Kept apart from ``chart_widget`` (which talks to the market and owns the controls) so this part
is pure drawing: given arrays, it shows them. All plots share one x axis, the bar index; only the
bottom one shows the time labels. The x range is the person's (pan, zoom, follow the newest bar);
every y range is fitted to what is visible, so panning through a crash never leaves the candles
off-screen. While the newest bar is in view the price scale also makes room for the open levels
(take profits, stop losses, working orders, the average cost): a take profit far above the
candles is on screen, not off it. Looking back into history, the scale fits that history, and an
open level's tag waits at the axis's edge with an arrow.

On a log scale the price plot's y is ``log10(price)`` (``PriceScale``): the candles, the studies
on price, the markers, the levels and the drawings are all drawn through the one scale.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, Qt, Signal
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QLabel

from app.market.series import KlineSeries
from app.ui.charts.axis import GridItem, PriceAxisItem, PriceScale, TimeAxisItem, tag_width
from app.ui.charts.candles import CandleItem, VolumeItem
from app.ui.charts.drawings import DrawingLayer
from app.ui.charts.indicator_panes import Study, legend_values
from app.ui.charts.level_layer import LevelLayer
from app.ui.charts.levels import Level
from app.ui.charts.markers import TradeMarkers
from app.ui.charts.style import COLORS, mono_font, qcolor

DEFAULT_BARS = 160  # bars shown after a load
RIGHT_MARGIN = 6  # empty bars right of the newest one while following
Y_PAD = 0.06  # fraction of the visible price range left above and below the candles
PRICE_STRETCH, VOLUME_STRETCH, PANE_STRETCH = 6, 1, 2
AXIS_WIDTH = 78  # the price axes' least width; wider when a tag's text needs it


class ChartView(pg.GraphicsLayoutWidget):
    """Price, volume and indicator plots on one bar-index x axis.

    Signals:
        hovered(int): the bar under the mouse, -1 when the mouse left the plots.
        following_changed(bool): whether the view tracks the newest bar.
        context_requested(float, float, QPoint): a right click on the price plot: the price and
            the x (bar index) under it, and where on the screen to open a menu.
    """

    hovered = Signal(int)
    following_changed = Signal(bool)
    context_requested = Signal(float, float, QPoint)

    def __init__(self, parent: object | None = None) -> None:
        super().__init__(parent=parent)
        self.setBackground(qcolor("background"))
        self.ci.layout.setContentsMargins(2, 2, 2, 2)
        self.ci.layout.setVerticalSpacing(0)
        self._count = 0
        self._following = True
        self._programmatic = 0
        self.high = np.zeros(0)  # in view units (the log scale's logs)
        self.low = np.zeros(0)
        self._series: KlineSeries | None = None
        self._timestamps = np.zeros(0, dtype=np.int64)
        self._bar_ms = 3_600_000
        self._hovered_bar = -1
        self._grids: dict[int, GridItem] = {}
        self._tag_texts: list[str] = []  # the axis tags' texts: how wide the axes must be
        self.price_scale = PriceScale()

        self.price_plot = self._new_plot(row=0, compact=False)
        self.volume_plot = self._new_plot(row=1, compact=True)
        self.volume_plot.setXLink(self.price_plot)
        self.panes: list[pg.PlotItem] = []
        self.studies: list[Study] = []
        self._set_stretch()

        self.candles = CandleItem()
        self.price_plot.addItem(self.candles)
        self.volume = VolumeItem()
        self.volume_plot.addItem(self.volume)
        self.markers = TradeMarkers(self.price_plot)
        self.levels = LevelLayer(self.price_plot, self.price_axis, self.price_scale)
        self.drawings = DrawingLayer(self.price_plot, self.price_scale)
        self.drawings.changed.connect(self.fit_y)
        self.note = QLabel(self)  # why there is nothing to draw, over the empty plots
        self.note.setObjectName("chartNote")
        self.note.setWordWrap(True)
        self.note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.note.setStyleSheet("background: transparent; font-size: 11pt;")
        self.note.hide()

        self._legends: dict[int, pg.TextItem] = {}
        self._vlines: dict[int, pg.InfiniteLine] = {}
        self._hlines: dict[int, pg.InfiniteLine] = {}
        for plot in self.plots:
            self._add_crosshair(plot)
        self.scene().sigMouseMoved.connect(self._mouse_moved)
        self.scene().sigMouseClicked.connect(self._mouse_clicked)
        self.price_plot.vb.sigXRangeChanged.connect(self._x_range_changed)
        self._relayout_axes()

    # -- plots --------------------------------------------------------------------------------

    @property
    def plots(self) -> list[pg.PlotItem]:
        return [self.price_plot, self.volume_plot, *self.panes]

    @property
    def price_axis(self) -> PriceAxisItem:
        return self.price_plot.getAxis("right")

    def _new_plot(self, row: int, compact: bool) -> pg.PlotItem:
        time_axis = TimeAxisItem()
        # the price plot's axis shares the view's scale (the first plot made is the price plot)
        scale = self.price_scale if row == 0 else None
        price_axis = PriceAxisItem(compact=compact, scale=scale)
        plot = self.addPlot(row=row, col=0, axisItems={"bottom": time_axis, "right": price_axis})
        plot.hideAxis("left")
        plot.showAxis("right")
        plot.hideButtons()
        plot.setMenuEnabled(False)
        grid = GridItem(plot, COLORS["grid"])
        self._grids[id(plot)] = grid
        plot.addItem(grid, ignoreBounds=True)
        plot.vb.setMouseEnabled(x=True, y=False)
        plot.vb.disableAutoRange()
        for name in ("right", "bottom"):
            plot.getAxis(name).setStyle(tickFont=mono_font(8))
        self._paint_axes(plot)
        price_axis.setWidth(self._axis_width())
        if self._count:
            time_axis.set_timestamps(self._timestamps, self._bar_ms)
        return plot

    @staticmethod
    def _paint_axes(plot: pg.PlotItem) -> None:
        for name in ("right", "bottom"):
            axis = plot.getAxis(name)
            axis.setPen(pg.mkPen(qcolor("grid")))
            axis.setTextPen(pg.mkPen(qcolor("axis")))

    def restyle(self) -> None:
        """Repaint everything in the current theme's colours (the theme changed)."""
        self.setBackground(qcolor("background"))
        pen = self._crosshair_pen()
        for plot in self.plots:
            self._paint_axes(plot)
            self._grids[id(plot)].set_color(COLORS["grid"])
            self._vlines[id(plot)].setPen(pen)
            self._hlines[id(plot)].setPen(pen)
        for item in (self.candles, self.volume):
            item.invalidate()  # its cached picture holds the old colours
        self.note.setStyleSheet(f"background: transparent; font-size: 11pt; "
                                f"color: {qcolor('muted').name()};")
        self.levels.redraw()
        self.drawings.redraw()
        self.update_legends()
        self.layout_markers()

    @staticmethod
    def _crosshair_pen() -> QPen:
        return pg.mkPen(qcolor("crosshair"), width=1, style=Qt.PenStyle.DashLine)

    def new_pane(self) -> pg.PlotItem:
        """A plot below the others for an oscillator, sharing the x axis."""
        plot = self._new_plot(row=2 + len(self.panes), compact=False)
        plot.setXLink(self.price_plot)
        self.panes.append(plot)
        self._add_crosshair(plot)
        self._set_stretch()
        self._relayout_axes()
        return plot

    def remove_pane(self, plot: pg.PlotItem) -> None:
        self.panes.remove(plot)
        self._vlines.pop(id(plot), None)
        self._grids.pop(id(plot), None)
        self._hlines.pop(id(plot), None)
        self._legends.pop(id(plot), None)
        self.ci.removeItem(plot)
        for row, pane in enumerate(self.panes, start=2):  # close the gap it left
            self.ci.removeItem(pane)
            self.ci.addItem(pane, row=row, col=0)
        self._set_stretch()
        self._relayout_axes()

    def _set_stretch(self) -> None:
        layout = self.ci.layout
        for row in range(layout.rowCount()):
            layout.setRowStretchFactor(row, 0)
        layout.setRowStretchFactor(0, PRICE_STRETCH)
        layout.setRowStretchFactor(1, VOLUME_STRETCH)
        for row in range(len(self.panes)):
            layout.setRowStretchFactor(2 + row, PANE_STRETCH)

    def update_legends(self) -> None:
        """Name the studies drawn in each plot in its top-left corner, in their line colours,
        with their values at the hovered bar (the newest when the mouse is elsewhere)."""
        bar = self._hovered_bar if 0 <= self._hovered_bar < self._count else self._count - 1
        decimals = self.price_axis.decimals
        for plot in self.plots:
            parts = []
            for study in self.studies:
                if study.plot is plot:
                    colors = [item.opts["pen"].color().name() for item in study.items.values()]
                    color = colors[0] if colors else qcolor("text").name()
                    values = legend_values(study, bar, decimals) if bar >= 0 else ""
                    parts.append(f'<span style="color:{color}">{study.label}</span>'
                                 + (f' <span style="color:{qcolor("text").name()}">'
                                    f"{values}</span>" if values else ""))
            legend = self._legends.get(id(plot))
            if legend is None:
                legend = pg.TextItem(anchor=(0, 0))
                legend.setParentItem(plot.vb)
                legend.setPos(4, 2)
                legend.setZValue(60)
                self._legends[id(plot)] = legend
            html = "&nbsp;&nbsp;".join(parts)
            if html != getattr(legend, "_kestrel_html", None):  # unchanged: no relayout
                legend._kestrel_html = html  # type: ignore[attr-defined]
                legend.setHtml(html)

    def legend_text(self, plot: pg.PlotItem) -> str:
        """The plain text of ``plot``'s legend (what a person reads there)."""
        legend = self._legends.get(id(plot))
        return legend.textItem.toPlainText() if legend is not None else ""

    def _relayout_axes(self) -> None:
        plots = self.plots
        for plot in plots:
            plot.showAxis("bottom", plot is plots[-1])

    def _add_crosshair(self, plot: pg.PlotItem) -> None:
        pen = self._crosshair_pen()
        vline = pg.InfiniteLine(angle=90, movable=False, pen=pen)
        hline = pg.InfiniteLine(angle=0, movable=False, pen=pen)
        for line in (vline, hline):
            line.setZValue(50)
            line.setVisible(False)
            plot.addItem(line, ignoreBounds=True)
        self._vlines[id(plot)] = vline
        self._hlines[id(plot)] = hline

    # -- data ---------------------------------------------------------------------------------

    def set_series(
        self, series: KlineSeries, bar_ms: int, first_changed: int, reset_view: bool
    ) -> None:
        """Show ``series``; bars before ``first_changed`` are unchanged since the last call."""
        added = len(series) - self._count
        self._count = len(series)
        self._series = series
        self._timestamps, self._bar_ms = series.timestamp_ms, bar_ms
        self._draw_candles(first_changed)
        self.volume.set_data(series.volume, series.open, series.close, first_changed)
        for plot in self.plots:
            plot.getAxis("bottom").set_timestamps(series.timestamp_ms, bar_ms)
        self.drawings.set_timeline(series.timestamp_ms, bar_ms, self.price_axis.decimals)
        count = max(self._count, 1)
        margin = max(count * 0.05, 20.0)
        self.price_plot.vb.setLimits(
            xMin=-margin, xMax=count + margin, minXRange=8, maxXRange=count + 2 * margin
        )
        if reset_view:
            self._following = True
            self.following_changed.emit(True)
            self.show_latest(DEFAULT_BARS)
        elif self._following and added > 0:
            self._shift(added)
        else:
            self.fit_y()

    def _draw_candles(self, first_changed: int) -> None:
        """The candles through the price scale (their logs on a log scale)."""
        series = self._series
        if series is None:
            return
        to_view = self.price_scale.to_view_array
        self.high, self.low = to_view(series.high), to_view(series.low)
        self.candles.set_data(to_view(series.open), self.high, self.low, to_view(series.close),
                              first_changed)

    def set_log_scale(self, log: bool) -> None:
        """Draw prices on a log scale (equal moves in percent take equal heights), or not."""
        if log == self.price_scale.log:
            return
        self.price_scale.log = log
        self.price_axis.picture = None  # its ticks are other prices now
        self._draw_candles(0)
        for study in self.studies:
            study.redraw()
        self.levels.redraw()
        self.drawings.redraw()
        self.fit_y()

    def set_levels(self, levels: list[Level]) -> None:
        """Mark ``levels`` on the price axis and across the plot; the scale makes room."""
        self.levels.set_levels(levels)
        self._tag_texts = [level.tag for level in levels]
        width = self._axis_width()
        for plot in self.plots:  # every plot's axis as wide, or their x axes would not align
            axis = plot.getAxis("right")
            if axis.width() != width:
                axis.setWidth(width)
        self.fit_y()

    def _axis_width(self) -> int:
        return max(AXIS_WIDTH, math.ceil(tag_width(self._tag_texts)))

    def show_note(self, text: str) -> None:
        """Say why the chart is empty over its plots ("" hides it)."""
        self.note.setText(text)
        self.note.setVisible(bool(text))
        self._place_note()

    def _place_note(self) -> None:
        margin = 24
        self.note.setGeometry(margin, margin, max(self.width() - 2 * margin, 50),
                              max(self.height() // 2, 60))

    def resizeEvent(self, event: Any) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if hasattr(self, "note"):  # pyqtgraph resizes once while it builds the view
            self._place_note()

    def set_decimals(self, decimals: int) -> None:
        self.price_axis.set_decimals(decimals)

    @property
    def bar_count(self) -> int:
        return self._count

    # -- view ---------------------------------------------------------------------------------

    @property
    def following(self) -> bool:
        return self._following

    def visible_bars(self) -> tuple[int, int]:
        """First and last bar index inside the view (clamped to the data)."""
        (x0, x1), _ = self.price_plot.vb.viewRange()
        last = max(self._count - 1, 0)
        return min(max(math.ceil(x0), 0), last), min(max(math.floor(x1), 0), last)

    def show_latest(self, bars: int | None = None) -> None:
        """Scroll so the newest bar sits near the right edge and track it from now on."""
        (x0, x1), _ = self.price_plot.vb.viewRange()
        width = float(bars) if bars is not None else x1 - x0
        if width <= 8:
            width = DEFAULT_BARS
        right = self._count - 1 + RIGHT_MARGIN
        self._set_x(right - width, right)
        if not self._following:
            self._following = True
            self.following_changed.emit(True)

    def _shift(self, bars: int) -> None:
        (x0, x1), _ = self.price_plot.vb.viewRange()
        self._set_x(x0 + bars, x1 + bars)

    def _set_x(self, x0: float, x1: float) -> None:
        self._programmatic += 1
        try:
            self.price_plot.vb.setXRange(x0, x1, padding=0)
        finally:
            self._programmatic -= 1
        self.fit_y()

    def _x_range_changed(self, _vb: object, x_range: tuple[float, float]) -> None:
        if not self._programmatic and self._count:
            following = x_range[1] >= self._count - 1
            if following != self._following:
                self._following = following
                self.following_changed.emit(following)
        self.fit_y()

    def fit_y(self) -> None:
        """Fit every plot's y range to the bars in view (the person only moves x); with the
        newest bar in view, the price plot's also to the open levels."""
        if self._count == 0:
            return
        lo, hi = self.visible_bars()
        ranges = [self.candles.y_range(lo, hi)]
        ranges += [s.y_range(lo, hi) for s in self.studies if s.on_price]
        if hi >= self._count - 1:
            for price in self.levels.range_prices():
                y = self.price_scale.to_view(price)
                if math.isfinite(y):
                    ranges.append((y, y))
        found = [r for r in ranges if r is not None and all(map(math.isfinite, r))]
        if found:
            low, high = min(r[0] for r in found), max(r[1] for r in found)
            pad = max((high - low) * Y_PAD, abs(high) * 1e-6, 1e-9)
            self.price_plot.vb.setYRange(low - pad, high + pad, padding=0)
        volume = self.volume.y_range(lo, hi)
        if volume is not None:
            self.volume_plot.vb.setYRange(0.0, max(volume[1] * 1.08, 1e-9), padding=0)
        for study in self.studies:
            if study.on_price:
                continue
            wanted = study.y_range(lo, hi)
            if wanted is not None:
                pad = max((wanted[1] - wanted[0]) * 0.08, 1e-9)
                study.plot.vb.setYRange(wanted[0] - pad, wanted[1] + pad, padding=0)
        self.layout_markers()

    def layout_markers(self) -> None:
        if not self.markers.markers and not self.markers.marker_positions():
            return
        vb = self.price_plot.vb
        (_, _), (y0, y1) = vb.viewRange()
        pixel_height = (y1 - y0) / max(float(vb.height()), 1.0)
        self.markers.layout(self.high, self.low, pixel_height, self.price_scale.to_view)

    # -- crosshair ----------------------------------------------------------------------------

    def _mouse_moved(self, scene_pos: QPointF) -> None:
        hovered = None
        for plot in self.plots:
            if plot.vb.sceneBoundingRect().contains(scene_pos):
                hovered = plot
                break
        if hovered is None or self._count == 0:
            self.hide_crosshair()
            return
        point = hovered.vb.mapSceneToView(scene_pos)
        bar = min(max(round(point.x()), 0), self._count - 1)
        for plot in self.plots:
            self._vlines[id(plot)].setPos(bar)
            self._vlines[id(plot)].setVisible(True)
            self._hlines[id(plot)].setVisible(plot is hovered)
            plot.getAxis("right").set_cursor(point.y() if plot is hovered else None)
        self._hlines[id(hovered)].setPos(point.y())
        self.plots[-1].getAxis("bottom").set_cursor(bar)
        if hovered is self.price_plot:
            self.drawings.hover(point.x(), point.y())
        if bar != self._hovered_bar:
            self._hovered_bar = bar
            self.update_legends()
        self.hovered.emit(bar)

    def hide_crosshair(self) -> None:
        for line in (*self._vlines.values(), *self._hlines.values()):
            line.setVisible(False)
        for plot in self.plots:
            plot.getAxis("right").set_cursor(None)
            plot.getAxis("bottom").set_cursor(None)
        if self._hovered_bar != -1:
            self._hovered_bar = -1
            self.update_legends()
        self.hovered.emit(-1)

    def leaveEvent(self, event: object) -> None:  # noqa: N802 - Qt's name
        self.hide_crosshair()
        super().leaveEvent(event)

    # -- clicks ---------------------------------------------------------------------------------

    def _mouse_clicked(self, event: Any) -> None:
        """A left click places a drawing being placed; a right click asks for the chart's menu
        (``context_requested``) at the price under it."""
        vb = self.price_plot.vb
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        point = vb.mapSceneToView(event.scenePos())
        if event.button() == Qt.MouseButton.LeftButton and self.drawings.placing:
            event.accept()
            self.drawings.click(point.x(), point.y())
        elif event.button() == Qt.MouseButton.RightButton and not event.isAccepted():
            event.accept()
            self.context_requested.emit(self.price_scale.from_view(point.y()), point.x(),
                                        event.screenPos().toPoint())

    def view_point_on_screen(self, x: float, price: float) -> QPoint:
        """The viewport pixel of bar ``x`` at ``price`` (tests and menus place themselves)."""
        scene = self.price_plot.vb.mapViewToScene(QPointF(x, self.price_scale.to_view(price)))
        return self.mapFromScene(scene)
