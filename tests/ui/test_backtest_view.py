"""The Backtest view driven like a person: tick data, pick the strategy or agents, set the dates,
press Start, watch the progress reach 100% and read the report beside buy-and-hold; Cancel stops
a long run; a bad file or a range too short to trade is explained in the form."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QPointF, QSize, Qt
from PySide6.QtGui import QFontMetrics, QWheelEvent
from PySide6.QtWidgets import QApplication

from app.config import Settings, settings_from_mapping
from app.ui.backtest import BacktestView
from app.workspace import Workspace
from tests.helpers.eventually import eventually, eventually_on
from tests.helpers.paths import BTC_USD_1H, BTC_USDT_1H

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")
HOUR_MS = 3_600_000
AGENTS_READY = all(importlib.util.find_spec(m) is not None
                   for m in ("app.agents.rule_engine", "app.agents.prompt"))


def make_view(qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path,
              files: list[Path], settings: Settings | None = None) -> BacktestView:
    view = BacktestView(Workspace(tmp_path / "ws").ensure(), files, settings=settings)
    qtbot.addWidget(view)
    view.resize(1300, 860)
    view.show()
    qloop.run_until_complete(view.tasks.wait())
    return view


def click(qtbot: Any, widget: Any) -> None:
    qtbot.mouseClick(widget, Qt.MouseButton.LeftButton)


def run_to_end(view: BacktestView, qloop: asyncio.AbstractEventLoop) -> None:
    eventually_on(qloop, lambda: view.progress_state is None and not view.tasks.busy)


def test_sma_cross_run_reaches_100_percent_and_reports_beside_buy_and_hold(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    view = make_view(qtbot, qloop, tmp_path, [BTC_USD_1H])
    assert view.data_list.item(0).text().startswith("BTC/USD 1h · 20,111 bars")
    assert view.data_list.item(0).checkState() == Qt.CheckState.Checked
    assert "0 LLM calls" in view.estimate.text()
    assert "rule engine (not an LLM)" in view.estimate.text()
    info = view.selected_files()[0]
    view.set_range(info.last_ms - 299 * HOUR_MS, info.last_ms)
    assert view.estimate.text().startswith("300 bars")
    click(qtbot, view.start_button)
    assert not view.start_button.isEnabled() and view.cancel_button.isEnabled()
    run_to_end(view, qloop)
    assert view.status.text().startswith("Done: 300 bars"), view.status.text()
    assert view.progress.value() == view.progress.maximum() == 300
    assert view.progress.text() == "100%"
    metrics = view.report.metrics
    headers = [metrics.horizontalHeaderItem(c).text() for c in range(metrics.columnCount())]
    assert headers == ["Metric", "sma_cross (10/30)", "Buy & hold"]
    rows = {metrics.item(r, 0).text(): (metrics.item(r, 1).text(), metrics.item(r, 2).text())
            for r in range(metrics.rowCount())}
    outcome = view.outcome
    assert outcome is not None
    assert rows["Total return %"] == (f"{outcome.result.metrics.total_return_pct:,.2f}",
                                      f"{outcome.result.baseline.total_return_pct:,.2f}")
    assert rows["Trades"][0] == str(len(outcome.result.trades))
    assert rows["Refused orders"] == ("0", "n/a")  # next to the trades, in every report
    assert view.report.trades.rowCount() == len(outcome.result.trades) > 0
    assert view.report.equity_plot.listDataItems()  # the equity curves are drawn
    table = view.report.metrics  # every metric visible without scrolling
    assert table.viewport().height() >= table.rowCount() * table.rowHeight(0)
    summary_files = list((tmp_path / "ws" / "backtests").glob("*/summary.json"))
    assert len(summary_files) == 1
    assert json.loads(summary_files[0].read_text())["bars"] == 300


def test_cancel_stops_a_long_run_without_a_report(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    view = make_view(qtbot, qloop, tmp_path, [BTC_USD_1H])
    info = view.selected_files()[0]
    view.set_range(info.first_ms, info.last_ms)  # all 20,111 bars: seconds of work
    click(qtbot, view.start_button)
    eventually_on(qloop, lambda: view.progress_state is not None and view.progress_state.done > 50,
             20)
    assert "bars ·" in view.eta.text() or view.eta.text() == "starting…"
    click(qtbot, view.cancel_button)
    run_to_end(view, qloop)
    assert view.status.text().startswith("Stopped: cancelled after"), view.status.text()
    assert view.progress.value() < view.progress.maximum()
    assert view.outcome is None and view.report.metrics.rowCount() == 0
    assert view.start_button.isEnabled()


def test_bad_data_file_is_named_with_its_problem(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    bad = tmp_path / "ETH-USD_1h_broken.csv"
    bad.write_text("timestamp_ms,open,high,low,close,volume\n"
                   "1571299200000,180.1,181,179.5,180.7,12\n"
                   "1571302800000,180.7,abc,180.2,181.0,9\n", encoding="utf-8")
    view = make_view(qtbot, qloop, tmp_path, [BTC_USDT_1H])
    view.add_data_file(bad)
    qloop.run_until_complete(view.tasks.wait())
    item = view.data_list.item(1)
    assert item.text() == "ETH-USD_1h_broken.csv: unusable"
    assert "row 3" in item.toolTip() and "high" in item.toolTip()
    assert "ETH-USD_1h_broken.csv cannot be used" in view.status.text()
    assert [f.symbol for f in view.selected_files()] == ["BTC/USDT"]


def test_a_range_too_short_to_trade_is_explained(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    view = make_view(qtbot, qloop, tmp_path, [BTC_USDT_1H])
    info = view.selected_files()[0]
    view.set_range(info.last_ms - 20 * HOUR_MS, info.last_ms)
    click(qtbot, view.start_button)
    run_to_end(view, qloop)
    assert "the range holds 21 bars; the slow SMA needs more than 30" in view.status.text()
    assert view.outcome is None and view.start_button.isEnabled()


@pytest.mark.skipif(not AGENTS_READY, reason="the rule-engine agents are not in this tree yet")
def test_rule_engine_agents_run_from_the_view(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    view = make_view(qtbot, qloop, tmp_path, [BTC_USDT_1H])
    click(qtbot, view.use_agents)
    for row in range(view.agent_list.count()):
        item = view.agent_list.item(row)
        if item.data(Qt.ItemDataRole.UserRole) in ("AnalystAgent_Trend_v1",
                                                    "TraderAgent_Default_v1"):
            item.setCheckState(Qt.CheckState.Checked)
    assert "the agents run on the rule engine (not an LLM)" in view.estimate.text()
    info = view.selected_files()[0]
    view.set_range(info.last_ms - 80 * HOUR_MS, info.last_ms)
    click(qtbot, view.start_button)
    run_to_end(view, qloop)
    assert view.status.text().startswith("Done"), view.status.text()
    assert view.progress.value() == view.progress.maximum() > 0
    headers = [view.report.metrics.horizontalHeaderItem(c).text() for c in range(3)]
    assert headers[2] == "Buy & hold" and "AnalystAgent_Trend_v1" in headers[1]


@pytest.mark.skipif(not AGENTS_READY, reason="the agent backtest is not in this tree yet")
def test_llm_agents_show_calls_and_cost_before_starting(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    settings = settings_from_mapping(
        {"llm": {"provider": "openai-compatible", "model": "gpt-4o-mini"}})
    view = make_view(qtbot, qloop, tmp_path, [BTC_USDT_1H], settings)
    view.use_agents.setChecked(True)
    view.agent_list.item(0).setCheckState(Qt.CheckState.Checked)
    text = view.estimate.text()
    assert "openai-compatible (gpt-4o-mini)" in text and "model calls" in text
    assert "estimated cost $" in text


@pytest.mark.skipif(not AGENTS_READY, reason="the agent backtest is not in this tree yet")
def test_the_agent_list_names_the_engine_the_llm_settings_choose(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    settings = settings_from_mapping(
        {"llm": {"provider": "openai-compatible", "model": "gpt-4o-mini"}})
    view = make_view(qtbot, qloop, tmp_path, [BTC_USDT_1H], settings)
    item = view.agent_list.item(0)
    assert "openai-compatible" in item.text() and "rule engine" not in item.text()
    assert "gpt-4o-mini" in item.toolTip()


@pytest.mark.skipif(not AGENTS_READY, reason="the agent backtest is not in this tree yet")
@pytest.mark.parametrize("blind", [False, True])
def test_an_llm_run_before_the_models_training_cutoff_is_flagged_in_the_report(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path, blind: bool
) -> None:
    from tests.helpers.fake_llm_servers import FakeOpenAIServer
    from tests.helpers.prompt_rule_model import PromptRuleModel

    with FakeOpenAIServer(default=PromptRuleModel()) as server:
        settings = settings_from_mapping({"llm": {
            "provider": "openai-compatible", "model": "gpt-4o-mini",
            "base_url": server.base_url, "max_retries": 0}})
        view = make_view(qtbot, qloop, tmp_path, [BTC_USDT_1H], settings)
        click(qtbot, view.use_agents)
        for row in range(view.agent_list.count()):
            item = view.agent_list.item(row)
            if item.data(Qt.ItemDataRole.UserRole) in ("AnalystAgent_Trend_v1",
                                                        "TraderAgent_Default_v1"):
                item.setCheckState(Qt.CheckState.Checked)
        info = view.selected_files()[0]
        view.set_range(info.last_ms - 66 * HOUR_MS, info.last_ms)
        assert view.blind.isEnabled()
        view.blind.setChecked(blind)
        click(qtbot, view.start_button)
        run_to_end(view, qloop)
    assert view.status.text().startswith("Done"), view.status.text()
    note = view.report.note.text()
    assert "training cutoff" in note and "gpt-4o-mini" in note and "2023-10-31" in note
    assert ("The run was blind" in note) is blind
    assert ("(blind)" in view.report.title.text()) is blind


# -- in the window, on a small screen ------------------------------------------------------------

WINDOW_LOG = pytest.mark.qt_log_ignore("This plugin does not support", "propagateSizeHints",
                                       "does not support raise",
                                       "does not support activateWindow")


async def backtest_tab(desk: Any, qtbot: Any, size: QSize) -> tuple[Any, BacktestView]:
    """The desk on a screen of ``size``, its Backtest view brought up with Ctrl+B."""
    window = await desk.open(size=size)
    qtbot.keyClick(window, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier)
    view = window.panels["backtest"]
    await eventually(lambda: window.tabs.currentWidget() is view)
    await view.tasks.wait()
    return window, view


async def run_in_window(qtbot: Any, view: BacktestView, bars: int = 300) -> None:
    info = view.selected_files()[0]
    view.set_range(info.last_ms - (bars - 1) * HOUR_MS, info.last_ms)
    done = view.outcome
    click(qtbot, view.start_button)
    await eventually(lambda: view.outcome is not done and view.progress_state is None
                and not view.tasks.busy, 60)


def cut_cells(table: Any) -> list[str]:
    """The cells whose text does not fit in view: cut by their column, or past the table's
    right or bottom edge."""
    cut = []
    right = table.viewport().width()
    bottom = table.viewport().height()
    for row in range(table.rowCount()):
        for col in range(table.columnCount()):
            item = table.item(row, col)
            if item is None:
                continue
            text = item.text()
            width = QFontMetrics(item.font()).horizontalAdvance(text)
            x = table.columnViewportPosition(col)
            y = table.rowViewportPosition(row)
            if (width > table.columnWidth(col) - 4 or x + table.columnWidth(col) > right
                    or y + table.rowHeight(row) > bottom):
                cut.append(text)
    return cut


@WINDOW_LOG
@pytest.mark.parametrize("screen", [QSize(1366, 768), QSize(1280, 720)])
def test_a_run_in_the_window_takes_the_view_with_every_metric_whole_and_plots_to_read(
    desk: Any, qtbot: Any, screen: QSize
) -> None:
    async def scenario() -> None:
        window, view = await backtest_tab(desk, qtbot, screen)
        await run_in_window(qtbot, view)
        assert view.status.text().startswith("Done: 300 bars"), view.status.text()
        report = view.report
        assert report.metrics.isVisible() and report.plots.isVisible()
        assert report.metrics.rowCount() == 12
        assert cut_cells(report.metrics) == [], "metrics cut on screen"
        assert report.plots.height() >= 150 and report.plots.width() >= 150
        assert not window.errors.reports

    desk.run(scenario)


@WINDOW_LOG
def test_the_trades_of_a_run_are_drawn_on_its_price_chart(desk: Any, qtbot: Any) -> None:
    async def scenario() -> None:
        window, view = await backtest_tab(desk, qtbot, QSize(1366, 768))
        await run_in_window(qtbot, view)
        outcome = view.outcome
        assert outcome is not None
        trades = outcome.result.trades
        assert trades
        page = view.report.trades_view
        view.pages.setCurrentWidget(page)
        await eventually(page.chart.isVisible)
        x, y = page.price_line.getData()
        assert x is not None and len(x) >= 300  # the closes the run traded on
        tips = page.marker_tooltips()
        closed = [t for t in trades if t.exit_time_ms is not None]
        assert len(tips) == len(trades) + len(closed)  # an entry and an exit per closed trade
        first = trades[0]
        assert f"entry {first.entry_price:,.2f}" in tips[0]
        assert "P&L" in tips[0]
        assert page.table.rowCount() == len(trades)
        assert page.chart.height() >= 120

    desk.run(scenario)


@WINDOW_LOG
def test_past_runs_are_listed_from_their_folders_and_two_compare_side_by_side(
    desk: Any, qtbot: Any, tmp_path: Path
) -> None:
    from app.ui.backtest.jobs import Progress, SmaRequest, inspect_file, run_sma

    # a run made in the shell, in a folder of its own; beside it a folder another command
    # made and one nobody marked: neither is a backtest to list
    elsewhere = tmp_path / "elsewhere"
    info = inspect_file(BTC_USDT_1H)
    run_sma(SmaRequest([info], info.last_ms - 200 * HOUR_MS, info.last_ms,
                       Decimal(5000), 5, 20, elsewhere / "shell-run"), Progress())
    other = elsewhere / "an-eval"
    other.mkdir()
    (other / ".kestrel-output").write_text("kestrel eval\n", encoding="utf-8")
    (other / "summary.json").write_text("{}", encoding="utf-8")
    unmarked = elsewhere / "copied"
    unmarked.mkdir()
    (unmarked / "summary.json").write_text(
        (elsewhere / "shell-run" / "summary.json").read_text(encoding="utf-8"), encoding="utf-8")

    async def scenario() -> None:
        window, view = await backtest_tab(desk, qtbot, QSize(1366, 768))
        await run_in_window(qtbot, view)
        view.runs_view.folder_added.emit(elsewhere)  # the answer of Add folder…'s dialog
        await eventually(lambda: len(view.runs_view.runs) == 2 and not view.tasks.busy)
        view.show_page("Past runs")
        titles = sorted(r.title for r in view.runs_view.runs)
        assert titles == ["sma_cross (10/30)", "sma_cross (5/20)"]
        table = view.runs_view.table
        assert table.rowCount() == 2
        assert {table.item(r, 0).text() for r in range(2)} == set(titles)
        shell = next(r for r in view.runs_view.runs if r.title == "sma_cross (5/20)")
        assert shell.folder == elsewhere / "shell-run"

        view.runs_view.select(*(r.folder for r in view.runs_view.runs))
        click(qtbot, view.runs_view.compare_button)
        await eventually(lambda: view.compare.shown is not None and not view.tasks.busy)
        assert view.pages.currentWidget() is view.compare
        metrics = view.compare.metrics
        rows = {metrics.item(r, 0).text(): (metrics.item(r, 1).text(), metrics.item(r, 2).text())
                for r in range(metrics.rowCount())}
        (a, ra), (b, rb) = view.compare.shown
        assert rows["Total return %"] == (f"{ra.metrics.total_return_pct:,.2f}",
                                          f"{rb.metrics.total_return_pct:,.2f}")
        assert rows["Trades"] == (str(ra.metrics.trades), str(rb.metrics.trades))
        assert len(view.compare.curves()) == 4  # each run and its buy-and-hold
        assert cut_cells(metrics) == []

        # a past run opens in the report pages, its trades on its own candles
        view.runs_view.select(shell.folder)
        click(qtbot, view.runs_view.open_button)
        await eventually(lambda: view.pages.currentWidget() is view.report and not view.tasks.busy)
        assert view.report.title.text().startswith("sma_cross (5/20)")
        assert view.report.trades_view.series  # its data/ copy of the candles was found
        assert not window.errors.reports

    desk.run(scenario)


@WINDOW_LOG
def test_the_mouse_wheel_over_an_unfocused_spin_box_or_combo_changes_nothing(
    desk: Any, qtbot: Any
) -> None:
    def wheel(widget: Any, clicks: int = 1) -> None:
        centre = QPointF(widget.width() / 2, widget.height() / 2)
        event = QWheelEvent(centre, widget.mapToGlobal(centre), QPoint(0, 0),
                            QPoint(0, 120 * clicks), Qt.MouseButton.NoButton,
                            Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
        QApplication.sendEvent(widget, event)

    async def scenario() -> None:
        window, view = await backtest_tab(desk, qtbot, QSize(1366, 768))
        assert view.fast.value() == 10 and not view.fast.hasFocus()
        wheel(view.fast, 3)
        assert view.fast.value() == 10  # a person scrolling the form leaves the parameter
        speed = window.replay_bar.speed
        before = speed.currentText()
        wheel(speed, -1)
        assert speed.currentText() == before  # and the replay speed
        assert view.fast.focusPolicy() == Qt.FocusPolicy.StrongFocus  # a wheel never focuses
        view.fast.setFocus()
        await eventually(view.fast.hasFocus)
        wheel(view.fast, 1)
        assert view.fast.value() == 11  # a spin box the person is in takes the wheel

    desk.run(scenario)
