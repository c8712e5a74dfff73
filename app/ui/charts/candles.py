"""Candle and volume items that stay cheap at 100,000 bars (finplot's tricks, in ~300 lines).

Each item paints a cached ``QPicture`` covering about three times the visible bars and replays it
on every repaint; a pan or a zoom inside that span costs one picture replay, not a rebuild. The
picture is rebuilt only when the data under it changed, when the view leaves the cached span, or
when the zoom changes how many bars share a pixel column. Only the cached slice is drawn, and
when more than one bar falls on a pixel column the bars are merged into one OHLC column per
power-of-two bucket (aligned to bar indices, so panning never shifts bucket edges): a fully
zoomed-out chart of 100,000 candles draws about as many columns as the view has pixels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QBrush, QPainter, QPainterPath, QPen, QPicture

from app.ui.charts.style import qcolor

#: Bodies are drawn once a bar is at least this many pixels wide; below, only the high-low line.
BODY_MIN_PIXELS = 3.0
BODY_WIDTH = 0.8  # of a bar
#: The picture is rebuilt when it covers more than this many view widths (after a zoom in).
MAX_SPAN_FACTOR = 7.0


@dataclass(frozen=True, slots=True)
class RenderKey:
    """What a cached picture was drawn for: the bar span, bucket size and body mode."""

    lo: int
    hi: int
    bucket: int
    bodies: bool


def bucket_size(bars_visible: float, width_px: float) -> int:
    """Bars merged per drawn column: 1 while a bar has a pixel, else the power of two above."""
    if width_px <= 0:
        return 1
    per_pixel = bars_visible / width_px
    if per_pixel <= 1.0:
        return 1
    return 1 << math.ceil(math.log2(per_pixel))


def aggregate(
    lo: int, hi: int, bucket: int, *columns: tuple[np.ndarray, str]
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Merge bars ``lo..hi`` (inclusive) into buckets aligned to multiples of ``bucket``.

    Args:
        columns: (array, how) with how one of ``first``, ``last``, ``max``, ``min``.

    Returns:
        The centre x of each bucket and the merged arrays, in the order given.
    """
    start = (lo // bucket) * bucket
    starts = np.arange(start, hi + 1, bucket)
    offsets = np.maximum(starts, lo) - lo
    ends = np.minimum(starts + bucket, hi + 1)
    merged: list[np.ndarray] = []
    for values, how in columns:
        part = values[lo : hi + 1]
        if how == "first":
            merged.append(part[offsets])
        elif how == "last":
            merged.append(part[ends - 1 - lo])
        elif how == "max":
            merged.append(np.maximum.reduceat(part, offsets))
        else:
            merged.append(np.minimum.reduceat(part, offsets))
    centres = (np.maximum(starts, lo) + ends - 1) / 2.0
    return centres.astype(float), merged


def _segments(x: np.ndarray, y0: np.ndarray, y1: np.ndarray) -> QPainterPath:
    """Vertical segments (x, y0)-(x, y1) as one path."""
    xs = np.repeat(x, 2)
    ys = np.empty(len(x) * 2)
    ys[0::2], ys[1::2] = y0, y1
    return pg.arrayToQPath(xs, ys, connect="pairs", finiteCheck=False)


def _rects(x: np.ndarray, y0: np.ndarray, y1: np.ndarray, half: float) -> QPainterPath:
    """Rectangles centred on x spanning y0..y1, as closed sub-paths of one path."""
    count = len(x)
    xs = np.empty(count * 4)
    ys = np.empty(count * 4)
    xs[0::4], xs[1::4], xs[2::4], xs[3::4] = x - half, x + half, x + half, x - half
    ys[0::4], ys[1::4], ys[2::4], ys[3::4] = y0, y0, y1, y1
    connect = np.ones(count * 4, dtype=np.int32)
    connect[3::4] = 0
    return pg.arrayToQPath(xs, ys, connect=connect, finiteCheck=False)


class SpanCachedItem(pg.GraphicsObject):
    """Base of the bar items: the picture cache and the visible-span logic.

    Subclasses hold their arrays and implement ``_draw`` for a bar span and bucket size.
    """

    def __init__(self) -> None:
        super().__init__()
        self._count = 0
        self._bounds = QRectF()
        self._picture: QPicture | None = None
        self._key: RenderKey | None = None
        self.render_count = 0  # how often the picture was rebuilt (tests, benchmark)
        self.drawn_columns = 0  # columns in the current picture

    # -- data ---------------------------------------------------------------------------------

    def _data_changed(self, count: int, y_min: float, y_max: float, first_changed: int) -> None:
        """Record new data; keep the picture unless the changed bars fall inside its span."""
        self._count = count
        if not (math.isfinite(y_min) and math.isfinite(y_max)):
            y_min, y_max = 0.0, 1.0
        bounds = QRectF(-0.5, y_min, max(count, 1), max(y_max - y_min, 1e-12))
        if bounds != self._bounds:
            self.prepareGeometryChange()
            self._bounds = bounds
        if self._key is not None and first_changed <= self._key.hi:
            self._key = None
        self.update()

    def invalidate(self) -> None:
        """Drop the cached picture (colours changed, for example)."""
        self._key = None
        self.update()

    @property
    def cached_span(self) -> tuple[int, int] | None:
        return None if self._key is None else (self._key.lo, self._key.hi)

    @property
    def bucket(self) -> int:
        return 1 if self._key is None else self._key.bucket

    # -- Qt -----------------------------------------------------------------------------------

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return QRectF(self._bounds)

    def paint(self, painter: QPainter, *args: object) -> None:
        if self._count == 0:
            return
        wanted = self._wanted()
        if wanted is None:
            return
        key, visible_lo, visible_hi = wanted
        if self._needs_render(key, visible_lo, visible_hi):
            self._render(key)
        if self._picture is not None:
            painter.drawPicture(0, 0, self._picture)

    def _wanted(self) -> tuple[RenderKey, int, int] | None:
        """The picture the current view would want, and the bars actually in view."""
        view = self.viewRect()
        vb = self.getViewBox()
        if view is None or vb is None:
            return None
        x0, x1 = view.left(), view.right()
        width_bars = max(x1 - x0, 1.0)
        width_px = max(float(vb.width()), 1.0)
        bucket = bucket_size(width_bars, width_px)
        bodies = bucket == 1 and width_px / width_bars >= BODY_MIN_PIXELS
        last = self._count - 1
        visible_lo = min(max(int(math.floor(x0)), 0), last)
        visible_hi = max(min(int(math.ceil(x1)), last), visible_lo)
        lo = max(int(math.floor(x0 - width_bars)), 0)
        hi = max(min(int(math.ceil(x1 + width_bars)), last), lo)
        return RenderKey(lo, hi, bucket, bodies), visible_lo, visible_hi

    def _needs_render(self, wanted: RenderKey, visible_lo: int, visible_hi: int) -> bool:
        have = self._key
        if have is None or have.bucket != wanted.bucket or have.bodies != wanted.bodies:
            return True
        if visible_lo < have.lo or visible_hi > have.hi:
            return True
        return (have.hi - have.lo) > MAX_SPAN_FACTOR * max(visible_hi - visible_lo, 1)

    def _render(self, key: RenderKey) -> None:
        picture = QPicture()
        painter = QPainter(picture)
        try:
            self.drawn_columns = self._draw(painter, key)
        finally:
            painter.end()
        self._picture = picture
        self._key = key
        self.render_count += 1

    def _draw(self, painter: QPainter, key: RenderKey) -> int:
        raise NotImplementedError


def _pen(color: str) -> QPen:
    pen = QPen(qcolor(color))
    pen.setCosmetic(True)
    pen.setWidth(1)
    return pen


class CandleItem(SpanCachedItem):
    """OHLC candles at x = bar index; green when close >= open, red otherwise."""

    def __init__(self, up: str = "up", down: str = "down") -> None:
        super().__init__()
        self._colors = (up, down)
        empty = np.zeros(0)
        self.open = self.high = self.low = self.close = empty

    def set_data(
        self,
        open_: np.ndarray,
        high: np.ndarray,
        low: np.ndarray,
        close: np.ndarray,
        first_changed: int = 0,
    ) -> None:
        """Show these candles; ``first_changed`` is the first bar that differs from before."""
        self.open, self.high, self.low, self.close = open_, high, low, close
        count = len(close)
        y_min = float(np.min(low)) if count else 0.0
        y_max = float(np.max(high)) if count else 1.0
        self._data_changed(count, y_min, y_max, first_changed)

    def y_range(self, lo: int, hi: int) -> tuple[float, float] | None:
        """Lowest low and highest high of bars ``lo..hi``; ``None`` when none are there."""
        lo, hi = max(lo, 0), min(hi, self._count - 1)
        if hi < lo:
            return None
        return float(np.min(self.low[lo : hi + 1])), float(np.max(self.high[lo : hi + 1]))

    def _draw(self, painter: QPainter, key: RenderKey) -> int:
        x, (o, h, lo_, c) = aggregate(
            key.lo, key.hi, key.bucket,
            (self.open, "first"), (self.high, "max"), (self.low, "min"), (self.close, "last"),
        )
        up = c >= o
        for mask, color in ((up, self._colors[0]), (~up, self._colors[1])):
            if not mask.any():
                continue
            painter.setPen(_pen(color))
            painter.setBrush(QBrush())
            painter.drawPath(_segments(x[mask], lo_[mask], h[mask]))
            if key.bodies:
                top = np.maximum(o[mask], c[mask])
                bottom = np.minimum(o[mask], c[mask])
                bodies = _rects(x[mask], bottom, top, BODY_WIDTH / 2)
                painter.fillPath(bodies, QBrush(qcolor(color)))
        return len(x)


class VolumeItem(SpanCachedItem):
    """Volume bars from zero, coloured by their candle's direction.

    A merged column shows the tallest bar it covers, so the scale does not jump while zooming.
    """

    def __init__(self, up: str = "volume_up", down: str = "volume_down") -> None:
        super().__init__()
        self._colors = (up, down)
        empty = np.zeros(0)
        self.volume = self.open = self.close = empty

    def set_data(
        self, volume: np.ndarray, open_: np.ndarray, close: np.ndarray, first_changed: int = 0
    ) -> None:
        self.volume, self.open, self.close = volume, open_, close
        count = len(volume)
        y_max = float(np.max(volume)) if count else 1.0
        self._data_changed(count, 0.0, y_max, first_changed)

    def y_range(self, lo: int, hi: int) -> tuple[float, float] | None:
        lo, hi = max(lo, 0), min(hi, self._count - 1)
        if hi < lo:
            return None
        return 0.0, float(np.max(self.volume[lo : hi + 1]))

    def _draw(self, painter: QPainter, key: RenderKey) -> int:
        x, (v, o, c) = aggregate(
            key.lo, key.hi, key.bucket, (self.volume, "max"), (self.open, "first"),
            (self.close, "last"),
        )
        up = c >= o
        zero = np.zeros(len(x))
        for mask, color in ((up, self._colors[0]), (~up, self._colors[1])):
            if not mask.any():
                continue
            if key.bodies:
                bars = _rects(x[mask], zero[mask], v[mask], BODY_WIDTH / 2)
                painter.fillPath(bars, QBrush(qcolor(color)))
            else:
                painter.setPen(_pen(color))
                painter.drawPath(_segments(x[mask], zero[mask], v[mask]))
        return len(x)
