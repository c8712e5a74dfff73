"""Where the person writes: a growing multi-line input with history, a Send button, and the line
that says what went wrong.

Enter sends and Shift+Enter starts a new line, as in every chat. Up on the first line and Down on
the last walk through what was sent before (a half-written draft comes back at the end), so a
command can be repeated or corrected without retyping. An empty message is never sent. A refusal
(no such agent, an empty answer, a question already answered) is shown above the input in words,
and the text stays in the input to fix and send again.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent, QResizeEvent, QTextCursor
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout

from app.ui.chat.widgets import text_label

MAX_LINES = 6
HISTORY_SIZE = 100


class ChatInput(QPlainTextEdit):
    """The text box: Enter submits, Shift+Enter breaks the line, Up/Down recall sent messages.

    Signals:
        submitted: the person pressed Enter.
    """

    submitted = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("chatInput")
        self.setTabChangesFocus(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self._hint = ""
        self.history: list[str] = []
        self._recalled: int | None = None  # index into history while walking it
        self._draft = ""
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit())
        self._fit()

    def text(self) -> str:
        return self.toPlainText()

    def set_hint(self, text: str) -> None:
        """Show ``text`` as the placeholder, elided to the input's width (it was cut off at the
        edge of a narrow chat), whole in the tooltip."""
        self._hint = text
        self.setToolTip(text)
        self._fit_hint()

    def _fit_hint(self) -> None:
        room = self.viewport().width() - 2 * int(self.document().documentMargin()) - 4
        elided = self.fontMetrics().elidedText(self._hint, Qt.TextElideMode.ElideRight,
                                               max(room, 40))
        if elided != self.placeholderText():
            self.setPlaceholderText(elided)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_hint()

    def remember(self, text: str) -> None:
        """Keep a sent message for Up/Down (a repeat of the last one is kept once)."""
        if not self.history or self.history[-1] != text:
            self.history.append(text)
            del self.history[:-HISTORY_SIZE]
        self._recalled = None
        self._draft = ""

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 - Qt's name
        key = event.key()
        modifiers = event.modifiers()
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if modifiers & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")  # a real newline, not Qt's soft line separator
            else:
                self.submitted.emit()
            return
        plain = not modifiers & (Qt.KeyboardModifier.ShiftModifier
                                 | Qt.KeyboardModifier.ControlModifier
                                 | Qt.KeyboardModifier.AltModifier)
        if plain and key == Qt.Key.Key_Up and self._on_edge(first=True) and self.history:
            self._recall(-1)
            return
        if plain and key == Qt.Key.Key_Down and self._on_edge(first=False) and (
                self._recalled is not None):
            self._recall(+1)
            return
        super().keyPressEvent(event)

    def _on_edge(self, *, first: bool) -> bool:
        """The cursor is on the first (or last) visual line, where Up (Down) has nowhere to go."""
        cursor = self.textCursor()
        block = cursor.block()
        layout = block.layout()
        line = layout.lineForTextPosition(cursor.positionInBlock()) if layout else None
        if first:
            return block == self.document().firstBlock() and (
                line is None or not line.isValid() or line.lineNumber() == 0)
        return block == self.document().lastBlock() and (
            line is None or not line.isValid() or line.lineNumber() == layout.lineCount() - 1)

    def _recall(self, step: int) -> None:
        if self._recalled is None:
            self._draft = self.toPlainText()
            index = len(self.history) - 1
        else:
            index = self._recalled + step
        if index >= len(self.history):
            self._recalled = None
            self._show(self._draft)
            return
        self._recalled = max(0, index)
        self._show(self.history[self._recalled])

    def _show(self, text: str) -> None:
        self.setPlainText(text)
        self.moveCursor(QTextCursor.MoveOperation.End)

    def _fit(self) -> None:
        """Grow with the text, one to ``MAX_LINES`` lines, then scroll."""
        wanted = int(self.document().documentLayout().documentSize().height())
        lines = max(1, min(MAX_LINES, wanted))
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded if wanted > MAX_LINES
                                        else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        margins = self.contentsMargins()
        frame = int(self.document().documentMargin() * 2) + margins.top() + margins.bottom()
        self.setFixedHeight(lines * self.fontMetrics().lineSpacing() + frame + 6)


class Composer(QFrame):
    """The input, its Send button, the error line and the keyboard hint.

    Signals:
        send_requested: the person sent this (non-empty) text.
    """

    send_requested = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("composer")
        box = QVBoxLayout(self)
        box.setContentsMargins(10, 8, 10, 6)
        box.setSpacing(5)
        self.error = text_label("", "inputError")
        self.error.hide()
        box.addWidget(self.error)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.input = ChatInput()
        self.input.submitted.connect(self.send)
        self.input.textChanged.connect(self._text_changed)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("send")
        self.send_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.send_button.setEnabled(False)
        self.send_button.clicked.connect(self.send)
        row.addWidget(self.input, 1)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        box.addLayout(row)
        self.hint = text_label("Enter sends · Shift+Enter new line · ↑ ↓ earlier messages",
                               "meta", selectable=False)
        box.addWidget(self.hint)

    def send(self) -> None:
        text = self.input.text()
        if not text.strip():
            return
        self.send_requested.emit(text.strip())

    def accept(self, text: str) -> None:
        """The text was sent: remember it and empty the input."""
        self.input.remember(text)
        self.input.clear()

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.show()

    def clear_error(self) -> None:
        self.error.hide()
        self.error.setText("")

    def set_placeholder(self, text: str) -> None:
        self.input.set_hint(text)

    def _text_changed(self) -> None:
        self.send_button.setEnabled(bool(self.input.text().strip()))
        if self.error.text():  # the person is fixing it
            self.clear_error()
