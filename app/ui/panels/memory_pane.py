"""The memory browser's right side: one file shown (Markdown rendered, or monospace) or edited.

This widget only displays and collects text; it never touches the bank. The browser decides what
to load and when to save, and uses ``Banner`` to tell the person what happened, with buttons when
there is a choice to make (overwrite an agent's newer version, or take it and drop the edit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.ui.panels.style import COLORS, mono_font, set_banner
from app.ui.theme import set_look

_MARKDOWN_MARKUP = re.compile(r"^[#>\-*+\s]+|[*_`]+")
EDITABLE_TYPES = ("MARKDOWN", "YAML", "TEXT", "UNKNOWN")


class Banner(QFrame):
    """A message strip (error, warning or info) with optional action buttons."""

    def __init__(self) -> None:
        super().__init__()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.label, 1)
        self._buttons: list[QPushButton] = []
        self.kind = ""
        self.hide()

    def show_message(
        self, kind: str, text: str, actions: Sequence[tuple[str, Callable[[], None]]] = ()
    ) -> None:
        self.kind = kind
        self.label.setText(text)
        set_banner(self.label, kind)
        for button in self._buttons:
            button.deleteLater()
        self._buttons = []
        for title, callback in actions:
            button = QPushButton(title)
            button.clicked.connect(lambda _checked=False, cb=callback: cb())
            self.layout().addWidget(button)
            self._buttons.append(button)
        self.show()

    def clear(self) -> None:
        self.kind = ""
        self.label.setText("")
        self.hide()

    @property
    def text(self) -> str:
        return self.label.text()

    def button(self, title: str) -> QPushButton | None:
        return next((b for b in self._buttons if b.text() == title), None)


class FilePane(QWidget):
    """Header with the file's name and buttons, a banner, and a viewer or an editor."""

    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        bar = QHBoxLayout()
        self.title = QLabel("Select a file in the tree")
        self.title.setStyleSheet("font-weight: bold;")
        set_look(self.title, "muted")
        # a long path must not widen a narrow dock: the title is cut at the pane's width
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.title.setMinimumWidth(60)
        self.agent_label = QLabel("")
        set_look(self.agent_label, "muted")
        self.agent_label.hide()
        self.path_edit = QLineEdit()
        self.path_edit.setPlaceholderText("path inside the agent's folder, e.g. notes/plan.md")
        self.path_edit.setToolTip("Save to this path in the agent's memory folder")
        self.path_edit.hide()
        self.new_button = QPushButton("New file")
        self.edit_button = QPushButton("Edit")
        self.save_button = QPushButton("Save")
        self.discard_button = QPushButton("Discard")
        set_look(self.save_button, "accent")
        bar.addWidget(self.title, 1)
        bar.addWidget(self.agent_label)
        bar.addWidget(self.path_edit, 1)
        for button in (self.new_button, self.edit_button, self.save_button, self.discard_button):
            bar.addWidget(button)
        layout.addLayout(bar)
        self.banner = Banner()
        layout.addWidget(self.banner)
        self.viewer = QTextBrowser()
        self.viewer.setOpenExternalLinks(False)
        self.viewer.setOpenLinks(False)
        self.editor = QPlainTextEdit()
        self.editor.setFont(mono_font(10))
        self.editor.setTabChangesFocus(False)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.viewer)
        self.stack.addWidget(self.editor)
        layout.addWidget(self.stack, 1)
        self.set_mode(viewing=False, editable=False)

    @property
    def editing(self) -> bool:
        return self.stack.currentWidget() is self.editor

    def set_mode(self, *, viewing: bool, editable: bool) -> None:
        """Viewing (read-only, Edit offered when the file is text) or editing (Save/Discard)."""
        editing = not viewing and editable
        self.stack.setCurrentWidget(self.editor if editing else self.viewer)
        self.path_edit.setVisible(editing)
        self.agent_label.setVisible(editing)
        self.title.setVisible(not editing)
        self.new_button.setVisible(not editing)
        self.edit_button.setVisible(not editing)
        self.edit_button.setEnabled(viewing and editable)
        self.save_button.setVisible(editing)
        self.discard_button.setVisible(editing)

    def show_text(self, title: str, text: str, type_hint: str, line: int | None = None) -> None:
        """Render Markdown as a document, anything else verbatim in monospace; go to ``line``."""
        self.title.setText(title)
        set_look(self.title, "text")
        scroll = self.viewer.verticalScrollBar().value()
        same = self.viewer.property("shown") == title
        if type_hint == "MARKDOWN":
            self.viewer.setFont(self.font())
            self.viewer.document().setDefaultStyleSheet(
                f"a {{ color: {COLORS['accent']}; }} code {{ color: {COLORS['warning']}; }}"
            )
            self.viewer.setMarkdown(text)
        else:
            self.viewer.setFont(mono_font(10))
            self.viewer.setPlainText(text)
        self.viewer.setProperty("shown", title)
        if line is not None:
            self._go_to(text, type_hint, line)
        elif same:  # a reload of the same file keeps the person's place
            self.viewer.verticalScrollBar().setValue(scroll)

    def show_placeholder(self, title: str, text: str) -> None:
        self.title.setText(title)
        self.viewer.setProperty("shown", title)
        self.viewer.setPlainText(text)

    def _go_to(self, text: str, type_hint: str, line: int) -> None:
        if type_hint != "MARKDOWN":
            block = self.viewer.document().findBlockByLineNumber(max(line - 1, 0))
            cursor = QTextCursor(block)
            cursor.select(QTextCursor.SelectionType.LineUnderCursor)
            self.viewer.setTextCursor(cursor)
            self.viewer.ensureCursorVisible()
            return
        # rendered Markdown has no source lines: find the line's words in the document instead
        lines = text.split("\n")
        if 0 < line <= len(lines):
            words = _MARKDOWN_MARKUP.sub("", lines[line - 1]).strip()[:60]
            if words and self.viewer.find(words):
                self.viewer.ensureCursorVisible()

    def start_edit(self, folder: str, path: str, text: str) -> None:
        """Edit ``text``; ``folder`` names whose memory it goes to (shown before the path)."""
        self.agent_label.setText(f"{folder} /")
        self.path_edit.setText(path)
        self.editor.setPlainText(text)
        self.set_mode(viewing=False, editable=True)
        self.editor.setFocus()
