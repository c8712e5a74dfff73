"""Colours and number formatting shared by the chart and order-book widgets.

``COLORS`` is the current theme's colours (``app.ui.theme``, kept up to date when the theme
changes): the chart looks a colour up when it draws, and redraws on ``restyle``. Number
formatting lives here too because the axis, the crosshair readout, the tooltips and the ladder
must print prices the same way.
"""

from __future__ import annotations

import math
from decimal import Decimal

from PySide6.QtGui import QColor, QFont, QFontDatabase

from app.ui.theme import COLORS

__all__ = ["COLORS", "SERIES_COLORS", "qcolor"]

#: Line colours for indicator outputs, picked in order as overlays and panes are added.
SERIES_COLORS: tuple[str, ...] = (
    "#f0b90b", "#4f8cff", "#c678dd", "#56b6c2", "#e5c07b", "#98c379", "#ff9f43",
)


def qcolor(name: str) -> QColor:
    """A ``QColor`` from a ``COLORS`` key or a ``#rrggbb[aa]`` literal (alpha last, as CSS)."""
    text = COLORS.get(name, name)
    if text.startswith("#") and len(text) == 9:
        color = QColor(text[:7])
        color.setAlpha(int(text[7:], 16))
        return color
    return QColor(text)


def mono_font(point_size: int = 9) -> QFont:
    """The system monospace font, so columns of digits line up."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setPointSize(point_size)
    return font


def format_price(value: float | Decimal, decimals: int) -> str:
    """A price with thousands separators and the market's decimals (``8,123.45``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "—"
    return f"{value:,.{max(decimals, 0)}f}"


def format_quantity(value: float | Decimal, decimals: int = 4) -> str:
    """A size with thousands separators; trailing zeros kept so columns align."""
    if isinstance(value, float) and not math.isfinite(value):
        return "—"
    return f"{value:,.{decimals}f}"


def format_compact(value: float) -> str:
    """A volume for an axis: ``950``, ``12.3K``, ``4.56M``, ``7.8B``."""
    if not math.isfinite(value):
        return ""
    magnitude = abs(value)
    for limit, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if magnitude >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"
