"""Axes for the candle chart: bar-index time axis and right-hand price/volume axes.

The chart's x coordinate is the bar index, not the time (finplot's trick): candles sit one unit
apart with no weekend or data gaps, and every item can slice its arrays by index. The time axis
turns indices back into UTC times, placing ticks where a calendar boundary (hour, day, month,
year) falls between two bars, so labels land on round times whatever the zoom.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF
from PySide6.QtGui import QPainter

from app.ui.charts.style import format_compact, format_price

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
    """A right-hand axis printing prices with thousands separators, or volumes compactly."""

    def __init__(self, orientation: str = "right", compact: bool = False, **kwargs: object):
        super().__init__(orientation, **kwargs)
        self._decimals = 2
        self._compact = compact

    def set_decimals(self, decimals: int) -> None:
        self._decimals = decimals
        self.picture = None
        self.update()

    def tickStrings(  # noqa: N802 - pyqtgraph's name
        self, values: list[float], scale: float, spacing: float
    ) -> list[str]:
        if self._compact:
            return [format_compact(v * scale) for v in values]
        needed = max(0, -math.floor(math.log10(spacing * scale))) if spacing > 0 else 0
        decimals = min(max(needed, 0), max(self._decimals, 0))
        return [format_price(v * scale, decimals) for v in values]


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
