"""Small widgets the chat's cards are made of: plain-text labels, an elided line, a collapsible
block, a flow of buttons and the divider between tasks.

Every label that shows agent- or model-written text is forced to plain text (``text_label``):
Qt would otherwise guess "rich text" from a ``<b>`` in a tool result and render markup the
model wrote.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLayoutItem,
    QSizePolicy,
    QToolButton,
    QWidget,
)


def text_label(text: str = "", name: str = "", *, wrap: bool = True,
               selectable: bool = True) -> QLabel:
    """A label that shows ``text`` literally (never as markup), wrapped and selectable."""
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    label.setWordWrap(wrap)
    if name:
        label.setObjectName(name)
    if selectable:
        label.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
    return label


class ElidedLabel(QLabel):
    """One line of plain text cut with "…" to the width it gets; the whole text in the tooltip."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(20)
        self._full = ""
        self.set_full_text(text)

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.setToolTip(text if len(text) > 40 else "")
        self.setText(text)
        self.update()

    @property
    def full_text(self) -> str:
        return self._full

    def paintEvent(self, _event: QPaintEvent) -> None:  # noqa: N802 - Qt's name
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        rect = self.contentsRect()
        elided = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight,
                                               rect.width())
        painter.drawText(rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                         elided)


class Collapsible:
    """A toggle, and the body it shows or hides, built on first opening.

    Collapsed by default, so reasoning and raw XML never push the conversation off screen; the
    body does not exist until the person asks for it, which keeps hundreds of cards cheap.

    Args:
        title: the toggle's words.
        build: makes the body, once.
        place: puts the built body into the card's layout.
    """

    def __init__(self, title: str, build: Callable[[], QWidget],
                 place: Callable[[QWidget], None]) -> None:
        self.title = title
        self._build = build
        self._place = place
        self.body: QWidget | None = None
        self.toggle = QToolButton()
        self.toggle.setObjectName("toggle")
        self.toggle.setCheckable(True)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.toggle.toggled.connect(self._toggled)
        self._paint_title()

    @property
    def expanded(self) -> bool:
        return self.toggle.isChecked()

    def _paint_title(self) -> None:
        self.toggle.setText(f"{self.title} {'▾' if self.expanded else '▸'}")

    def _toggled(self, on: bool) -> None:
        self._paint_title()
        if on and self.body is None:
            self.body = self._build()
            self._place(self.body)
        if self.body is not None:
            self.body.setVisible(on)


class FlowLayout(QLayout):
    """Lays widgets out left to right and wraps to the next line (quick-reply buttons)."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 6) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._gap = spacing
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 - Qt's name
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt's name
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:  # noqa: N802 - Qt's name
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:  # noqa: N802 - Qt's name
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt's name
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt's name
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt's name
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return self.minimumSize()

    def minimumSize(self) -> QSize:  # noqa: N802 - Qt's name
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size

    def _arrange(self, rect: QRect, *, move: bool) -> int:
        x, y, line = rect.x(), rect.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            if x + hint.width() > rect.right() + 1 and line > 0:
                x, y, line = rect.x(), y + line + self._gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self._gap
            line = max(line, hint.height())
        return y + line - rect.y()


class Divider(QWidget):
    """The line between two tasks, with what started the next one and when."""

    def __init__(self, text: str) -> None:
        super().__init__()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 10, 0, 2)
        row.setSpacing(8)
        for _ in range(2):
            rule = QFrame()
            rule.setObjectName("rule")
            rule.setFrameShape(QFrame.Shape.NoFrame)
            rule.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
            row.addWidget(rule, 1)
        self.label = text_label(text, "divider", wrap=False, selectable=False)
        row.insertWidget(1, self.label)

