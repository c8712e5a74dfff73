"""The person's drawings on the price chart: horizontal lines and trend lines.

A drawing is kept in market terms, a price and a time (``Drawing``), never in the chart's bar
indices: an index means another moment on another interval, and a drawing must stay on its
price and its moment when the person switches from 1h to 4h, scrolls, or relaunches. Drawings
belong to a symbol (a line at 10,000 on BTC means nothing on ETH); the chart keeps them per
workspace (``app.ui.charts.chart_state``).

Add: the chart's "Draw" menu or its right-click menu, then a click (a horizontal line) or two (a
trend line; Esc cancels). Move: drag the line, or a trend line's ends. Delete: right-click on it.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, Qt, Signal

from app.ui.charts.axis import PriceScale, index_to_ms
from app.ui.charts.levels import on_tick
from app.ui.charts.style import format_price, qcolor

logger = logging.getLogger(__name__)

KINDS = ("hline", "trend")
DRAWING_COLOR = "#56b6c2"
DRAWING_Z = 25
HIT_PIXELS = 6.0  # how near a right-click must be to a drawing to offer deleting it


@dataclass(frozen=True, slots=True)
class Drawing:
    """One drawing: a horizontal line at ``points[0]``'s price, or a trend line between its two
    points; each point is (time in ms, price)."""

    drawing_id: str
    kind: str
    points: tuple[tuple[int, Decimal], ...]

    @property
    def price(self) -> Decimal:
        return self.points[0][1]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.drawing_id, "kind": self.kind,
                "points": [[int(t), str(p)] for t, p in self.points]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Drawing:
        """A drawing as it was kept.

        Raises:
            ValueError: not a drawing (a kind, a point or a price that is not one).
        """
        kind = data.get("kind")
        if kind not in KINDS:
            raise ValueError(f"unknown drawing kind {kind!r}")
        raw = data.get("points")
        if not isinstance(raw, list) or len(raw) != (1 if kind == "hline" else 2):
            raise ValueError(f"a {kind} drawing needs {1 if kind == 'hline' else 2} points")
        points = []
        for point in raw:
            try:
                time_ms, price = int(point[0]), Decimal(str(point[1]))
            except (TypeError, ValueError, IndexError, InvalidOperation) as exc:
                raise ValueError(f"not a point: {point!r}") from exc
            if not price.is_finite() or price <= 0:
                raise ValueError(f"not a price: {point[1]!r}")
            points.append((time_ms, price))
        return cls(str(data.get("id") or uuid.uuid4().hex[:12]), kind, tuple(points))


def read_drawings(raw: object) -> list[Drawing]:
    """Drawings as kept (JSON values); one that cannot be read is left out and logged, so a
    damaged preference never stops the chart from opening."""
    if not isinstance(raw, list):
        return []
    out = []
    for item in raw:
        try:
            out.append(Drawing.from_json(item if isinstance(item, Mapping) else {}))
        except ValueError as exc:
            logger.warning("a kept chart drawing was left out: %s", exc)
    return out


def x_of_time(timestamps: np.ndarray, bar_ms: int, time_ms: int) -> float:
    """The chart's x (bar index, fractional inside a bar) of a moment; before the first bar or
    after the last it is extrapolated one bar per ``bar_ms``."""
    count = len(timestamps)
    if count == 0:
        return 0.0
    index = int(np.searchsorted(timestamps, time_ms, side="right")) - 1
    if index < 0:
        return (time_ms - int(timestamps[0])) / bar_ms
    if index == count - 1:
        return index + (time_ms - int(timestamps[-1])) / bar_ms
    span = max(int(timestamps[index + 1]) - int(timestamps[index]), 1)
    return index + min((time_ms - int(timestamps[index])) / span, 1.0)


def time_of_x(timestamps: np.ndarray, bar_ms: int, x: float) -> int:
    """The moment at the chart's ``x``: the inverse of ``x_of_time``."""
    if len(timestamps) == 0 or not math.isfinite(x):
        return 0
    index = math.floor(x)
    start = int(index_to_ms(timestamps, bar_ms, np.array([index]))[0])
    nxt = int(index_to_ms(timestamps, bar_ms, np.array([index + 1]))[0])
    return start + round((x - index) * (nxt - start))


class DrawingLayer(QObject):
    """The drawings of the charted symbol on one price plot.

    Signals:
        changed: a drawing was added, moved or deleted (the chart keeps them).
        placing_changed(str): the kind waiting for the person's clicks ("" when none).
    """

    changed = Signal()
    placing_changed = Signal(str)

    def __init__(self, plot: pg.PlotItem, scale: PriceScale) -> None:
        super().__init__()
        self._plot = plot
        self._scale = scale
        self.drawings: list[Drawing] = []
        self._items: dict[str, pg.GraphicsObject] = {}
        self._timestamps = np.zeros(0, dtype=np.int64)
        self._bar_ms = 3_600_000
        self._decimals = 2
        self.placing = ""  # "hline" or "trend" while waiting for clicks
        self._anchor: tuple[int, Decimal] | None = None  # a trend line's first click
        self._preview: pg.PlotDataItem | None = None

    # -- what is drawn --------------------------------------------------------------------------

    def set_timeline(self, timestamps: np.ndarray, bar_ms: int, decimals: int) -> None:
        """The bars now charted: trend lines are placed on them again."""
        self._timestamps, self._bar_ms, self._decimals = timestamps, int(bar_ms), decimals
        self.redraw()

    def load(self, drawings: Sequence[Drawing]) -> None:
        """Show ``drawings`` (another symbol's, or those kept) instead of the current ones."""
        self.cancel()
        for item in self._items.values():
            self._plot.removeItem(item)
        self._items.clear()
        self.drawings = list(drawings)
        self.redraw()

    def redraw(self) -> None:
        """Place every drawing's item on the current bars and scale."""
        for drawing in self.drawings:
            item = self._items.get(drawing.drawing_id)
            if item is None:
                item = self._new_item(drawing)
            self._place(item, drawing)

    def _view_point(self, point: tuple[int, Decimal]) -> tuple[float, float]:
        return (x_of_time(self._timestamps, self._bar_ms, point[0]),
                self._scale.to_view(float(point[1])))

    def _market_point(self, x: float, y: float) -> tuple[int, Decimal]:
        return (time_of_x(self._timestamps, self._bar_ms, x),
                on_tick(self._scale.from_view(y), self._decimals))

    def _pen(self, width: float = 1.5) -> Any:
        return pg.mkPen(qcolor(DRAWING_COLOR), width=width)

    def _new_item(self, drawing: Drawing) -> pg.GraphicsObject:
        if drawing.kind == "hline":
            item: pg.GraphicsObject = pg.InfiniteLine(angle=0, movable=True, pen=self._pen())
            item.setHoverPen(self._pen(3))
            item.sigPositionChangeFinished.connect(
                lambda line, key=drawing.drawing_id: self._hline_moved(key, line))
        else:
            a, b = (self._view_point(p) for p in drawing.points)
            item = pg.LineSegmentROI([a, b], pen=self._pen(), hoverPen=self._pen(3),
                                     movable=True)
            item.sigRegionChangeFinished.connect(
                lambda roi, key=drawing.drawing_id: self._trend_moved(key, roi))
        item.setZValue(DRAWING_Z)
        self._plot.addItem(item, ignoreBounds=True)
        self._items[drawing.drawing_id] = item
        return item

    def _place(self, item: pg.GraphicsObject, drawing: Drawing) -> None:
        if drawing.kind == "hline":
            item.setPos(self._scale.to_view(float(drawing.price)))
            item.setToolTip(f"Horizontal line at {format_price(drawing.price, self._decimals)}: "
                            "drag it to move it, right-click it to delete it")
            return
        a, b = (self._view_point(p) for p in drawing.points)
        handles = item.getHandles()
        item.blockSignals(True)  # a placement is not the person's move
        try:
            item.setPos(QPointF(0.0, 0.0))
            for handle, (x, y) in zip(handles, (a, b), strict=True):
                item.movePoint(handle, QPointF(x, y), finish=False)
        finally:
            item.blockSignals(False)
        item.setToolTip("Trend line: drag it or its ends to move it, right-click it to delete it")

    # -- the person's changes -------------------------------------------------------------------

    def add(self, kind: str, points: Sequence[tuple[int, Decimal]]) -> Drawing:
        drawing = Drawing(uuid.uuid4().hex[:12], kind, tuple(points))
        self.drawings.append(drawing)
        self.redraw()
        self.changed.emit()
        return drawing

    def delete(self, drawing_id: str) -> None:
        self.drawings = [d for d in self.drawings if d.drawing_id != drawing_id]
        item = self._items.pop(drawing_id, None)
        if item is not None:
            self._plot.removeItem(item)
        self.changed.emit()

    def clear(self) -> None:
        for drawing in list(self.drawings):
            self.delete(drawing.drawing_id)

    def _replace(self, drawing_id: str, points: tuple[tuple[int, Decimal], ...]) -> None:
        self.drawings = [replace(d, points=points) if d.drawing_id == drawing_id else d
                         for d in self.drawings]
        self.redraw()
        self.changed.emit()

    def _hline_moved(self, drawing_id: str, line: pg.InfiniteLine) -> None:
        self._replace(drawing_id, ((0, on_tick(self._scale.from_view(line.value()),
                                               self._decimals)),))

    def _trend_moved(self, drawing_id: str, roi: pg.LineSegmentROI) -> None:
        ends = [roi.mapToParent(handle.pos()) for handle in roi.getHandles()]
        self._replace(drawing_id, tuple(self._market_point(p.x(), p.y()) for p in ends))

    def item(self, drawing_id: str) -> pg.GraphicsObject | None:
        return self._items.get(drawing_id)

    def near(self, x: float, y: float, vb: pg.ViewBox) -> Drawing | None:
        """The drawing within a few pixels of view point (x, y), if any."""
        target = vb.mapViewToScene(QPointF(x, y))
        best: tuple[float, Drawing] | None = None
        for drawing in self.drawings:
            if drawing.kind == "hline":
                at = vb.mapViewToScene(QPointF(x, self._scale.to_view(float(drawing.price))))
                distance = abs(at.y() - target.y())
            else:
                a, b = (vb.mapViewToScene(QPointF(*self._view_point(p))) for p in drawing.points)
                distance = _segment_distance(target, a, b)
            if distance <= HIT_PIXELS and (best is None or distance < best[0]):
                best = (distance, drawing)
        return None if best is None else best[1]

    # -- placing a new drawing by clicks --------------------------------------------------------

    def begin(self, kind: str) -> None:
        """Wait for clicks on the chart to place a new drawing of ``kind``."""
        self.cancel()
        self.placing = kind
        self.placing_changed.emit(kind)

    def cancel(self) -> None:
        if self._preview is not None:
            self._plot.removeItem(self._preview)
            self._preview = None
        self._anchor = None
        if self.placing:
            self.placing = ""
            self.placing_changed.emit("")

    def click(self, x: float, y: float) -> Drawing | None:
        """A left click at view point (x, y) while placing: a horizontal line is placed at
        once, a trend line at the second click."""
        point = self._market_point(x, y)
        if self.placing == "hline":
            self.cancel()
            return self.add("hline", [(0, point[1])])
        if self.placing == "trend":
            if self._anchor is None:
                self._anchor = point
                self._preview = pg.PlotDataItem(pen=pg.mkPen(qcolor(DRAWING_COLOR), width=1,
                                                             style=Qt.PenStyle.DashLine))
                self._plot.addItem(self._preview, ignoreBounds=True)
                self.hover(x, y)
                return None
            anchor = self._anchor
            self.cancel()
            return self.add("trend", [anchor, point])
        return None

    def hover(self, x: float, y: float) -> None:
        """The mouse moved while a trend line waits for its second click: show it."""
        if self._preview is not None and self._anchor is not None:
            ax, ay = self._view_point(self._anchor)
            self._preview.setData([ax, x], [ay, y])


def _segment_distance(p: QPointF, a: QPointF, b: QPointF) -> float:
    """Pixels from ``p`` to the segment ``a``-``b`` (scene coordinates)."""
    dx, dy = b.x() - a.x(), b.y() - a.y()
    length = dx * dx + dy * dy
    t = 0.0 if length == 0 else max(0.0, min(1.0, ((p.x() - a.x()) * dx
                                                   + (p.y() - a.y()) * dy) / length))
    return math.hypot(p.x() - (a.x() + t * dx), p.y() - (a.y() + t * dy))
