"""Per-kind notification modes and the ``Notifier`` port for ``Channel.TELEGRAM``.

Every message the bot sends by itself belongs to a kind (fills, TP/SL hits, Risk Guard
rejections, approvals, questions, agent errors, agents' own notifications, the daily summary);
each kind is on (with sound), silent (Telegram's ``disable_notification``) or off (not sent), as
set in ``[telegram.notify]``. ``Poster`` applies the mode and hands the message to the outbox for
every notification chat. ``TelegramNotifier`` is what ``send_notification`` reaches for the
TELEGRAM channel: it waits briefly for the delivery so the agent learns whether it arrived.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from app.config.telegram import Mode, NotifyModes
from app.domain.agents import Channel, ChannelStatus, DeliveryStatus, Notification
from app.telegram.format import Outgoing, notification_alert
from app.telegram.outbox import OnSent, Outbox, OutboxFull

logger = logging.getLogger(__name__)

KINDS = tuple(NotifyModes.model_fields)
DELIVERY_WAIT_S = 5.0


def mode_of(modes: NotifyModes, kind: str) -> Mode:
    """The mode of a kind; an unknown kind is a bug of ours, not a setting."""
    if kind not in NotifyModes.model_fields:
        raise KeyError(f"unknown Telegram notification kind {kind!r}; known: {', '.join(KINDS)}")
    return getattr(modes, kind)


class Poster:
    """Sends a message of a kind to the notification chats, as that kind's mode says."""

    def __init__(self, outbox: Outbox, modes: NotifyModes, chats: tuple[int, ...]) -> None:
        self.outbox = outbox
        self.modes = modes
        self.chats = chats

    def post(
        self, kind: str, message: Outgoing, *, force: bool = False,
        on_sent: OnSent | None = None,
    ) -> list[asyncio.Future[int]]:
        """Queue ``message`` for every chat; nothing when the kind is off (unless ``force``:
        an answer the person asked for in this conversation). Returns the delivery futures."""
        mode = mode_of(self.modes, kind)
        if mode == "off" and not force:
            return []
        futures = []
        for chat in self.chats:
            try:
                futures.append(self.outbox.put(chat, message, silent=mode == "silent",
                                               on_sent=on_sent))
            except OutboxFull as exc:
                logger.warning("Telegram: %s alert not queued: %s", kind, exc)
        return futures


class TelegramNotifier:
    """``Notifier`` for ``Channel.TELEGRAM``: an agent's notification to the person's chats."""

    channel = Channel.TELEGRAM

    def __init__(
        self, poster: Poster, agent_name: Callable[[str], str],
        wait_s: float = DELIVERY_WAIT_S,
    ) -> None:
        self.poster = poster
        self.agent_name = agent_name
        self.wait_s = wait_s

    async def send(self, n: Notification) -> ChannelStatus:
        if mode_of(self.poster.modes, "agent_messages") == "off":
            return self._status(DeliveryStatus.FAILED, "agents' Telegram notifications are "
                                "switched off (Settings > Telegram, notify.agent_messages)")
        if not self.poster.chats:
            return self._status(DeliveryStatus.FAILED, "no chat to send to: add your Telegram "
                                "user id in Settings > Telegram")
        futures = self.poster.post("agent_messages", notification_alert(
            n, self.agent_name(n.agent_id)))
        if not futures:
            return self._status(DeliveryStatus.FAILED, "the Telegram outbox is full")
        done, pending = await asyncio.wait(futures, timeout=self.wait_s)
        if pending:
            return self._status(
                DeliveryStatus.PENDING,
                f"Telegram did not answer within {self.wait_s:g} s; the message is queued and "
                "retried for up to an hour")
        failed = [f for f in done if f.cancelled() or f.exception() is not None]
        if failed:
            error = None if failed[0].cancelled() else failed[0].exception()
            why = f"{type(error).__name__}: {error}" if error is not None else "cancelled"
            return self._status(DeliveryStatus.FAILED, f"not delivered: {why}")
        ids = ",".join(str(f.result()) for f in done)
        return self._status(DeliveryStatus.SUCCESS, f"telegram message {ids}")

    def _status(self, status: DeliveryStatus, text: str) -> ChannelStatus:
        return ChannelStatus(self.channel, status, text[:500])
