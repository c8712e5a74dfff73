"""The notifications list: everything Kestrel told the person, newest first, kept across restarts.

A tray balloon fades, a status-bar line is overwritten by the next, and a Telegram message is on
another device: this list is where they all stay. It is the workspace's notifications table
(``NotificationService.recent``): what agents sent, the kill switch's and the other alerts Kestrel
sends itself, and what the window keeps there as it happens (``app.ui.notices.NoticeLog``:
fills and exits, refusals, questions and approvals, faults). Each row says when (market time),
what kind, from whom, the message, and on which channels it went out and how that went.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.domain.agents import DeliveryStatus, Notification, Urgency
from app.events import (
    ClockAdvanced,
    EventBus,
    KillSwitchReset,
    KillSwitchTripped,
    NotificationRaised,
)
from app.orchestration.notify import NotificationService
from app.ui.names import AgentNames
from app.ui.panels.record_model import Column, RecordTableModel
from app.ui.panels.style import COLORS, format_time
from app.ui.panels.widget_tasks import BusLink, TaskSet, Throttle
from app.ui.theme import set_look

SHOWN = 500  # the newest notifications listed
_CHANNEL_WORDS = {"UI_ALERT": "window", "TRAY": "tray", "TELEGRAM": "Telegram",
                  "EMAIL": "e-mail"}
_MARKS = {DeliveryStatus.SUCCESS: "✓", DeliveryStatus.FAILED: "✗"}


def sent_to(n: Notification) -> str:
    """``window ✓, Telegram ✗``: where it went and how that went."""
    return ", ".join(f"{_CHANNEL_WORDS.get(s.channel.value, s.channel.value)} "
                     f"{_MARKS.get(s.delivery_status, '…')}" for s in n.statuses)


def delivery_tip(n: Notification) -> str:
    return "\n".join(f"{_CHANNEL_WORDS.get(s.channel.value, s.channel.value)}: "
                     f"{s.delivery_status.value.lower()}"
                     + (f" ({s.message_id_or_error})" if s.message_id_or_error
                        and s.delivery_status is not DeliveryStatus.SUCCESS else "")
                     for s in n.statuses)


def _urgency_colour(n: Notification) -> str | None:
    if n.urgency is Urgency.CRITICAL:
        return COLORS["down"]
    if n.urgency is Urgency.HIGH:
        return COLORS["warning"]
    return None


def notification_columns(names: AgentNames) -> list[Column[Notification]]:
    return [
        Column("Time", lambda n: format_time(n.created_ms), key=lambda n: n.created_ms),
        Column("Kind", lambda n: n.subject or "Message", color=_urgency_colour,
               tooltip=lambda n: f"urgency {n.urgency.value.lower()}"),
        Column("From", lambda n: names.name(n.agent_id),
               tooltip=lambda n: names.tooltip(n.agent_id),
               key=lambda n: names.name(n.agent_id).casefold()),
        Column("Message", lambda n: " ".join(n.message.split()), tooltip=lambda n: n.message),
        Column("Sent to", sent_to, tooltip=delivery_tip),
    ]


class NotificationsPanel(QWidget):
    """The table of notifications, newest first, read again when new ones may be there."""

    def __init__(self, service: NotificationService, bus: EventBus | None, names: AgentNames,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.service = service
        self.names = names
        self.count = QLabel("")
        self.count.setObjectName("notifications_count")
        set_look(self.count, "muted")
        self.model = RecordTableModel(notification_columns(names))
        self.table = QTableView()
        self.table.setObjectName("notifications_table")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setMinimumHeight(48)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for column, width in enumerate((140, 150, 140, 420)):
            header.resizeSection(column, width)
        header.setStretchLastSection(True)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        top = QHBoxLayout()
        caption = QLabel("Everything Kestrel told you, newest first")
        set_look(caption, "muted")
        top.addWidget(caption, 1)
        top.addWidget(self.count)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        self.tasks = TaskSet(on_error=lambda exc: self.count.setText(f"Not read: {exc}"))
        self.throttle = Throttle(self.refresh, self.tasks, interval_ms=500, parent=self)
        self.link = BusLink(bus)
        for event_type in (NotificationRaised, KillSwitchTripped, KillSwitchReset,
                           ClockAdvanced):
            # a notification sent on any channel is stored before it is sent: a moment of the
            # clock (or a notice on the bus) is when a new one may be there
            self.link.subscribe(event_type, lambda _event: self.throttle.request())
        self.link.attach(self)
        self.tasks.attach(self)
        self.throttle.request()

    def changed(self) -> None:
        """A notice was kept: read the list again (throttled)."""
        self.throttle.request()

    async def refresh(self) -> None:
        found = await asyncio.to_thread(self.service.recent, SHOWN)
        self.show_notifications(found)

    def show_notifications(self, found: Sequence[Notification]) -> None:
        header = self.table.horizontalHeader()
        column, order = header.sortIndicatorSection(), header.sortIndicatorOrder()
        self.model.set_rows(list(found))
        if 0 <= column < self.model.columnCount():
            self.model.sort(column, order)
        count = len(found)
        more = "+" if count >= SHOWN else ""
        self.count.setText(f"{count}{more} notification{'s' if count != 1 else ''}")

    def restyle(self) -> None:
        """The kinds' colours are the theme's: draw the rows again."""
        self.model.set_rows(list(self.model.rows))
