"""The chat panel over a real agent world (rule engine, SQLite, tools), driven as a person would:
type, press Enter, click replies and toggles, switch agents, scroll, and read what changes."""

from __future__ import annotations

import asyncio
from base64 import b64encode
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QPlainTextEdit, QWidget

from app.agents.llm.port import (
    LLMRequest,
    LLMResponse,
    LLMUsage,
    PermanentLLMError,
    StreamCallback,
)
from app.domain.agents import AgentInfo, AgentRole, AgentState
from app.runtime.world import World
from app.tools.protocol.render import el, render_success
from app.ui.chat import ChatPanel
from app.ui.chat.bubbles import AnswerBubble, PersonBubble, QuestionCard
from app.ui.chat.cards import Card, NoticeLine, TaskCard, ToolCard
from app.ui.chat.panel import MAX_CARDS
from app.ui.theme import COLORS
from tests.helpers.agents import SETUP_COMMAND, advance_hours, agent_world, settle
from tests.helpers.eventually import eventually, eventually_on, settled

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints")

TRADER = "TraderAgent_Default_v1"
SIGNAL = "NEW_MARKET_ANALYSIS_SIGNAL"
RuntimeFactory = Callable[..., World]


@pytest.fixture
def make_runtime(tmp_path: Path, qloop: asyncio.AbstractEventLoop) -> Iterator[RuntimeFactory]:
    """Build and start a world in the test's workspace (with ``settings.toml`` text if given)."""
    built: list[World] = []

    def make(settings: str = "", **kwargs: object) -> World:
        if settings:
            (tmp_path / "settings.toml").write_text(settings, encoding="utf-8")
        world = agent_world(tmp_path, **kwargs)
        built.append(world)
        qloop.run_until_complete(world.start())
        return world

    yield make
    for world in built:
        qloop.run_until_complete(world.aclose())


@pytest.fixture
def open_panel(qtbot, qloop) -> Iterator[Callable[[World], ChatPanel]]:
    """Open chat panels on a world; destroy them at the end, on this (the GUI) thread.

    A top-level panel belongs to Python and its wrapper sits in reference cycles (its slots are
    its own methods), so without this the garbage collector would destroy it, timers and all,
    in whatever thread happens to run the collector.
    """
    opened: list[ChatPanel] = []

    def open_(world: World) -> ChatPanel:
        panel = ChatPanel(world.agents, world.venue, world.bus, world.ledger,
                          world.ensure_orchestrator)
        opened.append(panel)
        panel.resize(700, 900)
        panel.show()
        qtbot.waitExposed(panel)
        eventually_on(qloop, lambda: panel.agent_id is not None and not panel.loading)
        return panel

    yield open_
    for panel in opened:
        panel.close()
        panel.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def cards(panel: ChatPanel, kind: type[Card]) -> list:
    return [card for card in panel.transcript.cards if isinstance(card, kind)]


def say(qtbot, panel: ChatPanel, text: str) -> None:
    """Type ``text`` in the input and press Enter."""
    qtbot.keyClicks(panel.composer.input, text)
    qtbot.keyClick(panel.composer.input, Qt.Key.Key_Return)


def click(qtbot, widget) -> None:
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)


def asked(panel: ChatPanel, count: int = 1) -> bool:
    """The panel shows ``count`` question cards and the newest can be answered: its card appears
    with the question's text first, and its buttons are enabled once the question is stored."""
    questions = cards(panel, QuestionCard)
    return len(questions) == count and all(b.isEnabled() for b in questions[-1].buttons)


def person_said(panel: ChatPanel) -> list[str]:
    return [b.text.text() for b in cards(panel, PersonBubble)]


async def said(world: World, qtbot, panel: ChatPanel, text: str) -> None:
    say(qtbot, panel, text)
    await settle(world)


def test_a_sent_message_shows_and_the_orchestrators_markdown_answer_follows(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()
    panel = open_panel(world)
    assert "built-in rule engine (not an LLM)" in panel.header.status_text()
    assert "LLM " not in panel.header.status_text().replace("not an LLM", "")

    async def scenario() -> None:
        say(qtbot, panel, "help")
        assert panel.composer.input.text() == ""
        mine = cards(panel, PersonBubble)
        assert [b.text.text() for b in mine] == ["help"]  # at once, before the agent starts
        await settle(world)
        await eventually(lambda: bool(cards(panel, AnswerBubble)))
        (answer,) = cards(panel, AnswerBubble)
        html = answer.text.text()
        assert "<li" in html and "rule engine (not an LLM)" in html  # the list is rendered
        assert "- watch BTC/USDT" not in html
        assert not mine[0].queued.isVisibleTo(panel)
        assert panel.transcript.cards[-1] is answer

    qloop.run_until_complete(scenario())


def test_a_tool_call_is_one_card_with_its_status_and_duration_that_opens_to_its_xml(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()
    panel = open_panel(world)

    async def scenario() -> None:
        await said(world, qtbot, panel, SETUP_COMMAND)
        await eventually(lambda: bool(cards(panel, AnswerBubble)))
        tools = cards(panel, ToolCard)
        calls = world.ledger.connection.execute(
            "SELECT tool_name FROM tool_calls WHERE agent_id=? ORDER BY id", (panel.agent_id,)
        ).fetchall()
        # the list of agents came with the message (is it set up already?): a line, not a card
        assert calls[0][0] == "list_agent_instances"
        assert "Data fetched with the task: list_agent_instances." in [
            n.label.text().removeprefix("ⓘ  ") for n in cards(panel, NoticeLine)]
        assert [c.entry.tool_name for c in tools] == [row[0] for row in calls[1:]]
        trader = tools[0]
        assert trader.name.text() == "create_new_agent_instance"
        assert trader.glyph.text() == "✓" and trader.meta.text().startswith("ok")
        assert "agent_name_label=BTC/USDT Trader" in trader.params.full_text
        assert "agent instance created" in trader.summary.full_text
        await eventually(lambda: all(c.entry.duration_ms is not None for c in tools))
        assert any(unit in trader.meta.text() for unit in ("µs", "ms", " s"))

        assert trader.raw.body is None  # no XML view until asked for
        click(qtbot, trader.raw.toggle)
        raw = trader.raw.body
        assert isinstance(raw, QPlainTextEdit) and raw.isVisible()
        assert "<create_new_agent_instance>" in raw.toPlainText()
        assert '<tool_result tool_name="create_new_agent_instance">' in raw.toPlainText()
        click(qtbot, trader.raw.toggle)
        assert not raw.isVisible()

    qloop.run_until_complete(scenario())


def test_reasoning_is_folded_away_until_the_person_opens_it(make_runtime, open_panel, qtbot, qloop):
    world = make_runtime()
    panel = open_panel(world)

    async def scenario() -> None:
        await said(world, qtbot, panel, SETUP_COMMAND)
        await eventually(lambda: len(cards(panel, ToolCard)) >= 1)
        card = cards(panel, ToolCard)[0]
        assert card.reasoning.toggle.isVisible() and not card.reasoning.expanded
        assert card.reasoning.body is None
        assert card.reasoning.toggle.text() == "Reasoning ▸"
        click(qtbot, card.reasoning.toggle)
        assert card.reasoning.body is not None and card.reasoning.body.isVisible()
        assert card.reasoning.toggle.text() == "Reasoning ▾"
        assert card.reasoning.body.text().startswith("[create trader] Setting up BTC/USDT")
        assert "<thinking>" not in card.params.full_text + card.summary.full_text

    qloop.run_until_complete(scenario())


def test_a_risk_guard_refusal_is_drawn_in_orange_with_its_rule_and_reason(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime("[risk.max_position_weight]\nlimit_pct = 5\n")
    panel = open_panel(world)

    async def scenario() -> None:
        trader = await world.agents.manager.create_agent(TRADER, "T", {"symbols": ["BTC/USDT"]})
        price = await world.venue.broker.last_price("BTC/USDT")
        world.agents.queue.enqueue(trader.agent_id, "NEW_MARKET_ANALYSIS_SIGNAL", {
            "symbol": "BTC/USDT", "side": "BUY", "confidence": "0.8", "price": str(price),
            "stop_loss": str((price * Decimal("0.98")).quantize(Decimal("0.01"))),
            "take_profit": str((price * Decimal("1.04")).quantize(Decimal("0.01"))),
            "reason": "test signal"}, "agent:analyst-1")
        await settle(world)
        await eventually(lambda: panel.header.picker.findData(trader.agent_id) >= 0)
        panel.header.picker.setCurrentIndex(panel.header.picker.findData(trader.agent_id))
        await eventually(lambda: not panel.loading and bool(cards(panel, AnswerBubble)))

        (task,) = cards(panel, TaskCard)
        assert task.kind.text() == "NEW_MARKET_ANALYSIS_SIGNAL"
        assert task.source.text() == "from analyst-1"
        (order,) = [c for c in cards(panel, ToolCard) if c.entry.tool_name == "create_order"]
        assert order.entry.status == "rejected" and order.glyph.text() == "⊘"
        assert order.problem is not None and order.problem.isVisible()
        assert order.problem.title.text() == "Refused by the Risk Guard · rule: max position weight"
        assert order.problem.text.text() == (
            "Position weight would be 19.9% > limit 5.0% for BTC/USDT")
        image = order.frame.grab().toImage()
        edge = image.pixelColor(1, image.height() // 2)  # the card's left edge
        assert edge == QColor(COLORS["rejected"])
        others = [c for c in cards(panel, ToolCard) if c is not order]
        assert all(c.problem is None for c in others)

    qloop.run_until_complete(scenario())


def test_a_clarification_offers_its_replies_as_buttons_and_a_click_answers_it(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()
    panel = open_panel(world)

    async def scenario() -> None:
        await said(world, qtbot, panel, "watch BTC/USDT")
        await eventually(lambda: asked(panel))
        (question,) = cards(panel, QuestionCard)
        assert "Which candle interval" in question.text.text()
        assert [b.text() for b in question.buttons] == ["1h", "4h", "15m", "1d"]
        assert "waiting for you" in panel.header.status_text()
        assert "expected: text" in panel.composer.input.placeholderText()

        click(qtbot, question.buttons[0])
        assert [b.isEnabled() for b in question.buttons] == [False] * 4
        assert question.buttons[0].isChecked() and not question.buttons[1].isChecked()
        assert question.status.text() == "You answered: 1h"
        await settle(world)
        await eventually(lambda: asked(panel, 2))
        schedule = cards(panel, QuestionCard)[1]
        assert "How often" in schedule.text.text()
        assert schedule.buttons[0].text() == "Every 1h, as each candle closes"

        click(qtbot, schedule.buttons[0])
        await settle(world)
        await eventually(lambda: asked(panel, 3))
        say(qtbot, panel, "a trend analyst only")  # typed while a clarification is open
        await settle(world)
        await eventually(lambda: bool(cards(panel, AnswerBubble)))
        assert cards(panel, QuestionCard)[2].status.text() == "You answered: a trend analyst only"
        assert "Set up BTC/USDT 1h Trend Analyst" in cards(panel, AnswerBubble)[0].text.text()
        await eventually(lambda: "waiting for you" not in panel.header.status_text())
        assert panel.header.status_text().startswith("running")
        assert panel.composer.input.placeholderText() == "Message Orchestrator…"

    qloop.run_until_complete(scenario())


def test_a_reply_to_a_question_already_answered_elsewhere_is_refused_in_words(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()
    panel = open_panel(world)

    async def scenario() -> None:
        await said(world, qtbot, panel, "watch BTC/USDT")
        await eventually(lambda: asked(panel))
        (question,) = cards(panel, QuestionCard)
        world.agents.manager.answer(question.entry.question_id, "4h")  # from the phone, say
        click(qtbot, question.buttons[0])  # before the panel heard of it
        await eventually(lambda: panel.composer.error.isVisibleTo(panel))
        assert "already answered" in panel.composer.error.text()
        await eventually(lambda: question.status.text() == "You answered: 4h")
        assert question.buttons[1].isChecked() and not question.buttons[0].isChecked()

    qloop.run_until_complete(scenario())


class GatedProvider:
    """A model that streams the first part of its answer, then waits for the test to let it
    finish with the second (or fail with ``error``)."""

    is_llm = True

    def __init__(self, first: str, second: str, *, name: str = "replay",
                 error: Exception | None = None) -> None:
        self.parts = (first, second)
        self.name = name
        self.error = error
        self.gate = asyncio.Event()

    async def complete(self, request: LLMRequest, on_delta: StreamCallback | None = None
                       ) -> LLMResponse:
        assert on_delta is not None
        on_delta(self.parts[0])
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        on_delta(self.parts[1])
        return LLMResponse("".join(self.parts), LLMUsage(10, 5), "scripted", self.name, 1.0)

    async def aclose(self) -> None:
        return None


def orchestrated_by(model: GatedProvider) -> Callable[[AgentInfo, object], GatedProvider | None]:
    def override(info: AgentInfo, _template: object) -> GatedProvider | None:
        return model if info.role is AgentRole.ORCHESTRATOR else None

    return override


def test_a_streamed_answer_shows_while_it_arrives_and_the_stored_one_replaces_it(
    make_runtime, open_panel, qtbot, qloop
):
    model = GatedProvider("<thinking>Checking the trend first.</thinking>**Bitcoin** is ",
                          "trending up.")
    world = make_runtime(provider_override=orchestrated_by(model),
                           force_provider=("replay", "scripted"))
    panel = open_panel(world)
    assert "replay of recorded answers (scripted)" in panel.header.status_text()

    async def scenario() -> None:
        say(qtbot, panel, "How is bitcoin doing?")
        await eventually(lambda: bool(panel.transcript.typing))
        (bubble,) = panel.transcript.typing.values()
        assert bubble.text.text() == "Checking the trend first.\n**Bitcoin** is"
        assert not cards(panel, AnswerBubble)
        model.gate.set()
        await settle(world)
        await eventually(lambda: bool(cards(panel, AnswerBubble)) and not panel.transcript.typing)
        (answer,) = cards(panel, AnswerBubble)
        assert "font-weight:700" in answer.text.text() and "trending up." in answer.text.text()
        assert "**" not in answer.text.text()
        assert answer.reasoning.body is None
        click(qtbot, answer.reasoning.toggle)
        assert answer.reasoning.body.text() == "Checking the trend first."

    qloop.run_until_complete(scenario())


def test_an_answer_cannot_show_html_or_load_images_it_names(
    make_runtime, open_panel, qtbot, qloop
):
    model = GatedProvider('Read <b onclick="x">this</b> ![chart](/etc/passwd) ',
                          "and ![ref][r]\n\n[r]: file:///dev/zero", name="openai-compatible")
    model.gate.set()
    world = make_runtime(provider_override=orchestrated_by(model))
    panel = open_panel(world)

    async def scenario() -> None:
        await said(world, qtbot, panel, "show me")
        await eventually(lambda: bool(cards(panel, AnswerBubble)))
        html = cards(panel, AnswerBubble)[0].text.text()
        assert "&lt;b onclick" in html and "<b " not in html  # written out, not markup
        assert "<img" not in html and html.count("[image]") == 2
        notices = [n.label.text() for n in cards(panel, NoticeLine)]  # the loop's own remarks
        assert any("The model 'scripted' has no price" in n for n in notices), notices

    qloop.run_until_complete(scenario())


def test_a_failing_model_faults_the_agent_and_the_chat_says_why(
    make_runtime, open_panel, qtbot, qloop
):
    model = GatedProvider("Let me", " think.", name="openai-compatible",
                          error=PermanentLLMError("openai-compatible", "the API key was refused"))
    world = make_runtime(provider_override=orchestrated_by(model))
    panel = open_panel(world)

    async def scenario() -> None:
        say(qtbot, panel, "hello")
        await eventually(lambda: bool(panel.transcript.typing))
        model.gate.set()
        await settle(world)
        await eventually(lambda: panel.header.status_text().startswith("faulted"))
        assert "the API key was refused" in panel.header.reason.text()
        assert "What to do: check the API key" in panel.header.reason.text()
        await eventually(lambda: not panel.transcript.typing and bool(cards(panel, NoticeLine)))
        notice = cards(panel, NoticeLine)[-1]
        assert "the model provider failed: openai-compatible: the API key was refused" in (
            notice.label.text())
        picked = panel.header.picker.currentText()
        assert picked.startswith("Orchestrator") and picked.endswith("faulted")

    qloop.run_until_complete(scenario())


def test_a_question_asked_while_the_chat_was_closed_waits_with_its_replies(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()

    async def ask() -> None:
        orchestrator = await world.ensure_orchestrator()
        world.agents.manager.send_user_message(orchestrator.agent_id, "watch BTC/USDT")
        await settle(world)

    qloop.run_until_complete(ask())
    panel = open_panel(world)

    async def scenario() -> None:
        (question,) = cards(panel, QuestionCard)
        assert [b.text() for b in question.buttons] == ["1h", "4h", "15m", "1d"]
        assert all(b.isEnabled() for b in question.buttons)
        assert "Answer Orchestrator (expected: text)" in panel.composer.input.placeholderText()
        assert [b.text.text() for b in cards(panel, PersonBubble)] == ["watch BTC/USDT"]
        click(qtbot, question.buttons[1])
        await settle(world)
        await eventually(lambda: len(cards(panel, QuestionCard)) == 2)
        assert question.status.text() == "You answered: 4h"
        assert cards(panel, PersonBubble)[-1].text.text() == "4h"  # the reply, as said

    qloop.run_until_complete(scenario())


def test_enter_sends_shift_enter_breaks_the_line_and_up_down_recall_what_was_sent(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()
    panel = open_panel(world)
    box = panel.composer.input

    async def scenario() -> None:
        qtbot.keyClick(box, Qt.Key.Key_Return)  # nothing typed: nothing sent, no complaint
        assert not panel.transcript.cards and not panel.composer.error.isVisibleTo(panel)
        assert not panel.composer.send_button.isEnabled()
        await said(world, qtbot, panel, "status")
        await said(world, qtbot, panel, "help")
        await eventually(lambda: person_said(panel) == ["status", "help"])

        qtbot.keyClicks(box, "half")
        qtbot.keyClick(box, Qt.Key.Key_Up)
        assert box.text() == "help"
        qtbot.keyClick(box, Qt.Key.Key_Up)
        assert box.text() == "status"
        qtbot.keyClick(box, Qt.Key.Key_Up)
        assert box.text() == "status"  # the oldest stays
        qtbot.keyClick(box, Qt.Key.Key_Down)
        assert box.text() == "help"
        qtbot.keyClick(box, Qt.Key.Key_Down)
        assert box.text() == "half"  # the draft comes back

        box.clear()
        qtbot.keyClicks(box, "line one")
        qtbot.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
        qtbot.keyClicks(box, "line two")
        assert box.text() == "line one\nline two"
        assert len(cards(panel, PersonBubble)) == 2
        click(qtbot, panel.composer.send_button)
        await eventually(lambda: person_said(panel)[-1:] == ["line one\nline two"])
        assert box.text() == ""

    qloop.run_until_complete(scenario())


def test_switching_agents_shows_each_ones_conversation_and_deleted_agents_leave_the_list(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()
    panel = open_panel(world)
    picker = panel.header.picker
    opened: list[str] = []
    panel.agent_changed.connect(opened.append)

    async def scenario() -> None:
        orchestrator = panel.agent_id
        await said(world, qtbot, panel, SETUP_COMMAND)
        await eventually(lambda: picker.count() == 3)
        assert picker.itemData(0) == orchestrator
        agents = {a.role: a for a in world.agents.manager.list_agents()}
        analyst, trader = agents[AgentRole.ANALYST], agents[AgentRole.TRADER]

        # a model that wrote its assessment with a call of its own, in base64
        (task, *_) = world.agents.queue.tasks(agent_id=analyst.agent_id)
        assessment = b64encode(b"schema_version: 1\nsymbols: {}\n").decode()
        world.agents.conversations.add(
            analyst.agent_id, task.task_id, 9, "assistant", "assistant",
            "<write_agent_memory_file><file_path>current_market_assessment.yaml</file_path>"
            f"<content_base64>{assessment}</content_base64></write_agent_memory_file>")
        world.agents.conversations.add(
            analyst.agent_id, task.task_id, 9, "user", "tool_result", render_success(
                "write_agent_memory_file", el("memory_file_written",
                                              file_path_written="current_market_assessment.yaml",
                                              status_message="File saved successfully."),
            ).xml)

        picker.setCurrentIndex(picker.findData(analyst.agent_id))
        await eventually(lambda: not panel.loading and bool(cards(panel, TaskCard)))
        assert opened == [analyst.agent_id]
        assert "analyst" in panel.header.status_text()
        assert not cards(panel, PersonBubble)
        names = [c.entry.tool_name for c in cards(panel, ToolCard)]
        assert "create_new_agent_instance" not in names
        notices = [n.label.text() for n in cards(panel, NoticeLine)]
        assert any("calculate_technical_indicator" in n for n in notices)  # came with the task
        # the answer's log entry and assessment, written for it after the answer
        assert any("Written after the answer: append_to_agent_memory_file: success; "
                   "write_agent_memory_file: success." in n for n in notices)
        (write,) = [c for c in cards(panel, ToolCard)
                    if c.entry.tool_name == "write_agent_memory_file"]
        assert "content=“schema_version: 1" in write.params.full_text  # base64, decoded
        click(qtbot, write.raw.toggle)
        assert "── content_base64 (call), decoded ──\nschema_version: 1" in (
            write.raw.body.toPlainText())

        panel.set_agent(orchestrator)  # as the main window's "open conversation" does
        await eventually(lambda: not panel.loading and bool(cards(panel, PersonBubble)))
        assert picker.currentData() == orchestrator
        assert cards(panel, PersonBubble)[0].text.text() == SETUP_COMMAND

        panel.set_agent(trader.agent_id)
        await eventually(lambda: not panel.loading)
        await world.agents.manager.delete_agent(trader.agent_id)
        await eventually(lambda: picker.findData(trader.agent_id) < 0)
        assert picker.count() == 2
        assert panel.agent_id == orchestrator  # its chat closed; back to the Orchestrator
        await eventually(lambda: not panel.loading and bool(cards(panel, PersonBubble)))

    qloop.run_until_complete(scenario())


def test_a_message_to_a_paused_agent_waits_visibly_until_it_resumes(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()
    panel = open_panel(world)

    async def scenario() -> None:
        await world.agents.manager.control(panel.agent_id, "pause")
        await eventually(lambda: panel.header.status_text().startswith("paused"))
        await said(world, qtbot, panel, "status")
        (mine,) = cards(panel, PersonBubble)
        assert mine.queued.isVisibleTo(panel)
        await settle(world)  # every running agent is done: a paused one has not answered
        assert not cards(panel, AnswerBubble)
        await world.agents.manager.control(panel.agent_id, "resume")
        await settle(world)
        await eventually(lambda: bool(cards(panel, AnswerBubble)))
        assert not mine.queued.isVisibleTo(panel)
        assert panel.team.store.get(panel.agent_id).state is AgentState.RUNNING

    qloop.run_until_complete(scenario())


def test_a_busy_replay_keeps_the_chat_bounded_follows_only_at_the_bottom_and_loads_earlier(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime()
    panel = open_panel(world)
    bar = panel.transcript.verticalScrollBar()

    async def scenario() -> None:
        world.agents.manager.send_user_message(panel.agent_id, SETUP_COMMAND)
        await settle(world)
        (analyst,) = [a for a in world.agents.manager.list_agents() if a.role is AgentRole.ANALYST]
        panel.set_agent(analyst.agent_id)
        await eventually(lambda: not panel.loading)
        await advance_hours(world, 160)  # about 650 messages
        await eventually(lambda: not panel.busy)
        stored = len(world.agents.conversations.recent(analyst.agent_id, 10_000))
        assert stored > 2 * MAX_CARDS
        assert len(panel.transcript.cards) == MAX_CARDS
        assert panel.transcript.load_earlier.isVisibleTo(panel)
        await eventually(lambda: bar.value() == bar.maximum())
        newest = world.agents.conversations.recent(analyst.agent_id, 1)[0]
        assert panel.transcript.cards[-1].entry.origin.content == newest.content

        bar.setValue(bar.maximum() // 3)  # the person scrolls up to read
        await settled(lambda: (bar.value(), bar.maximum()))
        first_seen = next(c for c in panel.transcript.cards if c.y() + c.height() > bar.value())
        offset = first_seen.y() - bar.value()
        await advance_hours(world, 2)
        await eventually(lambda: not panel.busy)
        await settled(lambda: (bar.value(), bar.maximum(), first_seen.y()))
        assert bar.value() < bar.maximum()  # not dragged to the bottom
        assert first_seen.y() - bar.value() == offset  # what was read stays put

        oldest_card = panel.transcript.cards[0]
        oldest = oldest_card.entry
        count = len(panel.transcript.cards)
        bar.setValue(0)
        await settled(lambda: (bar.value(), bar.maximum()))
        seen_at = oldest_card.y() - bar.value()
        click(qtbot, panel.transcript.load_earlier)
        await eventually(lambda: len(panel.transcript.cards) > count and not panel.busy)
        await settled(lambda: (bar.value(), bar.maximum(), oldest_card.y()))
        assert oldest_card.y() - bar.value() == seen_at  # loaded above, the view did not jump
        keys = [c.entry.key for c in panel.transcript.cards]
        assert keys.index(oldest.key) > 0 and len(set(keys)) == len(keys)
        earlier = panel.transcript.cards[keys.index(oldest.key) - 1].entry
        (oldest_row,) = [m for m in world.agents.conversations.messages(oldest.task_id)
                         if m.content == oldest.origin.content and m.kind == oldest.origin.kind]
        assert earlier.origin.message_id < oldest_row.id

    qloop.run_until_complete(scenario())


def test_an_order_held_for_approval_is_placed_once_the_person_approves_it(
    make_runtime, open_panel, qtbot, qloop
):
    world = make_runtime("[approval]\nabove_quote = 100\n")
    panel = open_panel(world)

    async def scenario() -> None:
        trader = await world.agents.manager.create_agent(TRADER, "T", {"symbols": ["BTC/USDT"]})
        panel.set_agent(trader.agent_id)
        await eventually(lambda: not panel.loading)
        price = await world.venue.broker.last_price("BTC/USDT")
        world.agents.queue.enqueue(trader.agent_id, "NEW_MARKET_ANALYSIS_SIGNAL", {
            "symbol": "BTC/USDT", "side": "BUY", "confidence": "0.8", "price": str(price),
            "stop_loss": str((price * Decimal("0.98")).quantize(Decimal("0.01"))),
            "take_profit": str((price * Decimal("1.04")).quantize(Decimal("0.01"))),
            "reason": "test signal"}, "agent:analyst-1")
        await settle(world)
        await eventually(lambda: bool(cards(panel, QuestionCard)))
        (order,) = [c for c in cards(panel, ToolCard) if c.entry.tool_name == "create_order"]
        assert order.entry.status == "awaiting approval" and order.glyph.text() == "?"
        assert "held for your approval" in order.summary.full_text
        (question,) = cards(panel, QuestionCard)
        assert question.title.text() == "Approval needed · T"
        assert "T wants to place an order" in question.text.text()
        assert [b.text() for b in question.buttons] == ["Approve", "Refuse"]
        assert "waiting for you" in panel.header.status_text()

        click(qtbot, question.buttons[0])
        await settle(world)
        await eventually(lambda: order.entry.status == "success")
        assert order.glyph.text() == "✓" and "order" in order.summary.full_text
        assert question.buttons[0].isChecked() and not question.buttons[1].isEnabled()
        await eventually(lambda: bool(cards(panel, AnswerBubble)))
        assert cards(panel, AnswerBubble)[0].text.text().count("Placed MARKET BUY") == 1

    qloop.run_until_complete(scenario())


def test_the_traders_conversation_wraps_to_a_narrow_panel(make_runtime, open_panel, qtbot, qloop):
    """A signal's payload, the person's message and the agent's replies all stay inside the
    panel's width: nothing is cut off at the right with no way to scroll to it."""
    world = make_runtime()
    panel = open_panel(world)

    async def scenario() -> None:
        await said(world, qtbot, panel, SETUP_COMMAND)
        trader = next(a for a in world.agents.manager.list_agents() if a.role is AgentRole.TRADER)
        panel.set_agent(trader.agent_id)
        def signals() -> list[TaskCard]:
            return [c for c in cards(panel, TaskCard) if c.entry.task_type == SIGNAL]

        for _hour in range(48):  # until the analyst's first signal reaches the trader
            if signals():
                break
            await advance_hours(world, 1)
            await eventually(lambda: not panel.loading)
        assert signals(), "the trader received a signal"
        say(qtbot, panel, "what is your plan for this position, and why that size?")
        await settle(world)
        await eventually(lambda: bool(cards(panel, PersonBubble)))
        panel.resize(380, 900)  # the chat dock on a 1280-pixel-wide screen
        view = panel.transcript

        def sticking_out() -> list[tuple[str, str, str, int, int]]:
            width = view.viewport().width()
            if view.widget().width() > width:
                return [("the transcript", "", "", view.widget().width(), width)]
            return [(type(card).__name__, type(part).__name__, part.objectName(), right, width)
                    for card in view.cards for part in [card, *card.findChildren(QWidget)]
                    if part.isVisible()
                    and (right := part.mapTo(view.viewport(), part.rect().topRight()).x()) > width]

        # the layout settles over a few turns of the loop; then nothing may stick out
        await eventually(lambda: not sticking_out())
        assert sticking_out() == []

    qloop.run_until_complete(scenario())


def test_a_sentence_around_a_fenced_call_shows_as_the_agents_words_with_what_was_accepted(
    make_runtime, open_panel, qtbot, qloop
):
    from tests.helpers.scripted_llm import ScriptedProvider

    model = ScriptedProvider([
        "I'll list the agents first.\n\n```xml\n<list_agent_instances></list_agent_instances>\n```",
        "No agents but me yet.",
    ])
    world = make_runtime(
        provider_override=lambda info, _t: model if info.role is AgentRole.ORCHESTRATOR else None
    )
    panel = open_panel(world)

    async def scenario() -> None:
        await said(world, qtbot, panel, "who is there?")
        await eventually(lambda: len(cards(panel, AnswerBubble)) == 2)
        words, answer = cards(panel, AnswerBubble)
        assert "list the agents first." in words.text.text()
        assert "No agents but me yet." in answer.text.text()
        (tool,) = cards(panel, ToolCard)
        assert tool.name.text() == "list_agent_instances" and tool.glyph.text() == "✓"
        notices = [n.label.text() for n in cards(panel, NoticeLine)]
        assert any("accepted: code fence removed; text before the call kept as commentary" in n
                   for n in notices), notices
        order = panel.transcript.cards
        assert order.index(words) < order.index(tool) < order.index(answer)

    qloop.run_until_complete(scenario())
