"""The trading-mode badge: BACKTEST, PAPER or LIVE, always on screen, LIVE impossible to miss.

A person who mistakes a live account for a paper one can lose real money, so LIVE is not a small
coloured word: it is a bright red bar with a plain warning. The badge is its own widget so the main
window can put a second one in its status bar.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from app.domain.trading import Mode
from app.ui.panels.style import MODE_COLORS

_TEXT: dict[Mode, str] = {
    Mode.BACKTEST: "BACKTEST · simulated history",
    Mode.PAPER: "PAPER · simulated account",
    Mode.LIVE: "● LIVE · REAL FUNDS — orders go to the exchange",
}


class ModeBadge(QLabel):
    """Shows the account's mode; ``set_mode`` switches text and colour."""

    def __init__(self, mode: Mode, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modeBadge")
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.mode = mode
        self.set_mode(mode)

    def set_mode(self, mode: Mode) -> None:
        self.mode = mode
        background, text = MODE_COLORS[mode]
        self.setText(_TEXT[mode])
        self.setToolTip(f"Account mode: {mode.value}")
        live = mode is Mode.LIVE
        self.setSizePolicy(
            QSizePolicy.Policy.Expanding if live else QSizePolicy.Policy.Maximum,
            QSizePolicy.Policy.Fixed,
        )
        self.setStyleSheet(
            f"QLabel#modeBadge {{ background: {background}; color: {text}; "
            f"font-weight: bold; letter-spacing: 1px; border-radius: {0 if live else 3}px; "
            f"padding: {'7px 14px' if live else '3px 10px'}; "
            f"font-size: {'13pt' if live else '9pt'}; }}"
        )

    @property
    def color(self) -> str:
        """The badge's background colour (what a test or the tray icon can compare)."""
        return MODE_COLORS[self.mode][0]
