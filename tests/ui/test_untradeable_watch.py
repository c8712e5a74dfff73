"""Markets the desk cannot trade, in the real window: the Orchestrator refuses in the chat to watch
them, with the reason and what can be watched (the check ``kestrel run --setup`` makes), and an
agent whose tasks keep failing shows "error" in the agent list and the person is alerted in words,
where they used to fail every hour behind a "running"."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.agents.health import FAILING_STREAK
from app.domain.agents import AgentRole
from app.ui.chat.bubbles import AnswerBubble, PersonBubble
from app.ui.main_window import MainWindow
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")

ANALYST = "AnalystAgent_Trend_v1"


async def say(desk: Desk, window: MainWindow, qtbot, text: str) -> str:
    """Type ``text`` to the Orchestrator, press Enter; the answer it shows."""
    chat = window.panels["chat"]
    qtbot.keyClicks(chat.composer.input, text)
    qtbot.keyClick(chat.composer.input, Qt.Key.Key_Return)
    await desk.settle(window)

    def answers() -> list[AnswerBubble]:
        """The answers of the task the message started: an earlier task's answer (the demo's
        own set-up) may reach the chat after the message does."""
        cards = chat.transcript.cards
        tasks = {c.entry.task_id for c in cards
                 if isinstance(c, PersonBubble) and c.entry.text == text}
        return [c for c in cards if isinstance(c, AnswerBubble) and c.entry.task_id in tasks]

    await eventually(lambda: bool(answers()))
    return answers()[-1].text.text()


def test_the_chat_refuses_to_watch_a_market_it_cannot_trade_naming_what_it_can(
    desk: Desk, qtbot
) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        world = window.world
        before = sorted(a.agent_id for a in world.agents.manager.list_agents())

        answer = await say(desk, window, qtbot,
                           "watch ETH/USD on 1h every 1h with a trend analyst and a trader")
        assert "Nothing was set up" in answer
        assert "ETH/USD cannot be watched in this workspace: the market data has no such " \
               "symbol (it has BTC/USD, BTC/USDT)" in answer
        assert "It can watch and trade BTC/USD" in answer

        answer = await say(desk, window, qtbot,
                           "watch BTC/USDT on 1h every 1h with a trend analyst and a trader")
        assert "BTC/USDT cannot be watched in this workspace: it is quoted in USDT, and this " \
               "workspace's paper account holds USD" in answer
        assert sorted(a.agent_id for a in world.agents.manager.list_agents()) == before
        assert not window.errors.reports

    desk.run(scenario)


def test_an_agent_whose_tasks_keep_failing_shows_error_and_the_person_is_alerted(
    desk: Desk, qtbot
) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        world = window.world
        manager = world.agents.manager
        # an analyst of a market without data, as one set up before the check existed
        manager.symbol_check = None
        analyst = await manager.create_agent(
            ANALYST, "ETH/USD 1h Trend Analyst", {"symbols": ["ETH/USD"], "interval": "1h"})
        for _hour in range(FAILING_STREAK):
            world.agents.queue.enqueue(analyst.agent_id, "RUN_ANALYSIS",
                                       {"symbol": "ETH/USD", "interval": "1h"}, "test")
            await desk.settle(window)

        panel = window.panels["agents"]
        await panel.refresh()
        row = panel.model.row_of(analyst.agent_id)
        state = panel.model.index(row, 1).data()
        assert state == f"error: {FAILING_STREAK} tasks failed in a row"
        tip = panel.model.index(row, 1).data(Qt.ItemDataRole.ToolTipRole)
        assert "get_market_snapshot NOT_FOUND" in tip and "ETH/USD" in tip
        strip = window.alert_banner
        await eventually(strip.isVisible)
        assert "ETH/USD 1h Trend Analyst is running but its last 3 tasks failed" \
               in strip.text.text()
        window.statusBar().refresh()
        assert "(1 failing)" in window.statusBar().agents_label.text()
        trader = next(a for a in manager.list_agents() if a.role is AgentRole.TRADER)
        assert world.agents.health.failing(trader.agent_id) is None
        await desk.close(window)

        again = await desk.open()  # a relaunch shows it at once, without a second alert
        panel = again.panels["agents"]
        await panel.refresh()
        row = panel.model.row_of(analyst.agent_id)
        assert panel.model.index(row, 1).data() == f"error: {FAILING_STREAK} tasks failed in a row"
        assert not again.alert_banner.isVisible()

    desk.run(scenario)
