"""The replay's controls in the real window: a replay opened at the person's start date begins
there; speeds past 600x are in the tool bar and drive the clock; Ctrl+. pauses and steps one
bar; the jump dialog moves the replay to a later date, and a date before now is refused with the
reason."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QDateTime, Qt, QTimeZone
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QLabel

from app.domain.clock import ms_to_iso
from app.market.replay import ReplayMarketData
from app.resources import sample_data_files
from app.runtime.replay import ReplayClock
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


def chosen_start() -> int:
    """Sixty days into the bundled data, on an hour: a start the demo would not pick."""
    probe = ReplayMarketData.from_paths(ReplayClock(0), sample_data_files())
    loaded = probe.loaded("BTC/USD", probe.finest_interval("BTC/USD"))
    start = int(loaded.series.timestamp_ms[0]) + 60 * DAY_MS
    return start - start % HOUR_MS


def test_start_date_speed_step_key_and_jump_drive_the_replay(desk: Desk) -> None:
    async def scenario() -> None:
        start = chosen_start()
        window = await desk.open(start_ms=start)
        world = window.world
        clock, driver = world.venue.clock, world.venue.driver
        assert clock.now_ms() == start  # the replay begins at the person's date
        bar = window.replay_bar

        texts = [bar.speed.itemText(i) for i in range(bar.speed.count())]
        assert texts[-2:] == ["3,600x (1 h/s)", "14,400x (4 h/s)"]
        bar.speed.setCurrentIndex(bar.speed.count() - 1)
        assert driver.speed == 14_400.0
        await eventually(lambda: desk.workspace.settings().agents.replay_speed == 14_400.0)

        # Ctrl+. while the replay plays: it pauses, and steps one bar
        assert not driver.paused
        before = clock.now_ms()
        window.windowHandle().requestActivate()  # keys go to the active window
        await eventually(lambda: QApplication.activeWindow() is window)
        QTest.keyClick(window, Qt.Key.Key_Period, Qt.KeyboardModifier.ControlModifier)
        assert driver.paused and bar.pause_button.text() == "Play"
        assert clock.now_ms() == before + HOUR_MS
        QTest.keyClick(window, Qt.Key.Key_Period, Qt.KeyboardModifier.ControlModifier)
        assert clock.now_ms() == before + 2 * HOUR_MS

        # the jump dialog, opened by its button: three days ahead, on the hour
        bar.jump_button.click()
        dialog = bar.jump_dialog
        await eventually(lambda: dialog is not None and dialog.isVisible())
        now = clock.now_ms()
        assert any(ms_to_iso(now) in label.text() for label in dialog.findChildren(QLabel))
        target = now + 3 * DAY_MS + 30 * 60_000  # half past: the replay lands on the hour
        dialog.when.setDateTime(QDateTime.fromMSecsSinceEpoch(target, QTimeZone.utc()))
        buttons = dialog.findChild(QDialogButtonBox)
        buttons.button(QDialogButtonBox.StandardButton.Ok).click()
        landed = now + 3 * DAY_MS
        assert clock.now_ms() == landed
        assert window.statusBar().currentMessage().startswith(
            f"Jumped to {ms_to_iso(landed)} from {ms_to_iso(now)}")
        chart = window.panels["chart"]
        await eventually(lambda: chart.series is not None and len(chart.series) > 0
                    and int(chart.series.timestamp_ms[-1]) >= landed - HOUR_MS)

        # a date before now is refused, with why and what to do instead; the clock stays
        earlier = start + DAY_MS
        text = bar.jump_to(earlier)
        assert clock.now_ms() == landed
        assert f"cannot go back to {ms_to_iso(earlier)}" in text
        assert "--at DATE" in window.statusBar().currentMessage()
        # the dialog cannot pick one either: it starts at now
        bar.jump_button.click()
        assert bar.jump_dialog.when.minimumDateTime().toMSecsSinceEpoch() == landed
        bar.jump_dialog.reject()
        assert not window.errors.reports

    desk.run(scenario)
