"""The work cards of the chat: a tool call with its result, a task from elsewhere, a notice.

A tool card says in one line what ran (tool, key parameters), how it went (a coloured status
glyph, the duration) and, under it, what came back or what went wrong. A Risk Guard refusal is
drawn in orange with the rule and the reason in words, because a refused order is the one thing a
person must not miss. The reasoning and the raw XML of call and result are one click away; the
XML view is only built when first opened, so hundreds of cards stay cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.ui.chat.entries import (
    AWAITING,
    ERROR,
    REJECTED,
    RUNNING,
    SUCCESS,
    Entry,
    FillEntry,
    NoticeEntry,
    TaskEntry,
    ToolEntry,
    decoded_contents,
    payload_params,
    task_source_words,
)
from app.ui.chat.style import TOOL_GLYPHS, retone
from app.ui.chat.widgets import Chip, Collapsible, Divider, ElidedLabel, FlowLayout, text_label
from app.ui.panels.audit_model import format_duration
from app.ui.panels.style import format_time, mono_font

RAW_XML_MAX_HEIGHT = 280
HUMAN_APPROVAL_RULE = "human_approval"
# the tools that place, change or cancel orders: on a LIVE account their cards carry the tag
ORDER_TOOLS = frozenset({"create_order", "cancel_order", "set_position_tp_sl_orders",
                         "close_position"})
LIVE_TAG = "LIVE"


@dataclass(frozen=True, slots=True)
class CardHooks:
    """What cards need from the panel.

    Args:
        agent_name: an agent's name by id (who sent a task, who asks).
        agent_names: every known agent's name by id.
        answer: answer a question by id; True when the answer was taken.
        live: the account is LIVE (real money): every order card says so.
        readable: the agents' ids in a text (a journal line, a signal's source) as their names.
    """

    agent_name: Callable[[str], str]
    agent_names: Callable[[], dict[str, str]]
    answer: Callable[[str, str], bool]
    live: bool = False
    readable: Callable[[str], str] = str


def clock_time(ms: int | None) -> str:
    """``14:00`` (market time); the divider above each task carries the date."""
    text = format_time(ms, seconds=False)
    return text[11:] if len(text) > 11 else text


class Card(QWidget):
    """One entry on screen, with the divider above it when it opens a task.

    ``refresh`` redraws the card from its entry after the entry changed (a result arrived).
    """

    def __init__(self, entry: Entry, hooks: CardHooks) -> None:
        super().__init__()
        self.entry = entry
        self.hooks = hooks
        self.body = QVBoxLayout(self)
        self.body.setContentsMargins(0, 0, 0, 0)
        self.body.setSpacing(2)
        if entry.starts_task:
            self.body.addWidget(Divider(format_time(entry.market_ms, seconds=False)))

    def refresh(self) -> None:
        """Redraw from ``self.entry``; the base card has nothing that changes."""


class ToolCard(Card):
    """One call and its result: status, key parameters, duration; reasoning and XML on demand.

    The parts most cards never need (the problem box, the reasoning, the XML view) are built
    when first needed: every widget of a card costs a style-sheet pass when it is shown.
    """

    entry: ToolEntry

    def __init__(self, entry: ToolEntry, hooks: CardHooks) -> None:
        super().__init__(entry, hooks)
        self.frame = QFrame()
        self.frame.setObjectName("toolCard")
        self.box = QVBoxLayout(self.frame)
        self.box.setContentsMargins(10, 5, 8, 6)
        self.box.setSpacing(3)
        head = QHBoxLayout()
        head.setSpacing(6)
        self.glyph = QLabel()
        self.glyph.setObjectName("glyph")
        self.glyph.setFixedWidth(14)
        self.glyph.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.name = ElidedLabel()  # whole where there is room, cut in a narrow panel
        self.name.setObjectName("toolName")
        self.name.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.name.setFont(mono_font(9))
        self.params = ElidedLabel()
        self.params.setObjectName("muted")
        self.params.setFont(mono_font(9))
        self.meta = QLabel()
        self.meta.setObjectName("meta")
        head.addWidget(self.glyph)
        self.head = head
        self.live_tag: QLabel | None = None  # made once the call is known to be an order's
        head.addWidget(self.name)
        head.addWidget(self.params, 1)
        head.addWidget(self.meta)
        self.box.addLayout(head)
        self.problem: Problem | None = None
        foot = QHBoxLayout()
        foot.setSpacing(6)
        self.summary = ElidedLabel()
        self.summary.setObjectName("meta")
        self.reasoning = Collapsible(
            "Reasoning", lambda: text_label(self.hooks.readable(self.entry.thinking), "thinking"),
            lambda body: self.extras.insertWidget(0, body),
        )
        self.raw = Collapsible("XML", self._raw_view, lambda body: self.extras.addWidget(body))
        foot.addWidget(self.summary, 1)
        foot.addWidget(self.reasoning.toggle)
        foot.addWidget(self.raw.toggle)
        self.box.addLayout(foot)
        self.extras = QVBoxLayout()
        self.extras.setSpacing(4)
        self.box.addLayout(self.extras)
        self.body.addWidget(self.frame)
        self.refresh()

    def refresh(self) -> None:
        e = self.entry
        if self.hooks.live and self.live_tag is None and e.tool_name in ORDER_TOOLS:
            self.live_tag = live_tag()
            self.head.insertWidget(1, self.live_tag)
        retone(self.frame, e.status)
        retone(self.glyph, e.status)
        self.glyph.setText(TOOL_GLYPHS.get(e.status, "•"))
        self.name.set_full_text(e.tool_name)
        self.params.set_full_text(self.hooks.readable(
            "  ".join(f"{p.name}={p.value}" for p in e.params)))
        meta = [e.status if e.status != SUCCESS else "ok"]
        if e.duration_ms is not None:
            meta.append(format_duration(e.duration_ms))
        self.meta.setText(" · ".join(meta))
        self.reasoning.toggle.setVisible(bool(e.thinking))
        title, text = _problem_words(e)
        if title and self.problem is None:
            self.problem = Problem()
            self.box.insertWidget(1, self.problem)
        if self.problem is not None:
            self.problem.show_problem(e.status, title, text)
        summary = {
            SUCCESS: f"→ {self.hooks.readable(e.summary)}" if e.summary else "",
            RUNNING: "running…",
            AWAITING: "held for your approval: answer the question below",
        }.get(e.status, "")
        self.summary.set_full_text(summary)
        if isinstance(self.raw.body, QPlainTextEdit):
            self._fill_raw(self.raw.body)

    def _raw_view(self) -> QPlainTextEdit:
        view = QPlainTextEdit()
        view.setObjectName("rawXml")
        view.setReadOnly(True)
        view.setFont(mono_font(8))
        view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self._fill_raw(view)
        return view

    def _fill_raw(self, view: QPlainTextEdit) -> None:
        e = self.entry
        parts = []
        if e.call_xml:
            parts.append(f"── call ──\n{e.call_xml.strip()}")
        parts.append(f"── result ──\n{e.result_xml.strip()}" if e.result_xml else
                     "── result ──\n(not yet)")
        for param in decoded_contents(e.call_xml, e.result_xml):
            parts.append(f"── {param.name}, decoded ──\n{param.value}")
        text = "\n\n".join(parts)
        if view.toPlainText() != text:
            view.setPlainText(text)
        lines = text.count("\n") + 1
        view.setFixedHeight(min(RAW_XML_MAX_HEIGHT, lines * view.fontMetrics().lineSpacing() + 14))


def live_tag() -> QLabel:
    """The red LIVE tag of an order card on a real-money account."""
    tag = QLabel(LIVE_TAG)
    tag.setObjectName("liveTag")
    tag.setToolTip("A LIVE order: real money on the exchange")
    return tag


class Problem(QFrame):
    """What went wrong with a call: the error code and message, or the refusal and its rule."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("problem")
        box = QVBoxLayout(self)
        box.setContentsMargins(8, 5, 8, 6)
        box.setSpacing(2)
        self.title = text_label("", "problemTitle")
        self.text = text_label("", "problemText")
        box.addWidget(self.title)
        box.addWidget(self.text)

    def show_problem(self, status: str, title: str, text: str) -> None:
        retone(self, status)
        retone(self.title, status)
        self.title.setText(title)
        self.text.setText(text)
        self.text.setVisible(bool(text))
        self.setVisible(bool(title))


def _problem_words(e: ToolEntry) -> tuple[str, str]:
    """The failure in words: (title, detail), or empty strings when there is none."""
    if e.status == REJECTED:
        if e.rule == HUMAN_APPROVAL_RULE:
            return "You refused this order", e.message
        rule = e.rule.replace("_", " ") if e.rule else "a risk rule"
        return f"Refused by the Risk Guard · rule: {rule}", e.message
    if e.status == ERROR:
        return (e.error_code or "Error"), e.message
    return "", ""


class TaskCard(Card):
    """A task another agent, a job or the system gave: its type, sender and payload."""

    entry: TaskEntry

    def __init__(self, entry: TaskEntry, hooks: CardHooks) -> None:
        super().__init__(entry, hooks)
        frame = QFrame()
        frame.setObjectName("taskCard")
        box = QVBoxLayout(frame)
        box.setContentsMargins(10, 6, 10, 7)
        box.setSpacing(3)
        head = QHBoxLayout()
        head.setSpacing(8)
        self.kind = text_label(entry.task_type or "task", "taskType", wrap=False)
        sender = task_source_words(entry.source, hooks.agent_names())
        self.source = ElidedLabel(f"from {sender}")  # cut, not wider than the panel
        self.source.setObjectName("muted")
        head.addWidget(self.kind)
        head.addWidget(self.source, 1)
        head.addWidget(text_label(clock_time(entry.market_ms), "meta", wrap=False))
        box.addLayout(head)
        payload = {k: v for k, v in entry.payload.items() if k != "text"}
        params = payload_params(payload)
        if params:
            chips = QWidget()
            flow = FlowLayout(chips, spacing=4)
            for param in params:
                chip = Chip(hooks.readable(f"{param.name} {param.value}"))
                chip.setFont(mono_font(8))
                flow.addWidget(chip)
            box.addWidget(chips)
        text = entry.payload.get("text")
        if isinstance(text, str) and text.strip():
            box.addWidget(text_label(hooks.readable(text.strip())))
        self.body.addWidget(frame)


class FillCard(Card):
    """A fill or an exit: its kind (bought, take profit hit…), who traded what at which price,
    and for a sell what it realized, green or red: the news of the desk, in every chat."""

    entry: FillEntry

    def __init__(self, entry: FillEntry, hooks: CardHooks) -> None:
        super().__init__(entry, hooks)
        buy = entry.side == "BUY"
        frame = QFrame()
        frame.setObjectName("fillCard")
        frame.setProperty("tone", "buy" if buy else "sell")
        box = QVBoxLayout(frame)
        box.setContentsMargins(10, 5, 10, 6)
        box.setSpacing(2)
        head = QHBoxLayout()
        head.setSpacing(6)
        glyph = text_label("▲" if buy else "▼", "fillGlyph", wrap=False, selectable=False)
        glyph.setProperty("tone", "buy" if buy else "sell")
        self.title = text_label(entry.title, "fillTitle", wrap=False)
        head.addWidget(glyph)
        head.addWidget(self.title)
        head.addStretch(1)
        head.addWidget(text_label(clock_time(entry.market_ms), "meta", wrap=False))
        box.addLayout(head)
        self.line = text_label(entry.line, "fillLine")
        box.addWidget(self.line)
        self.pnl = text_label(entry.pnl, "fillPnl")
        tone = ("" if entry.pnl_value is None else "up" if entry.pnl_value > 0
                else "down" if entry.pnl_value < 0 else "")
        self.pnl.setProperty("tone", tone)
        self.pnl.setVisible(bool(entry.pnl))
        box.addWidget(self.pnl)
        self.body.addWidget(frame)


class NoticeLine(Card):
    """The loop's own remark (a step limit, a spent budget, a failing provider) as a system line."""

    entry: NoticeEntry

    def __init__(self, entry: NoticeEntry, hooks: CardHooks) -> None:
        super().__init__(entry, hooks)
        label = text_label(f"ⓘ  {hooks.readable(entry.text)}", "notice")
        label.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        label.setContentsMargins(24, 4, 24, 4)
        self.label = label
        self.body.addWidget(label)
