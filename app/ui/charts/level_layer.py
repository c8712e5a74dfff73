"""The marked prices drawn on the price plot: a thin line each across the plot, a tag each on the
price axis, both draggable for a level that is an order.

A drag may start on the line or on its tag; either way the line and the tag follow the mouse and
the drop is announced (``dropped``), never acted on here. Until the drop's outcome is known the
level stays where it was dropped (``finish_move``): moved, it is replaced by the order's new line at
the next refresh; refused, it snaps back to the order's price at once. A refresh of the levels
(the account is read every second while the market moves) never moves a line that is being
dragged or waits for an outcome.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal

from app.ui.charts.axis import AxisTag, PriceAxisItem, PriceScale
from app.ui.charts.levels import IN_RANGE_KINDS, KINDS, Level
from app.ui.charts.style import qcolor

LINE_Z = 30  # over the candles and the markers: a dragged line must be where the mouse is


class LevelLayer(QObject):
    """The levels of one price plot and their axis tags.

    Signals:
        dropped(Level, float): a movable level was dropped at a price (view units undone).
    """

    dropped = Signal(object, float)

    def __init__(self, plot: pg.PlotItem, axis: PriceAxisItem, scale: PriceScale) -> None:
        super().__init__()
        self._plot = plot
        self._axis = axis
        self._scale = scale
        self.levels: list[Level] = []
        self._lines: dict[str, pg.InfiniteLine] = {}
        self._dragged: dict[str, float] = {}  # key -> price under the mouse during a drag
        self._held: dict[str, float] = {}  # key -> price it was dropped at, outcome pending
        self._settled: set[str] = set()  # moved: its held price goes at the next refresh
        axis.tag_dragged.connect(self._tag_dragged)

    # -- levels ---------------------------------------------------------------------------------

    def set_levels(self, levels: Sequence[Level]) -> None:
        """Show ``levels`` (the newest account reading and the last price)."""
        self.levels = sorted(levels, key=lambda lv: KINDS.index(lv.kind))
        keys = {level.key for level in self.levels}
        for key in list(self._held):
            if key not in keys or key in self._settled:
                self._held.pop(key)
                self._settled.discard(key)
        for key in [k for k in self._lines if k not in keys]:
            self._plot.removeItem(self._lines.pop(key))
        self.redraw()

    def level(self, key: str) -> Level | None:
        return next((lv for lv in self.levels if lv.key == key), None)

    def shown_price(self, level: Level) -> float:
        """Where ``level`` is drawn now: under the mouse while dragged, where it was dropped
        while its move is pending, else at its price."""
        if level.key in self._dragged:
            return self._dragged[level.key]
        return self._held.get(level.key, float(level.price))

    def range_prices(self) -> list[float]:
        """The prices the scale makes room for: every open level (not the last price, which
        is a candle's, nor a drawing)."""
        return [self.shown_price(lv) for lv in self.levels if lv.kind in IN_RANGE_KINDS]

    def redraw(self) -> None:
        """Place every line and tag again (new levels, a new scale, a drag)."""
        for level in self.levels:
            line = self._lines.get(level.key)
            if line is None:
                line = self._new_line(level)
            self._style(line, level)
            if not line.moving:
                line.setPos(self._scale.to_view(self.shown_price(level)))
        self._axis.set_tags([
            AxisTag(lv.key, self.shown_price(lv), lv.tag, qcolor(lv.color), lv.movable,
                    lv.tooltip)
            for lv in self.levels
        ])

    def _new_line(self, level: Level) -> pg.InfiniteLine:
        line = pg.InfiniteLine(angle=0, movable=level.movable)
        line.setZValue(LINE_Z)
        line.sigDragged.connect(lambda item, key=level.key: self._line_dragged(key, item))
        line.sigPositionChangeFinished.connect(
            lambda item, key=level.key: self._line_dropped(key, item))
        self._plot.addItem(line, ignoreBounds=True)
        self._lines[level.key] = line
        return line

    def _style(self, line: pg.InfiniteLine, level: Level) -> None:
        color = qcolor(level.color)
        style = Qt.PenStyle.DotLine if level.kind == "last" else Qt.PenStyle.DashLine
        line.setPen(pg.mkPen(color, width=1, style=style))
        line.setHoverPen(pg.mkPen(color, width=3 if level.movable else 1, style=style))
        line.setMovable(level.movable)
        line.setToolTip(level.tooltip)
        line.setCursor(Qt.CursorShape.SizeVerCursor if level.movable
                       else Qt.CursorShape.ArrowCursor)

    # -- dragging -------------------------------------------------------------------------------

    def _line_dragged(self, key: str, line: pg.InfiniteLine) -> None:
        self._dragged[key] = self._scale.from_view(line.value())
        self.redraw()

    def _line_dropped(self, key: str, line: pg.InfiniteLine) -> None:
        self._dragged.pop(key, None)
        self._drop(key, self._scale.from_view(line.value()))

    def _tag_dragged(self, key: str, price: float, finished: bool) -> None:
        if finished:
            self._dragged.pop(key, None)
            self._drop(key, price)
        else:
            self._dragged[key] = price
            self.redraw()

    def _drop(self, key: str, price: float) -> None:
        level = self.level(key)
        if level is None or not level.movable:
            self.redraw()
            return
        self._held[key] = price
        self.redraw()
        self.dropped.emit(level, price)

    def finish_move(self, key: str, moved: bool) -> None:
        """The move of ``key``'s order came to an outcome: refused, it snaps back now; moved,
        its new line comes with the next reading of the orders."""
        if moved:
            self._settled.add(key)
            return
        self._held.pop(key, None)
        self.redraw()

    def line(self, key: str) -> pg.InfiniteLine | None:
        return self._lines.get(key)

    def visible_lines(self) -> list[tuple[float, str]]:
        """(price, tag text) of each level except the last price: what tests and a person
        read."""
        return [(self.shown_price(lv), lv.tag) for lv in self.levels if lv.kind != "last"]
