"""The top of the chat: which agent the person talks to, and how that agent is doing.

The agent's name is the picker itself (a click switches to another agent); under it one line says
the role, the lifecycle state (running, paused, waiting for you, faulted with the reason, or not
started while start-up waits for the person) and what answers. A paused agent (the kill switch
pauses every agent, and its reset leaves them paused) says that what is sent waits in its inbox,
and offers Resume right there: a named LLM, a replay of recorded
answers, or the built-in rule engine, which is always called what it is and never presented as a
language model.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPointF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPolygonF
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
)

from app.agents.faults import what_to_do
from app.domain.agents import AgentInfo, AgentRole, AgentState
from app.ui.chat.style import STATE_WORDS, retone
from app.ui.chat.widgets import text_label
from app.ui.panels.style import COLORS
from app.ui.theme import set_look

RULE_ENGINE_WORDS = "built-in rule engine (not an LLM)"
CHEVRON_ROOM = 48  # the combo's padding and the drawn chevron
_PROVIDER_NAMES = {"openai-compatible": "OpenAI-compatible", "anthropic": "Anthropic"}


def provider_words(info: AgentInfo) -> str:
    """What produces the agent's answers, in words."""
    if info.provider == "rule-engine":
        return RULE_ENGINE_WORDS
    if info.provider == "replay":
        return f"replay of recorded answers ({info.model})"
    return f"LLM {info.model} via {_PROVIDER_NAMES.get(info.provider, info.provider)}"


def state_words(info: AgentInfo) -> str:
    return STATE_WORDS.get(info.state, info.state.value.replace("_", " "))


def picker_text(info: AgentInfo) -> str:
    """An agent as the picker lists it: its name, and a mark when it needs the person."""
    if info.state is AgentState.WAITING_FOR_USER:
        return f"{info.name}   — waits for you"
    if info.state is AgentState.FAULTED:
        return f"{info.name}   — faulted"
    return info.name


def ordered(agents: Sequence[AgentInfo]) -> list[AgentInfo]:
    """The Orchestrator first (the person's usual partner), then the others as created."""
    return sorted(agents, key=lambda a: a.role is not AgentRole.ORCHESTRATOR)


class AgentPicker(QComboBox):
    """The agent's name as a drop-down: as wide as the name, with a drawn chevron (a styled
    combo box loses the platform's arrow, and style sheets cannot draw a triangle)."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("agentPicker")

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        """As wide as the agent shown (not the longest name in the list), plus the chevron."""
        hint = super().sizeHint()
        width = self.fontMetrics().horizontalAdvance(self.currentText()) + CHEVRON_ROOM
        return QSize(max(width, 120), hint.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return self.sizeHint()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        super().paintEvent(event)
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(COLORS["muted"]))
        x, y = self.width() - 16.0, self.height() / 2 - 2
        painter.drawPolygon(QPolygonF([QPointF(x, y), QPointF(x + 9, y), QPointF(x + 4.5, y + 5)]))


class AgentHeader(QFrame):
    """The agent picker and the status line of the agent shown.

    Signals:
        agent_chosen: the person picked another agent (its id).
    """

    agent_chosen = Signal(str)
    resume_requested = Signal(str)  # the person pressed Resume for this (paused) agent

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("header")
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 8, 10, 8)
        box.setSpacing(4)
        self.picker = AgentPicker()
        self.picker.setToolTip("Talk to another agent")
        self.picker.currentIndexChanged.connect(self._picked)
        top = QHBoxLayout()
        top.addWidget(self.picker)
        top.addStretch(1)
        box.addLayout(top)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.dot = QLabel("●")
        self.dot.setObjectName("stateDot")
        self.state = text_label("", "state", wrap=False, selectable=False)
        self.details = text_label("", "muted")  # wraps in a narrow panel
        row.addWidget(self.dot)
        row.addWidget(self.state)
        row.addWidget(self.details, 1)
        box.addLayout(row)
        self.reason = text_label("", "faultReason")
        self.reason.hide()
        box.addWidget(self.reason)
        self.hold_note = text_label("")  # amber: a wait for the person, not a fault
        set_look(self.hold_note, "warning")
        self.hold_note.hide()
        box.addWidget(self.hold_note)
        # a paused agent (the kill switch pauses every agent, and a reset leaves them paused):
        # what is sent waits in its inbox, so say so and offer to run it again right here
        self.paused_row = QFrame()
        paused = QHBoxLayout(self.paused_row)
        paused.setContentsMargins(0, 0, 0, 0)
        paused.setSpacing(8)
        self.paused_note = text_label("")
        set_look(self.paused_note, "warning")
        self.resume_button = QPushButton("Resume")
        self.resume_button.setObjectName("chatResume")
        self.resume_button.setToolTip("Let this agent run again: it works through its inbox")
        self.resume_button.clicked.connect(self._resume_clicked)
        paused.addWidget(self.paused_note, 1)
        paused.addWidget(self.resume_button, 0, Qt.AlignmentFlag.AlignTop)
        self.paused_row.hide()
        box.addWidget(self.paused_row)
        self._filling = False
        self._hold: str | None = None
        self._shown: AgentInfo | None = None

    def hold(self, why: str | None) -> None:
        """Say that no agent runs yet, and why (start-up waits for the person), over whatever
        state the agent was saved in; None when the agents have started."""
        self._hold = why
        self.show_agent(self._shown)

    def set_agents(self, agents: Sequence[AgentInfo], current: str | None) -> None:
        """Refill the picker (names and states change) without reporting it as a choice."""
        listed = ordered(agents)
        self._filling = True
        try:
            if [self.picker.itemData(i) for i in range(self.picker.count())] == [
                    a.agent_id for a in listed]:
                for index, info in enumerate(listed):  # in place: an open list stays open
                    self.picker.setItemText(index, picker_text(info))
            else:
                self.picker.clear()
                for info in listed:
                    self.picker.addItem(picker_text(info), info.agent_id)
            self.picker.setCurrentIndex(
                self.picker.findData(current) if current is not None else -1)
            self.picker.updateGeometry()  # the name shown may have changed in place
        finally:
            self._filling = False

    def show_agent(self, info: AgentInfo | None) -> None:
        self._shown = info
        if self._hold is not None:
            retone(self.dot, AgentState.PAUSED.value)
            retone(self.state, AgentState.PAUSED.value)
            self.state.setText("not started")
            self.details.setText(
                "" if info is None else f"·  {info.role.value}  ·  {provider_words(info)}")
            self.reason.hide()
            self.paused_row.hide()
            self.hold_note.setText(self._hold)
            self.hold_note.show()
            return
        self.hold_note.hide()
        self.hold_note.setText("")
        if info is None:
            self.state.setText("no agent")
            self.details.setText("")
            self.reason.hide()
            self.paused_row.hide()
            retone(self.dot, AgentState.STOPPED.value)
            return
        retone(self.dot, info.state.value)
        retone(self.state, info.state.value)
        self.state.setText(state_words(info))
        self.details.setText(f"·  {info.role.value}  ·  {provider_words(info)}")
        faulted = info.state is AgentState.FAULTED and bool(info.fault_reason)
        self.reason.setText(
            f"Reason: {info.fault_reason}. What to do: {what_to_do(info.fault_reason or '')}"
            if faulted else "")
        self.reason.setVisible(faulted)
        paused = info.state is AgentState.PAUSED
        self.paused_note.setText(
            f"{info.name} is paused: what you send waits in its inbox until it runs again."
            if paused else "")
        self.resume_button.setEnabled(paused)
        self.paused_row.setVisible(paused)

    def status_text(self) -> str:
        """The status line as the person reads it."""
        parts = (self.state.text(), self.details.text(), self.reason.text(),
                 self.hold_note.text(), self.paused_note.text())
        return "  ".join(p for p in parts if p)

    def _resume_clicked(self) -> None:
        if self._shown is not None and self._shown.state is AgentState.PAUSED:
            self.resume_button.setEnabled(False)  # once: the state change shows the rest
            self.resume_requested.emit(self._shown.agent_id)

    def _picked(self, index: int) -> None:
        if self._filling or index < 0:
            return
        agent_id = self.picker.itemData(index)
        if isinstance(agent_id, str):
            self.agent_chosen.emit(agent_id)
