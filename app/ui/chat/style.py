"""The chat's look: status colours and glyphs, and one style sheet for every card.

Cards are styled by object name and a ``tone`` property from one sheet set on the panel, rather
than a sheet per card: a busy replay makes hundreds of cards, and Qt parses every per-widget
sheet separately. A card whose tone changes (a call that finishes) is re-polished with ``retone``.
Colours come from the panels' shared ``COLORS``, so the chat matches the account and audit panels.
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

from app.domain.agents import AgentState
from app.ui.chat.entries import AWAITING, ERROR, REJECTED, RUNNING, SUCCESS
from app.ui.panels.style import COLORS

ORANGE = "#ff9f43"  # Risk Guard refusals: louder than a warning, distinct from an error's red
PERSON_BUBBLE = "#1f3357"

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


def chat_stylesheet() -> str:
    c = COLORS
    return f"""
    QWidget#chatPanel {{ background: {c['background']}; color: {c['text']}; }}
    QWidget#chatPanel QLabel {{ background: transparent; }}
    QScrollArea#transcript, QWidget#transcriptBody {{ background: {c['background']}; border: 0; }}
    QFrame#header {{ background: {c['panel']}; border-bottom: 1px solid {c['border']}; }}
    QComboBox#agentPicker {{
        background: transparent; border: 1px solid transparent; border-radius: 4px;
        padding: 2px 6px; min-height: 22px; font-size: 12pt; font-weight: bold;
        color: {c['text']};
    }}
    QComboBox#agentPicker:hover, QComboBox#agentPicker:on {{
        background: {c['panel_alt']}; border-color: {c['border']};
    }}
    QComboBox#agentPicker::drop-down {{ border: 0; width: 22px; }}
    QComboBox#agentPicker::down-arrow {{ image: none; width: 0; height: 0; border: 0; }}
    QComboBox#agentPicker:hover {{ border-color: {c['accent']}; }}
    QComboBox#agentPicker QAbstractItemView {{
        background: {c['panel']}; border: 1px solid {c['border']};
        selection-background-color: {c['selection']}; font-size: 10pt; font-weight: normal;
    }}
    QLabel#muted, QLabel#meta, QLabel#who, QLabel#typingText {{ color: {c['muted']}; }}
    QLabel#who {{ font-weight: bold; }}
    QLabel#answerText, QLabel#personText, QLabel#questionText {{ color: {c['text']}; }}
    QLabel#personText {{ color: #e8ecf4; }}
    QLabel#thinking {{ color: {c['muted']}; font-style: italic; padding: 2px 0 2px 8px;
        border-left: 2px solid {c['border']}; }}
    QLabel#notice {{ color: {c['muted']}; font-style: italic; }}
    QLabel#toolName {{ font-weight: bold; color: {c['text']}; }}
    QLabel#chip {{ background: {c['panel_alt']}; border: 1px solid {c['border']};
        border-radius: 3px; padding: 1px 5px; color: {c['text']}; }}
    QLabel#taskType {{ font-weight: bold; color: {c['accent']}; }}
    QLabel#questionTitle {{ font-weight: bold; color: {c['accent']}; }}
    QFrame#question[tone="approval"] QLabel#questionTitle {{ color: {c['warning']}; }}
    QFrame#question[tone="answered"] QLabel#questionTitle {{ color: {c['muted']}; }}
    QLabel#glyph {{ font-weight: bold; color: {c['muted']}; }}
    QLabel#glyph[tone="success"] {{ color: {c['up']}; }}
    QLabel#glyph[tone="error"] {{ color: {c['down']}; }}
    QLabel#glyph[tone="rejected"] {{ color: {ORANGE}; }}
    QLabel#glyph[tone="awaiting approval"] {{ color: {c['warning']}; }}
    QLabel#problemTitle {{ font-weight: bold; color: {c['down']}; }}
    QLabel#problemTitle[tone="rejected"] {{ color: {ORANGE}; }}
    QLabel#stateDot, QLabel#state {{ color: {c['muted']}; }}
    QLabel#state {{ font-weight: bold; }}
    QLabel#stateDot[tone="running"], QLabel#state[tone="running"] {{ color: {c['up']}; }}
    QLabel#stateDot[tone="paused"], QLabel#state[tone="paused"] {{ color: {c['warning']}; }}
    QLabel#stateDot[tone="waiting_for_user"], QLabel#state[tone="waiting_for_user"] {{
        color: {c['accent']}; }}
    QLabel#stateDot[tone="faulted"], QLabel#state[tone="faulted"] {{ color: {c['down']}; }}
    QLabel#faultReason {{ color: {c['down']}; }}
    QScrollBar:vertical {{ background: {c['background']}; width: 10px; margin: 0; }}
    QScrollBar::handle:vertical {{ background: {c['border']}; border-radius: 4px;
        min-height: 30px; }}
    QScrollBar::handle:vertical:hover {{ background: {c['muted']}; }}
    QScrollBar::add-line:vertical, QScrollBar::sub-line:vertical {{ height: 0; }}
    QScrollBar::add-page:vertical, QScrollBar::sub-page:vertical {{ background: none; }}
    QLabel#meta {{ font-size: 8pt; }}
    QLabel#divider {{ color: {c['muted']}; font-size: 8pt; }}
    QFrame#rule {{ background: {c['border']}; max-height: 1px; min-height: 1px; border: 0; }}

    QFrame#person {{ background: {PERSON_BUBBLE}; border-radius: 10px; }}
    QFrame#answer {{
        background: {c['panel_alt']}; border: 1px solid {c['border']}; border-radius: 10px;
    }}
    QFrame#typing {{
        background: {c['panel_alt']}; border: 1px dashed {c['border']}; border-radius: 10px;
    }}
    QFrame#taskCard {{
        background: {c['panel']}; border: 1px solid {c['border']}; border-radius: 6px;
    }}
    QFrame#toolCard {{
        background: {c['panel']}; border: 1px solid {c['border']}; border-radius: 6px;
        border-left: 3px solid {c['muted']};
    }}
    QFrame#toolCard[tone="success"] {{ border-left-color: {c['up']}; }}
    QFrame#toolCard[tone="error"] {{ border-left-color: {c['down']}; }}
    QFrame#toolCard[tone="awaiting approval"] {{ border-left-color: {c['warning']}; }}
    QFrame#toolCard[tone="rejected"] {{
        background: #2b1d0e; border: 1px solid #6b4514; border-left: 3px solid {ORANGE};
    }}
    QFrame#problem {{ background: {c['error_bg']}; border-radius: 4px; }}
    QFrame#problem[tone="rejected"] {{ background: #3d2508; }}
    QFrame#question {{
        background: {c['info_bg']}; border: 1px solid {c['accent']}; border-radius: 8px;
    }}
    QFrame#question[tone="approval"] {{ background: {c['warning_bg']};
        border-color: {c['warning']}; }}
    QFrame#question[tone="answered"] {{ background: {c['panel']}; border-color: {c['border']}; }}
    QPlainTextEdit#rawXml {{
        background: {c['background']}; border: 1px solid {c['border']}; border-radius: 4px;
        color: {c['text']};
    }}

    QToolButton#toggle {{
        background: transparent; border: 0; color: {c['muted']}; padding: 0 2px;
        font-size: 8pt;
    }}
    QToolButton#toggle:hover {{ color: {c['text']}; }}
    QPushButton#reply {{
        background: {c['panel_alt']}; border: 1px solid {c['accent']}; border-radius: 12px;
        padding: 4px 12px; color: {c['text']};
    }}
    QPushButton#reply:hover {{ background: {c['selection']}; }}
    QPushButton#reply:disabled {{ border-color: {c['border']}; color: {c['muted']}; }}
    QPushButton#reply:checked {{
        background: {c['accent']}; border-color: {c['accent']}; color: #ffffff;
    }}
    QPushButton#loadEarlier {{
        background: {c['panel']}; border: 1px solid {c['border']}; border-radius: 10px;
        padding: 3px 14px; color: {c['muted']};
    }}
    QPushButton#loadEarlier:hover {{ color: {c['text']}; border-color: {c['accent']}; }}

    QFrame#composer {{ background: {c['panel']}; border-top: 1px solid {c['border']}; }}
    QPlainTextEdit#chatInput {{
        background: {c['panel_alt']}; border: 1px solid {c['border']}; border-radius: 6px;
        padding: 4px 6px; color: {c['text']};
    }}
    QPlainTextEdit#chatInput:focus {{ border-color: {c['accent']}; }}
    QPushButton#send {{
        background: {c['accent']}; border: 0; border-radius: 6px; color: #ffffff;
        padding: 6px 16px; font-weight: bold;
    }}
    QPushButton#send:disabled {{ background: {c['panel_alt']}; color: {c['muted']}; }}
    QLabel#inputError {{
        background: {c['error_bg']}; color: {c['text']}; border-left: 3px solid {c['down']};
        padding: 4px 8px;
    }}
    """
