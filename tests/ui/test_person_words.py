"""What a person reads in the real window is said for a person: money to the cent and prices at the
market's precision ("needs 49999.9932432 … 8517.26774931 is free", "Equity 10053.2012191 USD" and
"RSI 59.91716198" were shown), schedules and times in words ("every 3600 s", "…T06:00:00Z");
the agents' tool results keep every digit."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import QSize, Qt

from app.domain.agents import AgentRole
from app.runtime.ticket import TicketKind
from app.ui.chat.bubbles import AnswerBubble, QuestionCard
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk
from tests.ui.test_untradeable_watch import say

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def answers(window) -> list[str]:
    chat = window.panels["chat"]
    return [c.text.text() for c in chat.transcript.cards if isinstance(c, AnswerBubble)]


def test_schedules_times_and_money_are_said_in_a_persons_words(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        world = window.world
        chat = window.panels["chat"]
        await eventually(lambda: bool(answers(window)))
        setup = answers(window)[0]
        assert re.search(r"every hour \(job BTCUSD_1h_Trend_\w+, next run "
                         r"2019-\d\d-\d\d \d\d:00 UTC\)", setup), setup
        assert not ISO.search(setup)

        status = await say(desk, window, qtbot, "status")
        assert re.search(r"every hour, next 2019-\d\d-\d\d \d\d:00 UTC", status), status
        assert "3600 s" not in status and not ISO.search(status)

        window.replay_bar.pause_button.click()
        window.replay_bar.step_button.click()  # the demo's first buy fills
        await desk.settle(window)
        trader = next(a for a in world.agents.manager.list_agents()
                      if a.role is AgentRole.TRADER)
        chat.set_agent(trader.agent_id)
        await eventually(lambda: not chat.loading)
        held = await say(desk, window, qtbot, "how are we doing?")
        assert re.search(r"Equity [\d]+\.\d\d USD, cash [\d]+\.\d\d, total P&amp;L -?[\d]+\.\d\d",
                         held), held
        assert re.search(r"BTC/USD: [\d.]+ at [\d]+\.\d\d, last [\d]+\.\d\d, unrealized P&amp;L "
                         r"-?[\d]+\.\d\d \([\d]+\.\d\d% of equity\)", held), held
        analyst = next(a for a in world.agents.manager.list_agents()
                       if a.role is AgentRole.ANALYST)
        chat.set_agent(analyst.agent_id)
        await eventually(lambda: not chat.loading and bool(answers(window)))
        for said in answers(window):
            assert not re.search(r"RSI \d+\.\d{3,}", said), said

        qtbot.keyClick(window, Qt.Key.Key_F9)  # a buy the account cannot pay for
        await eventually(lambda: window.trading.ticket is not None
                    and window.trading.ticket.isVisible())
        ticket = window.trading.ticket
        ticket.set_kind(TicketKind.MARKET)
        ticket.fields["amount"].setText("50")
        qtbot.keyClick(ticket.go, Qt.Key.Key_Return)
        await eventually(lambda: "The broker would refuse it" in ticket.review_box.text())
        refusal = ticket.review_box.text().split("The broker would refuse it: ")[1]
        assert re.search(r"needs [\d,]+\.\d\d \(quantity 50 at about [\d,]+\.\d\d, fee and "
                         r"slippage included\) but only [\d,]+\.\d\d is free", refusal), refusal
        ticket.close()

    desk.run(scenario)


def test_the_input_asks_for_an_answer_in_words_that_fit_and_stops_once_it_is_given(
    desk: Desk, qtbot
) -> None:
    """The input's "Answer …'s question, or pick a reply above (expected: …)" was cut off in a
    narrow chat, and stayed after the reply button had answered the question."""
    async def scenario() -> None:
        window = await desk.open(size=QSize(1280, 720))
        await desk.settle(window)
        chat = window.panels["chat"]
        box = chat.composer.input
        qtbot.keyClicks(box, "watch BTC/USD")
        qtbot.keyClick(box, Qt.Key.Key_Return)
        await desk.settle(window)
        await eventually(lambda: any(isinstance(c, QuestionCard) for c in chat.transcript.cards))
        question = [c for c in chat.transcript.cards if isinstance(c, QuestionCard)][-1]
        shown = box.placeholderText()
        assert shown.startswith("Answer Orchestrator"), shown
        assert box.fontMetrics().horizontalAdvance(shown) <= box.viewport().width()
        assert box.toolTip() == ("Answer Orchestrator (expected: text) or pick a reply "
                                 "above…")
        qtbot.mouseClick(question.buttons[0], Qt.MouseButton.LeftButton)
        assert box.placeholderText() == "Message Orchestrator…", "answered: no question open"
        await desk.settle(window)
        await eventually(lambda: len([c for c in chat.transcript.cards
                                 if isinstance(c, QuestionCard)]) == 2)
        assert box.placeholderText().startswith("Answer Orchestrator")  # the next question
        qtbot.keyClicks(box, "cancel")
        qtbot.keyClick(box, Qt.Key.Key_Return)
        assert box.placeholderText() == "Message Orchestrator…"

    desk.run(scenario)
