"""The colours of the whole window, dark (default) and light, and how a theme switch reaches
every widget.

One ``Theme`` holds every colour the window uses; ``COLORS`` is the current theme's colours by
name, one dict shared by the panels and the charts (``app.ui.panels.style`` and
``app.ui.charts.style`` hand out this same object) and updated in place by ``apply_theme``, so
code that looks a colour up when it draws always gets the current one.

Why a theme switch reaches every widget: widgets do not carry colours of their own. Their looks
are rules of the one application style sheet (``app.ui.theme_sheet``, written from the ``Theme``
values of ``app.ui.theme_colors``), chosen by object name or by a ``look`` property
(``set_look``); ``apply_theme`` replaces that sheet and Qt restyles every widget. What Qt's
sheets cannot colour (the charts' pens and brushes, colours kept in table items) is redrawn by
the panel's ``restyle()``, which the main window calls after a switch. Trading colours follow
the desk convention: up/buy green, down/sell red; LIVE mode gets an unmistakable orange-red.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QWidget

from app.ui.theme_colors import DARK, THEMES, Theme
from app.ui.theme_sheet import style_sheet

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
