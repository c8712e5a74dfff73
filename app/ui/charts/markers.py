"""The agents' trades drawn on the price chart: fill and order markers, position price lines.

Fills are the record of what happened, so they get solid triangles (buy ▲ green under the bar,
sell ▼ red over it) at the bar they executed in; orders that never filled fully are hollow
triangles at their limit/stop price, so a person sees both what agents did and what they tried.
Hovering a marker shows who traded (by name: the window's resolver, ``app.ui.names``, with the id
after it), what, at what price, and why (the order's reason), in a tooltip placed inside the chart.
Open positions' average cost, take profit and stop loss, and working orders, are levels with a tag
on the price axis (``app.ui.charts.levels``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QToolTip

from app.domain.trading import Fill, Order, OrderStatus, Side
from app.domain.words import market_time
from app.ui.charts.style import format_price, format_quantity, qcolor
from app.ui.names import current as current_names

MARKER_SIZE = 12
MARKER_Z = 20
MARKER_GAP_PX = 9  # distance between a bar's extreme and its marker's centre
REASON_CHARS = 56  # a reason's line length in a tooltip: narrow enough for a small chart
CONTINUED = " " * 8  # a wrapped line's indent: under the text after its label
TIP_OFFSET = 12
TIP_PADDING = QSize(16, 12)  # the tooltip's frame and margins around its text
QT_TIP_SHIFT = QPoint(2, 16)


@dataclass(frozen=True, slots=True)
class Marker:
    """One marker as drawn: bar index, anchor price (bar low/high or order price), tooltip."""

    bar: int
    side: Side
    price: float
    filled: bool
    tooltip: str


def bar_of(timestamps: np.ndarray, time_ms: int) -> int:
    """The index of the bar that contains ``time_ms`` (-1 before the first bar)."""
    return int(np.searchsorted(timestamps, time_ms, side="right")) - 1


def _reason(order: Order | None) -> str:
    """The order's reason, wrapped so the tooltip stays narrow enough for the chart."""
    if order is None or not order.reason:
        return "—"
    return f"\n{CONTINUED}".join(textwrap.wrap(order.reason, REASON_CHARS)) or "—"


def place_tip(area: QRect, cursor: QPoint, size: QSize) -> QPoint:
    """Where a tooltip of ``size`` goes near ``cursor`` so that it stays inside ``area`` (the
    chart, in global coordinates): beside the cursor, moved left or above at the edges."""
    x = min(cursor.x() + TIP_OFFSET, area.right() - size.width())
    y = cursor.y() + TIP_OFFSET
    if y + size.height() > area.bottom():
        y = cursor.y() - TIP_OFFSET - size.height()
    return QPoint(max(x, area.left()), max(y, area.top()))


def fit_text(text: str, metrics: QFontMetrics, width: int) -> str:
    """``text`` with each line wider than ``width`` pixels wrapped at words (continued lines
    indented under the label, as a reason's are), so a tooltip fits a narrow chart."""
    out: list[str] = []
    for line in text.split("\n"):
        chars = len(line)
        pieces = [line]
        indent = line[:len(line) - len(line.lstrip())]  # a line already continued keeps it
        while chars > 8 and any(metrics.horizontalAdvance(p) > width for p in pieces):
            chars -= max(1, chars // 10)
            pieces = textwrap.wrap(line.strip(), chars, initial_indent=indent,
                                   subsequent_indent=indent or CONTINUED,
                                   break_long_words=False) or [line]
        out.extend(pieces)
    return "\n".join(out)


def who(actor: str) -> str:
    """``BTC/USD Trader (id 2e9f…)``: the name a person knows, and the id the audit trail has."""
    names = current_names()
    name = names.lookup(actor)
    return f"{name} (id {actor})" if name is not None and name != actor else actor


def _fill_tooltip(fill: Fill, order: Order | None, decimals: int) -> str:
    reason = _reason(order)
    kind = order.order_type.value if order is not None else ""
    return (
        f"{fill.side.value} {format_quantity(fill.quantity, 6)} {fill.symbol} "
        f"@ {format_price(fill.price, decimals)}\n"
        f"by {who(fill.agent_id)}\n"
        f"time: {market_time(fill.time_ms)}   {kind} fill {fill.fill_id}\n"
        f"reason: {reason}"
    )


def _order_tooltip(order: Order, price: Decimal, decimals: int) -> str:
    return (
        f"{order.side.value} {order.order_type.value} {format_quantity(order.quantity, 6)} "
        f"{order.symbol} @ {format_price(price, decimals)} ({order.status.value})\n"
        f"by {who(order.agent_id)}\n"
        f"time: {market_time(order.created_ms)}   order {order.order_id}\n"
        f"reason: {_reason(order)}"
    )


def build_markers(
    symbol: str,
    fills: Sequence[Fill],
    orders: Sequence[Order],
    timestamps: np.ndarray,
    decimals: int,
) -> list[Marker]:
    """Markers for ``symbol``'s fills and not-fully-filled priced orders inside the bars."""
    if len(timestamps) == 0:
        return []
    by_id = {order.order_id: order for order in orders}
    out: list[Marker] = []
    for fill in fills:
        bar = bar_of(timestamps, fill.time_ms)
        if fill.symbol != symbol or bar < 0:
            continue
        tip = _fill_tooltip(fill, by_id.get(fill.order_id), decimals)
        out.append(Marker(bar, fill.side, float(fill.price), True, tip))
    for order in orders:
        price = order.price if order.price is not None else order.stop_price
        if order.symbol != symbol or price is None or order.status == OrderStatus.FILLED:
            continue
        bar = bar_of(timestamps, order.created_ms)
        if bar < 0:
            continue
        tip = _order_tooltip(order, price, decimals)
        out.append(Marker(bar, order.side, float(price), False, tip))
    return out


class TradeMarkers:
    """Owns the scatter items of one price plot and keeps markers beside their bars."""

    def __init__(self, plot: pg.PlotItem) -> None:
        self._plot = plot
        self.markers: list[Marker] = []
        # the tooltip is placed here, inside the chart (pyqtgraph's own ran off its edge)
        self._filled = pg.ScatterPlotItem(hoverable=True, tip=None, size=MARKER_SIZE,
                                          pxMode=True)
        self._open = pg.ScatterPlotItem(hoverable=True, tip=None, size=MARKER_SIZE, pxMode=True)
        for item in (self._filled, self._open):
            item.setZValue(MARKER_Z)
            plot.addItem(item)
            item.sigHovered.connect(self._hovered)

    def set_markers(self, markers: list[Marker]) -> None:
        self.markers = markers

    def _hovered(self, _item: object, points: Sequence[pg.SpotItem], event: object) -> None:
        scene = self._plot.scene()
        views = scene.views() if scene is not None else []
        if not views or getattr(event, "exit", False) or not len(points):
            QToolTip.hideText()
            return
        text = "\n\n".join(str(point.data()) for point in points[:3])
        view = views[0]
        area = QRect(view.mapToGlobal(QPoint(0, 0)), view.size())
        # the part of the chart on the screen: Qt would move a tip that crosses the screen's edge
        # out of the chart again
        seen = area.intersected(view.screen().availableGeometry())
        area = seen if not seen.isEmpty() else area
        metrics = QFontMetrics(QToolTip.font())
        text = fit_text(text, metrics, area.width() - TIP_PADDING.width())
        size = metrics.boundingRect(QRect(0, 0, 4000, 4000), 0, text).size() + TIP_PADDING
        cursor = event.screenPos().toPoint() if hasattr(event, "screenPos") else area.center()
        # Qt shifts a tooltip from the point it is given (2 px right, 16 down): given less
        QToolTip.showText(place_tip(area, cursor, size) - QT_TIP_SHIFT, text, view, view.rect())

    def layout(
        self, high: np.ndarray, low: np.ndarray, pixel_height: float,
        to_view: Callable[[float], float] = float,
    ) -> None:
        """Place markers: fills just below (buy) or above (sell) their bar, in pixels; an
        order's at its price. ``high``/``low`` and ``pixel_height`` are in the plot's y units,
        ``to_view`` turns a price into them (the log scale)."""
        gap = MARKER_GAP_PX * pixel_height
        filled = [m for m in self.markers if m.filled and m.bar < len(high)]
        hollow = [m for m in self.markers if not m.filled and m.bar < len(high)]
        self._filled.setData(
            x=[float(m.bar) for m in filled],
            y=[
                float(low[m.bar]) - gap if m.side == Side.BUY else float(high[m.bar]) + gap
                for m in filled
            ],
            symbol=["t1" if m.side == Side.BUY else "t" for m in filled],
            brush=[qcolor("up" if m.side == Side.BUY else "down") for m in filled],
            pen=[pg.mkPen(qcolor("background")) for _ in filled],
            data=[m.tooltip for m in filled],
        )
        self._open.setData(
            x=[float(m.bar) for m in hollow],
            y=[to_view(m.price) for m in hollow],
            symbol=["t1" if m.side == Side.BUY else "t" for m in hollow],
            brush=[pg.mkBrush(None) for _ in hollow],
            pen=[pg.mkPen(qcolor("up" if m.side == Side.BUY else "down"), width=1.5)
                 for m in hollow],
            data=[m.tooltip for m in hollow],
        )

    def marker_positions(self) -> list[tuple[float, float, str]]:
        """(x, y, tooltip) of every drawn marker, fills first."""
        out: list[tuple[float, float, str]] = []
        for item in (self._filled, self._open):
            for point in item.points():
                out.append((point.pos().x(), point.pos().y(), point.data()))
        return out
