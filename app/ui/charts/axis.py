"""Axes for the candle chart: bar-index time axis and right-hand price/volume axes.

The chart's x coordinate is the bar index, not the time (finplot's trick): candles sit one unit
apart with no weekend or data gaps, and every item can slice its arrays by index. The time axis
turns indices back into UTC times, placing ticks where a calendar boundary (hour, day, month,
year) falls between two bars, so labels land on round times whatever the zoom.

Both axes also carry what a trading chart reads off its edges: the crosshair's price and time in a
box where the mouse is, and on the price axis a tag per marked price (``app.ui.charts.levels``).
The tags are painted over the axis's cached picture on every repaint, so a moving crosshair or a
new last price repaints a strip of pixels, never the ticks. On a log scale the price plot's y is
``log10(price)`` (``PriceScale``); the price axis then puts its ticks on round prices.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetricsF, QPainter, QPainterPath, QPen

from app.ui.charts.levels import spread
from app.ui.charts.style import format_compact, format_price, mono_font, qcolor

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
#: Fixed tick steps in milliseconds; calendar steps (months, years) follow them.
FIXED_STEPS = (
    MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
    HOUR, 2 * HOUR, 3 * HOUR, 4 * HOUR, 6 * HOUR, 12 * HOUR, DAY, 2 * DAY, 7 * DAY, 14 * DAY,
)
MONTH_STEPS = (1, 2, 3, 6, 12, 24, 60, 120)  # in months; 12 and up are year ticks
PIXELS_PER_LABEL = 110
MAX_TICKS = 40
TAG_POINT_SIZE = 8
#: Round mantissas a log scale's ticks may sit on (1,000, 1,500, 2,000 ... 9,000, 10,000).
LOG_MANTISSAS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
LOG_TICK_GAP_PX = 28


class PriceScale:
    """How prices map to the price plot's y: as they are, or as ``log10(price)`` (log scale).

    One instance is shared by the chart's view, its price axis and everything drawn on prices,
    so a toggle changes them all at once.
    """

    def __init__(self, log: bool = False) -> None:
        self.log = log

    def to_view(self, price: float) -> float:
        if not self.log:
            return float(price)
        return math.log10(price) if price > 0 else math.nan

    def to_view_array(self, prices: np.ndarray) -> np.ndarray:
        if not self.log:
            return prices
        out = np.full(len(prices), np.nan)
        positive = prices > 0
        out[positive] = np.log10(prices[positive])
        return out

    def from_view(self, y: float) -> float:
        return float(10.0 ** y) if self.log else float(y)


@dataclass(frozen=True, slots=True)
class AxisTag:
    """A tag on the price axis: ``price`` in prices (not view units), drawn in ``color``."""

    key: str
    price: float
    text: str
    color: QColor
    movable: bool = False
    tooltip: str = ""


def log_tick_prices(low: float, high: float, pixels: float) -> list[float]:
    """Round prices between ``low`` and ``high`` for a log scale ``pixels`` tall, at least
    ``LOG_TICK_GAP_PX`` apart; empty when the range holds fewer than three (then a linear
    choice of round prices reads better: over a narrow range log and linear hardly differ)."""
    if low <= 0 or high <= low or pixels <= 0:
        return []
    per_decade = pixels / (math.log10(high) - math.log10(low))
    kept: list[float] = []
    for exponent in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1):
        for mantissa in LOG_MANTISSAS:
            value = mantissa * 10.0 ** exponent
            if not low <= value <= high:
                continue
            if kept and (math.log10(value) - math.log10(kept[-1])) * per_decade < LOG_TICK_GAP_PX:
                continue
            kept.append(value)
    return kept if len(kept) >= 3 else []


def _tag_font_metrics() -> QFontMetricsF:
    return QFontMetricsF(mono_font(TAG_POINT_SIZE))


def tag_width(texts: Sequence[str]) -> float:
    """The axis width the longest of ``texts`` needs as a tag (its arrow and margins too)."""
    metrics = _tag_font_metrics()
    return max((metrics.horizontalAdvance("▲" + text) for text in texts), default=0.0) + 14.0


def _contrast(color: QColor) -> QColor:
    """Black or white, whichever reads on ``color``."""
    luma = 0.299 * color.redF() + 0.587 * color.greenF() + 0.114 * color.blueF()
    return QColor("#101010") if luma > 0.55 else QColor("#ffffff")


def _paint_box(painter: QPainter, rect: QRectF, text: str, fill: QColor, notch: str) -> None:
    """A filled box with centred text; ``notch``: ``left`` points it at a price line."""
    path = QPainterPath()
    path.addRoundedRect(rect, 2, 2)
    if notch == "left":
        tip = QPainterPath()
        middle = rect.center().y()
        tip.moveTo(rect.left() - 4, middle)
        tip.lineTo(rect.left() + 1, middle - 4)
        tip.lineTo(rect.left() + 1, middle + 4)
        tip.closeSubpath()
        path = path.united(tip)
    painter.fillPath(path, fill)
    painter.setPen(QPen(_contrast(fill)))
    painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), text)


def index_to_ms(timestamps: np.ndarray, bar_ms: int, indices: np.ndarray) -> np.ndarray:
    """Open times of bar ``indices``; outside the data they are extrapolated one bar apart."""
    count = len(timestamps)
    idx = np.asarray(indices, dtype=np.int64)
    inside = np.clip(idx, 0, count - 1)
    out = timestamps[inside].astype(np.int64)
    out = out + (idx - inside) * int(bar_ms)
    return out


class TimeAxisItem(pg.AxisItem):
    """A bottom axis labelling bar indices with UTC times at calendar boundaries."""

    def __init__(self, orientation: str = "bottom", **kwargs: object) -> None:
        super().__init__(orientation, **kwargs)
        self._timestamps = np.zeros(0, dtype=np.int64)
        self._bar_ms = HOUR
        self._step: tuple[str, int] = ("ms", HOUR)
        self._cached: tuple[tuple[int, ...], list[tuple[float, list[float]]]] | None = None
        self.cursor: int | None = None  # the crosshair's bar, labelled in a box

    def set_cursor(self, index: int | None) -> None:
        """Label bar ``index`` (the crosshair's) on the axis; None: no label."""
        if index != self.cursor:
            self.cursor = index
            self.update()

    def cursor_text(self) -> str:
        """The crosshair's time as the box shows it (minutes only where bars are shorter
        than a day)."""
        if self.cursor is None or len(self._timestamps) == 0:
            return ""
        ms = int(index_to_ms(self._timestamps, self._bar_ms, np.array([self.cursor]))[0])
        when = datetime.fromtimestamp(ms / 1000, tz=UTC)
        return when.strftime("%a %d %b %Y" if self._bar_ms >= DAY else "%a %d %b %Y %H:%M")

    def paint(self, painter: QPainter, *args: object) -> None:
        super().paint(painter, *args)
        text = self.cursor_text()
        view = self.linkedView()
        if not text or view is None or not self.isVisible():
            return
        painter.setFont(mono_font(TAG_POINT_SIZE))
        metrics = _tag_font_metrics()
        width = metrics.horizontalAdvance(text) + 12
        x = self.mapFromScene(view.mapViewToScene(QPointF(float(self.cursor or 0), 0))).x()
        x = min(max(x - width / 2, 0.0), max(self.width() - width, 0.0))
        rect = QRectF(x, 1, width, metrics.height() + 4)
        _paint_box(painter, rect, text, qcolor("crosshair"), "")

    def set_timestamps(self, timestamps: np.ndarray, bar_ms: int) -> None:
        self._timestamps = timestamps
        self._bar_ms = int(bar_ms)
        self._cached = None
        self.picture = None  # AxisItem's own cache of drawn ticks
        self.update()

    def tickValues(  # noqa: N802 - pyqtgraph's name
        self, minVal: float, maxVal: float, size: float  # noqa: N803
    ) -> list[tuple[float, list[float]]]:
        count = len(self._timestamps)
        if count == 0 or not (math.isfinite(minVal) and math.isfinite(maxVal)):
            return []
        first, last = max(math.ceil(minVal), 0), min(math.floor(maxVal), count - 1)
        if last < first:
            return []
        key = (first, last, round(size), count, int(self._timestamps[-1]))
        if self._cached is not None and self._cached[0] == key:  # the grid asks too
            return self._cached[1]
        start, end = int(self._timestamps[first]), int(self._timestamps[last])
        wanted = max(size / PIXELS_PER_LABEL, 2.0)
        kind, step = self._choose_step(float(end - start) / wanted)
        self._step = (kind, step)
        bounds = self._boundaries(start, end, kind, step)
        # the first bar at or after each boundary (sorted times: a binary search, not a scan)
        ticks = np.unique(np.searchsorted(self._timestamps, bounds, side="left"))
        ticks = ticks[(ticks >= first) & (ticks <= last)]
        if len(ticks) > MAX_TICKS:  # gaps in the data can crowd boundaries together
            ticks = ticks[:: math.ceil(len(ticks) / MAX_TICKS)]
        spacing = max(float(last - first) / max(len(ticks), 1), 1.0)
        result = [(spacing, [float(t) for t in ticks])]
        self._cached = (key, result)
        return result

    def _choose_step(self, target_ms: float) -> tuple[str, int]:
        floor_ms = max(target_ms, float(self._bar_ms))
        for step in FIXED_STEPS:
            if step >= floor_ms:
                return "ms", step
        for months in MONTH_STEPS:
            if months * 30 * DAY >= floor_ms:
                return "month", months
        return "month", MONTH_STEPS[-1]

    @staticmethod
    def _boundaries(start: int, end: int, kind: str, step: int) -> np.ndarray:
        """Calendar boundaries in ``[start, end]``: multiples of ``step`` ms or months."""
        if kind == "ms":
            return np.arange(-(-start // step) * step, end + 1, step, dtype=np.int64)
        month0 = int(np.datetime64(start, "ms").astype("datetime64[M]").astype(np.int64))
        month1 = int(np.datetime64(end, "ms").astype("datetime64[M]").astype(np.int64))
        months = np.arange((month0 // step) * step, month1 + 1, step)
        bounds = months.astype("datetime64[M]").astype("datetime64[ms]").astype(np.int64)
        return bounds[(bounds >= start) & (bounds <= end)]

    def tickStrings(  # noqa: N802 - pyqtgraph's name
        self, values: list[float], scale: float, spacing: float
    ) -> list[str]:
        if len(self._timestamps) == 0:
            return ["" for _ in values]
        times = index_to_ms(self._timestamps, self._bar_ms, np.round(values).astype(np.int64))
        return [self._label(int(ms)) for ms in times]

    def _label(self, ms: int) -> str:
        when = datetime.fromtimestamp(ms / 1000, tz=UTC)
        kind, step = self._step
        if kind == "month":
            if step >= 12 or when.month == 1:
                return when.strftime("%Y")
            return when.strftime("%b")
        if step >= DAY:
            if when.day == 1:
                return when.strftime("%b") if when.month != 1 else when.strftime("%Y")
            return when.strftime("%d %b")
        if when.hour == 0 and when.minute == 0:
            return when.strftime("%d %b")
        return when.strftime("%H:%M")

    def label_for_index(self, index: int) -> str:
        """Full UTC date and time of bar ``index``, for the crosshair readout."""
        if len(self._timestamps) == 0:
            return ""
        ms = int(index_to_ms(self._timestamps, self._bar_ms, np.array([index]))[0])
        return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


class PriceAxisItem(pg.AxisItem):
    """A right-hand axis printing prices with thousands separators, or volumes compactly; with
    the crosshair's value in a box, and (the price plot's) a tag per marked price.

    Signals:
        tag_dragged(str, float, bool): a movable tag is being dragged: its key, the price under
            the mouse, and whether it was dropped there (the drag finished).
    """

    tag_dragged = Signal(str, float, bool)

    def __init__(
        self, orientation: str = "right", compact: bool = False,
        scale: PriceScale | None = None, **kwargs: object,
    ) -> None:
        super().__init__(orientation, **kwargs)
        self._decimals = 2
        self._compact = compact
        self.price_scale = scale if scale is not None else PriceScale()
        self.tags: list[AxisTag] = []
        self.tag_rects: dict[str, QRectF] = {}  # where each tag was last painted (hit tests)
        self.cursor: float | None = None  # the crosshair's y, in view units
        self._dragging: str | None = None
        self.setAcceptHoverEvents(True)

    def set_decimals(self, decimals: int) -> None:
        self._decimals = decimals
        self.picture = None
        self.update()

    @property
    def decimals(self) -> int:
        return self._decimals

    def set_tags(self, tags: Sequence[AxisTag]) -> None:
        self.tags = list(tags)
        self.update()

    def set_cursor(self, y: float | None) -> None:
        """Show the crosshair's value at view ``y`` in a box; None: none."""
        if y != self.cursor:
            self.cursor = y
            self.update()

    def format_value(self, y: float) -> str:
        """View ``y`` as this axis prints a value there (a price, a volume, an indicator's)."""
        value = self.price_scale.from_view(y)
        if self._compact:
            return format_compact(value)
        return format_price(value, self._decimals)

    # -- ticks ----------------------------------------------------------------------------------

    def tickValues(  # noqa: N802 - pyqtgraph's name
        self, minVal: float, maxVal: float, size: float  # noqa: N803
    ) -> list[tuple[float, list[float]]]:
        if self.price_scale.log and math.isfinite(minVal) and math.isfinite(maxVal):
            scale = self.price_scale
            low, high = sorted((scale.from_view(minVal), scale.from_view(maxVal)))
            prices = log_tick_prices(low, high, size)
            if not prices:  # narrow: round prices, linearly spaced
                levels = super().tickValues(low, high, size)
                prices = [v for _spacing, values in levels[:2] for v in values]
            ticks = sorted({self.price_scale.to_view(p) for p in prices})
            return [(1.0, ticks)]
        return super().tickValues(minVal, maxVal, size)

    def tickStrings(  # noqa: N802 - pyqtgraph's name
        self, values: list[float], scale: float, spacing: float
    ) -> list[str]:
        if self._compact:
            return [format_compact(v * scale) for v in values]
        if self.price_scale.log:
            out = []
            for value in values:
                price = self.price_scale.from_view(value)
                needed = max(0, 1 - math.floor(math.log10(price))) if price > 0 else 0
                out.append(format_price(price, min(needed, max(self._decimals, 0))))
            return out
        needed = max(0, -math.floor(math.log10(spacing * scale))) if spacing > 0 else 0
        decimals = min(max(needed, 0), max(self._decimals, 0))
        return [format_price(v * scale, decimals) for v in values]

    # -- tags -----------------------------------------------------------------------------------

    def _local_y(self, view_y: float) -> float | None:
        view = self.linkedView()
        if view is None or not math.isfinite(view_y):
            return None
        return self.mapFromScene(view.mapViewToScene(QPointF(0.0, view_y))).y()

    def paint(self, painter: QPainter, *args: object) -> None:
        super().paint(painter, *args)
        self.tag_rects = {}
        if not self.isVisible() or (not self.tags and self.cursor is None):
            return
        painter.setFont(mono_font(TAG_POINT_SIZE))
        metrics = _tag_font_metrics()
        height = metrics.height() + 3
        top, bottom = 0.0, float(self.height())
        width = float(self.width()) - 5
        wanted: list[float] = []
        shown: list[tuple[AxisTag, str]] = []
        for tag in self.tags:
            y = self._local_y(self.price_scale.to_view(tag.price))
            if y is None:
                continue
            text = tag.text
            if y < top:  # off the scale: pinned at the edge (by ``spread``), the arrow says
                text = "▲" + text  # which way; pinned tags keep the order of their prices
            elif y > bottom:
                text = "▼" + text
            wanted.append(y)
            shown.append((tag, text))
        for (tag, text), centre in zip(shown, spread(wanted, height, top, bottom), strict=True):
            rect = QRectF(5.0, centre - height / 2, width, height)
            _paint_box(painter, rect, text, tag.color, "left")
            self.tag_rects[tag.key] = rect
        if self.cursor is not None:
            y = self._local_y(self.cursor)
            if y is not None and top <= y <= bottom:
                rect = QRectF(5.0, y - height / 2, width, height)
                _paint_box(painter, rect, self.format_value(self.cursor), qcolor("crosshair"),
                           "left")

    def tag_at(self, pos: QPointF) -> AxisTag | None:
        """The tag painted at ``pos`` (item coordinates), the topmost first."""
        for tag in reversed(self.tags):
            rect = self.tag_rects.get(tag.key)
            if rect is not None and rect.contains(pos):
                return tag
        return None

    def hoverEvent(self, event: Any) -> None:  # noqa: N802 - pyqtgraph's name
        tag = None if event.isExit() else self.tag_at(event.pos())
        if tag is not None and tag.movable:
            event.acceptDrags(Qt.MouseButton.LeftButton)
            self.setCursor(Qt.CursorShape.SizeVerCursor)
        else:
            self.unsetCursor()
        self.setToolTip(tag.tooltip if tag is not None else "")

    def mouseDragEvent(self, event: Any) -> None:  # noqa: N802 - pyqtgraph's name
        """A movable tag follows the mouse and is dropped where the button is released; any
        other drag is the axis's own."""
        view = self.linkedView()
        if view is not None and event.button() == Qt.MouseButton.LeftButton:
            if event.isStart():
                tag = self.tag_at(event.buttonDownPos())
                self._dragging = tag.key if tag is not None and tag.movable else None
            if self._dragging is not None:
                event.accept()
                y = view.mapSceneToView(event.scenePos()).y()
                finished = bool(event.isFinish())
                key = self._dragging
                if finished:
                    self._dragging = None
                self.tag_dragged.emit(key, self.price_scale.from_view(y), finished)
                return
        super().mouseDragEvent(event)


class GridItem(pg.GraphicsObject):
    """Grid lines at the major ticks of a plot's bottom and right axes.

    pyqtgraph's own grid is drawn by each axis as part of its picture, which with two axes per
    plot cost most of a frame in the benchmark; a few cosmetic lines drawn here cost almost
    nothing.
    """

    def __init__(self, plot: pg.PlotItem, color: str) -> None:
        super().__init__()
        self._plot = plot
        self.set_color(color)
        self.setZValue(-100)
        self.setFlag(self.GraphicsItemFlag.ItemIgnoresParentOpacity)

    def set_color(self, color: str) -> None:
        self._pen = pg.mkPen(color, width=1)
        self._pen.setCosmetic(True)
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        view = self.viewRect()
        return QRectF() if view is None else view

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph's name
        self.prepareGeometryChange()

    def paint(self, painter: QPainter, *args: object) -> None:
        view = self.viewRect()
        vb = self._plot.vb
        if view is None or view.width() <= 0 or view.height() <= 0:
            return
        painter.setPen(self._pen)
        lines: list[QLineF] = []
        bottom = self._plot.getAxis("bottom")
        for _spacing, values in bottom.tickValues(view.left(), view.right(), vb.width())[:1]:
            lines += [QLineF(x, view.top(), x, view.bottom()) for x in values]
        right = self._plot.getAxis("right")
        for _spacing, values in right.tickValues(view.top(), view.bottom(), vb.height())[:1]:
            lines += [QLineF(view.left(), y, view.right(), y) for y in values]
        painter.drawLines(lines)
