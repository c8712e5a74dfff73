"""Notifications: every channel reports its own status; one failing or hanging channel never
blocks or hides the others; everything sent is kept."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.domain.agents import Channel, ChannelStatus, DeliveryStatus, Notification, Urgency
from app.domain.clock import ReplayClock
from app.domain.errors import InvalidParameterError
from app.events import EventBus, NotificationRaised
from app.orchestration.ids import SeededIds
from app.orchestration.notify import (
    BusNotifier,
    NotificationService,
    Notifier,
    UnconfiguredNotifier,
)
from tests.unit.orchestration.conftest import START


class HangingNotifier:
    """A channel whose server never answers."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.started = asyncio.Event()

    async def send(self, n: Notification) -> ChannelStatus:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class BrokenNotifier:
    """A channel with a bug in it."""

    def __init__(self, channel: Channel, exc: Exception) -> None:
        self.channel = channel
        self.exc = exc
        self.calls = 0

    async def send(self, n: Notification) -> ChannelStatus:
        self.calls += 1
        raise self.exc


def service(
    db: Path, clock: ReplayClock, bus: EventBus, extra: dict[Channel, Notifier] | None = None,
    timeout_s: float = 10,
) -> NotificationService:
    notifiers: dict[Channel, Notifier] = {
        Channel.UI_ALERT: BusNotifier(Channel.UI_ALERT, bus),
        Channel.TRAY: BusNotifier(Channel.TRAY, bus),
        Channel.TELEGRAM: UnconfiguredNotifier(
            Channel.TELEGRAM, "add the bot token and chat id in Settings > Notifications"
        ),
    }
    notifiers.update(extra or {})
    return NotificationService(db, clock, SeededIds("n"), notifiers, timeout_s=timeout_s)


def statuses(n: Notification) -> dict[str, tuple[str, str]]:
    return {s.channel.value: (s.delivery_status.value, s.message_id_or_error) for s in n.statuses}


def test_ui_alert_and_tray_go_out_on_the_bus(db: Path, clock: ReplayClock, bus: EventBus) -> None:
    raised: list[NotificationRaised] = []
    bus.subscribe(NotificationRaised, raised.append)
    svc = service(db, clock, bus)
    sent = asyncio.run(
        svc.send("trader-1", [Channel.UI_ALERT, Channel.TRAY], "Bought 0.1 BTC", "Fill",
                 Urgency.HIGH)
    )
    nid = sent.notification_id
    assert statuses(sent) == {"UI_ALERT": ("SUCCESS", nid), "TRAY": ("SUCCESS", nid)}
    assert raised == [
        NotificationRaised(nid, "trader-1", "UI_ALERT", "Bought 0.1 BTC", "Fill", "HIGH"),
        NotificationRaised(nid, "trader-1", "TRAY", "Bought 0.1 BTC", "Fill", "HIGH"),
    ]
    assert (sent.created_ms, sent.urgency) == (START, Urgency.HIGH)


def test_an_unconfigured_channel_fails_and_says_where_to_set_it_up(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    svc = service(db, clock, bus)
    sent = asyncio.run(svc.send("a1", [Channel.TELEGRAM, Channel.EMAIL, Channel.UI_ALERT], "hi"))
    got = statuses(sent)
    assert got["TELEGRAM"] == (
        "FAILED",
        "TELEGRAM is not configured: add the bot token and chat id in Settings > Notifications",
    )
    assert got["EMAIL"][0] == "FAILED" and "EMAIL is not configured" in got["EMAIL"][1]
    assert got["UI_ALERT"][0] == "SUCCESS"
    assert [s.channel for s in sent.statuses] == [Channel.TELEGRAM, Channel.EMAIL, Channel.UI_ALERT]


def test_a_hanging_channel_times_out_without_holding_up_the_others(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    raised: list[NotificationRaised] = []
    bus.subscribe(NotificationRaised, raised.append)
    hanging = HangingNotifier(Channel.EMAIL)
    svc = service(db, clock, bus, {Channel.EMAIL: hanging}, timeout_s=0.2)
    sent = asyncio.run(svc.send("a1", [Channel.EMAIL, Channel.UI_ALERT], "stop hit"))
    assert statuses(sent)["EMAIL"] == ("FAILED", "no answer within 0.2 s")
    assert statuses(sent)["UI_ALERT"][0] == "SUCCESS"
    assert [e.channel for e in raised] == ["UI_ALERT"]
    assert hanging.started.is_set()  # tried, never answered, and the send still came back


def test_a_broken_channel_is_reported_and_the_others_still_deliver(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    broken = BrokenNotifier(Channel.EMAIL, RuntimeError("smtp library exploded"))
    odd_timeout = BrokenNotifier(Channel.TELEGRAM, TimeoutError("read timed out"))
    svc = service(db, clock, bus, {Channel.EMAIL: broken, Channel.TELEGRAM: odd_timeout})
    sent = asyncio.run(
        svc.send("a1", [Channel.EMAIL, Channel.TELEGRAM, Channel.TRAY], "stop hit")
    )
    assert statuses(sent) == {
        "EMAIL": ("FAILED", "RuntimeError: smtp library exploded"),
        "TELEGRAM": ("FAILED", "timed out: read timed out"),
        "TRAY": ("SUCCESS", sent.notification_id),
    }


def test_each_channel_status_is_stored_with_the_notification(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    svc = service(db, clock, bus)
    first = asyncio.run(svc.send("a1", [Channel.UI_ALERT], "first"))
    clock.advance_to(START + 1000)
    second = asyncio.run(
        svc.send("a2", [Channel.TELEGRAM, Channel.TRAY], "second", "subj", Urgency.CRITICAL)
    )
    svc.close()
    reopened = service(db, clock, bus)
    assert reopened.recent() == [second, first]
    assert reopened.recent(limit=1) == [second]
    assert reopened.get(first.notification_id) == first


def test_the_notification_is_stored_before_any_channel_sends(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    seen: list[list[str]] = []
    reader = service(db, clock, bus)

    def look(event: NotificationRaised) -> None:
        stored = reader.get(event.notification_id)
        assert stored is not None
        seen.append([s.delivery_status.value for s in stored.statuses])

    bus.subscribe(NotificationRaised, look)
    asyncio.run(service(db, clock, bus).send("a1", [Channel.UI_ALERT], "m"))
    assert seen == [["PENDING"]]


def test_a_repeated_call_key_sends_nothing_twice(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    raised: list[NotificationRaised] = []
    bus.subscribe(NotificationRaised, raised.append)
    svc = service(db, clock, bus)
    first = asyncio.run(svc.send("a1", [Channel.UI_ALERT], "m", key="task-1:2"))
    again = asyncio.run(svc.send("a1", [Channel.UI_ALERT], "m", key="task-1:2"))
    assert again == first and len(raised) == 1


def test_a_channel_named_twice_is_sent_once(db: Path, clock: ReplayClock, bus: EventBus) -> None:
    raised: list[NotificationRaised] = []
    bus.subscribe(NotificationRaised, raised.append)
    sent = asyncio.run(service(db, clock, bus).send("a", [Channel.TRAY, Channel.TRAY], "m"))
    assert sent.channels == (Channel.TRAY,) and len(raised) == 1


def test_no_channel_or_an_empty_message_is_refused(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    svc = service(db, clock, bus)
    with pytest.raises(InvalidParameterError, match="at least one channel: UI_ALERT, TRAY"):
        asyncio.run(svc.send("a1", [], "m"))
    with pytest.raises(InvalidParameterError, match="message_text"):
        asyncio.run(svc.send("a1", [Channel.TRAY], "  "))
    assert svc.recent() == []


def test_cancelling_a_send_is_not_swallowed(db: Path, clock: ReplayClock, bus: EventBus) -> None:
    hanging = HangingNotifier(Channel.EMAIL)
    svc = service(db, clock, bus, {Channel.EMAIL: hanging}, timeout_s=30)

    async def main() -> None:
        sending = asyncio.create_task(svc.send("a1", [Channel.EMAIL], "m"))
        await hanging.started.wait()
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending

    asyncio.run(main())
    (stored,) = svc.recent()
    assert stored.statuses[0].delivery_status is DeliveryStatus.PENDING


def test_a_notice_given_elsewhere_is_kept_once_in_the_list_without_being_sent_again(
    db: Path, clock: ReplayClock, bus: EventBus
) -> None:
    raised: list[NotificationRaised] = []
    bus.subscribe(NotificationRaised, raised.append)
    svc = service(db, clock, bus)
    sent = asyncio.run(svc.send("a1", [Channel.TRAY], "earlier"))
    clock.advance_to(START + 60_000)
    kept = svc.record("trader-1", "BTC/USD Trader sold 0.1 BTC/USD at 9,400.00; P&L +38.60 USD",
                      "Take profit hit", Urgency.MEDIUM, key="fill:F1", at_ms=START + 30_000)
    again = svc.record("trader-1", "another wording", "Take profit hit", key="fill:F1")
    assert again == kept and len(raised) == 1  # told once, never sent by the list
    assert kept.created_ms == START + 30_000  # when the fill happened
    assert statuses(kept) == {"UI_ALERT": ("SUCCESS", "shown in the window")}
    svc.close()
    assert service(db, clock, bus).recent() == [kept, sent]  # kept across a restart, newest first
    with pytest.raises(InvalidParameterError):
        svc = service(db, clock, bus)
        svc.record("a1", "  ", "empty", key="x")
