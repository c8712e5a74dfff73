"""Indicator studies on the chart: which catalogue outputs go on price, which get a pane.

Any catalogued indicator can be added; where it is drawn is data, not a branch per name: moving
averages, bands and channels share the price scale, oscillators get a pane below. Values come
from the indicator engine's own ``compute`` (the very function agents' tools use), run in a worker
thread, so what a person sees on the chart is exactly what an agent was told.
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMenu, QWidget

from app.indicators.engine import compute
from app.indicators.model import (
    CATEGORIES,
    Catalogue,
    IndicatorDef,
    ParamValues,
    format_number,
)
from app.market.port import PrefixSource
from app.market.series import KlineSeries
from app.ui.charts.style import SERIES_COLORS, format_compact, format_price, qcolor

#: Outputs on the price scale for indicators outside the ``overlap`` category.
PRICE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "BBANDS": ("lower", "middle", "upper"),
    "KC": ("lower", "middle", "upper"),
    "DONCHIAN": ("lower", "middle", "upper"),
    "ACCBANDS": ("lower", "middle", "upper"),
    "PSAR": ("value",),
    "CKSP": ("long_stop", "short_stop"),
    "VWAP": ("value",),
    "VWMA": ("value",),
}
READOUT_GAP = "   "  # between the readout's parts (one part has double spaces inside)
#: Outputs that are states, not levels; never drawn as lines.
HIDDEN_OUTPUTS = frozenset({"direction"})
#: Panes with a fixed scale and guide levels (overbought / oversold).
FIXED_SCALES: dict[str, tuple[float, float, tuple[float, ...]]] = {
    "RSI": (0.0, 100.0, (30.0, 70.0)),
    "RSX": (0.0, 100.0, (30.0, 70.0)),
    "MFI": (0.0, 100.0, (20.0, 80.0)),
    "STOCH": (0.0, 100.0, (20.0, 80.0)),
    "STOCHRSI": (0.0, 100.0, (20.0, 80.0)),
    "WILLR": (-100.0, 0.0, (-80.0, -20.0)),
}
#: The short list offered first in the chart's menu (the rest are under "All indicators").
QUICK_PICKS = ("SMA", "EMA", "BBANDS", "RSI", "MACD")


def placement(indicator: IndicatorDef) -> tuple[bool, tuple[str, ...]]:
    """Whether ``indicator`` sits on the price scale, and which of its outputs are drawn."""
    if indicator.name in PRICE_OUTPUTS:
        return True, PRICE_OUTPUTS[indicator.name]
    outputs = tuple(n for n in indicator.output_names if n not in HIDDEN_OUTPUTS)
    return indicator.category == "overlap", outputs


def study_label(indicator: IndicatorDef, params: ParamValues) -> str:
    """``SMA(20)``, ``BBANDS(20, 2)``, ``OBV``: the name a person reads in legends and menus."""
    if not params:
        return indicator.name
    return f"{indicator.name}({', '.join(format_number(v) for v in params.values())})"


async def compute_columns(
    indicator: IndicatorDef, params: ParamValues, series: KlineSeries
) -> dict[str, np.ndarray]:
    """The indicator's outputs over every bar of ``series``, computed off the event loop."""
    computed = await asyncio.to_thread(compute, indicator, params, series)
    return dict(computed.columns)


class PrefixCache:
    """Whole-series indicator values of a replay, so live updates only slice them.

    A replay's visible complete candles are a prefix of one fixed series (``PrefixSource``) and
    every catalogued indicator is causal, so the values over the prefix are the first values
    over the whole series (the indicator engine's own argument). Computing once per study and
    slicing at the cursor keeps a 10 Hz replay from recomputing 20,000 bars per redraw.
    """

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._cache: OrderedDict[Hashable, dict[str, np.ndarray]] = OrderedDict()

    async def columns(
        self,
        indicator: IndicatorDef,
        params: ParamValues,
        series: KlineSeries,
        prefix: PrefixSource | None,
    ) -> dict[str, np.ndarray]:
        """Values over ``series``: sliced from the full series when it is a visible prefix."""
        usable = prefix is not None and series.last_complete and len(series) == prefix.visible
        if not usable or prefix is None:
            return await compute_columns(indicator, params, series)
        key = (prefix.key, len(prefix.full), indicator.name, tuple(sorted(params.items())))
        full = self._cache.get(key)
        if full is None:
            full = await compute_columns(indicator, params, prefix.full)
            self._cache[key] = full
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        return {name: values[: prefix.visible] for name, values in full.items()}


class Study:
    """One indicator on the chart: its lines in ``plot`` and the values they show."""

    def __init__(
        self,
        indicator: IndicatorDef,
        params: Mapping[str, int | float],
        plot: pg.PlotItem,
        color_start: int,
    ) -> None:
        self.indicator = indicator
        self.params = dict(params)
        self.label = study_label(indicator, self.params)
        self.on_price, self.outputs = placement(indicator)
        self.plot = plot
        self.values: dict[str, np.ndarray] = {}
        self._x = np.zeros(0)
        #: prices to the price plot's y (its log scale); applied to the lines of a study on price
        self.to_view: Callable[[np.ndarray], np.ndarray] | None = None
        self.items: dict[str, pg.PlotDataItem] = {}
        self._guides: list[pg.InfiniteLine] = []
        for offset, name in enumerate(self.outputs):
            color = qcolor(SERIES_COLORS[(color_start + offset) % len(SERIES_COLORS)])
            item = pg.PlotDataItem(pen=pg.mkPen(color, width=1.3), connect="finite", name=name)
            if name == "histogram":
                item.setPen(pg.mkPen(color, width=1))
                item.setFillLevel(0.0)
                item.setBrush(pg.mkBrush(color.red(), color.green(), color.blue(), 90))
            item.setClipToView(True)
            item.setDownsampling(auto=True, method="peak")
            item.setZValue(10)
            plot.addItem(item)
            self.items[name] = item
        fixed = FIXED_SCALES.get(indicator.name)
        if fixed is not None and not self.on_price:
            for level in fixed[2]:
                guide = pg.InfiniteLine(
                    pos=level, angle=0, movable=False,
                    pen=pg.mkPen(qcolor("muted"), width=1, style=Qt.PenStyle.DotLine),
                )
                plot.addItem(guide, ignoreBounds=True)
                self._guides.append(guide)

    @property
    def key(self) -> str:
        return self.label

    def set_values(self, columns: Mapping[str, np.ndarray], x: np.ndarray) -> None:
        """Show new values; ``x`` is the bar index of each value."""
        self.values = {name: columns[name] for name in self.outputs}
        self._x = x
        self.redraw()

    def _shown(self, values: np.ndarray) -> np.ndarray:
        """``values`` in the plot's y units (a study on a log-scaled price plot: their log)."""
        if self.on_price and self.to_view is not None:
            return self.to_view(values)
        return values

    def redraw(self) -> None:
        """Draw the values again (the price scale changed)."""
        for name, item in self.items.items():
            if name in self.values:
                item.setData(self._x, self._shown(self.values[name]), connect="finite")

    def value_at(self, bar: int) -> dict[str, float]:
        return {
            name: float(values[bar])
            for name, values in self.values.items()
            if 0 <= bar < len(values)
        }

    def y_range(self, lo: int, hi: int) -> tuple[float, float] | None:
        """The scale this study wants over bars ``lo..hi`` (fixed for bounded oscillators)."""
        fixed = FIXED_SCALES.get(self.indicator.name)
        if fixed is not None and not self.on_price:
            return fixed[0], fixed[1]
        low, high = math.inf, -math.inf
        for values in self.values.values():
            part = self._shown(values[max(lo, 0) : max(hi + 1, 0)])
            finite = part[np.isfinite(part)]
            if len(finite):
                low, high = min(low, float(finite.min())), max(high, float(finite.max()))
        if not math.isfinite(low):
            return None
        if "histogram" in self.values:
            low, high = min(low, 0.0), max(high, 0.0)
        return low, high

    def remove(self) -> None:
        for item in [*self.items.values(), *self._guides]:
            self.plot.removeItem(item)
        self.items.clear()
        self._guides.clear()


def indicator_menu(
    parent: QWidget, catalogue: Catalogue, on_pick: Callable[[str], object]
) -> QMenu:
    """The quick picks with a one-line description, then every indicator by category."""
    menu = QMenu(parent)
    for name in QUICK_PICKS:
        indicator = catalogue.get(name)
        action = menu.addAction(f"{name} — {indicator.description.split('.')[0]}")
        action.triggered.connect(lambda _=False, n=name: on_pick(n))
    every = menu.addMenu("All indicators")
    for category in CATEGORIES:
        sub = every.addMenu(category.capitalize())
        for indicator in catalogue.in_category(category):
            action = sub.addAction(indicator.name)
            action.setToolTip(indicator.description)
            action.triggered.connect(lambda _=False, n=indicator.name: on_pick(n))
    return menu


def fit_readout(text: str, fits: Callable[[str], bool]) -> str:
    """``text`` (parts joined by three spaces) on as few lines as ``fits`` allows: a narrow
    chart (1280x720) cut the close, the volume and the change off its one line."""
    lines: list[str] = []
    for part in text.split(READOUT_GAP):
        if lines and fits(lines[-1] + READOUT_GAP + part):
            lines[-1] += READOUT_GAP + part
        else:
            lines.append(part)
    return "\n".join(lines)


def readout_text(
    series: KlineSeries, bar: int, decimals: int, time_text: str, studies: list[Study]
) -> tuple[str, bool]:
    """The crosshair line for ``bar``: time, OHLCV, change, study values; and whether it rose."""
    o, h, lo, c = (float(a[bar]) for a in (series.open, series.high, series.low, series.close))
    change = (c - o) / o * 100 if o else 0.0
    parts = [
        f"{series.symbol} {series.interval}  {time_text}",
        f"O {format_price(o, decimals)}  H {format_price(h, decimals)}  "
        f"L {format_price(lo, decimals)}  C {format_price(c, decimals)}  "
        f"V {format_compact(float(series.volume[bar]))}  {change:+.2f}%",
    ]
    if bar == len(series) - 1 and not series.last_complete:
        parts.append("(forming)")
    for study in studies:
        shown = "/".join(format_price(v, 2) for v in study.value_at(bar).values())
        parts.append(f"{study.label} {shown}")
    return READOUT_GAP.join(parts), c >= o


def legend_values(study: Study, bar: int, decimals: int) -> str:
    """The study's values at ``bar`` as its legend shows them: on price, with the market's
    decimals; in a pane, compactly (a volume study's millions read as ``4.56M``)."""
    values = study.value_at(bar)
    if not values:
        return ""
    shown = []
    for value in values.values():
        if not math.isfinite(value):
            shown.append("—")
        elif study.on_price:
            shown.append(format_price(value, decimals))
        elif abs(value) >= 10_000:
            shown.append(format_compact(value))
        else:
            shown.append(f"{value:,.2f}")
    return " / ".join(shown)
