"""A strip over the chart: a bold title with its buttons on the right, and wrapped, selectable
text under it. The kill switch's banner and Kestrel's own alerts are such strips; the theme's sheet
colours each by its object name (``<name>``, ``<name>Title``, ``<name>Text``)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget


class Strip(QFrame):
    """Hidden until its owner shows it."""

    def __init__(
        self, name: str, title: str, buttons: Sequence[QPushButton],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName(name)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 4, 10, 6)
        layout.setSpacing(2)
        top = QHBoxLayout()
        self.title = QLabel(title)
        self.title.setObjectName(f"{name}Title")
        top.addWidget(self.title, 1)
        for button in buttons:
            top.addWidget(button)
        self.text = QLabel("")
        self.text.setObjectName(f"{name}Text")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addLayout(top)
        layout.addWidget(self.text)
        self.hide()
