"""Kestrel's own urgent alerts in the window: a position left without its stop loss shows over the
chart until dismissed, readable on a small screen; the kill switch's own notices stay in its
banner, and an agent's notification stays in its chat."""

from __future__ import annotations

import errno

import pytest
from PySide6.QtCore import QSize

from app.domain.agents import Channel
from app.orchestration.notify import EVERY_CHANNEL, SENDER, PersonAlert
from app.store.disk_full import MEMORY_WRITES
from app.ui.main_window import MainWindow
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk, on_screen

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")

LOST = ("The BTC/USDT position lost its stop loss at 66073.02. It was cancelled to be moved, "
        "the exchange refused the new order (binance: 429 Too Many Requests), and placing it "
        "again was refused for the same reason. Set a stop loss in the account panel, or close "
        "the position.")


def banner_of(window: MainWindow):
    return window.alert_banner


def test_a_lost_stop_loss_alert_shows_over_the_chart_until_dismissed(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        world = window.world
        assert world is not None and world.agents is not None
        banner = banner_of(window)
        assert not banner.isVisible()
        alert = PersonAlert()
        alert.notifications = world.agents.notifications
        await alert.send(LOST, "Kestrel: BTC/USDT has no stop loss now")
        await eventually(banner.isVisible)
        assert banner.title.text() == "BTC/USDT HAS NO STOP LOSS NOW"
        assert banner.text.text() == LOST
        assert on_screen(banner.dismiss_button)
        # the same notification went to the tray and the other channels too
        (stored,) = [n for n in world.agents.notifications.recent() if n.message == LOST]
        assert {s.channel for s in stored.statuses} == set(EVERY_CHANNEL)

        await alert.send(LOST.replace("66073.02", "65000.00"),
                         "Kestrel: BTC/USDT has no stop loss now")
        await eventually(lambda: "(+1 earlier" in banner.title.text())
        assert "66073.02" in banner.toolTip()
        assert banner.text.text().startswith("The BTC/USDT position lost its stop loss at 65000")
        banner.dismiss_button.click()
        assert not banner.isVisible() and banner.alerts == []
        assert not window.errors.reports

    desk.run(scenario)


def test_the_kill_switch_and_agents_notices_are_not_repeated_in_the_alert_strip(
    desk: Desk,
) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        world = window.world
        assert world is not None and world.agents is not None
        notifications = world.agents.notifications
        await notifications.send(SENDER, [Channel.UI_ALERT], "Kill switch tripped by hand.",
                                 "Kestrel: kill switch tripped")
        await notifications.send("some-agent", [Channel.UI_ALERT], "BUY signal BTC/USDT",
                                 "Trend signal")
        await world.bus.drain()
        assert not banner_of(window).isVisible()

    desk.run(scenario)


def test_the_alert_strip_fits_a_small_screen(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open(size=QSize(1280, 720))  # a small screen, the window filling it
        await desk.settle(window)
        banner = banner_of(window)
        banner.add("Kestrel: BTC/USDT has no stop loss now", LOST)
        await eventually(banner.isVisible)
        assert on_screen(banner.dismiss_button)
        assert banner.text.height() >= banner.text.fontMetrics().height() * 2  # wrapped, whole
        # the chart keeps its room: the alert takes the place of the banner saying what runs
        assert not window.banner.isVisible()
        await eventually(lambda: window.panels["chart"].height() > 250)
        banner.dismiss_button.click()
        await eventually(window.banner.isVisible)  # back once the alert is dismissed

    desk.run(scenario)


def test_a_full_disk_stops_the_replay_and_the_agents_and_says_so_over_the_chart(
    desk: Desk,
) -> None:
    async def scenario() -> None:
        window = await desk.open(paced=True)
        await desk.settle(window)
        world = window.world
        assert world is not None and world.agents is not None
        banner = banner_of(window)
        # the first write the disk refuses trips the world's watch, from whichever part met it
        assert world.disk.check(OSError(errno.ENOSPC, "No space left on device"))
        world.disk.unrecorded(MEMORY_WRITES, "notes/market.md")
        await eventually(banner.isVisible)
        assert banner.title.text() == "THE DISK IS FULL"
        said = banner.text.text()
        assert "is full" in said and "free space" in said
        assert "stopped the replay and every agent" in said
        assert "notes/market.md" in said  # what could not be recorded, by name
        assert window._pacer is None or window._pacer.done()  # noqa: SLF001
        assert world.agents.manager._workers == {}  # noqa: SLF001
        await desk.close(window)  # closing says nothing more and raises nothing

    desk.run(scenario)
