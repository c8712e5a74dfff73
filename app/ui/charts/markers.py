"""The agents' trades drawn on the price chart: fill and order markers, position price lines.

Fills are the record of what happened, so they get solid triangles (buy ▲ green under the bar,
sell ▼ red over it) at the bar they executed in; orders that never filled fully are hollow
triangles at their limit/stop price, so a person sees both what agents did and what they tried.
Hovering a marker shows who traded (by name: the window's resolver, ``app.ui.names``, with the id
after it), what, at what price, and why (the order's reason).
Open positions' average cost, take profit and stop loss, and working orders, are levels with a tag
on the price axis (``app.ui.charts.levels``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import pyqtgraph as pg

from app.domain.clock import ms_to_iso
from app.domain.trading import Fill, Order, OrderStatus, Side
from app.ui.charts.style import format_price, format_quantity, qcolor
from app.ui.names import current as current_names

MARKER_SIZE = 12
MARKER_Z = 20
MARKER_GAP_PX = 9  # distance between a bar's extreme and its marker's centre


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


def who(actor: str) -> str:
    """``BTC/USD Trader (id 2e9f…)``: the name a person knows, and the id the audit trail has."""
    names = current_names()
    name = names.lookup(actor)
    return f"{name} (id {actor})" if name is not None and name != actor else actor


def _fill_tooltip(fill: Fill, order: Order | None, decimals: int) -> str:
    reason = order.reason if order is not None and order.reason else "—"
    kind = order.order_type.value if order is not None else ""
    return (
        f"{fill.side.value} {format_quantity(fill.quantity, 6)} {fill.symbol} "
        f"@ {format_price(fill.price, decimals)}\n"
        f"by {who(fill.agent_id)}   {kind} fill {fill.fill_id}\n"
        f"time: {ms_to_iso(fill.time_ms)}\n"
        f"reason: {reason}"
    )


def _order_tooltip(order: Order, price: Decimal, decimals: int) -> str:
    return (
        f"{order.side.value} {order.order_type.value} {format_quantity(order.quantity, 6)} "
        f"{order.symbol} @ {format_price(price, decimals)} ({order.status.value})\n"
        f"by {who(order.agent_id)}   order {order.order_id}\n"
        f"time: {ms_to_iso(order.created_ms)}\n"
        f"reason: {order.reason or '—'}"
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
        self._filled = pg.ScatterPlotItem(
            hoverable=True, tip=lambda x, y, data: data, size=MARKER_SIZE, pxMode=True
        )
        self._open = pg.ScatterPlotItem(
            hoverable=True, tip=lambda x, y, data: data, size=MARKER_SIZE, pxMode=True
        )
        for item in (self._filled, self._open):
            item.setZValue(MARKER_Z)
            plot.addItem(item)

    def set_markers(self, markers: list[Marker]) -> None:
        self.markers = markers

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
