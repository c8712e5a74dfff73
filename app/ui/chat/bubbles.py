"""The conversation itself: the person's messages, the agent's answers, its questions, and the
bubble that shows an answer while it is still streaming in.

The person's messages sit on the right, the agent's on the left, as in every chat a person has
used. An answer is Markdown, rendered with raw HTML off and images dropped: the model wrote it,
and a rendered ``<img src=…>`` would make Qt read a local file. A question card carries its
suggested replies as buttons; once answered they are disabled and the chosen one stays lit, so
the record shows what was decided.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent, QTextDocument
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from app.domain.agents import QuestionKind
from app.ui.chat.cards import Card, CardHooks, clock_time
from app.ui.chat.entries import AnswerEntry, PersonEntry, QuestionEntry, one_line
from app.ui.chat.style import retone
from app.ui.chat.widgets import Collapsible, FlowLayout, WrappedLabel, text_label

BUBBLE_SHARE = 0.82  # the person's bubble leaves the left of the row free, as chats do
PREVIEW_CHARS = 600
_IMAGE_TAG = re.compile(r"<img\b[^>]*>")  # only Qt's own markup: the source's HTML is escaped
_THINKING = re.compile(r"\s*<thinking\s*>(.*?)(</thinking\s*>|$)", re.DOTALL)
_CALL_NAME = re.compile(r"\s*<([A-Za-z_][A-Za-z0-9_.\-]*)")


def markdown_html(text: str) -> str:
    """Markdown as HTML for a label: raw HTML shown as text, every image replaced by a mark."""
    doc = QTextDocument()
    features = (QTextDocument.MarkdownFeature.MarkdownDialectGitHub
                | QTextDocument.MarkdownFeature.MarkdownNoHTML)
    doc.setMarkdown(text, features)
    return _IMAGE_TAG.sub("[image]", doc.toHtml())


def _meta_row(left: str, right: str, *, align_right: bool = False) -> QHBoxLayout:
    row = QHBoxLayout()
    row.setSpacing(8)
    who = text_label(left, "who", wrap=False, selectable=False)
    when = text_label(right, "meta", wrap=False, selectable=False)
    if align_right:
        row.addStretch(1)
        row.addWidget(when)
        row.addWidget(who)
    else:
        row.addWidget(who)
        row.addWidget(when)
        row.addStretch(1)
    return row


class MessageText(WrappedLabel):
    """The person's words, wrapped: the bubble asks for their natural width (each line unbroken)
    and takes less when the row is narrower. A plain wrapped label asks for an arbitrary width
    and would break a short message into lines."""

    def __init__(self, text: str, name: str) -> None:
        super().__init__()
        self.setObjectName(name)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setText(text)
        self.setWordWrap(True)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                     | Qt.TextInteractionFlag.TextSelectableByKeyboard)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        metrics = self.fontMetrics()
        natural = max((metrics.horizontalAdvance(line) for line in self.text().splitlines()),
                      default=0) + 4
        return QSize(natural, self.heightForWidth(natural))


class PersonBubble(Card):
    """What the person wrote: a message (a task) or a reply to a question, on the right."""

    entry: PersonEntry

    def __init__(self, entry: PersonEntry, hooks: CardHooks) -> None:
        super().__init__(entry, hooks)
        row = QHBoxLayout()
        row.setContentsMargins(48, 2, 0, 2)
        row.addStretch(1)
        self.frame = QFrame()
        self.frame.setObjectName("person")
        box = QVBoxLayout(self.frame)
        box.setContentsMargins(12, 7, 12, 8)
        box.setSpacing(3)
        self.who = _meta_row("You" if not entry.reply else "You answered",
                             clock_time(entry.market_ms), align_right=True)
        box.addLayout(self.who)
        self.text = MessageText(entry.text, "personText")
        box.addWidget(self.text)
        self.queued = text_label("queued: the agent has not started on it yet", "meta",
                                 selectable=False)
        box.addWidget(self.queued)
        row.addWidget(self.frame)
        self.body.addLayout(row)
        self.refresh()

    def refresh(self) -> None:
        self.queued.setVisible(self.entry.queued)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        """Keep the bubble within ``BUBBLE_SHARE`` of the row. Only a maximum is set: a minimum
        taken from the row's width would hold the row at that width when the panel narrows,
        and the message would go off the panel's edge."""
        self.frame.setMaximumWidth(max(160, int(event.size().width() * BUBBLE_SHARE)))
        super().resizeEvent(event)


class AnswerBubble(Card):
    """The agent's text answer, rendered Markdown, with its reasoning folded away."""

    entry: AnswerEntry

    def __init__(self, entry: AnswerEntry, hooks: CardHooks) -> None:
        super().__init__(entry, hooks)
        frame = QFrame()
        frame.setObjectName("answer")
        box = QVBoxLayout(frame)
        box.setContentsMargins(12, 8, 12, 9)
        box.setSpacing(4)
        box.addLayout(_meta_row(hooks.agent_name(entry.agent_id), clock_time(entry.market_ms)))
        self.text = WrappedLabel()
        self.text.setObjectName("answerText")
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setWordWrap(True)
        self.text.setOpenExternalLinks(False)
        self.text.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.text.setText(markdown_html(hooks.readable(entry.text)))  # agents by name
        box.addWidget(self.text)
        self.reasoning = Collapsible(
            "Reasoning", lambda: text_label(hooks.readable(entry.thinking), "thinking"),
            box.addWidget)
        self.reasoning.toggle.setVisible(bool(entry.thinking))
        box.addWidget(self.reasoning.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        row = QHBoxLayout()
        row.setContentsMargins(0, 2, 24, 2)
        row.addWidget(frame)
        self.body.addLayout(row)


class QuestionCard(Card):
    """A question the agent waits on: its text, the suggested replies as buttons, the answer."""

    entry: QuestionEntry

    def __init__(self, entry: QuestionEntry, hooks: CardHooks) -> None:
        super().__init__(entry, hooks)
        self.frame = QFrame()
        self.frame.setObjectName("question")
        box = QVBoxLayout(self.frame)
        box.setContentsMargins(12, 9, 12, 10)
        box.setSpacing(6)
        head = QHBoxLayout()
        self.title = text_label("", "questionTitle", wrap=False, selectable=False)
        head.addWidget(self.title)
        head.addStretch(1)
        head.addWidget(text_label(clock_time(entry.market_ms), "meta", wrap=False))
        box.addLayout(head)
        self.text = text_label(hooks.readable(entry.text), "questionText")
        box.addWidget(self.text)
        self.replies = QWidget()
        self.flow = FlowLayout(self.replies)
        box.addWidget(self.replies)
        self.buttons: list[QPushButton] = []
        self.status = text_label("", "meta", selectable=False)
        box.addWidget(self.status)
        self.reasoning = Collapsible(
            "Reasoning", lambda: text_label(self.entry.thinking, "thinking"), box.addWidget)
        box.addWidget(self.reasoning.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        row = QHBoxLayout()
        row.setContentsMargins(0, 2, 24, 2)
        row.addWidget(self.frame)
        self.body.addLayout(row)
        self.refresh()

    def refresh(self) -> None:
        e = self.entry
        who = self.hooks.agent_name(e.agent_id)
        approval = e.question_kind == QuestionKind.APPROVAL.value
        live = "LIVE order · " if approval and self.hooks.live else ""
        self.title.setText(f"Approval needed · {live}{who}" if approval else f"{who} asks you")
        self.text.setText(self.hooks.readable(e.text))
        retone(self.frame, "answered" if not e.pending else
               ("approval" if approval else "clarification"))
        if [b.text() for b in self.buttons] != list(e.replies):
            self._make_buttons(e.replies)
        for button in self.buttons:
            button.setEnabled(e.pending and bool(e.question_id))
            button.setChecked(e.answer is not None and button.text() == e.answer.strip())
        if e.answer is not None:
            self.status.setText(f"You answered: {one_line(e.answer, 200)}")
        elif e.question_id:
            self.status.setText("Waiting for your answer: pick a reply or type your own below."
                                if not approval else "The order waits for your decision.")
        else:
            self.status.setText("Asking…")
        self.replies.setVisible(bool(self.buttons))
        self.reasoning.toggle.setVisible(bool(e.thinking))

    def _make_buttons(self, replies: tuple[str, ...]) -> None:
        for button in self.buttons:
            self.flow.removeWidget(button)
            button.deleteLater()
        self.buttons = []
        for reply in replies:
            button = QPushButton(reply)
            button.setObjectName("reply")
            button.setCheckable(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _checked=False, text=reply: self._reply(text))
            self.flow.addWidget(button)
            self.buttons.append(button)

    def _reply(self, text: str) -> None:
        e = self.entry
        if not e.pending or not e.question_id:
            return
        if self.hooks.answer(e.question_id, text):
            e.answer = text
        self.refresh()


class TypingBubble(QWidget):
    """An answer arriving piece by piece (``AnswerStreamed``); the stored message replaces it."""

    def __init__(self, agent_name: str) -> None:
        super().__init__()
        self.streamed = ""
        frame = QFrame()
        frame.setObjectName("typing")
        box = QVBoxLayout(frame)
        box.setContentsMargins(12, 7, 12, 8)
        box.setSpacing(3)
        box.addLayout(_meta_row(agent_name, "writing…"))
        self.text = text_label("", "typingText", selectable=False)
        box.addWidget(self.text)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 2, 24, 2)
        row.addWidget(frame)

    def append(self, delta: str) -> None:
        self.streamed += delta
        self.text.setText(stream_preview(self.streamed))


def stream_preview(streamed: str) -> str:
    """What a partial answer says so far, in words: its reasoning, the call it is preparing, or
    the text (its end, when long)."""
    parts: list[str] = []
    rest = streamed
    thinking = _THINKING.match(streamed)
    if thinking is not None:
        parts.append(one_line(thinking.group(1), 300))
        rest = streamed[thinking.end():] if thinking.group(2) else ""
    call = _CALL_NAME.match(rest)
    if call is not None:
        parts.append(f"preparing a call to {call.group(1)}…")
    elif rest.strip():
        text = rest.strip()
        parts.append(text if len(text) <= PREVIEW_CHARS else "…" + text[-PREVIEW_CHARS:])
    return "\n".join(parts) or "…"
