"""Notifications to the person: one ``Notifier`` port per channel, sent side by side.

The notification is produced once and each channel only delivers it (the UI alert and the tray on
the event bus, e-mail over SMTP, Telegram through the bot once it has started). Every channel runs
in its own guard with its own deadline, concurrently, so one failing or hanging channel never
blocks or hides the others, and each channel's outcome is reported and stored with the
notification. The message and each channel's error are redacted before they are stored, sent or
shown (a mail server's refusal may quote the login).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from app.domain.agents import Channel, ChannelStatus, DeliveryStatus, Notification, Urgency
from app.domain.clock import Clock
from app.domain.errors import InvalidParameterError
from app.events import EventBus, NotificationRaised
from app.orchestration.ids import IdFactory, keyed_id
from app.redaction import redact
from app.store.db import StoreDb, store_db

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0


class Notifier(Protocol):
    channel: Channel

    async def send(self, n: Notification) -> ChannelStatus:
        """Deliver ``n`` on this channel; report failure as a FAILED status, not an exception."""
        ...


class BusNotifier:
    """UI_ALERT and TRAY: announce the notification on the bus, where the window and the tray
    icon listen."""

    def __init__(self, channel: Channel, bus: EventBus) -> None:
        self.channel = channel
        self._bus = bus

    async def send(self, n: Notification) -> ChannelStatus:
        await self._bus.publish(
            NotificationRaised(
                n.notification_id, n.agent_id, self.channel.value, n.message, n.subject,
                n.urgency.value,
            )
        )
        return ChannelStatus(self.channel, DeliveryStatus.SUCCESS, n.notification_id)


class UnconfiguredNotifier:
    """A channel that cannot send yet: reports FAILED with where the person can set it up."""

    def __init__(self, channel: Channel, why: str) -> None:
        self.channel = channel
        self.why = why

    async def send(self, n: Notification) -> ChannelStatus:
        reason = f"{self.channel.value} is not configured: {self.why}"
        return ChannelStatus(self.channel, DeliveryStatus.FAILED, reason)


class NotificationService:
    """Sends a notification on its channels and keeps it, with each channel's status."""

    def __init__(
        self,
        db_path: Path | str | StoreDb,
        clock: Clock,
        ids: IdFactory,
        notifiers: Mapping[Channel, Notifier],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        durable: bool = True,
    ) -> None:
        self._db = store_db(db_path, durable=durable)
        self._clock = clock
        self._ids = ids
        self._notifiers = dict(notifiers)
        self.timeout_s = timeout_s

    def close(self) -> None:
        self._db.close()

    def use(self, notifier: Notifier) -> Notifier | None:
        """Deliver ``notifier.channel`` through ``notifier`` from now on (a channel that connects
        after start-up, like the Telegram bot); returns the notifier it replaced."""
        previous = self._notifiers.get(notifier.channel)
        self._notifiers[notifier.channel] = notifier
        return previous

    async def send(
        self,
        agent_id: str,
        channels: Iterable[Channel],
        message: str,
        subject: str = "",
        urgency: Urgency = Urgency.MEDIUM,
        *,
        key: str | None = None,
    ) -> Notification:
        """Send on every channel at once and return the notification with one status each.

        The notification is stored (statuses PENDING) before anything is sent and updated after.

        Args:
            key: the sending tool call's key: sending again with the same key (a task
                redelivered after a crash) returns the stored notification and sends nothing.

        Raises:
            InvalidParameterError: no channel, or an empty message.
        """
        wanted = tuple(dict.fromkeys(Channel(c) for c in channels))
        message, subject = redact(message), redact(subject)
        if not wanted:
            raise InvalidParameterError(
                "Give at least one channel: " + ", ".join(c.value for c in Channel) + ".",
                details={"parameter": "channels"},
            )
        if not message.strip():
            raise InvalidParameterError(
                "<message_text> must not be empty.", details={"parameter": "message_text"}
            )
        notification = Notification(
            notification_id=keyed_id(f"notification:{key}") if key else self._ids.new(),
            agent_id=agent_id, channels=wanted, message=message, subject=subject,
            urgency=Urgency(urgency), created_ms=self._clock.now_ms(),
            statuses=tuple(ChannelStatus(c, DeliveryStatus.PENDING, "") for c in wanted),
        )
        with self._db.transaction() as conn:
            existing = _first(_select(conn, "notification_id=?", (notification.notification_id,)))
            if existing is not None:
                return existing
            self._db.insert("notifications", {
                "notification_id": notification.notification_id, "agent_id": agent_id,
                "channels": ",".join(c.value for c in wanted), "message": message,
                "subject": subject, "urgency": notification.urgency.value,
                "created_ms": notification.created_ms,
                "statuses_json": _statuses_json(notification.statuses),
            })
        statuses = await asyncio.gather(*(self._deliver(c, notification) for c in wanted))
        notification.statuses = tuple(statuses)
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE notifications SET statuses_json=? WHERE notification_id=?",
                (_statuses_json(notification.statuses), notification.notification_id),
            )
        return notification

    def record(
        self,
        agent_id: str,
        message: str,
        subject: str,
        urgency: Urgency = Urgency.LOW,
        *,
        key: str,
        shown_on: Channel = Channel.UI_ALERT,
        where: str = "shown in the window",
        at_ms: int | None = None,
    ) -> Notification:
        """Keep a notice the person was already given (a fill card in the chat, a question in
        the tray) in the notifications list, without sending it anywhere: stored as delivered on
        ``shown_on``, at ``at_ms`` (default: the clock's now; a fill's own time, say). ``key``
        names what it is about (a fill, a question): recording it again returns the stored one.
        Raises ``InvalidParameterError`` for an empty message."""
        message, subject = redact(message), redact(subject)
        if not message.strip():
            raise InvalidParameterError(
                "<message_text> must not be empty.", details={"parameter": "message_text"}
            )
        notification = Notification(
            notification_id=keyed_id(f"notification:{key}"), agent_id=agent_id,
            channels=(shown_on,), message=message, subject=subject, urgency=Urgency(urgency),
            created_ms=self._clock.now_ms() if at_ms is None else at_ms,
            statuses=(ChannelStatus(shown_on, DeliveryStatus.SUCCESS, where),),
        )
        with self._db.transaction() as conn:
            existing = _first(_select(conn, "notification_id=?", (notification.notification_id,)))
            if existing is not None:
                return existing
            self._db.insert("notifications", {
                "notification_id": notification.notification_id, "agent_id": agent_id,
                "channels": shown_on.value, "message": message, "subject": subject,
                "urgency": notification.urgency.value, "created_ms": notification.created_ms,
                "statuses_json": _statuses_json(notification.statuses),
            })
        return notification

    async def _deliver(self, channel: Channel, n: Notification) -> ChannelStatus:
        """One channel, guarded: whatever it does, the result is a status for that channel."""
        notifier = self._notifiers.get(channel)
        if notifier is None:
            return ChannelStatus(
                channel, DeliveryStatus.FAILED,
                f"{channel.value} is not configured: no notifier is set up for it",
            )
        scope = asyncio.timeout(self.timeout_s)
        try:
            async with scope:
                status = await notifier.send(n)
        except TimeoutError as exc:
            if scope.expired():
                return ChannelStatus(
                    channel, DeliveryStatus.FAILED, f"no answer within {self.timeout_s:g} s"
                )
            return ChannelStatus(channel, DeliveryStatus.FAILED,
                                 redact(f"timed out: {exc}")[:500])
        except Exception as exc:  # a broken channel must not stop the others
            logger.exception("the %s notifier failed", channel.value)
            return ChannelStatus(
                channel, DeliveryStatus.FAILED, redact(f"{type(exc).__name__}: {exc}")[:500]
            )
        return ChannelStatus(channel, status.delivery_status, redact(status.message_id_or_error))

    def recent(self, limit: int = 50) -> list[Notification]:
        """The latest notifications, newest first."""
        with self._db.lock:
            return _select(self._db.conn, "1=1 ORDER BY created_ms DESC, rowid DESC LIMIT ?",
                           (limit,))

    def get(self, notification_id: str) -> Notification | None:
        with self._db.lock:
            return _first(_select(self._db.conn, "notification_id=?", (notification_id,)))


def _statuses_json(statuses: Iterable[ChannelStatus]) -> str:
    return json.dumps(
        [
            {"channel": s.channel.value, "delivery_status": s.delivery_status.value,
             "message_id_or_error": s.message_id_or_error}
            for s in statuses
        ],
        ensure_ascii=False,
    )


def _select(conn: sqlite3.Connection, clause: str, args: tuple[Any, ...]) -> list[Notification]:
    columns = (
        "notification_id, agent_id, channels, message, subject, urgency, created_ms, statuses_json"
    )
    sql = f"SELECT {columns} FROM notifications WHERE {clause}"  # noqa: S608 - clauses are ours
    return [_notification(row) for row in conn.execute(sql, args).fetchall()]


def _first(found: list[Notification]) -> Notification | None:
    return found[0] if found else None


def _notification(row: tuple[Any, ...]) -> Notification:
    return Notification(
        notification_id=row[0], agent_id=row[1],
        channels=tuple(Channel(c) for c in row[2].split(",") if c), message=row[3],
        subject=row[4], urgency=Urgency(row[5]), created_ms=row[6],
        statuses=tuple(
            ChannelStatus(
                Channel(s["channel"]), DeliveryStatus(s["delivery_status"]),
                s["message_id_or_error"],
            )
            for s in json.loads(row[7])
        ),
    )


SENDER = "kestrel"  # notifications from Kestrel itself, not from an agent
EVERY_CHANNEL = (Channel.UI_ALERT, Channel.TRAY, Channel.TELEGRAM, Channel.EMAIL)


class PersonAlert:
    """An alert from Kestrel itself on every channel (the kill switch, a position left without
    its stop loss). ``notifications`` may be set after construction, for parts built before
    the notification service (the trading tools); until then, and in a world without agents,
    the alert is only logged. Sending never raises: what the alert is about has happened
    whether or not the person could be told."""

    def __init__(self, notifications: NotificationService | None = None) -> None:
        self.notifications = notifications

    async def send(self, message: str, subject: str, urgency: Urgency = Urgency.CRITICAL) -> None:
        if self.notifications is None:
            logger.warning("%s (no notification service to tell the person): %s", subject,
                           message)
            return
        try:
            await self.notifications.send(SENDER, EVERY_CHANNEL, message, subject, urgency)
        except Exception:
            logger.exception("the alert %r could not be stored or sent", subject)
