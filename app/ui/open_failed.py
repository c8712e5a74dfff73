"""What the window shows when a workspace's market cannot be reached: why, and two ways on.

Paper on live quotes needs the exchange; without a network the window used to stay a dead shell
behind a message box (an empty title, the error in one centred line cut off at both edges, an
empty Trading menu). Now the error is said in full, wrapped, in the middle of the window, with
Retry (the same venue again: the network may be back) and "Open the offline replay" (the bundled
data, no network), so the person is never left with only Quit.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from app.ui.theme import set_look

TEXT_WIDTH = 640  # the message wraps at a width a person reads in one sweep


class OpenFailedPage(QWidget):
    """The reason a workspace could not open, with Retry and, for a live market, the replay.

    Signals:
        retry_requested: open the same venue again.
        replay_requested: open the workspace on the offline replay instead.
    """

    retry_requested = Signal()
    replay_requested = Signal()

    def __init__(self, title: str, reason: str, *, offer_replay: bool,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("openFailed")
        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 24, 24, 24)
        outer.addStretch(1)
        column = QVBoxLayout()
        column.setSpacing(12)
        self.title = QLabel(title)
        self.title.setObjectName("openFailedTitle")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-size: 14pt; font-weight: bold;")
        self.reason = QLabel(reason)
        self.reason.setObjectName("openFailedReason")
        self.reason.setWordWrap(True)
        self.reason.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        set_look(self.reason, "warning")
        for label in (self.title, self.reason):
            label.setMaximumWidth(TEXT_WIDTH)
            column.addWidget(label)
        buttons = QHBoxLayout()
        self.retry_button = QPushButton("Retry")
        self.retry_button.setObjectName("openRetry")
        self.retry_button.setToolTip("Try to open it the same way again (the network may be "
                                     "back)")
        self.retry_button.clicked.connect(self.retry_requested)
        buttons.addWidget(self.retry_button)
        self.replay_button = QPushButton("Open the offline replay")
        self.replay_button.setObjectName("openReplay")
        self.replay_button.setToolTip("Open this workspace on the bundled market data instead: "
                                      "no network needed")
        self.replay_button.clicked.connect(self.replay_requested)
        self.replay_button.setVisible(offer_replay)
        buttons.addWidget(self.replay_button)
        buttons.addStretch(1)
        column.addLayout(buttons)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addLayout(column)
        row.addStretch(1)
        outer.addLayout(row)
        outer.addStretch(2)
        self.retry_button.setDefault(True)

    def set_busy(self, busy: bool) -> None:
        """While a retry runs, its buttons wait (one attempt at a time)."""
        self.retry_button.setEnabled(not busy)
        self.replay_button.setEnabled(not busy)
