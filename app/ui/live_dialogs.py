"""The two questions a live account puts to the person before anything trades.

``LiveConfirmDialog``: the workspace opens the live venue only after the person has read what is
at stake (real orders, real money, on this exchange) and typed the exchange's name; Enter alone
cannot confirm it. ``UnknownOrdersDialog``: reconciliation found open orders on the exchange that
Kestrel's journal does not know; the person adopts them (Kestrel follows them as the person's),
leaves them alone (never touched or listed again), or decides later (no agent starts).

Both are shown without a nested event loop (``open``, not ``exec``) and answered through an
``asyncio`` future, so the window's loop (and the agents' and the exchange's I/O) keeps running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.runtime.live_startup import UnknownOrderChoice
from app.runtime.live_venue import confirmation_text
from app.trading.live_account import ExchangeOrder
from app.ui.theme import palette


class LiveConfirmDialog(QDialog):
    """"Trade LIVE on <exchange>": accepted only once the exchange's name is typed."""

    def __init__(self, exchange: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("live_confirm")
        self.exchange = exchange
        self.setWindowTitle(f"Trade LIVE on {exchange} with real money?")
        self.setMinimumWidth(520)
        box = QVBoxLayout(self)
        warning = QLabel(f"<b>LIVE · REAL MONEY</b><br>{confirmation_text(exchange)}")
        warning.setObjectName("live_warning")
        warning.setWordWrap(True)
        warning.setStyleSheet(f"color: {palette().down};")
        box.addWidget(warning)
        box.addWidget(QLabel(f"Type <b>{exchange}</b> to confirm:"))
        self.typed = QLineEdit()
        self.typed.setObjectName("live_confirm_name")
        self.typed.setPlaceholderText(exchange)
        box.addWidget(self.typed)
        self.buttons = QDialogButtonBox()
        self.confirm = self.buttons.addButton(
            f"Trade LIVE on {exchange}", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel = self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.confirm.setEnabled(False)
        self.confirm.setAutoDefault(False)
        self.cancel.setDefault(True)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.typed.textChanged.connect(self._typed)
        box.addWidget(self.buttons)

    def _typed(self, text: str) -> None:
        self.confirm.setEnabled(text.strip().lower() == self.exchange.lower())

    def confirmed_name(self) -> str:
        """What the person confirmed (``VenueSpec.confirmed``); empty unless accepted."""
        if self.result() != QDialog.DialogCode.Accepted or not self.confirm.isEnabled():
            return ""
        return self.typed.text().strip().lower()

    async def ask(self) -> str:
        return await _answer(self, self.confirmed_name)


class UnknownOrdersDialog(QDialog):
    """Open orders on the exchange that the journal does not know: adopt, leave alone, later."""

    def __init__(
        self, exchange: str, orders: Sequence[ExchangeOrder], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("unknown_orders")
        self.setWindowTitle(f"Orders on {exchange} that Kestrel does not know")
        self.setMinimumWidth(560)
        self.choice: UnknownOrderChoice | None = None
        box = QVBoxLayout(self)
        count = len(orders)
        text = QLabel(
            f"{count} open order{'s' if count != 1 else ''} on your LIVE {exchange} account "
            f"{'are' if count != 1 else 'is'} not in Kestrel's journal (placed elsewhere, or "
            "before Kestrel kept this journal). No agent starts until you decide.")
        text.setWordWrap(True)
        box.addWidget(text)
        self.list = QListWidget()
        self.list.addItems([o.describe() for o in orders])
        box.addWidget(self.list)
        self.buttons = QDialogButtonBox()
        self.adopt = QPushButton("Adopt: Kestrel follows them as mine")
        self.ignore = QPushButton("Leave them alone")
        self.later = QPushButton("Decide later (agents stay stopped)")
        for button, choice in ((self.adopt, UnknownOrderChoice.ADOPT),
                               (self.ignore, UnknownOrderChoice.IGNORE), (self.later, None)):
            button.setAutoDefault(False)
            self.buttons.addButton(button, QDialogButtonBox.ButtonRole.ActionRole)
            button.clicked.connect(lambda _=False, c=choice: self._chosen(c))
        box.addWidget(self.buttons)

    def _chosen(self, choice: UnknownOrderChoice | None) -> None:
        self.choice = choice
        self.done(QDialog.DialogCode.Accepted if choice is not None else
                  QDialog.DialogCode.Rejected)

    async def ask(self) -> UnknownOrderChoice | None:
        return await _answer(self, lambda: self.choice)


async def _answer[T](dialog: QDialog, value: Callable[[], T]) -> T:
    """Show ``dialog`` window-modal and wait, on the running loop, until it is closed."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    dialog.finished.connect(lambda _code: done.done() or done.set_result(None))
    dialog.open()
    await done
    return value()


def held_words(exchange: str, count: int, *, decided_later: bool = True) -> str:
    """Why no agent runs while exchange orders the journal does not know wait for the person
    (the chat says it where the agent's state would read "running")."""
    orders = f"{count} open order{'s' if count != 1 else ''}"
    if not decided_later:
        return (f"{exchange} holds {orders} Kestrel's journal does not know; no agent runs until "
                "you decide whether Kestrel adopts them or leaves them alone.")
    return (f"No agent runs: the {orders} on {exchange} Kestrel's journal does not know wait for "
            "your decision. Open the workspace again to decide.")
