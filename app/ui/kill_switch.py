"""The kill switch in the window: a red toolbar button, Ctrl+Shift+K, the Trading menu, a banner
while tripped, and the deliberate reset; after a reconciliation mismatch, the banner also offers
to accept the exchange's balances (``app.ui.accept_balances``; it does not reset the switch).

Tripping by hand always asks first (``TripDialog``: what the trip will do, counted now, and an
optional reason); its default button trips, so Ctrl+Shift+K then Enter halts everything within a
second. Resetting is deliberate: ``ResetDialog`` says what the trip was and what a reset does, and
its button only works once the person has typed RESET. The switch itself is Qt-free
(``app.orchestration.kill_switch``); this module only asks it, and learns of trips and resets made
anywhere (Telegram, an automatic halt) from the bus, so every view shows the same state. Colours
come from the theme's sheet (object names and ``look``), never from here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.domain.clock import ms_to_iso
from app.domain.kill_switch import Trip, TripCause
from app.events import EventBus, KillSwitchReset, KillSwitchTripped
from app.orchestration.kill_switch import KillSwitch, TripPreview
from app.trading.live_account import BalanceCheck, Reconciliation
from app.ui.accept_balances import OFFER, AcceptBalancesDialog
from app.ui.panels.widget_tasks import BusLink, TaskSet
from app.ui.strip import Strip
from app.ui.theme import set_look

logger = logging.getLogger(__name__)

SHORTCUT = "Ctrl+Shift+K"
BY = "the person in the Kestrel window"
RESET_WORD = "RESET"


class TripDialog(QDialog):
    """Asks before a trip by hand: what it will do, and why (optional, kept with the trip)."""

    def __init__(self, preview: TripPreview, source: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("killTripDialog")
        self.setWindowTitle("Trip the kill switch")
        self.source = source
        layout = QVBoxLayout(self)
        title = QLabel("Halt all trading now?")
        title.setObjectName("killDialogTitle")
        body = QLabel(
            f"{preview.describe()}<br><br>Cancelling orders and closing positions keep working. "
            "Trading resumes only when you reset the switch in this window; agents then stay "
            "paused until you resume them.")
        body.setWordWrap(True)
        self.reason = QLineEdit()
        self.reason.setObjectName("killReason")
        self.reason.setPlaceholderText("Why? (optional, kept with the trip)")
        buttons = QDialogButtonBox()
        self.trip_button = QPushButton("Trip kill switch")
        self.trip_button.setObjectName("killConfirm")
        self.trip_button.setDefault(True)
        self.trip_button.setAutoDefault(True)
        buttons.addButton(self.trip_button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel_button = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        for widget in (title, body, self.reason, buttons):
            layout.addWidget(widget)
        self.setMinimumWidth(420)

    def reason_text(self) -> str:
        return self.reason.text().strip() or f"tripped by hand ({self.source})"


class ResetDialog(QDialog):
    """Resetting is deliberate: what the trip was, what a reset does, and RESET typed out."""

    def __init__(self, trip: Trip, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("killResetDialog")
        self.setWindowTitle("Reset the kill switch")
        layout = QVBoxLayout(self)
        title = QLabel("Let agents trade again?")
        title.setObjectName("killDialogTitle")
        did = f" It did: {trip.actions}" if trip.actions else ""
        body = QLabel(
            f"The kill switch was {trip.describe()}.{did}<br><br>Resetting lets new orders pass "
            "the Risk Guard again. Paused agents stay paused: resume those that should trade "
            "(Agents &gt; Resume all agents, or each in the Agents panel). The loss halts keep "
            "refusing entries while they hold.<br><br>"
            f"Type <b>{RESET_WORD}</b> to confirm.")
        body.setWordWrap(True)
        body.setTextFormat(Qt.TextFormat.RichText)
        self.word = QLineEdit()
        self.word.setObjectName("killResetWord")
        self.word.setPlaceholderText(RESET_WORD)
        buttons = QDialogButtonBox()
        self.reset_button = QPushButton("Reset kill switch")
        self.reset_button.setObjectName("killResetConfirm")
        self.reset_button.setEnabled(False)
        buttons.addButton(self.reset_button, QDialogButtonBox.ButtonRole.AcceptRole)
        cancel = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        cancel.setDefault(True)  # Enter alone never resets
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.word.textChanged.connect(
            lambda text: self.reset_button.setEnabled(text.strip() == RESET_WORD))
        for widget in (title, body, self.word, buttons):
            layout.addWidget(widget)
        self.setMinimumWidth(460)

    def accept(self) -> None:
        if self.word.text().strip() == RESET_WORD:  # Enter in the field must not bypass it
            super().accept()


def summary(trip: Trip) -> str:
    """The trip in a line: when (wall clock, to the minute), by whom and why."""
    when = ms_to_iso(trip.tripped_ms)[:16].replace("T", " ")
    return f"tripped {when} UTC by {trip.by}: {trip.reason}"


class KillSwitchBanner(Strip):
    """The strip over the chart while the switch is tripped (in place of the desk's banner):
    what, when, who, and Reset. The whole story, market time included, is its tooltip."""

    reset_requested = Signal()
    accept_requested = Signal()  # the exchange's balances, after a reconciliation mismatch

    def __init__(self, parent: QWidget | None = None) -> None:
        self.reset_button = QPushButton("Reset kill switch…")
        self.reset_button.setObjectName("killReset")
        self.accept_button = QPushButton(OFFER)
        self.accept_button.setObjectName("acceptBalances")
        self.accept_button.setToolTip(
            "Reconciliation found balances the journal cannot explain: see the differences and "
            "take the exchange's balances as the journal's new starting point.")
        self.accept_button.hide()
        super().__init__("killBanner", "TRADING HALTED by the kill switch",
                         [self.accept_button, self.reset_button], parent)
        self.reset_button.clicked.connect(self.reset_requested)
        self.accept_button.clicked.connect(self.accept_requested)

    def show_trip(self, trip: Trip | None, *, offer_accept: bool = False) -> None:
        self.accept_button.setVisible(trip is not None and offer_accept)
        if trip is None:
            self.hide()
            return
        self.text.setText(f"{summary(trip)[0].upper()}{summary(trip)[1:]}. New orders are "
                          "refused; cancelling and closing still work.")
        self.setToolTip(f"The kill switch was {trip.describe()}."
                        + (f" It did: {trip.actions}" if trip.actions else ""))
        self.show()


class KillSwitchControls(QObject):
    """Every control of the kill switch in one window, kept in step with the switch.

    Args:
        switch: the runtime's kill switch.
        bus: where trips and resets made anywhere are announced.
        tasks: the window's task set (a failed trip or reset is reported there).
        on_change: told the trip in force (or None) after every change, for the views this module
            does not own (the account panel, the tray).
        reconciler: a live account's reconciler: while a reconciliation trip stands and its
            last balance check found differences, the banner offers to accept the exchange's
            balances (``app.ui.accept_balances``).

    Attributes:
        toolbar: the "Kill switch" toolbar with its red button.
        trip_action: Ctrl+Shift+K; asks, then trips.
        reset_action: opens the reset dialog (enabled while tripped).
        banner: the strip the window shows over the chart while tripped.
        dialog: the confirmation or reset dialog open now, if any.
    """

    changed = Signal(object)  # the trip in force, or None

    def __init__(
        self,
        window: QWidget,
        switch: KillSwitch,
        bus: EventBus | None,
        tasks: TaskSet,
        on_change: Callable[[Trip | None], None] | None = None,
        reconciler: Reconciliation | None = None,
    ) -> None:
        super().__init__(window)
        self.window = window
        self.switch = switch
        self.reconciler = reconciler
        self.tasks = tasks
        self.dialog: QDialog | None = None
        self._preparing = False  # a trip dialog is being prepared (its counts are read)
        self.toolbar = QToolBar("Kill switch", window)
        self.toolbar.setObjectName("kill_switch_bar")
        self.button = QToolButton()
        self.button.setObjectName("killSwitch")
        self.button.setText("Kill switch")
        self.button.clicked.connect(lambda: self.request_trip("toolbar"))
        self.toolbar.addWidget(self.button)
        self.trip_action = QAction("Trip kill switch…", window)
        self.trip_action.setShortcut(QKeySequence(SHORTCUT))
        self.trip_action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        self.trip_action.triggered.connect(lambda: self.request_trip("shortcut or menu"))
        self.reset_action = QAction("Reset kill switch…", window)
        self.reset_action.triggered.connect(self.request_reset)
        self.banner = KillSwitchBanner(window)  # a child from the start: never a window
        self.banner.reset_requested.connect(self.request_reset)
        self.banner.accept_requested.connect(self.request_accept)
        if on_change is not None:
            self.changed.connect(on_change)
        self.link = BusLink(bus)
        self.link.subscribe(KillSwitchTripped, self._on_event)
        self.link.subscribe(KillSwitchReset, self._on_event)
        self.link.attach(self)
        self.refresh()

    def detach(self) -> None:
        self.link.detach()

    def _on_event(self, _event: Any) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Show the switch's state everywhere this module draws it."""
        trip = self.switch.active()
        tripped = trip is not None
        self.button.setText("Kill switch TRIPPED" if tripped else "Kill switch")
        self.button.setToolTip(
            f"The kill switch was {trip.describe()}. Reset it from the banner or the Trading menu."
            if trip is not None else
            f"Halt all trading ({SHORTCUT}): refuse new orders, cancel open ones, pause agents. "
            "Asks first.")
        set_look(self.button, "tripped" if tripped else "")
        self.trip_action.setEnabled(not tripped)
        self.reset_action.setEnabled(tripped)
        self.banner.show_trip(trip, offer_accept=self._offers_accept(trip))
        self.changed.emit(trip)

    def _offers_accept(self, trip: Trip | None) -> bool:
        return (trip is not None and trip.cause is TripCause.RECONCILIATION
                and self.reconciler is not None and bool(self.reconciler.mismatches))

    # -- tripping --------------------------------------------------------------------------------

    def request_trip(self, source: str) -> None:
        """Ask the person (what the trip will do), then trip. The toolbar, the shortcut, the menu
        and the tray all come here."""
        if self.switch.is_tripped():
            self.refresh()
            return
        if self.dialog is not None:  # already asking (a second press, or the reset dialog)
            self.dialog.raise_()
            return
        if not self._preparing:
            self._preparing = True
            self.tasks.spawn(self._ask_trip(source))

    async def _ask_trip(self, source: str) -> None:
        try:
            preview = await self.switch.preview()
        finally:
            self._preparing = False
        dialog = TripDialog(preview, source, self.window)
        dialog.accepted.connect(lambda: self.tasks.spawn(self.trip(dialog.reason_text())))
        dialog.finished.connect(lambda _result: self._closed(dialog))
        self.dialog = dialog
        dialog.open()

    async def trip(self, reason: str) -> str | None:
        done = await self.switch.trip(reason, BY)
        self.refresh()
        return done

    # -- resetting -------------------------------------------------------------------------------

    def request_reset(self) -> None:
        trip = self.switch.active()
        if trip is None:
            self.refresh()
            return
        if self.dialog is not None:
            self.dialog.raise_()
            return
        dialog = ResetDialog(trip, self.window)
        dialog.accepted.connect(lambda: self.tasks.spawn(self.reset()))
        dialog.finished.connect(lambda _result: self._closed(dialog))
        self.dialog = dialog
        dialog.open()

    async def reset(self) -> str:
        done = await self.switch.reset(BY)
        self.refresh()
        return done

    # -- accepting the exchange's balances -------------------------------------------------------

    def request_accept(self) -> None:
        """Read the balances fresh, show the differences, and accept them if the person says so."""
        if self.reconciler is None:
            return
        if self.dialog is not None:
            self.dialog.raise_()
            return
        if not self._preparing:
            self._preparing = True
            self.tasks.spawn(self._ask_accept(self.reconciler))

    async def _ask_accept(self, reconciler: Reconciliation) -> None:
        try:
            check = await reconciler.balance_check()
        finally:
            self._preparing = False
        mismatches = () if check is None else check.mismatches
        dialog = AcceptBalancesDialog(reconciler.venue, mismatches, self.window)
        if check is not None and mismatches:
            dialog.accepted.connect(lambda: self.accept_balances(reconciler, check))
        dialog.finished.connect(lambda _result: self._closed(dialog))
        self.dialog = dialog
        self.refresh()
        dialog.open()

    def accept_balances(self, reconciler: Reconciliation, check: BalanceCheck) -> None:
        reconciler.accept_balances(check, by=BY)
        self.refresh()

    def _closed(self, dialog: QDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()
