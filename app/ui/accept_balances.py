"""Accepting the exchange's balances after a reconciliation mismatch: the differences, then yes.

When a live account's balances differ from what the order journal explains (a deposit, a
withdrawal, a trade made on the exchange's website), reconciliation trips the kill switch and
keeps reporting the gap. Only the person can say "the exchange is right, start from here": the
banner of the tripped switch offers it, this dialog shows each difference (asset, what the journal
explains, what the exchange holds) read fresh from the exchange, and accepting makes exactly
those balances the journal's baseline (``Reconciliation.accept_balances``, kept in the journal with
who accepted what). It does not reset the kill switch: that stays the deliberate RESET.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.domain.market_rules import fmt
from app.trading.live_account import BalanceMismatch

OFFER = "Accept the exchange's balances…"


class AcceptBalancesDialog(QDialog):
    """The differences between the journal and the exchange, and the person's confirmation.

    Cancel is the default button: Enter alone never accepts.
    """

    def __init__(
        self, venue: str, mismatches: Sequence[BalanceMismatch], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("acceptBalancesDialog")
        self.setWindowTitle(f"Accept {venue}'s balances?")
        layout = QVBoxLayout(self)
        title = QLabel(f"Take {venue}'s balances as right?")
        title.setObjectName("killDialogTitle")
        layout.addWidget(title)
        self.table = QTableWidget(len(mismatches), 4)
        self.table.setObjectName("balanceDifferences")
        self.table.setHorizontalHeaderLabels(["Asset", "Journal", "Exchange", "Difference"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for row, m in enumerate(mismatches):
            for col, text in enumerate((m.asset, fmt(m.expected), fmt(m.actual),
                                        f"{'+' if m.difference > 0 else ''}{fmt(m.difference)}")):
                self.table.setItem(row, col, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        if mismatches:
            body = QLabel(
                f"The balances {venue} holds differ from what Kestrel's order journal explains "
                "(its starting balances plus every fill it knows). This happens after a deposit, "
                "a withdrawal or a trade made outside Kestrel; it can also mean an order Kestrel "
                "lost track of, so check the exchange's history first.\n\n"
                f"Accepting makes {venue}'s balances above the journal's new starting point; "
                "the acceptance is recorded with the differences. The kill switch stays "
                "tripped: reset it yourself (type RESET) when you are satisfied.")
            layout.addWidget(self.table)
        else:
            body = QLabel(f"The balances {venue} holds now agree with the journal: there is "
                          "nothing to accept. Reset the kill switch when you are satisfied.")
            self.table.hide()
        body.setObjectName("acceptBalancesText")
        body.setWordWrap(True)
        layout.addWidget(body)
        buttons = QDialogButtonBox()
        self.accept_button = QPushButton("Accept the exchange's balances")
        self.accept_button.setObjectName("acceptBalancesConfirm")
        self.accept_button.setAutoDefault(False)
        self.accept_button.setEnabled(bool(mismatches))
        buttons.addButton(self.accept_button, QDialogButtonBox.ButtonRole.AcceptRole)
        cancel = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        cancel.setDefault(True)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.setMinimumWidth(520)
