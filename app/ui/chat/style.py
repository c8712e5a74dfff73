"""The chat's look: status glyphs and words, and ``retone`` for a card whose state changes.

Cards are styled by object name and a ``tone`` property from the application's style sheet (the
chat's rules are in ``app.ui.theme_sheet``), rather than a sheet per card: a busy replay makes
hundreds of cards, and Qt parses every per-widget sheet separately; and a sheet of the app's
follows a theme switch. A card whose tone changes (a call that finishes) is re-polished with
``retone``.
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from app.domain.agents import AgentState
from app.ui.chat.entries import AWAITING, ERROR, REJECTED, RUNNING, SUCCESS

TOOL_GLYPHS = {SUCCESS: "✓", ERROR: "✕", REJECTED: "⊘", RUNNING: "…", AWAITING: "?"}
STATE_WORDS = {
    AgentState.RUNNING: "running",
    AgentState.PAUSED: "paused",
    AgentState.WAITING_FOR_USER: "waiting for you",
    AgentState.FAULTED: "faulted",
    AgentState.STOPPED: "stopped",
    AgentState.CREATED: "created, not started",
}


def retone(widget: QWidget, tone: str) -> None:
    """Set a card's ``tone`` property and re-apply the sheet (Qt does not on its own)."""
    if widget.property("tone") == tone:
        return
    widget.setProperty("tone", tone)
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)
