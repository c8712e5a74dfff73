"""Colours and the application style sheet, dark (default) and light, from one place.

Every widget takes its colours from ``palette()`` so a theme switch is one call. Trading colours
follow the desk convention: up/buy green, down/sell red; LIVE mode gets an unmistakable orange-red.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication


@dataclass(frozen=True)
class Theme:
    name: str
    background: str
    panel: str
    raised: str
    border: str
    text: str
    muted: str
    accent: str
    up: str
    down: str
    warning: str
    live: str
    paper: str
    backtest: str


DARK = Theme(
    name="dark", background="#0f1116", panel="#161a22", raised="#1e2430", border="#2a3140",
    text="#d6dae3", muted="#8a93a6", accent="#4f8cff", up="#26a69a", down="#ef5350",
    warning="#f0b429", live="#ff3d00", paper="#3b82f6", backtest="#8b5cf6",
)
LIGHT = Theme(
    name="light", background="#f5f6f8", panel="#ffffff", raised="#eef0f4", border="#d5d9e0",
    text="#1c2230", muted="#5c6678", accent="#2563eb", up="#0f9d58", down="#d93025",
    warning="#b7791f", live="#e03400", paper="#2563eb", backtest="#7c3aed",
)
THEMES = {"dark": DARK, "light": LIGHT}
_current: list[Theme] = [DARK]


def palette() -> Theme:
    return _current[0]


def apply_theme(app: QApplication, name: str = "dark") -> Theme:
    """Set the Qt palette and style sheet for the whole application."""
    theme = THEMES.get(name, DARK)
    _current[0] = theme
    app.setStyle("Fusion")
    qpal = QPalette()
    roles = {
        QPalette.ColorRole.Window: theme.background,
        QPalette.ColorRole.WindowText: theme.text,
        QPalette.ColorRole.Base: theme.panel,
        QPalette.ColorRole.AlternateBase: theme.raised,
        QPalette.ColorRole.Text: theme.text,
        QPalette.ColorRole.Button: theme.raised,
        QPalette.ColorRole.ButtonText: theme.text,
        QPalette.ColorRole.Highlight: theme.accent,
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.ToolTipBase: theme.raised,
        QPalette.ColorRole.ToolTipText: theme.text,
        QPalette.ColorRole.PlaceholderText: theme.muted,
    }
    for role, colour in roles.items():
        qpal.setColor(role, QColor(colour))
    app.setPalette(qpal)
    app.setStyleSheet(style_sheet(theme))
    return theme


def style_sheet(t: Theme) -> str:
    return f"""
QMainWindow, QDialog {{ background: {t.background}; }}
QDockWidget {{ color: {t.text}; }}
QDockWidget::title {{ background: {t.panel}; padding: 4px 8px;
    border-bottom: 1px solid {t.border}; }}
QToolBar {{ background: {t.panel}; border-bottom: 1px solid {t.border}; spacing: 6px; }}
QStatusBar {{ background: {t.panel}; color: {t.muted}; border-top: 1px solid {t.border}; }}
QTableView, QTreeView, QListView, QTextBrowser, QPlainTextEdit, QTextEdit, QLineEdit {{
    background: {t.panel}; border: 1px solid {t.border}; selection-background-color: {t.accent};
}}
QHeaderView::section {{ background: {t.raised}; color: {t.muted}; border: none;
    border-right: 1px solid {t.border}; padding: 3px 6px; }}
QPushButton {{ background: {t.raised}; border: 1px solid {t.border}; border-radius: 4px;
    padding: 4px 10px; }}
QPushButton:hover {{ border-color: {t.accent}; }}
QPushButton:disabled {{ color: {t.muted}; }}
QTabBar::tab {{ background: {t.panel}; padding: 5px 12px; border: 1px solid {t.border}; }}
QTabBar::tab:selected {{ background: {t.raised}; color: {t.text}; }}
QLabel#banner {{ background: {t.raised}; color: {t.text}; padding: 6px 10px;
    border-bottom: 1px solid {t.border}; }}
"""
