"""Kestrel's own urgent alerts in the window: a strip over the chart until the person dismisses it.

An agent's ``send_notification`` shows in its chat; the kill switch has its own banner. What is
left is Kestrel telling the person something on its own account (``PersonAlert``: a position left
without the stop loss it had), which reached only the tray, Telegram and e-mail, while the window,
where the person is looking, showed nothing. The strip shows the newest alert; earlier ones are
counted in its title and read in its tooltip.
Colours come from the theme's sheet (object names), never from here.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QPushButton, QWidget

from app.domain.agents import Channel
from app.events import EventBus, NotificationRaised
from app.orchestration.kill_switch import SUBJECT as KILL_SWITCH_SUBJECT
from app.orchestration.notify import SENDER
from app.ui.panels.widget_tasks import BusLink
from app.ui.strip import Strip


def shown_in_window(event: NotificationRaised) -> bool:
    """Kestrel's own alert for the window, not one the kill switch banner already shows."""
    return (event.channel == Channel.UI_ALERT.value and event.agent_id == SENDER
            and not event.subject.startswith(KILL_SWITCH_SUBJECT))


class AlertBanner(Strip):
    """The strip of Kestrel's own alerts, with Dismiss; hidden while there is none.

    Signals:
        raised: True when the strip shows, False when it is dismissed (the window gives the
            strip the room of its informational banner meanwhile, so the chart keeps its own).
    """

    raised = Signal(bool)

    def __init__(self, bus: EventBus | None, parent: QWidget | None = None) -> None:
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.setObjectName("alertDismiss")
        self.dismiss_button.setToolTip("Hide these alerts (each stays in the notification log).")
        super().__init__("alertBanner", "", [self.dismiss_button], parent)
        self.dismiss_button.clicked.connect(self.dismiss)
        self.alerts: list[tuple[str, str]] = []  # (subject, message), newest first
        self.link = BusLink(bus)
        self.link.subscribe(NotificationRaised, self._on_notification)
        self.link.attach(self)

    def _on_notification(self, event: NotificationRaised) -> None:
        if shown_in_window(event):
            self.add(event.subject, event.message)

    def add(self, subject: str, message: str) -> None:
        self.alerts.insert(0, (subject, message))
        self._show()

    def dismiss(self) -> None:
        self.alerts.clear()
        self.hide()
        self.raised.emit(False)

    def _show(self) -> None:
        subject, _message = self.alerts[0]
        more = len(self.alerts) - 1
        self.title.setText(subject.removeprefix("Kestrel: ").upper()
                           + (f"  (+{more} earlier: hover to read)" if more else ""))
        self.text.setText(self.alerts[0][1])  # the newest; the strip keeps its height
        self.setToolTip("\n\n".join(f"{s}\n{m}" for s, m in self.alerts))
        self.show()
        self.raised.emit(True)
