"""The person's trading controls in the window: "New order" (F9) and "Flatten all" in a toolbar and
the Trading menu.

Flatten all asks first, naming every order it cancels and every position it closes, read from the
account at the moment of asking; then each is one tool call as the person (``PersonControls``),
so a refusal is shown as it came. It works while the kill switch is tripped: cancelling and
closing only ever reduce risk. The outcome is told in the account panel's strip.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog, QToolBar, QToolButton, QWidget

from app.domain.trading import Mode
from app.market.port import MarketData
from app.runtime.controls import Outcome, PersonControls
from app.trading.port import TradingBroker
from app.ui.panels.closed_trades import actor_name
from app.ui.panels.tasks import TaskSet
from app.ui.trading.confirm import ConfirmDialog, flatten_text
from app.ui.trading.ticket import OrderTicket

TICKET_SHORTCUT = "F9"
FLATTEN_SHORTCUT = "Ctrl+Shift+F"


class DeskTradingControls(QObject):
    """The toolbar and menu actions of the person's trading, and the dialogs they open.

    Args:
        show_message: where outcomes are told (the account panel's strip).
        agent_name: an agent's name from its id, for the flatten list.

    Attributes:
        ticket: the order ticket once opened (kept: its fields stay between uses).
        dialog: the Flatten all question open now, if any.
    """

    def __init__(
        self,
        window: QWidget,
        controls: PersonControls,
        broker: TradingBroker,
        symbols: Sequence[str],
        mode: Mode,
        tasks: TaskSet,
        show_message: Callable[[str, str], None],
        agent_name: Callable[[str], str | None] | None = None,
        market: MarketData | None = None,
    ) -> None:
        super().__init__(window)
        self.market = market  # the ticket's live bid and ask
        self.window = window
        self.controls = controls
        self.broker = broker
        self.symbols = list(symbols)
        self.mode = mode
        self.tasks = tasks
        self.show_message = show_message
        self.name = actor_name(agent_name)
        self.ticket: OrderTicket | None = None
        self.dialog: QDialog | None = None
        self._preparing = False
        controls.on_exits = self._exits_placed

        self.ticket_action = QAction("New order…", window)
        self.ticket_action.setShortcut(QKeySequence(TICKET_SHORTCUT))
        self.ticket_action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        self.ticket_action.setToolTip(f"Place an order of your own ({TICKET_SHORTCUT}): reviewed "
                                      "against the Risk Guard first")
        self.ticket_action.triggered.connect(lambda: self.open_ticket())
        self.flatten_action = QAction("Flatten all…", window)
        self.flatten_action.setShortcut(QKeySequence(FLATTEN_SHORTCUT))
        self.flatten_action.setToolTip(f"Cancel every open order and close every position "
                                       f"({FLATTEN_SHORTCUT}); asks first")
        self.flatten_action.triggered.connect(self.request_flatten)
        self.toolbar = QToolBar("Trading", window)
        self.toolbar.setObjectName("trading_bar")
        self.ticket_button = QToolButton()
        self.ticket_button.setObjectName("newOrder")
        self.ticket_button.setDefaultAction(self.ticket_action)
        self.ticket_button.setText("New order")
        self.flatten_button = QToolButton()
        self.flatten_button.setObjectName("flattenAll")
        self.flatten_button.setDefaultAction(self.flatten_action)
        self.flatten_button.setText("Flatten all")
        self.toolbar.addWidget(self.ticket_button)
        self.toolbar.addWidget(self.flatten_button)

    # -- the ticket ------------------------------------------------------------------------------

    def open_ticket(self, symbol: str | None = None) -> OrderTicket:
        if self.ticket is None:
            self.ticket = OrderTicket(self.controls, self.broker, self.symbols, self.mode,
                                      self.tasks, self.window, market=self.market)
            self.ticket.placed.connect(lambda outcome: self.show_message(outcome.text, "info"))
        elif not self.ticket.isVisible():
            self.ticket.reopened()
        if symbol and symbol in self.symbols:
            self.ticket.symbol.setCurrentText(symbol)
        self.ticket.show()
        self.ticket.raise_()
        self.ticket.activateWindow()
        self.ticket.symbol.setFocus()
        return self.ticket

    def _exits_placed(self, outcome: Outcome) -> None:
        kind = "info" if outcome.ok else "error"
        text = outcome.text if outcome.ok else f"Your buy filled, but its exits were not " \
                                                f"placed: {outcome.text}"
        self.show_message(text, kind)
        if self.ticket is not None and self.ticket.isVisible():
            self.ticket.show_outcome(outcome)

    # -- flatten all -----------------------------------------------------------------------------

    def request_flatten(self) -> None:
        """Ask (naming what will be cancelled and closed), then flatten."""
        if self.dialog is not None:
            self.dialog.raise_()
            return
        if not self._preparing:
            self._preparing = True
            self.tasks.spawn(self._ask())

    async def _ask(self) -> None:
        try:
            plan = await self.controls.flatten_plan()
        finally:
            self._preparing = False
        if plan.empty:
            self.show_message("Nothing to flatten: no open orders and no positions.", "info")
            return
        dialog = ConfirmDialog(
            "flattenDialog", "Flatten all", "Cancel everything and close every position?",
            flatten_text(plan, self.broker.quote_currency, self.mode, self.name,
                         fills_at_ms=next((self.controls.close_fills_at(p.symbol)
                                           for p in plan.positions), None),
                         now_ms=self.controls.orders.now_ms()),
            "Flatten all", self.window,
        )
        dialog.accepted.connect(lambda: self.tasks.spawn(self.flatten()))
        dialog.finished.connect(lambda _result: self._closed(dialog))
        self.dialog = dialog
        dialog.open()

    def _closed(self, dialog: QDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()

    async def flatten(self) -> list[Outcome]:
        outcomes = await self.controls.flatten()
        failed = [o for o in outcomes if not o.ok]
        cancelled = sum(1 for o in outcomes if o.ok and o.text.startswith("Cancelled"))
        closing = sum(1 for o in outcomes if o.ok and not o.text.startswith("Cancelled"))
        done = (f"Flatten all: {cancelled} order{'s' if cancelled != 1 else ''} cancelled, "
                f"{closing} close order{'s' if closing != 1 else ''} placed.")
        if failed:
            self.show_message(done + " Not done: " + " ".join(o.text for o in failed), "error")
        else:
            self.show_message(done, "info")
        return outcomes
