"""The main window as a new user meets it: the offline demo on first launch trades within the
first simulated hour at top speed, the layout survives a restart, panels open from notices and
shortcuts, and the replay and the agents obey the window's controls."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QSize, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QAbstractItemView, QApplication, QToolTip

from app.agents.loop_share import LoopShare
from app.agents.task_data import split_task_data
from app.domain.agents import AgentRole, AgentState
from app.runtime.desk import DEMO_COMMAND
from app.ui.window_layout import DOCKS
from tests.helpers.eventually import eventually, settled
from tests.helpers.fake_llm_servers import FakeOpenAIServer, Reply
from tests.ui.desk import Desk, on_screen

# the offscreen platform cannot size, raise or activate windows and says so
pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")
HOUR_MS = 3_600_000


def test_first_launch_opens_the_demo_and_trades_within_an_hour_at_top_speed(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open(paced=True, speed=600.0)
        world = window.world
        assert world is not None
        start = world.venue.clock.now_ms()
        banner = window.banner.text()
        assert "Offline replay" in banner and "rule engine (not an LLM)" in banner
        assert "Training cutoff" not in banner  # the rule engine remembers no market
        assert window.replay_bar.speed.currentText() == "600x"
        await eventually(lambda: world.venue.clock.now_ms() >= start + HOUR_MS)
        await desk.settle(window)
        roles = sorted(a.role.value for a in world.agents.manager.list_agents())
        assert roles == ["analyst", "orchestrator", "trader"]
        orchestrator = world.orchestrator()
        assert orchestrator is not None
        first = world.agents.conversations.recent(orchestrator.agent_id)[0]
        assert split_task_data(first.content)[0] == DEMO_COMMAND, (
            "the demo is the person's first chat message")
        fills = [f for f in world.ledger.fills() if f.time_ms <= start + HOUR_MS]
        assert fills, "a fill within 60 simulated minutes of replay"
        trader = next(a for a in world.agents.manager.list_agents() if a.role is AgentRole.TRADER)
        assert world.memory.list_files(trader.agent_id, "journal"), "memory entries"
        assert not window.live.errors and not window.errors.reports
        status = window.statusBar()
        status.refresh()  # the rule engine's answers are decisions, not language-model calls
        assert status.spend_label.text().startswith("LLM today: 0 calls, $0.0000 · rule engine: ")
        # the window's agents time-slice their steps, and its database is checkpointed on a
        # thread, not inside the commits they make on the window's loop
        share = world.agents.manager.s.share
        assert isinstance(share, LoopShare)
        assert world.agents.checkpointer.running

    desk.run(scenario)


def test_the_layout_and_the_workspace_survive_closing_and_reopening(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        world = window.world
        assert world is not None
        await desk.settle(window)
        agents = sorted(a.agent_id for a in world.agents.manager.list_agents())
        window.docks["audit"].close()
        window.docks["memory"].raise_()
        window.resize(1300, 850)
        resumed_at = world.venue.clock.now_ms()
        await desk.close(window)

        again = await desk.open()
        assert again.world is not None
        assert not again.docks["audit"].isVisible() and again.docks["chat"].isVisible()
        assert not again.store.value("window/geometry").isEmpty()
        assert sorted(a.agent_id for a in again.world.agents.manager.list_agents()) == agents
        orchestrator = again.world.orchestrator()
        assert orchestrator is not None
        texts = [split_task_data(m.content)[0]
                 for m in again.world.agents.conversations.recent(orchestrator.agent_id)
                 if m.kind == "task"]
        assert texts == [DEMO_COMMAND], "a used workspace is resumed, not seeded again"
        assert again.world.venue.clock.now_ms() >= resumed_at
        again.reset_layout()
        assert all(again.docks[spec.key].isVisible() for spec in DOCKS)

    desk.run(scenario)


def test_notices_and_shortcuts_open_the_right_panel(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        world = window.world
        assert world is not None
        await desk.settle(window)
        trader = next(a for a in world.agents.manager.list_agents() if a.role is AgentRole.TRADER)
        window.docks["chat"].close()
        window.open_panel("chat", trader.agent_id)
        assert window.docks["chat"].isVisible()
        assert window.panels["chat"].agent_id == trader.agent_id
        window.open_panel("backtest")
        assert window.tabs.currentWidget() is window.panels["backtest"]
        window.docks["memory"].close()
        window.open_memory(trader.agent_id)
        assert window.docks["memory"].isVisible()
        assert window.panel_shortcuts["audit"].shortcut().toString() == "Ctrl+6"

    desk.run(scenario)


def test_pause_all_and_the_replay_controls_act_on_agents_and_clock(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        world = window.world
        assert world is not None
        await desk.settle(window)
        await window.pause_all()
        states = {a.role: a.state for a in world.agents.manager.list_agents()}
        assert states[AgentRole.ANALYST] is AgentState.PAUSED
        assert states[AgentRole.TRADER] is AgentState.PAUSED
        await window.resume_all()
        assert all(a.state is not AgentState.PAUSED for a in world.agents.manager.list_agents())

        bar = window.replay_bar
        bar.speed.setCurrentIndex(bar.speed.findText("10x"))
        assert world.venue.driver.speed == 10.0
        bar.pause_button.click()
        assert world.venue.driver.paused and bar.step_button.isEnabled()
        before = world.venue.clock.now_ms()
        bar.step_button.click()
        assert world.venue.clock.now_ms() == before + HOUR_MS

    desk.run(scenario)


def test_an_unexpected_error_in_a_task_is_reported_with_its_details(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()

        async def broken() -> None:
            raise RuntimeError("the exchange sent nonsense")

        window.tasks.spawn(broken())
        await eventually(lambda: bool(window.errors.reports))
        summary, details = window.errors.reports[0]
        assert "the exchange sent nonsense" in summary and "RuntimeError" in details

    desk.run(scenario)


def test_a_relaunched_workspace_draws_its_open_position_and_fills_at_once(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        assert window.world is not None
        window.world.venue.driver.paused = True
        window.replay_bar.step()  # the demo's first order fills; the trader sets its TP and SL
        await desk.settle(window)
        chart = window.panels["chart"]
        await eventually(lambda: len(chart.view.levels.visible_lines()) == 3)
        drawn = sorted(label.split()[0] for _price, label in chart.view.levels.visible_lines())
        assert drawn == ["Avg", "SL", "TP"]  # "Avg cost ...", the position's line
        await desk.close(window)

        again = await desk.open()  # no clock move and no new fill from here on
        chart = again.panels["chart"]
        await eventually(lambda: len(chart.view.levels.visible_lines()) == 3)
        assert sorted(label.split()[0] for _price, label in
                      chart.view.levels.visible_lines()) == drawn
        await eventually(lambda: len(chart.view.markers.markers) >= 1)
        assert any(m.filled for m in chart.view.markers.markers), "the entry's fill marker"

    desk.run(scenario)


def test_the_replay_speed_is_kept_across_a_relaunch(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()  # a fresh workspace: the demo runs at its top speed
        assert window.replay_bar.speed.currentText() == "600x"
        await desk.settle(window)
        await desk.close(window)

        again = await desk.open()
        assert again.world is not None
        assert again.replay_bar.speed.currentText() == "600x"
        assert again.world.venue.driver.speed == 600.0
        bar = again.replay_bar
        bar.speed.setCurrentIndex(bar.speed.findText("10x"))
        await eventually(lambda: desk.workspace.settings().agents.replay_speed == 10.0)
        await desk.close(again)

        third = await desk.open()
        assert third.world is not None
        assert third.replay_bar.speed.currentText() == "10x"
        assert third.world.venue.driver.speed == 10.0

    desk.run(scenario)


def test_a_panel_shortcut_brings_the_panel_forward_and_the_view_menu_toggles_it(
    desk: Desk,
) -> None:
    async def scenario() -> None:
        window = await desk.open()
        account, audit = window.docks["account"], window.docks["audit"]
        await eventually(lambda: on_screen(account))
        assert not on_screen(audit), "the tool calls start behind the account's tab"
        shortcut = window.panel_shortcuts["audit"]
        assert shortcut.shortcut().toString() == "Ctrl+6"
        for _press in range(2):  # pressed again, it stays: a shortcut never hides a panel
            shortcut.trigger()
            await eventually(lambda: on_screen(audit))
            assert not on_screen(account), "the account went behind its tab"
        menu = audit.toggleViewAction()
        assert menu in window.view_menu.actions() and menu.shortcut().isEmpty()
        assert menu.text().endswith("\tCtrl+6"), "the menu still shows the shortcut"
        menu.trigger()
        await eventually(lambda: audit.isHidden())
        shortcut.trigger()
        await eventually(lambda: on_screen(audit))

    desk.run(scenario)


@pytest.mark.parametrize("size", [QSize(1280, 720), QSize(1366, 768)], ids=str)
def test_the_window_fits_a_small_screen_with_every_panel_usable(desk: Desk, size: QSize) -> None:
    async def scenario() -> None:
        window = await desk.open(size=size)
        await eventually(lambda: on_screen(window.docks["account"]))
        # the default dock sizes are set after the first layout
        await settled(lambda: (window.size(), [d.geometry() for d in window.docks.values()]))
        assert window.size() == size, "the window's minimum is larger than the screen"
        inside = QRect(0, 0, size.width(), size.height())
        status = window.statusBar()
        assert status.isVisible() and inside.contains(status.geometry())
        chart = window.panels["chart"]
        assert chart.isVisible() and chart.view.height() >= 220
        assert inside.contains(QRect(chart.mapTo(window, chart.rect().topLeft()), chart.size()))
        for key, dock in window.docks.items():
            dock.raise_()  # a panel behind another's tab is one click away
            await eventually(lambda dock=dock: on_screen(dock))
            assert inside.contains(dock.geometry()), key
            # big enough to use: a dock smaller than its panel scrolls, it never clips it away
            assert dock.width() >= 250 and dock.height() >= 150, (key, dock.size())
            assert dock.widget().viewport().width() >= 200, key

    desk.run(scenario)


def test_the_window_names_the_venue_it_runs_on_in_its_title_account_and_status_bar(
    desk: Desk,
) -> None:
    """The venue says what the desk runs on; the window shows its words, not a guess of its own
    (a paper account on live quotes, or a live one, will say so in the same three places)."""
    async def scenario() -> None:
        window = await desk.open()
        world = window.world
        assert world is not None
        label = world.venue.label
        assert label == "Offline replay"
        assert label in window.windowTitle()
        assert window.panels["account"].venue.text() == label
        assert window.statusBar().connection_label.text() == label

    desk.run(scenario)


@pytest.mark.parametrize("size", [QSize(1280, 720), QSize(1366, 768)], ids=str)
def test_the_agent_list_shows_every_agents_name_state_and_pnl_without_scrolling(
    desk: Desk, size: QSize
) -> None:
    """What a desk scans for: at 1280x720 the P&L column ran past the dock's edge (the long
    analyst name took the room), so the Trader's P&L read "+62" with the rest cut off; and the
    columns fitted before the docks had their sizes stayed so until the next refresh."""
    async def scenario() -> None:
        window = await desk.open(size=size)
        panel = window.panels["agents"]
        await eventually(lambda: panel.model.rowCount() == 3)
        await panel.refresh()
        header = panel.view.horizontalHeader()
        pnl = next(i for i, c in enumerate(panel.model.columns) if c.title.startswith("P&L"))

        def pnl_shown() -> bool:  # once the default dock sizes are set, after the first layout
            end = header.sectionViewportPosition(pnl) + header.sectionSize(pnl)
            return end <= panel.view.viewport().width()

        await eventually(pnl_shown)
        assert header.sectionSize(0) >= 80  # names elided at worst, never gone

    desk.run(scenario)


def test_ctrl_q_with_agents_running_asks_first_naming_them(desk: Desk, qtbot) -> None:
    """A stray Ctrl+Q closed a desk whose agents were trading, without a word."""
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
        await eventually(lambda: window.quit_dialog is not None and window.quit_dialog.isVisible())
        said = window.quit_dialog.informativeText()
        assert "2 agents are running: BTC/USD Trader, BTC/USD 1h Trend Analyst." in said
        assert "resumes where it stood" in said
        window.quit_dialog.reject()  # second thoughts: the desk goes on
        await eventually(lambda: window.quit_dialog is None)
        assert window.isVisible() and window.world is not None

        await window.pause_all()  # nothing running, nothing held: Quit quits at once
        await window.trading.controls.flatten()
        window.world.venue.driver.advance_to(window.world.venue.clock.now_ms() + HOUR_MS)
        window.quit()
        await eventually(lambda: not window.isVisible())
        assert window.quit_dialog is None

    desk.run(scenario)


def test_a_replay_left_paused_opens_paused_where_it_stood(desk: Desk) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        window.replay_bar.pause_button.click()
        stood = window.world.venue.clock.now_ms()
        await desk.close(window)

        again = await desk.open(paced=True)  # the pacer runs: only the pause holds the clock
        assert again.world.venue.driver.paused
        assert again.replay_bar.pause_button.text() == "Play"
        assert again.world.venue.clock.now_ms() == stood
        again.replay_bar.pause_button.click()  # Play: time flows, and the next start too
        await eventually(lambda: again.world.venue.clock.now_ms() > stood)
        await desk.close(again)
        third = await desk.open()
        assert not third.world.venue.driver.paused

    desk.run(scenario)


def test_a_fill_markers_tooltip_gives_its_orders_reason_and_stays_inside_the_chart(
    desk: Desk,
) -> None:
    """The tooltip said "reason: —" where the order had its reason, and ran off the chart."""
    async def scenario() -> None:
        window = await desk.open(size=QSize(1280, 720))
        await desk.settle(window)
        window.replay_bar.pause_button.click()
        window.replay_bar.step_button.click()  # the demo's first order fills
        chart = window.panels["chart"]
        await eventually(lambda: any(m.filled for m in chart.view.markers.markers))
        (fill,) = window.world.ledger.fills()[:1]
        reason = next(r.order.reason for r in window.world.ledger.load().orders
                      if r.order.order_id == fill.order_id)
        assert reason
        marker = next(m for m in chart.view.markers.markers if m.filled)
        assert "reason: —" not in marker.tooltip
        assert " ".join(marker.tooltip.split("reason: ")[1].split()) == reason
        assert "UTC" in marker.tooltip and "Z\n" not in marker.tooltip

        view = chart.view
        area = QRect(view.mapToGlobal(QPoint(0, 0)), view.size()).intersected(
            view.screen().availableGeometry())  # the test screen is smaller than the window
        x, y, _ = view.markers.marker_positions()[0]  # the fill's (fills come first)
        spot = view.mapFromScene(view.price_plot.vb.mapViewToScene(QPointF(x, y)))

        def hovered() -> bool:  # moved again until pyqtgraph takes a move (it drops some)
            # sent, not QTest.mouseMove: that spins Qt's loop inside this coroutine's step,
            # and the qasync loop can lose the step (the test then waited forever)
            QApplication.sendEvent(view.viewport(), QMouseEvent(
                QEvent.Type.MouseMove, QPointF(spot), QPointF(view.viewport().mapToGlobal(spot)),
                Qt.MouseButton.NoButton, Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
            return QToolTip.isVisible()

        await eventually(hovered)
        assert " ".join(QToolTip.text().split("reason: ")[1].split()) == reason
        (tip,) = [w for w in QApplication.topLevelWidgets()
                  if w.metaObject().className() == "QTipLabel" and w.isVisible()]
        assert area.contains(tip.geometry()), (area, tip.geometry())
        await desk.close(window)

        again = await desk.open()  # a relaunch reads the fill's order, reason and all
        chart = again.panels["chart"]
        await eventually(lambda: any(m.filled for m in chart.view.markers.markers))
        marker = next(m for m in chart.view.markers.markers if m.filled)
        assert " ".join(marker.tooltip.split("reason: ")[1].split()) == reason

    desk.run(scenario)


def test_a_language_model_on_the_bundled_replay_is_named_and_warned_of_in_the_banner(
    desk: Desk,
) -> None:
    async def scenario() -> None:
        # a proxy's alias, served by a dated OpenAI model: the banner checks the name it answers
        answer = Reply(text="Noted: nothing to set up yet.", model="gpt-4o-mini-2024-07-18")
        with FakeOpenAIServer(default=answer) as server:
            desk.workspace.root.mkdir(parents=True, exist_ok=True)
            desk.workspace.settings_path.write_text(
                f'[llm]\nprovider = "openai-compatible"\nmodel = "house-default"\n'
                f'base_url = "{server.base_url}"\nmax_retries = 0\n', encoding="utf-8")
            window = await desk.open()  # the demo's first request goes to the model
            await desk.settle(window)
            assert server.bodies, "the Orchestrator asked the model"
            banner = window.banner.text()
            assert "agents on <b>openai-compatible:house-default</b>" in banner
            assert "not an LLM" not in banner and "Change the model" in banner
            warning = banner.split("<br><b>Training cutoff:</b> ", 1)[1]
            assert warning.startswith("This period starts 2019-")  # the bundled replay
            assert "before gpt-4o-mini-2024-07-18's training cutoff (2023-10-31" in warning
            assert "does not know house-default" not in banner and "--blind" not in banner
            await desk.close(window)

    desk.run(scenario)


def _rows_shown(view: QAbstractItemView, row_height: int) -> int:
    return view.viewport().height() // max(row_height, 1)


@pytest.mark.parametrize(("size", "account_rows"), [(QSize(1366, 768), 4), (QSize(1280, 720), 3)],
                         ids=str)
def test_the_docks_show_rows_enough_to_scan_on_a_small_screen(
    desk: Desk, size: QSize, account_rows: int
) -> None:
    """At 1366x768 the memory tree, the tool calls and the open orders showed two rows each."""
    async def scenario() -> None:
        window = await desk.open(size=size)
        await desk.settle(window)
        memory, audit, account = (window.panels[k] for k in ("memory", "audit", "account"))
        window.open_panel("memory")
        window.open_panel("audit")
        account.tabs.setCurrentWidget(account.orders_view)
        tree = memory.tree
        await eventually(lambda: tree.topLevelItemCount() == 3)
        row = tree.visualItemRect(tree.topLevelItem(0)).height()
        await eventually(lambda: _rows_shown(tree, row) >= 6)
        await eventually(lambda: _rows_shown(audit.table, audit.table.verticalHeader()
                                        .defaultSectionSize()) >= 5)
        assert not audit.detail_title.visibleRegion().isEmpty()  # the details beside it
        window.open_panel("account")
        orders = account.orders_view
        await eventually(lambda: _rows_shown(orders, orders.verticalHeader().defaultSectionSize())
                    >= account_rows)
        for card in account.cards.values():  # compact: each figure still read in full
            assert card.value.isVisible() and card.value.visibleRegion().boundingRect().width() \
                >= card.value.fontMetrics().horizontalAdvance(card.value.text())
        assert "USD" in account.cards["Cash"].toolTip()

    desk.run(scenario)


@pytest.mark.parametrize("size", [QSize(1366, 768), QSize(1280, 720)], ids=str)
def test_the_charts_readout_shows_every_figure_on_a_small_screen(desk: Desk, size: QSize) -> None:
    """At 1280x720 the readout's one line was cut after "C 10,5": no close, volume or change."""
    async def scenario() -> None:
        window = await desk.open(size=size)
        readout = window.panels["chart"].readout
        await eventually(lambda: "%" in readout.text())
        room = readout.contentsRect().width()
        lines = readout.text().split("\n")
        assert all(readout.fontMetrics().horizontalAdvance(line) <= room for line in lines), (
            room, lines)
        assert " C " in readout.text() and " V " in readout.text()
        assert readout.toolTip().replace("\n", "") == readout.toolTip()  # the whole, one line

    desk.run(scenario)
