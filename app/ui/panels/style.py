"""Colours and number/time formatting shared by the memory, account and audit panels.

``COLORS`` is the current theme's colours (``app.ui.theme``; the same dict the charts use, kept up
to date when the theme changes): look a colour up when drawing, never keep a copy. Formatting
lives here because every table must print money, prices and P&L the same way: thousands
separators, the market's decimals, ``Decimal`` in and text out (never a float detour).
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

from PySide6.QtGui import QColor, QFont, QFontDatabase
from PySide6.QtWidgets import QWidget

from app.domain.clock import ms_to_iso
from app.domain.trading import Mode
from app.ui.theme import COLORS, set_look

__all__ = ["COLORS", "MODE_COLORS", "set_banner"]

#: Mode badge colours: (background, text). LIVE is a loud red no one can mistake for paper.
MODE_COLORS: dict[Mode, tuple[str, str]] = {
    Mode.BACKTEST: ("#8b5cf6", "#ffffff"),
    Mode.PAPER: ("#3b82f6", "#ffffff"),
    Mode.LIVE: ("#ff3d00", "#ffffff"),
}

#: Currencies whose amounts are shown with cents; anything else (BTC as a quote) gets 8 places.
_CENT_CURRENCIES = frozenset({"USD", "USDT", "USDC", "BUSD", "FDUSD", "TUSD", "DAI", "EUR", "GBP"})


def qcolor(name: str) -> QColor:
    """A ``QColor`` from a ``COLORS`` key or a ``#rrggbb`` literal."""
    return QColor(COLORS.get(name, name))


def mono_font(point_size: int = 9) -> QFont:
    """The system monospace font, so columns of digits line up."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setPointSize(point_size)
    return font


def money_decimals(currency: str) -> int:
    return 2 if currency.upper() in _CENT_CURRENCIES else 8


def format_fixed(value: Decimal, decimals: int, *, sign: bool = False) -> str:
    """``value`` rounded half-even to ``decimals`` places with thousands separators."""
    quantum = Decimal(1).scaleb(-max(decimals, 0))
    rounded = value.quantize(quantum, rounding=ROUND_HALF_EVEN)
    if rounded == 0:
        rounded = abs(rounded)  # never print "-0.00"
    return f"{rounded:{'+' if sign else ''},.{max(decimals, 0)}f}"


def format_quantity(value: Decimal, max_decimals: int = 8) -> str:
    """A size with separators and only the decimals it has (``1,250``, ``0.116274``)."""
    rounded = value.quantize(Decimal(1).scaleb(-max_decimals), rounding=ROUND_HALF_EVEN)
    normal = rounded.normalize()
    exponent = normal.as_tuple().exponent
    places = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return format_fixed(rounded, places)


def format_pct(value: Decimal, *, sign: bool = False) -> str:
    return f"{format_fixed(value, 2, sign=sign)}%"


def pnl_tone(value: Decimal) -> str:
    """The ``look`` of a gain (``up``), a loss (``down``) or exactly zero (none)."""
    return "up" if value > 0 else "down" if value < 0 else ""


def pnl_color(value: Decimal) -> str:
    """Green for a gain, red for a loss, the plain text colour for exactly zero."""
    if value > 0:
        return COLORS["up"]
    if value < 0:
        return COLORS["down"]
    return COLORS["text"]


def format_time(ms: int | None, *, seconds: bool = True) -> str:
    """Market time as ``2019-10-10 14:00:05`` (UTC; the replay clock has no local zone)."""
    if ms is None or ms < 0:
        return "—"
    text = ms_to_iso(ms).replace("T", " ").rstrip("Z")
    text = text.split(".")[0]
    return text if seconds else text[:16]


def format_bytes(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1 << 20:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1 << 20):.1f} MB"


def set_banner(label: QWidget, kind: str) -> None:
    """Style a message strip as ``error``, ``warning``, ``info`` or ``ok`` (the theme's colours)."""
    set_look(label, f"{kind if kind in ('error', 'warning', 'ok') else 'info'}-banner")
