"""The status bar: market clock (simulated time in a replay), data connection (while the exchange
holds requests after a ban or a rate limit: until when), agents at work,
LLM spend today and the trading mode, which is always visible (LIVE in its own colour); while the
kill switch is tripped, a red TRADING HALTED badge beside the mode."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from app.domain.agents import AgentState
from app.domain.clock import ms_to_iso
from app.domain.trading import Mode
from app.runtime.providers import RULE_ENGINE
from app.ui.panels.style import MODE_COLORS
from app.ui.theme import set_look

if TYPE_CHECKING:
    from app.runtime.world import World

DAY_S = 86_400


class StatusBar(QStatusBar):
    def __init__(
        self, world: World, mode: Mode, connection: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.world = world
        self.clock_label = QLabel()
        self.clock_label.setObjectName("status_clock")
        self.connection = connection
        self.connection_label = QLabel(connection)
        self.connection_label.setObjectName("status_connection")
        self.agents_label = QLabel()
        self.agents_label.setObjectName("status_agents")
        self.spend_label = QLabel()
        self.spend_label.setObjectName("status_spend")
        self.mode_label = QLabel(f" {mode.value} ")
        self.mode_label.setObjectName("status_mode")
        background, text = MODE_COLORS[mode]  # the badge's: the same in either theme
        self.mode_label.setStyleSheet(
            f"background: {background}; color: {text}; font-weight: bold; border-radius: 3px;"
        )
        self.halted_label = QLabel(" TRADING HALTED: kill switch ")
        self.halted_label.setObjectName("statusHalted")  # its colours are the sheet's
        self.halted_label.hide()
        for label in (self.clock_label, self.connection_label, self.agents_label,
                      self.spend_label):
            self.addWidget(label)
        self.addPermanentWidget(self.halted_label)
        self.addPermanentWidget(self.mode_label)
        self._timer = QTimer(self)
        self._timer.setInterval(500)  # 2 Hz: a clock that moves, without redrawing per tick
        self._timer.timeout.connect(self.refresh)
        self._timer.start()
        self.refresh()

    def stop(self) -> None:
        """Stop reading the runtime (its stores are about to close)."""
        self._timer.stop()

    def _agents_text(self) -> str:
        manager = self.world.agents.manager
        agents = manager.list_agents()
        if not manager.started:  # a live account's start-up waits for you
            return f"Agents: {len(agents)} not started yet"
        running = sum(1 for a in agents if a.state is AgentState.RUNNING)
        waiting = sum(1 for a in agents if a.state is AgentState.WAITING_FOR_USER)
        faulted = sum(1 for a in agents if a.state is AgentState.FAULTED)
        health = self.world.agents.health
        failing = 0 if health is None else sum(
            1 for a in agents if a.state is AgentState.RUNNING and health.failing(a.agent_id))
        text = f"Agents: {running} running"
        if failing:
            text += f" ({failing} failing)"
        if waiting:
            text += f", {waiting} waiting for you"
        if faulted:
            text += f", {faulted} faulted"
        return text

    def refresh(self) -> None:
        now = ms_to_iso(self.world.venue.clock.now_ms()).replace("T", " ").replace("Z", " UTC")
        self.clock_label.setText(f"Market time {now}")
        self.agents_label.setText(self._agents_text())
        driver = self.world.venue.driver
        held, failing = driver.held, driver.last_error
        if held is not None:  # the exchange paused requests: nothing is asked until then
            self.connection_label.setText(held)
            self.connection_label.setToolTip(
                f"{held}. Kestrel sends the exchange nothing, reads or orders, before then: "
                "asking during a ban only makes it longer.")
        else:
            self.connection_label.setText(self.connection if failing is None else
                                          f"{self.connection}: market reads failing, retrying")
            self.connection_label.setToolTip(failing or "")
        set_look(self.connection_label, "" if held is None and failing is None else "warning")
        trip = self.world.agents.kill_switch.active()
        self.halted_label.setVisible(trip is not None)
        self.halted_label.setToolTip(
            "" if trip is None else f"The kill switch was {trip.describe()}")
        since = int((time.time() - time.time() % DAY_S) * 1000)
        conversations = self.world.agents.conversations
        spend = conversations.usage(since_wall_ms=since)
        decisions = conversations.calls_by_provider(since_wall_ms=since).get(RULE_ENGINE, 0)
        text = (f"LLM today: {spend.calls - decisions} calls, "
                f"${spend.cost.quantize(Decimal('0.0001'))}")
        if decisions:  # the built-in engine's answers are not language-model calls
            text += f" · rule engine: {decisions} decisions"
        self.spend_label.setText(text)
