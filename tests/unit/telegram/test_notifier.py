"""Per-kind modes (on, silent, off) and the TELEGRAM channel's delivery status for an agent's
own notification."""

from __future__ import annotations

import asyncio

from app.config.telegram import NotifyModes
from app.domain.agents import Channel, DeliveryStatus, Notification, Urgency
from app.telegram.alerts import seconds_until
from app.telegram.format import Outgoing
from app.telegram.notifier import Poster, TelegramNotifier
from app.telegram.outbox import Outbox
from tests.unit.telegram.test_outbox import FlakyChat

NOTE = Notification("n1", "a1", (Channel.TELEGRAM,), "BTC broke 9000", "Alert", Urgency.HIGH, 0)


def test_on_rings_silent_does_not_and_off_sends_nothing() -> None:
    chat = FlakyChat()

    async def scenario() -> None:
        box = Outbox(chat.send)
        box.start()
        poster = Poster(box, NotifyModes(fills="on", take_profit_stop_loss="silent",
                                         risk_rejections="off"), (1, 2))
        sent = [*poster.post("fills", Outgoing("fill")),
                *poster.post("take_profit_stop_loss", Outgoing("tp")),
                *poster.post("risk_rejections", Outgoing("rejected")),
                *poster.post("risk_rejections", Outgoing("asked for"), force=True)]
        await asyncio.gather(*sent)
        await box.aclose()

    asyncio.run(scenario())
    assert chat.delivered == [(1, "fill", False), (2, "fill", False), (1, "tp", True),
                              (2, "tp", True), (1, "asked for", False), (2, "asked for", False)]


def _notify(modes: NotifyModes, chats: tuple[int, ...], chat: FlakyChat, wait_s: float = 5.0):
    async def scenario():  # noqa: ANN202
        box = Outbox(chat.send, first_delay_s=0.5)
        box.start()
        notifier = TelegramNotifier(Poster(box, modes, chats), lambda _id: "Analyst", wait_s)
        try:
            return await notifier.send(NOTE)
        finally:
            await box.aclose(flush_s=0)

    return asyncio.run(scenario())


def test_an_agents_notification_reports_the_message_ids_once_delivered() -> None:
    chat = FlakyChat()
    status = _notify(NotifyModes(), (7,), chat)
    assert status.channel is Channel.TELEGRAM
    assert (status.delivery_status, status.message_id_or_error) == (
        DeliveryStatus.SUCCESS, "telegram message 1001")
    assert chat.delivered == [(7, "🔔 Alert\nBTC broke 9000\n— Analyst · high urgency", False)]


def test_switched_off_or_without_a_chat_the_channel_says_why() -> None:
    status = _notify(NotifyModes(agent_messages="off"), (7,), FlakyChat())
    assert status.delivery_status is DeliveryStatus.FAILED
    assert "switched off" in status.message_id_or_error
    status = _notify(NotifyModes(), (), FlakyChat())
    assert status.delivery_status is DeliveryStatus.FAILED
    assert "add your Telegram user id" in status.message_id_or_error


def test_while_telegram_is_unreachable_the_message_is_reported_queued() -> None:
    from telegram.error import NetworkError

    status = _notify(NotifyModes(), (7,), FlakyChat(*[NetworkError("down")] * 5), wait_s=0.1)
    assert status.delivery_status is DeliveryStatus.PENDING
    assert "queued and retried" in status.message_id_or_error


def test_the_daily_summary_is_due_at_its_next_local_time() -> None:
    from datetime import datetime

    assert seconds_until(datetime(2024, 3, 1, 19, 30), "20:00") == 1800
    assert seconds_until(datetime(2024, 3, 1, 20, 0), "20:00") == 86_400
    assert seconds_until(datetime(2024, 3, 1, 20, 0, 1), "20:00") == 86_399
    assert seconds_until(datetime(2024, 12, 31, 23, 59), "00:00") == 60
