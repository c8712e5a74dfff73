"""Small widgets the chat's cards are made of: plain-text labels, an elided line, a chip, a
collapsible block, a flow of buttons and chips that wraps to the card's width, and the divider
between tasks.

Every label that shows agent- or model-written text is forced to plain text (``text_label``):
Qt would otherwise guess "rich text" from a ``<b>`` in a tool result and render markup the
model wrote.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QResizeEvent
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


class WrappedLabel(QLabel):
    """A word-wrapped label that may be narrower than its longest word.

    Qt will not make a wrapped label narrower than its longest word, so one long token (an id,
    a path) would widen the card and with it the whole conversation past the panel's edge. Here
    such a token is cut at the label's edge instead (it is still whole when selected and copied),
    and every other line wraps to the panel's width.
    """

    MIN_WIDTH = 80

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        if self.wordWrap():
            hint.setWidth(min(hint.width(), self.MIN_WIDTH))
        return hint


def text_label(text: str = "", name: str = "", *, wrap: bool = True,
               selectable: bool = True) -> QLabel:
    """A label that shows ``text`` literally (never as markup), wrapped and selectable."""
    label = WrappedLabel()
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


class Chip(QLabel):
    """A ``name value`` tag on one line, cut with "…" when its line is narrower than its text.

    A signal's payload holds long values (its reasoning, order ids); at their full width a row of
    chips would make the card, and the whole conversation, wider than the panel. The layout may
    give a chip less than its natural width (``sizeHint``); the chip then shows what fits, and
    the whole text in its tooltip.
    """

    MIN_WIDTH = 48

    def __init__(self, text: str) -> None:
        super().__init__()
        self.setObjectName("chip")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._full = text
        self.setText(text)
        self.setToolTip(text if len(text) > 40 else "")

    @property
    def full_text(self) -> str:
        return self._full

    def _chrome(self) -> int:
        """The sheet's padding and border beside the text (Qt keeps them as contents margins)."""
        margins = self.contentsMargins()
        return margins.left() + margins.right()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().sizeHint()
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + self._chrome() + 2,
                     hint.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        return QSize(self.MIN_WIDTH, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        room = event.size().width() - self._chrome()
        self.setText(self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight,
                                                   max(room, 0)))
        super().resizeEvent(event)


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
        """Place the items line by line; one wider than a whole line gets the line's width."""
        x, y, line = rect.x(), rect.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            width = min(hint.width(), max(rect.width(), 1))
            if x + width > rect.right() + 1 and line > 0:
                x, y, line = rect.x(), y + line + self._gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), QSize(width, hint.height())))
            x += width + self._gap
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

