"""The colours of the whole window, dark (default) and light, and how a theme switch reaches
every widget.

One ``Theme`` holds every colour the window uses; ``COLORS`` is the current theme's colours by
name, one dict shared by the panels and the charts (``app.ui.panels.style`` and
``app.ui.charts.style`` hand out this same object) and updated in place by ``apply_theme``, so
code that looks a colour up when it draws always gets the current one.

Why a theme switch reaches every widget: widgets do not carry colours of their own. Their looks
are rules of the one application style sheet (``app.ui.theme_sheet``), chosen by object name or
by a ``look`` property (``set_look``); ``apply_theme`` replaces that sheet and Qt restyles every
widget. What Qt's sheets cannot colour (the charts' pens and brushes, colours kept in table
items) is redrawn by the panel's ``restyle()``, which the main window calls after a switch.
Trading colours follow the desk convention: up/buy green, down/sell red; LIVE mode gets an
unmistakable orange-red.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QWidget


@dataclass(frozen=True)
class Theme:
    name: str
    background: str
    panel: str
    panel_alt: str
    raised: str
    border: str
    grid: str
    text: str
    muted: str
    accent: str
    up: str
    down: str
    warning: str
    live: str
    paper: str
    backtest: str
    error_bg: str
    warning_bg: str
    info_bg: str
    ok_bg: str
    selection: str
    axis: str
    crosshair: str
    person_bubble: str
    person_text: str
    rejected: str  # Risk Guard refusals: louder than a warning, distinct from an error's red
    rejected_bg: str
    rejected_border: str
    rejected_problem_bg: str
    volume_up: str
    volume_down: str

    def colors(self) -> dict[str, str]:
        """Every colour by name, with the chart's names for the position lines."""
        named = {k: v for k, v in asdict(self).items() if k != "name"}
        named.update(entry=self.accent, take_profit=self.up, stop_loss=self.down)
        return named


DARK = Theme(
    name="dark", background="#0f1116", panel="#161a22", panel_alt="#1b2029", raised="#1e2430",
    border="#262c38", grid="#232834", text="#d6dae3", muted="#8a93a6", accent="#4f8cff",
    up="#26a69a", down="#ef5350", warning="#f0b90b", live="#ff3d00", paper="#3b82f6",
    backtest="#8b5cf6", error_bg="#3a1518", warning_bg="#3a3012", info_bg="#14233d",
    ok_bg="#10302c", selection="#2a3a5c", axis="#8a93a6", crosshair="#6b7385",
    person_bubble="#1f3357", person_text="#e8ecf4", rejected="#ff9f43", rejected_bg="#2b1d0e",
    rejected_border="#6b4514", rejected_problem_bg="#3d2508", volume_up="#26a69a66",
    volume_down="#ef535066",
)
LIGHT = Theme(
    name="light", background="#f5f6f8", panel="#ffffff", panel_alt="#f0f2f5", raised="#e9ecf1",
    border="#cfd4dc", grid="#e6e9ef", text="#1c2230", muted="#5c6678", accent="#2563eb",
    up="#0f8a4f", down="#d93025", warning="#a86a12", live="#e03400", paper="#2563eb",
    backtest="#7c3aed", error_bg="#fde8e7", warning_bg="#fdf3dc", info_bg="#e6efff",
    ok_bg="#e3f5ec", selection="#cfe0ff", axis="#5c6678", crosshair="#9aa3b2",
    person_bubble="#dbe7ff", person_text="#1c2230", rejected="#c25e00", rejected_bg="#fff1e0",
    rejected_border="#f0b57a", rejected_problem_bg="#ffe2c2", volume_up="#0f8a4f55",
    volume_down="#d9302555",
)
THEMES = {"dark": DARK, "light": LIGHT}
_current: list[Theme] = [DARK]

#: The current theme's colours by name; updated in place, never rebound.
COLORS: dict[str, str] = DARK.colors()


def palette() -> Theme:
    return _current[0]


@runtime_checkable
class Restylable(Protocol):
    """A panel that draws colours the style sheet cannot reach (pens, brushes, item colours)."""

    def restyle(self) -> None:
        """Redraw those colours from ``COLORS`` (the theme changed)."""


def apply_theme(app: QApplication, name: str = "dark") -> Theme:
    """Make ``name`` the theme of the whole application: palette, colours and style sheet."""
    from app.ui.theme_sheet import style_sheet

    theme = THEMES.get(name, DARK)
    _current[0] = theme
    COLORS.clear()
    COLORS.update(theme.colors())
    app.setStyle("Fusion")
    qpal = QPalette()
    roles = {
        QPalette.ColorRole.Window: theme.background,
        QPalette.ColorRole.WindowText: theme.text,
        QPalette.ColorRole.Base: theme.panel,
        QPalette.ColorRole.AlternateBase: theme.panel_alt,
        QPalette.ColorRole.Text: theme.text,
        QPalette.ColorRole.Button: theme.raised,
        QPalette.ColorRole.ButtonText: theme.text,
        QPalette.ColorRole.BrightText: theme.text,
        QPalette.ColorRole.Highlight: theme.accent,
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.ToolTipBase: theme.raised,
        QPalette.ColorRole.ToolTipText: theme.text,
        QPalette.ColorRole.PlaceholderText: theme.muted,
        QPalette.ColorRole.Link: theme.accent,
        QPalette.ColorRole.Light: theme.raised,
        QPalette.ColorRole.Midlight: theme.border,
        QPalette.ColorRole.Mid: theme.border,
        QPalette.ColorRole.Dark: theme.border,
        QPalette.ColorRole.Shadow: theme.background,
    }
    for role, colour in roles.items():
        qpal.setColor(role, QColor(colour))
    for group in (QPalette.ColorGroup.Disabled,):
        for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                     QPalette.ColorRole.ButtonText):
            qpal.setColor(group, role, QColor(theme.muted))
    app.setPalette(qpal)
    app.setStyleSheet(style_sheet(theme))
    return theme


def set_look(widget: QWidget, look: str) -> None:
    """Give ``widget`` one of the sheet's looks (``muted``, ``up``, ``error-banner``…; "" for
    none) and restyle it; nothing happens when it already has that look, so this is cheap to
    call on every update."""
    if (widget.property("look") or "") == look:
        return
    widget.setProperty("look", look)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
    # a re-polish alone keeps the box of the first polish: a label given a banner look after it
    # was first shown drew its text over its own border, without the padding
    QApplication.sendEvent(widget, QEvent(QEvent.Type.StyleChange))
