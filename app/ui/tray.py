"""The system tray: an icon that shows whether agents run or need you, its menu, and notifications.

While the kill switch is tripped the icon's dot is red and its tooltip says trading is halted;
the menu's "Trip kill switch…" asks in the window first, as the toolbar does.

Why two parts: ``TrayRouter`` decides, from bus events alone, what deserves a native notification
(a TRAY notification, fills, risk rejections, faults, questions), which panel a click on it opens,
and what the icon shows; it has no Qt in it, so it is tested on machines without a tray (CI,
offscreen). ``TrayController`` only draws the icon, builds the menu and calls ``showMessage``.
When the desktop has no tray (``isSystemTrayAvailable()`` false) the controller keeps routing
(``notice_raised`` still fires, so the window can show the alert itself) and says so once in the
log. Fills come in bursts during a fast replay, so they are gathered into one notice at most every
``fill_interval_s``.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from PySide6.QtCore import QObject, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QColor, QIcon, QPainter, QPainterPath, QPen, QPixmap
from PySide6.QtWidgets import QMenu, QSystemTrayIcon, QWidget

from app.events import (
    AgentStateChanged,
    ClockAdvanced,
    Event,
    EventBus,
    KillSwitchReset,
    KillSwitchTripped,
    NotificationRaised,
    QuestionAnswered,
    QuestionAsked,
    ToolCallCompleted,
)
from app.orchestration.notify import SENDER as KESTREL_SENDER
from app.ui.theme import DARK

logger = logging.getLogger(__name__)
ACTIVE_STATES = frozenset({"running", "waiting_for_user"})
FILL_INTERVAL_S = 10.0


class TrayState(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    ATTENTION = "attention"
    HALTED = "halted"  # the kill switch is tripped


@dataclass(frozen=True, slots=True)
class TrayNotice:
    """One native notification and where a click on it leads.

    Attributes:
        panel: the panel to open: "chat", "agents" or "account".
        agent_id: the agent concerned ("" when none), so the panel can select it.
        level: "info", "warning" or "critical" (the notification's icon).
    """

    title: str
    message: str
    panel: str
    agent_id: str = ""
    level: str = "info"


class TrayRouter:
    """Events in, notices and the icon's state out. No Qt, no clock of its own.

    Args:
        agent_name: the name to show for an agent id (``None``: the id itself).
        now: wall-clock seconds (injectable for tests); used only to gather fills.
        fill_interval_s: at most one fill notice per this many seconds.
    """

    def __init__(
        self,
        agent_name: Callable[[str], str | None] | None = None,
        now: Callable[[], float] = time.monotonic,
        fill_interval_s: float = FILL_INTERVAL_S,
    ) -> None:
        self._agent_name = agent_name
        self._now = now
        self.fill_interval_s = fill_interval_s
        self.active: set[str] = set()
        self.faulted: dict[str, str] = {}
        self.questions: dict[str, str] = {}  # question id -> agent id
        self.halted = False  # the kill switch is tripped
        self.live = ""  # the venue's label when the account is LIVE (real money)
        self._pending_fills = 0
        self._last_fill_notice: float | None = None

    def name(self, agent_id: str) -> str:
        found = self._agent_name(agent_id) if self._agent_name is not None and agent_id else None
        return found or agent_id or "Kestrel"

    @property
    def state(self) -> TrayState:
        if self.halted:
            return TrayState.HALTED
        if self.faulted or self.questions:
            return TrayState.ATTENTION
        return TrayState.RUNNING if self.active else TrayState.IDLE

    def describe(self) -> str:
        """The icon's tooltip: the state in words."""
        parts = [f"{len(self.active)} agent{'s' if len(self.active) != 1 else ''} running"]
        if self.questions:
            parts.append(f"{len(self.questions)} waiting for you")
        if self.faulted:
            parts.append(f"{len(self.faulted)} faulted")
        halted = "TRADING HALTED (kill switch); " if self.halted else ""
        live = f"● {self.live}; " if self.live else ""
        return "Kestrel: " + live + halted + ", ".join(parts)

    def set_agent_states(self, states: dict[str, str]) -> None:
        """Start from what the agent store says (agents that ran before the window opened)."""
        self.active = {a for a, s in states.items() if s in ACTIVE_STATES}
        self.faulted = {a: "" for a, s in states.items() if s == "faulted"}

    def route(self, event: Event) -> TrayNotice | None:
        """The notice ``event`` deserves, if any; updates the icon's state on the way."""
        if isinstance(event, NotificationRaised):
            return self._notification(event)
        if isinstance(event, KillSwitchTripped | KillSwitchReset):
            self.halted = isinstance(event, KillSwitchTripped)
            return None  # the notice is the switch's own notification (TRAY channel)
        if isinstance(event, QuestionAsked):
            self.questions[event.question_id] = event.agent_id
            approval = event.kind == "approval"
            title = (f"{self.name(event.agent_id)} needs your approval" if approval
                     else f"{self.name(event.agent_id)} asks you")
            return TrayNotice(title, _clip(event.text), "chat", event.agent_id, "warning")
        if isinstance(event, QuestionAnswered):
            self.questions.pop(event.question_id, None)
            return None
        if isinstance(event, AgentStateChanged):
            return self._agent_state(event)
        if isinstance(event, ToolCallCompleted) and event.status == "rejected":
            return TrayNotice(
                f"Order of {self.name(event.agent_id)} rejected",
                f"The Risk Guard refused {event.tool_name} "
                f"({event.error_code or 'RISK_REJECTED'}); the reason is in the conversation.",
                "chat", event.agent_id, "warning")
        if isinstance(event, ClockAdvanced) and event.fills > 0:
            self._pending_fills += event.fills
            return self.flush_fills()
        return None

    def flush_fills(self, force: bool = False) -> TrayNotice | None:
        """A notice for the fills gathered so far, if the interval allows (or ``force``)."""
        if self._pending_fills <= 0:
            return None
        now = self._now()
        last = self._last_fill_notice
        if not force and last is not None and now - last < self.fill_interval_s:
            return None
        count, self._pending_fills = self._pending_fills, 0
        self._last_fill_notice = now
        return TrayNotice(
            f"{count} order{'s' if count != 1 else ''} filled",
            "See the account panel for the fills and positions.", "account")

    def _notification(self, event: NotificationRaised) -> TrayNotice | None:
        if event.channel != "TRAY":
            return None  # UI_ALERT is shown inside the window
        level = {"HIGH": "warning", "CRITICAL": "critical"}.get(event.urgency.upper(), "info")
        title = event.subject or f"Message from {self.name(event.agent_id)}"
        if event.agent_id == KESTREL_SENDER:  # Kestrel itself (the kill switch, an exit lost):
            # what it is about is the account's
            return TrayNotice(title, _clip(event.message), "account", "", level)
        return TrayNotice(title, _clip(event.message), "chat", event.agent_id, level)

    def _agent_state(self, event: AgentStateChanged) -> TrayNotice | None:
        agent = event.agent_id
        if event.state in ACTIVE_STATES:
            self.active.add(agent)
        else:
            self.active.discard(agent)
        if event.state == "faulted":
            self.faulted[agent] = event.reason or ""
            return TrayNotice(
                f"{self.name(agent)} stopped with a fault",
                _clip(event.reason or "no reason given"), "agents", agent, "critical")
        self.faulted.pop(agent, None)
        if event.state == "deleted":
            self.questions = {q: a for q, a in self.questions.items() if a != agent}
        return None


def _clip(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- drawing ---------------------------------------------------------------------------------------

LIVE_FRAME = DARK.down
STATE_COLOURS = {TrayState.IDLE: "#8a93a6", TrayState.RUNNING: "#26a69a",
                 TrayState.ATTENTION: "#f0b429", TrayState.HALTED: DARK.down}


def draw_icon(state: TrayState, size: int = 64, *, live: bool = False) -> QPixmap:
    """A kestrel's wing (a chevron) on the panel colour, with a status dot in the state's colour;
    on a LIVE account (real money) the tile is framed in red."""
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor("#161a22"))
        painter.drawRoundedRect(QRectF(2, 2, size - 4, size - 4), size * 0.2, size * 0.2)
        s = size / 64
        if live:
            painter.setPen(QPen(QColor(LIVE_FRAME), 6 * s))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(5 * s, 5 * s, size - 10 * s, size - 10 * s),
                                    size * 0.17, size * 0.17)
            painter.setPen(Qt.PenStyle.NoPen)
        wing = QPainterPath()
        wing.moveTo(QPointF(12 * s, 40 * s))
        wing.lineTo(QPointF(30 * s, 18 * s))
        wing.lineTo(QPointF(52 * s, 30 * s))
        pen = QPen(QColor("#4f8cff"), 7 * s)
        pen.setCapStyle(Qt.PenCapStyle.RoundCap)
        pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(wing)
        painter.setPen(QPen(QColor("#0f1116"), 3 * s))
        painter.setBrush(QColor(STATE_COLOURS[state]))
        painter.drawEllipse(QRectF(36 * s, 36 * s, 24 * s, 24 * s))
    finally:
        painter.end()
    return pixmap


_LEVEL_ICONS = {
    "info": QSystemTrayIcon.MessageIcon.Information,
    "warning": QSystemTrayIcon.MessageIcon.Warning,
    "critical": QSystemTrayIcon.MessageIcon.Critical,
}


class TrayController(QObject):
    """The tray icon, its menu and native notifications for one main window.

    Args:
        window: the main window (shown/hidden from the menu and by a notification click).
        bus: the event bus whose events are routed.
        pause_all: called by "Pause all agents" (may return an awaitable; it is scheduled).
        quit_app: called by "Quit".
        agent_name: agent id -> display name.
        close_to_tray: closing the window hides it to the tray instead of quitting.
        trip_kill_switch: called by "Trip kill switch…" (the window asks before tripping);
            None: the menu has no such entry.
        halted: the kill switch is tripped as the tray starts.
        live: the venue's label when the account is LIVE (real money): the tooltip names it and
            the icon is framed in red; empty otherwise.

    Signals:
        open_panel(str, str): panel name ("chat", "agents", "account") and agent id, when a
            notification is clicked.
        notice_raised(TrayNotice): every notice, tray or not (the window may show it itself).
    """

    open_panel = Signal(str, str)
    notice_raised = Signal(object)

    def __init__(
        self,
        window: QWidget,
        bus: EventBus | None,
        *,
        pause_all: Callable[[], Any],
        quit_app: Callable[[], None],
        agent_name: Callable[[str], str | None] | None = None,
        close_to_tray: bool = False,
        router: TrayRouter | None = None,
        trip_kill_switch: Callable[[], None] | None = None,
        halted: bool = False,
        live: str = "",
    ) -> None:
        super().__init__(window)
        self.window = window
        self.bus = bus
        self.router = router or TrayRouter(agent_name)
        self.router.halted = halted
        self.router.live = live
        self.close_to_tray = close_to_tray
        self._trip_kill_switch = trip_kill_switch
        self.kill_action: QAction | None = None
        self._pause_all = pause_all
        self._quit_app = quit_app
        self._last: TrayNotice | None = None
        self._told_hidden = False
        self._pending: set[Any] = set()
        self._icons = {state: QIcon(draw_icon(state, live=bool(live))) for state in TrayState}
        self.tray: QSystemTrayIcon | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.tray = self._build_tray()
        else:
            logger.info("no system tray on this desktop: notifications are shown in the window "
                        "only, and closing the window quits")
        self._fill_timer = QTimer(self)
        self._fill_timer.setInterval(int(self.router.fill_interval_s * 1000))
        self._fill_timer.timeout.connect(self._flush_fills)
        self._fill_timer.start()
        self._handlers: list[tuple[type[Event], Callable[[Any], None]]] = []
        if bus is not None:
            for event_type in (NotificationRaised, QuestionAsked, QuestionAnswered,
                               AgentStateChanged, ToolCallCompleted, ClockAdvanced,
                               KillSwitchTripped, KillSwitchReset):
                bus.subscribe(event_type, self.on_event)
                self._handlers.append((event_type, self.on_event))
        window.destroyed.connect(lambda *_: self.detach())

    @property
    def available(self) -> bool:
        return self.tray is not None

    @property
    def state(self) -> TrayState:
        return self.router.state

    def icon(self, state: TrayState | None = None) -> QIcon:
        return self._icons[state or self.router.state]

    def _build_tray(self) -> QSystemTrayIcon:
        tray = QSystemTrayIcon(self._icons[self.router.state], self)
        menu = QMenu()
        self.show_action = QAction("Hide window", menu)
        self.show_action.triggered.connect(self.toggle_window)
        pause = QAction("Pause all agents", menu)
        pause.triggered.connect(self.pause_all)
        leave = QAction("Quit Kestrel", menu)
        leave.triggered.connect(self._quit_app)
        menu.addAction(self.show_action)
        menu.addAction(pause)
        if self._trip_kill_switch is not None:
            self.kill_action = QAction("Trip kill switch…", menu)
            self.kill_action.triggered.connect(self.trip_kill_switch)
            menu.addAction(self.kill_action)
        menu.addSeparator()
        menu.addAction(leave)
        menu.aboutToShow.connect(self._update_menu)
        self._menu = menu
        tray.setContextMenu(menu)
        tray.messageClicked.connect(self.notice_clicked)
        tray.activated.connect(self._activated)
        tray.setToolTip(self.router.describe())
        tray.show()
        return tray

    # -- events ---------------------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        notice = self.router.route(event)
        self._refresh_icon()
        if notice is not None:
            self.present(notice)

    def present(self, notice: TrayNotice) -> None:
        """Show ``notice`` natively (when there is a tray) and announce it."""
        self._last = notice
        if self.tray is not None:
            self.tray.showMessage(notice.title, notice.message, _LEVEL_ICONS[notice.level], 8000)
        self.notice_raised.emit(notice)

    def notice_clicked(self) -> None:
        """The person clicked the last notification: bring the window up at the right panel."""
        if self._last is None:
            return
        self.show_window()
        self.open_panel.emit(self._last.panel, self._last.agent_id)

    def _flush_fills(self) -> None:
        notice = self.router.flush_fills()
        if notice is not None:
            self.present(notice)

    def _refresh_icon(self) -> None:
        self._sync_kill_action()
        if self.tray is not None:
            self.tray.setIcon(self._icons[self.router.state])
            self.tray.setToolTip(self.router.describe())

    # -- window and menu ------------------------------------------------------------------------
    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self.toggle_window()

    def _update_menu(self) -> None:
        self.show_action.setText("Hide window" if self.window.isVisible() else "Show window")
        self._sync_kill_action()

    def _sync_kill_action(self) -> None:
        if self.kill_action is not None:
            halted = self.router.halted
            self.kill_action.setText("Kill switch TRIPPED" if halted else "Trip kill switch…")
            self.kill_action.setEnabled(not halted)

    def trip_kill_switch(self) -> None:
        """The menu's "Trip kill switch…": bring the window up, where the person confirms."""
        if self._trip_kill_switch is None or self.router.halted:
            return
        self.show_window()
        self._trip_kill_switch()

    def show_window(self) -> None:
        self.window.show()
        self.window.raise_()
        self.window.activateWindow()

    def toggle_window(self) -> None:
        if self.window.isVisible():
            self.window.hide()
        else:
            self.show_window()

    def pause_all(self) -> None:
        outcome = self._pause_all()
        if inspect.isawaitable(outcome):
            import asyncio

            task = asyncio.ensure_future(outcome)
            self._pending.add(task)
            task.add_done_callback(self._paused)

    def _paused(self, task: Any) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("pausing the agents failed", exc_info=task.exception())
            self.present(TrayNotice("Could not pause every agent", str(task.exception()),
                                    "agents", "", "critical"))

    def handle_close(self, event: QCloseEvent) -> bool:
        """Call from the main window's ``closeEvent``: True when the window went to the tray."""
        if not (self.close_to_tray and self.tray is not None):
            return False
        event.ignore()
        self.window.hide()
        if not self._told_hidden:
            self._told_hidden = True
            self.tray.showMessage("Kestrel is still running",
                                  "Agents keep working. Use the tray icon to open the window or "
                                  "quit.", QSystemTrayIcon.MessageIcon.Information, 5000)
        return True

    def detach(self) -> None:
        if self.bus is not None:
            for event_type, handler in self._handlers:
                self.bus.unsubscribe(event_type, handler)
        self._handlers.clear()
        if self.tray is not None:
            self.tray.hide()
