"""The Agents panel's "May trade live" command: the person's per-agent opt-in on a LIVE account.

Shown only on a live venue. Checked, it says the selected Trader may place REAL orders on the
exchange; checking it asks first (naming the agent, the exchange and real money), unchecking it
takes the permission back at once (refusing risk needs no confirmation). The grant itself is kept
by the live account's grants; an agent's orders without it are refused by the broker.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMessageBox, QWidget

from app.domain.agents import AgentInfo, AgentRole
from app.domain.clock import Clock
from app.trading.live_account import Grants

GRANT_BY = "the person (Agents panel)"


class LiveGrantCommand(QObject):
    """A checkable ``QAction`` bound to the selected agent's grant.

    Args:
        selected: the agent the command applies to (None: none, or several, selected).
        told: shows a sentence in the panel (what was done).
    """

    def __init__(
        self,
        owner: QWidget,
        grants: Grants,
        clock: Clock,
        selected: Callable[[], AgentInfo | None],
        told: Callable[[str], None],
    ) -> None:
        super().__init__(owner)
        self.owner = owner
        self.grants = grants
        self.clock = clock
        self._selected = selected
        self._told = told
        self.confirm_box: QMessageBox | None = None
        self.action = QAction("May trade live", self)
        self.action.setCheckable(True)
        self.action.setToolTip(f"Allow the selected Trader to place REAL orders on "
                               f"{grants.venue} (asks first)")
        self.action.triggered.connect(self._toggled)

    def update(self) -> None:
        info = self._selected()
        trader = info is not None and info.role is AgentRole.TRADER
        self.action.setEnabled(trader)
        self.action.setChecked(trader and info is not None and
                               self.grants.get(info.agent_id) is not None)

    def _toggled(self, checked: bool) -> None:
        info = self._selected()
        if info is None:
            return
        if not checked:
            self.grants.revoke(info.agent_id)
            self._told(f"{info.name} may no longer trade live on {self.grants.venue}.")
            self.update()
            return
        self.action.setChecked(False)  # until the person says yes
        box = QMessageBox(QMessageBox.Icon.Warning, "Allow LIVE trading?",
                          f"Allow {info.name} to place REAL orders with REAL money on "
                          f"{self.grants.venue}? Its orders still pass the Risk Guard and your "
                          "approval settings.", parent=self.owner)
        allow = box.addButton(f"Allow {info.name}", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.buttonClicked.connect(lambda button: self._answered(info, button is allow))
        self.confirm_box = box
        box.open()

    def _answered(self, info: AgentInfo, allowed: bool) -> None:
        if allowed:
            grant = self.grants.grant(info.agent_id, GRANT_BY, self.clock.now_ms())
            self._told(f"{info.name} may trade live on {self.grants.venue} "
                       f"({grant.describe()}).")
        self.update()
