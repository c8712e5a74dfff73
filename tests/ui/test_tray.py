"""The tray as the person meets it: each alert becomes one notification with the right title, a
click opens the right panel, the icon says idle / running / attention; without a system tray
(offscreen, CI) the routing still works and nothing breaks."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from PySide6.QtGui import QCloseEvent, QColor
from PySide6.QtWidgets import QMainWindow, QSystemTrayIcon

from app.events import (
    AgentStateChanged,
    ClockAdvanced,
    EventBus,
    KillSwitchReset,
    KillSwitchTripped,
    NotificationRaised,
    QuestionAnswered,
    QuestionAsked,
    ToolCallCompleted,
)
from app.ui.tray import STATE_COLOURS, TrayController, TrayNotice, TrayRouter, TrayState, draw_icon

# the offscreen platform cannot raise a window or propagate size hints; it says so as a warning
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")
NAMES = {"a1": "Trend analyst", "t1": "Trader"}


class Rig:
    def __init__(self, qtbot: Any, qloop: asyncio.AbstractEventLoop) -> None:
        self.loop = qloop
        self.bus = EventBus()
        self.window = QMainWindow()
        qtbot.addWidget(self.window)
        self.paused: list[str] = []
        self.quit: list[bool] = []

        async def pause_all() -> None:
            self.paused.append("all")

        self.tray = TrayController(
            self.window, self.bus, pause_all=pause_all, quit_app=lambda: self.quit.append(True),
            agent_name=NAMES.get,
        )
        self.notices: list[TrayNotice] = []
        self.opened: list[tuple[str, str]] = []
        self.tray.notice_raised.connect(self.notices.append)
        self.tray.open_panel.connect(lambda panel, agent: self.opened.append((panel, agent)))

    def publish(self, event: Any) -> None:
        self.loop.run_until_complete(self.bus.publish(event))


@pytest.fixture
def rig(qtbot: Any, qloop: asyncio.AbstractEventLoop) -> Rig:
    return Rig(qtbot, qloop)


def test_tray_notification_becomes_one_native_notice_opening_the_chat(rig: Rig) -> None:
    rig.publish(NotificationRaised("n1", "a1", "TRAY", "BTC broke 9,000 on volume", "Breakout",
                                   "HIGH"))
    rig.publish(NotificationRaised("n2", "a1", "UI_ALERT", "shown in the window", "", "LOW"))
    assert len(rig.notices) == 1
    notice = rig.notices[0]
    assert (notice.title, notice.panel, notice.agent_id, notice.level) == (
        "Breakout", "chat", "a1", "warning")
    rig.tray.notice_clicked()
    assert rig.opened == [("chat", "a1")]
    assert rig.window.isVisible()


def test_fault_notifies_opens_agents_and_turns_the_icon_to_attention(rig: Rig) -> None:
    rig.publish(AgentStateChanged("t1", "running"))
    assert rig.tray.state is TrayState.RUNNING and rig.notices == []
    rig.publish(AgentStateChanged("t1", "faulted", "LLM key rejected (HTTP 401)"))
    assert len(rig.notices) == 1
    assert rig.notices[0].title == "Trader stopped with a fault"
    assert "HTTP 401" in rig.notices[0].message and rig.notices[0].level == "critical"
    assert rig.tray.state is TrayState.ATTENTION
    rig.tray.notice_clicked()
    assert rig.opened == [("agents", "t1")]
    rig.publish(AgentStateChanged("t1", "stopped"))
    assert rig.tray.state is TrayState.IDLE


def test_question_notifies_until_answered(rig: Rig) -> None:
    rig.publish(QuestionAsked("q1", "a1", "task1", "clarification", "Which timeframe: 1h or 4h?",
                              ("1h", "4h"), ""))
    rig.publish(QuestionAsked("q2", "t1", "task2", "approval", "Buy 0.5 BTC at market?",
                              ("Approve", "Refuse"), ""))
    assert [n.title for n in rig.notices] == ["Trend analyst asks you",
                                              "Trader needs your approval"]
    assert {n.panel for n in rig.notices} == {"chat"}
    assert rig.tray.state is TrayState.ATTENTION
    rig.tray.notice_clicked()
    assert rig.opened == [("chat", "t1")]
    rig.publish(QuestionAnswered("q1", "a1", "1h"))
    rig.publish(QuestionAnswered("q2", "t1", "Approve"))
    assert rig.tray.state is TrayState.IDLE


def test_risk_rejection_and_fills_are_announced(rig: Rig) -> None:
    rig.publish(ToolCallCompleted("t1", "create_order", "rejected", "RISK_REJECTED", 3.0))
    rig.publish(ToolCallCompleted("t1", "create_order", "success", None, 3.0))
    rig.publish(ClockAdvanced(1_000, 0))
    rig.publish(ClockAdvanced(2_000, 2))
    assert [n.title for n in rig.notices] == ["Order of Trader rejected", "2 orders filled"]
    assert rig.notices[1].panel == "account"


def test_fills_in_a_burst_are_gathered_into_one_notice() -> None:
    clock = [0.0]
    router = TrayRouter(now=lambda: clock[0], fill_interval_s=10)
    first = router.route(ClockAdvanced(1, 1))
    assert first is not None and first.title == "1 order filled"
    assert router.route(ClockAdvanced(2, 3)) is None
    assert router.route(ClockAdvanced(3, 1)) is None
    clock[0] = 11.0
    later = router.flush_fills()
    assert later is not None and later.title == "4 orders filled"
    assert router.flush_fills(force=True) is None


def test_without_a_system_tray_it_logs_once_and_closing_quits(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture
) -> None:
    assert not QSystemTrayIcon.isSystemTrayAvailable()  # offscreen: the case CI exercises
    with caplog.at_level(logging.INFO, logger="app.ui.tray"):
        rig = Rig(qtbot, qloop)
    assert [r.message for r in caplog.records if "no system tray" in r.message]
    assert not rig.tray.available
    rig.tray.close_to_tray = True
    event = QCloseEvent()
    assert rig.tray.handle_close(event) is False  # nowhere to go: the window really closes


def test_menu_actions_pause_agents_and_toggle_the_window(rig: Rig, qtbot: Any) -> None:
    rig.tray.pause_all()
    rig.loop.run_until_complete(asyncio.sleep(0))
    assert rig.paused == ["all"]
    rig.window.show()
    rig.tray.toggle_window()
    assert not rig.window.isVisible()
    rig.tray.toggle_window()
    assert rig.window.isVisible()


def test_icons_are_drawn_in_the_colour_of_each_state(qapp: Any) -> None:
    colours = set()
    for state in TrayState:
        image = draw_icon(state, 64).toImage()
        dot = QColor(image.pixel(48, 48))
        assert dot.name() == STATE_COLOURS[state]
        colours.add(dot.name())
    assert len(colours) == len(TrayState)


def test_a_tripped_kill_switch_turns_the_icon_red_and_its_notice_opens_the_account(
    rig: Rig,
) -> None:
    rig.publish(AgentStateChanged("t1", "faulted", "boom"))
    rig.publish(KillSwitchTripped(1, "manual", "stop", "the person", 1, 1))
    assert rig.tray.state is TrayState.HALTED  # louder than a fault
    assert rig.tray.router.describe().startswith("Kestrel: TRADING HALTED (kill switch); ")
    rig.publish(NotificationRaised("n1", "kestrel", "TRAY", "Kill switch tripped by the person",
                                   "Kestrel: kill switch tripped", "CRITICAL"))
    notice = rig.notices[-1]
    assert (notice.title, notice.panel, notice.level) == (
        "Kestrel: kill switch tripped", "account", "critical")
    rig.tray.notice_clicked()
    assert rig.opened[-1] == ("account", "")
    rig.publish(KillSwitchReset(1, "the person", 2))
    assert rig.tray.state is TrayState.ATTENTION  # the fault is still there


def test_the_menus_trip_entry_asks_in_the_window_and_not_while_tripped(
    qtbot: Any, qloop: asyncio.AbstractEventLoop
) -> None:
    asked: list[str] = []
    window = QMainWindow()
    qtbot.addWidget(window)
    tray = TrayController(window, EventBus(), pause_all=lambda: None, quit_app=lambda: None,
                          trip_kill_switch=lambda: asked.append("tray"))
    tray.trip_kill_switch()
    assert asked == ["tray"] and window.isVisible()
    tripped = TrayController(window, EventBus(), pause_all=lambda: None, quit_app=lambda: None,
                             trip_kill_switch=lambda: asked.append("again"), halted=True)
    assert tripped.state is TrayState.HALTED
    tripped.trip_kill_switch()
    assert asked == ["tray"]
