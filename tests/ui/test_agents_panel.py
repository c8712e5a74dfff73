"""The agent list driven as a person would: create, pause, stop, delete, read P&L, switch jobs off.

Every test runs a real agent world (the rule engine, real SQLite, the real tools and scheduler)
inside the qasync loop, as the window does; nothing here is a mock.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QMessageBox

from app.config import LLMSettings
from app.domain.agents import AgentInfo, AgentRole, AgentState, Job
from app.runtime.world import World
from app.ui.agents import AgentsPanel, CreateAgentDialog
from app.ui.agents.jobs import describe_schedule
from app.ui.agents.lifecycle import RULE_ENGINE_LABEL, Action
from app.ui.panels.style import COLORS, format_time
from tests.helpers.agents import SETUP_COMMAND, advance_hours, agent_world, settle
from tests.helpers.eventually import eventually

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints")

TRADER = "TraderAgent_Default_v1"
ANALYST = "AnalystAgent_Trend_v1"


@pytest.fixture
def world(tmp_path, qloop) -> Iterator[World]:
    rt = agent_world(tmp_path)
    qloop.run_until_complete(rt.start())
    yield rt
    qloop.run_until_complete(rt.aclose())


@pytest.fixture
def panel(world, qtbot, qloop) -> Iterator[AgentsPanel]:
    w = AgentsPanel(world.agents, world.venue, world.bus)
    qtbot.addWidget(w)
    w.resize(1100, 500)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.tasks.shutdown()  # nothing may read the stores once the world closes them


def cell(panel: AgentsPanel, agent_id: str, column: str, role: int = Qt.ItemDataRole.DisplayRole
         ) -> Any:
    titles = [c.title for c in panel.model.columns]
    matches = [i for i, t in enumerate(titles) if t == column or t.startswith(f"{column} (")]
    row = panel.model.row_of(agent_id)
    assert row is not None, f"{agent_id} is not in the table"
    return panel.model.data(panel.model.index(row, matches[0]), role)


def click_row(qtbot, panel: AgentsPanel, agent_id: str, *, double: bool = False) -> None:
    row = panel.model.row_of(agent_id)
    assert row is not None
    rect = panel.view.visualRect(panel.model.index(row, 0))
    click = qtbot.mouseDClick if double else qtbot.mouseClick
    click(panel.view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


def click(qtbot, widget) -> None:
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)


def type_into(qtbot, widget, text: str) -> None:
    """Select what the field holds and type over it, as a person does."""
    widget.setFocus()
    widget.selectAll()
    qtbot.keyClicks(widget, text)


def enabled(panel: AgentsPanel) -> set[str]:
    names = {str(a): panel.button(a) for a in Action}
    names.update({n: panel.button(n) for n in ("delete", "memory", "conversation")})
    return {name for name, button in names.items() if button.isEnabled()}


async def new_agent(world: World, panel: AgentsPanel, template: str, name: str,
                    config: dict[str, Any] | None = None) -> AgentInfo:
    info = await world.agents.manager.create_agent(
        template, name, config or {"symbols": ["BTC/USDT"]})
    await eventually(lambda: panel.model.row_of(info.agent_id) is not None)
    return info


async def open_dialog(qtbot, panel: AgentsPanel, template: str) -> CreateAgentDialog:
    click(qtbot, panel.button("create"))
    dialog = panel.create_dialog
    assert dialog is not None and dialog.isVisible()
    dialog.template_box.setCurrentIndex(dialog.template_box.findData(template))
    assert dialog.form.template.template_id == template
    return dialog


def test_an_agent_created_from_the_generated_form_appears_running_with_its_config(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        dialog = await open_dialog(qtbot, panel, TRADER)
        form = dialog.form
        # one widget per setting of the template, labelled, with its default and description
        assert list(form.editors) == list(world.agents.manager.templates[TRADER].config)
        risk = form.editors["risk_per_trade_pct"]
        assert risk.label.text() == "Risk per trade (%)" and risk.widget.text() == "1"
        assert "(0.01 to 10)" in risk.help.text()
        assert form.editors["order_type"].widget.currentText() == "MARKET"
        assert "not an LLM" in dialog.engine.text()

        type_into(qtbot, dialog.name_edit, "Desk Trader")
        type_into(qtbot, form.editors["symbols"].widget, "btc/usdt")
        type_into(qtbot, risk.widget, "0.5")
        form.editors["order_type"].widget.setCurrentText("LIMIT")
        click(qtbot, dialog.ok_button)
        await eventually(lambda: panel.create_dialog is None)  # closed (and deleted)

        (info,) = [a for a in world.agents.manager.list_agents() if a.name == "Desk Trader"]
        assert info.state is AgentState.RUNNING
        assert info.config["symbols"] == ["BTC/USDT"]
        assert info.config["risk_per_trade_pct"] == "0.5"
        assert info.config["order_type"] == "LIMIT"
        await eventually(lambda: panel.model.row_of(info.agent_id) is not None)
        assert cell(panel, info.agent_id, "State") == "running"
        assert cell(panel, info.agent_id, "Template") == "Trader"
        assert [i.agent_id for i in panel.selected_infos()] == [info.agent_id]
        assert "Created Desk Trader (running)" in panel.message.text()

    qloop.run_until_complete(scenario())


def test_an_invalid_setting_is_refused_naming_the_field_and_nothing_is_created(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        dialog = await open_dialog(qtbot, panel, TRADER)
        risk = dialog.form.editors["risk_per_trade_pct"]
        type_into(qtbot, risk.widget, "15")
        assert "Risk per trade (%) must be between 0.01 and 10, got 15" in risk.help.text()
        click(qtbot, dialog.ok_button)
        await eventually(lambda: "Not created" in dialog.message.text())
        assert dialog.isVisible()
        assert "Not created: Risk per trade (%) must be between" in dialog.message.text()
        assert world.agents.manager.list_agents() == []

        # a rule across two fields only the manager checks: its refusal lands on the field
        dialog.select_template(ANALYST)
        type_into(qtbot, dialog.name_edit, "Fast Analyst")
        fast = dialog.form.editors["macd_fast"]
        type_into(qtbot, fast.widget, "30")
        click(qtbot, dialog.ok_button)
        await eventually(lambda: "macd_fast" in dialog.message.text())
        assert "macd_fast < macd_slow" in dialog.message.text()
        assert "MACD fast period" in dialog.message.text()
        assert "macd_fast" in fast.help.text() and fast.error is not None
        assert dialog.isVisible() and dialog.ok_button.isEnabled()
        assert fast.widget.value() == 30 and dialog.name_edit.text() == "Fast Analyst"
        assert world.agents.manager.list_agents() == []
        await panel.refresh()
        assert panel.model.rowCount() == 0

    qloop.run_until_complete(scenario())


def test_pause_resume_and_stop_change_the_state_shown_and_the_buttons_enabled(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        trader = await new_agent(world, panel, TRADER, "BTC Trader")
        assert enabled(panel) == set()  # nothing selected yet
        click_row(qtbot, panel, trader.agent_id)
        assert enabled(panel) == {"pause", "stop", "delete", "memory", "conversation"}
        assert {a.text() for a in panel.menu.actions() if a.isEnabled() and a.text()} == {
            "Pause", "Stop", "Delete…", "Memory", "Conversation", "Create…"}

        steps = [(Action.PAUSE, "paused", {"resume", "stop"}),
                 (Action.RESUME, "running", {"pause", "stop"}),
                 (Action.STOP, "stopped", {"start"}),
                 (Action.START, "running", {"pause", "stop"})]
        for action, state, buttons in steps:
            click(qtbot, panel.button(action))
            await eventually(lambda s=state: cell(panel, trader.agent_id, "State") == s)
            assert world.agents.store.get(trader.agent_id).state == state
            assert enabled(panel) == buttons | {"delete", "memory", "conversation"}
        assert panel.message.text() == "Started BTC Trader."

        # stopped behind the panel's back; the click lands before the panel has caught up
        world.agents.store.set_state(trader.agent_id, AgentState.STOPPED)
        click(qtbot, panel.button(Action.PAUSE))
        await eventually(lambda: "Could not pause" in panel.message.text())
        assert "BTC Trader: an agent that is stopped cannot become paused" in panel.message.text()
        assert "Traceback" not in panel.message.text()
        await eventually(lambda: cell(panel, trader.agent_id, "State") == "stopped")
        assert enabled(panel) == {"start", "delete", "memory", "conversation"}

    qloop.run_until_complete(scenario())


def test_delete_asks_for_confirmation_naming_the_agent_and_cancel_keeps_it(
    world, panel, qtbot, qloop
):
    async def answer(reply: str) -> QMessageBox:
        click(qtbot, panel.button("delete"))
        await eventually(lambda: panel.confirm_box is not None and panel.confirm_box.isVisible())
        box = panel.confirm_box
        assert box is not None
        (button,) = [b for b in box.buttons() if b.text().replace("&", "") == reply]
        text = box.text()
        click(qtbot, button)
        await eventually(lambda: panel.confirm_box is None)
        return text

    async def scenario() -> None:
        trader = await new_agent(world, panel, TRADER, "Doomed Trader")
        keeper = await new_agent(world, panel, TRADER, "Keeper")
        click_row(qtbot, panel, trader.agent_id)

        text = await answer("Cancel")
        assert "Delete the agent “Doomed Trader”?" in text
        assert "Kept" in panel.message.text()
        assert world.agents.manager.get_agent(trader.agent_id) is not None
        assert panel.model.row_of(trader.agent_id) is not None

        await answer("Delete")
        await eventually(lambda: panel.model.row_of(trader.agent_id) is None)
        assert world.agents.manager.get_agent(trader.agent_id) is None
        assert panel.model.row_of(keeper.agent_id) is not None
        assert "Deleted “Doomed Trader”" in panel.message.text()
        assert enabled(panel) == set()

    qloop.run_until_complete(scenario())


def test_a_faulted_agent_shows_why_in_red_and_can_only_be_started_or_stopped(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        trader = await new_agent(world, panel, TRADER, "Broken Trader")
        reason = "the provider refused the API key (401)"
        world.agents.store.set_state(trader.agent_id, AgentState.FAULTED, reason)
        await eventually(lambda: cell(panel, trader.agent_id, "State").startswith("faulted"))
        assert cell(panel, trader.agent_id, "State") == f"faulted: {reason}"
        assert reason in cell(panel, trader.agent_id, "State", Qt.ItemDataRole.ToolTipRole)
        color = cell(panel, trader.agent_id, "State", Qt.ItemDataRole.ForegroundRole).color()
        assert color == QColor(COLORS["down"])
        assert cell(panel, trader.agent_id, "State", Qt.ItemDataRole.FontRole).bold()
        assert "1 needs you" in panel.summary.text()
        click_row(qtbot, panel, trader.agent_id)
        assert enabled(panel) == {"start", "stop", "delete", "memory", "conversation"}

    qloop.run_until_complete(scenario())


async def set_up_watch(world: World) -> dict[AgentRole, AgentInfo]:
    orchestrator = await world.ensure_orchestrator()
    world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
    await settle(world)
    return {a.role: a for a in world.agents.manager.list_agents()}


def test_after_a_watch_trades_the_trader_shows_its_pnl_and_the_analyst_its_last_action(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        agents = await set_up_watch(world)
        trader, analyst = agents[AgentRole.TRADER], agents[AgentRole.ANALYST]
        for _hour in range(48):
            await advance_hours(world, 1)
            if any(f.agent_id == trader.agent_id for f in world.ledger.fills()):
                break
        # the table lists a new agent on its next refresh, not at once
        await eventually(lambda: panel.model.row_of(trader.agent_id) is not None
                    and cell(panel, trader.agent_id, "P&L") != "—")
        pnl = panel.model.rows[panel.model.row_of(trader.agent_id)].pnl
        assert pnl is not None and pnl.total != 0 and pnl.fills >= 1
        text = cell(panel, trader.agent_id, "P&L")
        assert text.startswith("+" if pnl.total > 0 else "-")
        assert Decimal(text.replace(",", "")) == pnl.total.quantize(Decimal("0.01"))
        color = cell(panel, trader.agent_id, "P&L", Qt.ItemDataRole.ForegroundRole).color()
        assert color == QColor(COLORS["up"] if pnl.total > 0 else COLORS["down"])
        assert "Realized" in cell(panel, trader.agent_id, "P&L", Qt.ItemDataRole.ToolTipRole)
        assert cell(panel, analyst.agent_id, "P&L") == "—"  # an analyst never trades

        assert world.agents.store.get(analyst.agent_id).last_action

        def analyst_row_shows_the_stored_last_action() -> bool:
            # the store can move on between two refreshes of the table (the same
            # action an hour later), so both cells are compared with one reading
            info = world.agents.store.get(analyst.agent_id)
            return (cell(panel, analyst.agent_id, "Last action") == info.last_action
                    and cell(panel, analyst.agent_id, "At")
                    == format_time(info.last_action_ms, seconds=False))

        await eventually(analyst_row_shows_the_stored_last_action)
        for agent in agents.values():  # every agent here runs on the rule engine
            assert cell(panel, agent.agent_id, "Provider / model") == RULE_ENGINE_LABEL
            assert "not a language model" in cell(
                panel, agent.agent_id, "Provider / model", Qt.ItemDataRole.ToolTipRole)
            assert cell(panel, agent.agent_id, "Cost") == "0.0000"

    qloop.run_until_complete(scenario())


def test_the_selected_analysts_hourly_job_is_listed_and_disabling_it_reaches_the_scheduler(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        analyst = (await set_up_watch(world))[AgentRole.ANALYST]
        (job,) = world.agents.scheduler.jobs(analyst.agent_id)
        await eventually(lambda: panel.model.row_of(analyst.agent_id) is not None)
        click_row(qtbot, panel, analyst.agent_id)
        jobs = panel.jobs
        assert jobs.title.text() == f"Scheduled jobs of {analyst.name} (1)"
        next_run = format_time(job.next_run_ms, seconds=False)
        assert jobs.model.rowCount() == 1
        shown = [jobs.model.data(jobs.model.index(0, c)) for c in range(1, 4)]
        assert shown == [job.name, "every hour", next_run]

        box = jobs.checkbox(job.job_id)
        assert box is not None and box.isChecked()
        click(qtbot, box)
        assert world.agents.scheduler.get(job.job_id).enabled is False
        assert jobs.model.data(jobs.model.index(0, 3)) == "— (disabled)"
        assert f"Disabled job {job.name}" in panel.message.text()

        await advance_hours(world, 2)  # a disabled job does not fire
        assert world.agents.scheduler.get(job.job_id).last_run_ms == job.last_run_ms
        click(qtbot, jobs.checkbox(job.job_id))
        enabled_again = world.agents.scheduler.get(job.job_id)
        assert enabled_again.enabled and enabled_again.next_run_ms > job.next_run_ms
        again = format_time(enabled_again.next_run_ms, seconds=False)
        assert jobs.model.data(jobs.model.index(0, 3)) == again
        assert f"next run {again} UTC" in panel.message.text()

    qloop.run_until_complete(scenario())


def test_open_memory_and_conversation_emit_the_selected_agents_id(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        trader = await new_agent(world, panel, TRADER, "Chatty Trader")
        click_row(qtbot, panel, trader.agent_id)
        with qtbot.waitSignal(panel.open_memory_requested) as memory:
            click(qtbot, panel.button("memory"))
        assert memory.args == [trader.agent_id]
        with qtbot.waitSignal(panel.open_conversation_requested) as chat:
            click(qtbot, panel.button("conversation"))
        assert chat.args == [trader.agent_id]
        with qtbot.waitSignal(panel.open_conversation_requested) as double:
            click_row(qtbot, panel, trader.agent_id, double=True)
        assert double.args == [trader.agent_id]

    qloop.run_until_complete(scenario())


def test_the_rule_engine_is_labelled_as_not_an_llm_and_an_llm_by_its_provider(
    tmp_path, qtbot, qloop
):
    llm = agent_world(tmp_path, force_provider=("openai-compatible", "gpt-4o-mini"))
    rules = agent_world(tmp_path / "rules")

    async def scenario() -> None:
        for rt in (llm, rules):
            await rt.start()
            # never calls a model
            await rt.agents.manager.create_agent(TRADER, "T", {}, start=False)
        llm_panel, rule_panel = (AgentsPanel(w.agents, w.venue, w.bus) for w in (llm, rules))
        for w in (llm_panel, rule_panel):
            qtbot.addWidget(w)
        await eventually(lambda: llm_panel.model.rowCount() == rule_panel.model.rowCount() == 1)
        llm_id, rule_id = llm_panel.model.rows[0].agent_id, rule_panel.model.rows[0].agent_id
        assert cell(llm_panel, llm_id, "Provider / model") == "openai-compatible · gpt-4o-mini"
        assert cell(rule_panel, rule_id, "Provider / model") == "rule engine (not an LLM)"
        tip = Qt.ItemDataRole.ToolTipRole
        assert cell(llm_panel, llm_id, "Cost", tip) == "0 model calls"
        assert cell(rule_panel, rule_id, "Cost", tip) == "0 rule-engine decisions"
        for w in (llm_panel, rule_panel):
            w.tasks.shutdown()
        for rt in (llm, rules):
            await rt.aclose()

    qloop.run_until_complete(scenario())


def test_a_burst_of_agent_events_is_coalesced_and_the_selection_survives_sorting(
    world, panel, qtbot, qloop
):
    merges: list[int] = []
    merge = panel.model.merge

    def counting(rows: Any) -> None:
        merges.append(len(rows))
        merge(rows)

    panel.model.merge = counting  # type: ignore[method-assign]

    async def scenario() -> None:
        alpha = await new_agent(world, panel, TRADER, "Alpha")
        zulu = await new_agent(world, panel, TRADER, "Zulu")
        mike = await new_agent(world, panel, TRADER, "Mike")
        click_row(qtbot, panel, zulu.agent_id)
        header = panel.view.horizontalHeader()
        name_x = header.sectionViewportPosition(0) + 10
        qtbot.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(name_x, 5))
        assert [r.info.name for r in panel.model.rows] == ["Alpha", "Mike", "Zulu"]

        merges.clear()
        for step in range(300):
            world.agents.store.record_action(mike.agent_id, None, f"calling tool {step}")
        await eventually(lambda: cell(panel, mike.agent_id, "Last action") == "calling tool 299")
        assert len(merges) <= 3, f"{len(merges)} refreshes for one burst"
        assert [i.agent_id for i in panel.selected_infos()] == [zulu.agent_id]
        assert [r.info.name for r in panel.model.rows] == ["Alpha", "Mike", "Zulu"]
        assert alpha.agent_id in {r.agent_id for r in panel.model.rows}

    qloop.run_until_complete(scenario())


def test_the_create_dialog_offers_existing_traders_for_an_analysts_trader(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        trader = await new_agent(world, panel, TRADER, "Linked Trader")
        dialog = await open_dialog(qtbot, panel, ANALYST)
        picker = dialog.form.editors["trader_agent_id"].widget
        assert [picker.itemText(i) for i in range(picker.count())] == [
            "(none)", f"Linked Trader ({trader.agent_id[:8]})"]
        picker.setCurrentIndex(1)
        type_into(qtbot, dialog.form.editors["symbols"].widget, "BTC/USDT")
        dialog.start_box.setChecked(False)
        click(qtbot, dialog.ok_button)
        await eventually(lambda: panel.create_dialog is None)  # closed (and deleted)
        (analyst,) = [a for a in world.agents.manager.list_agents() if a.role is AgentRole.ANALYST]
        assert analyst.config["trader_agent_id"] == trader.agent_id
        assert analyst.state is AgentState.CREATED
        await eventually(lambda: panel.model.row_of(analyst.agent_id) is not None)
        assert cell(panel, analyst.agent_id, "State") == "created (not started)"
        assert enabled(panel) == {"start", "stop", "delete", "memory", "conversation"}

    qloop.run_until_complete(scenario())


@pytest.mark.parametrize(("interval_s", "cron", "words"), [
    (3600, None, "every hour"),
    (4 * 3600, None, "every 4 hours"),
    (86_400, None, "every day"),
    (900, None, "every 15 minutes"),
    (90, None, "every 90 seconds"),
    (None, "0 */4 * * *", "every 4 hours"),
    (None, "30 * * * *", "every hour at :30"),
    (None, "*/15 * * * *", "every 15 minutes"),
    (None, "0 8 * * *", "daily at 08:00 UTC"),
    (None, "0 8 * * 1", "every Monday at 08:00 UTC"),
    (None, "0 8 1 * *", "cron 0 8 1 * * (UTC)"),
])
def test_a_jobs_schedule_is_put_in_words(interval_s, cron, words):
    job = Job(job_id="j", name="n", job_type="PERIODIC_AGENT_TRIGGER", target_agent_id="a",
              task_type="RUN_ANALYSIS", payload={}, enabled=True, created_ms=0, next_run_ms=0,
              cron=cron, interval_s=interval_s)
    assert describe_schedule(job) == words


def test_the_create_dialog_names_the_engine_a_new_agent_gets_under_the_llm_settings(
    world, panel, qtbot, qloop
):
    async def scenario() -> None:
        dialog = await open_dialog(qtbot, panel, TRADER)
        assert "not an LLM" in dialog.engine.text()
        world.apply_settings(world.settings.model_copy(update={
            "llm": LLMSettings(provider="openai-compatible", model="llama3.1")}))
        dialog.select_template(TRADER)
        assert "openai-compatible · llama3.1" in dialog.engine.text()
        info = await world.agents.manager.create_agent(TRADER, "Llama trader", {}, start=False)
        assert (info.provider, info.model) == ("openai-compatible", "llama3.1")
        dialog.close()

    qloop.run_until_complete(scenario())
