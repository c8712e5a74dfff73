"""The agents' trades drawn on the price chart: fill and order markers, position price lines.

Fills are the record of what happened, so they get solid triangles (buy ▲ green under the bar,
sell ▼ red over it) at the bar they executed in; orders that never filled fully are hollow
triangles at their limit/stop price, so a person sees both what agents did and what they tried.
Hovering a marker shows who traded (by name: the window's resolver, ``app.ui.names``, with the id
after it), what, at what price, and why (the order's reason), in a tooltip placed inside the chart.
Open positions get their entry, take-profit and stop-loss as horizontal lines.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QToolTip

from app.domain.trading import ExitKind, Fill, Order, OrderStatus, Position, Side
from app.domain.words import market_time
from app.ui.charts.style import format_price, format_quantity, qcolor
from app.ui.names import current as current_names

MARKER_SIZE = 12
MARKER_Z = 20
# a line's label sits at the right edge, where the newest candles and markers are: the line and
# its label are drawn above both, the label on an opaque ground so candles never show through
LINE_Z = 30
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


@dataclass(frozen=True, slots=True)
class PriceLine:
    """A horizontal price line; ``kind``: ``entry``, ``take_profit`` or ``stop_loss``."""

    kind: str
    price: Decimal
    label: str


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


def position_lines(
    symbol: str, positions: Sequence[Position], orders: Sequence[Order], decimals: int
) -> list[PriceLine]:
    """The average-cost line of each of ``symbol``'s positions (its buys' fees included, so the
    line is where selling breaks even before that sale's fee; the fills' own prices are their
    markers) and its open take-profit / stop-loss orders."""
    lines: list[PriceLine] = []
    for position in positions:
        if position.symbol == symbol and position.size != 0:
            text = f"Avg cost {format_price(position.avg_price, decimals)}  size {position.size}"
            lines.append(PriceLine("entry", position.avg_price, text))
    names = {ExitKind.TAKE_PROFIT: ("take_profit", "TP"), ExitKind.STOP_LOSS: ("stop_loss", "SL")}
    for order in orders:
        if order.symbol != symbol or not order.status.is_open or order.exit_kind not in names:
            continue
        if order.exit_kind == ExitKind.STOP_LOSS:
            price = order.stop_price if order.stop_price is not None else order.price
        else:
            price = order.price if order.price is not None else order.stop_price
        if price is None:
            continue
        kind, short = names[order.exit_kind]
        lines.append(PriceLine(kind, price, f"{short} {format_price(price, decimals)}"))
    return lines


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
        self._lines: list[pg.InfiniteLine] = []

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

    def layout(self, high: np.ndarray, low: np.ndarray, pixel_height: float) -> None:
        """Place markers: fills just below (buy) or above (sell) their bar, in pixels."""
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
            y=[m.price for m in hollow],
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

    def set_lines(self, lines: Sequence[PriceLine]) -> None:
        """Show ``lines``, reusing the line items already made."""
        while len(self._lines) < len(lines):
            line = pg.InfiniteLine(
                angle=0, movable=False,
                label="",
                labelOpts={"position": 0.97, "anchors": [(1, 1), (1, 1)]},
            )
            line.setZValue(LINE_Z)
            self._plot.addItem(line, ignoreBounds=True)
            self._lines.append(line)
        for item, spec in zip(self._lines, lines, strict=False):
            color = qcolor(spec.kind)
            item.setPen(pg.mkPen(color, width=1, style=Qt.PenStyle.DashLine))
            item.setPos(float(spec.price))
            item.label.setText(spec.label)
            item.label.setColor(color)
            item.label.fill = pg.mkBrush(qcolor("background"))  # the theme's, when it changes
            item.setVisible(True)
        for item in self._lines[len(lines):]:
            item.setVisible(False)

    @property
    def visible_lines(self) -> list[tuple[float, str]]:
        return [(ln.value(), ln.label.toPlainText()) for ln in self._lines if ln.isVisible()]
