"""The Backtest view's Sweeps tab, driven like a person: the workspace's sweeps are listed with
how far each got and its best; opening one shows its table best first, a header click sorts it;
an isolated peak is warned of; a folder added from elsewhere is listed too."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QTabWidget

from app.ui.backtest import BacktestView
from app.ui.backtest.sweeps import SweepsView
from app.workspace import Workspace
from tests.helpers.paths import BTC_USDT_1H
from tests.helpers.sweeps import grid_sweep

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")
AXES = {"fast": [5, 10, 20], "slow": [30, 50]}
PEAK = {(5, 30): 0.2, (10, 30): 2.0, (20, 30): 0.3, (5, 50): 0.4, (10, 50): 0.1, (20, 50): 0.35}


def make(qtbot: Any, roots: list[Path]) -> SweepsView:
    view = SweepsView(roots)
    qtbot.addWidget(view)
    view.resize(1100, 700)
    return view


def test_the_workspaces_sweeps_are_listed_and_one_opens_best_first(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    root = tmp_path / "ws" / "sweeps"
    grid_sweep(root / "peak", AXES, PEAK)
    grid_sweep(root / "half", AXES, {(5, 30): 0.5, (10, 30): "failed", (20, 30): 0.9})
    (root / "not-a-sweep").mkdir()
    view = make(qtbot, [root])
    sweeps = qloop.run_until_complete(view.refresh())
    assert sorted(s.folder.name for s in sweeps) == ["half", "peak"]
    rows = {view.list.item(r, 0).text(): [view.list.item(r, c).text()
                                          for c in range(view.list.columnCount())]
            for r in range(view.list.rowCount())}
    assert rows["half"][3:6] == ["3/6", "1", "0.90"]
    assert rows["peak"][3:7] == ["6/6", "0", "2.00", "fast=10 slow=30 (isolated peak)"]
    assert view.where.text().startswith("2 sweeps in")

    table = qloop.run_until_complete(view.open_sweep(root / "half"))
    assert table is not None
    assert view.column_values("cell") == ["c0005", "c0001", "c0003"]  # best first, failed last
    assert view.column_values("status")[-1] == "failed"
    assert "3 of 6 cells finished; 1 failed; 3 not run yet" in view.title.text()
    assert view.warning.isHidden()
    view.sort_by("sharpe", descending=False)
    assert view.column_values("sharpe") == ["n/a", "0.50", "0.90"]
    view.sort_by("fast", descending=True)
    assert view.column_values("fast") == ["20", "10", "5"]  # as numbers, not as text


def test_an_isolated_peak_is_warned_of_and_a_header_sorts_numerically(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    folder = grid_sweep(tmp_path / "elsewhere" / "peak", AXES, PEAK)
    view = make(qtbot, [tmp_path / "ws" / "sweeps"])
    assert qloop.run_until_complete(view.refresh()) == []
    view.add_folder(folder)
    qloop.run_until_complete(view.tasks.wait())
    assert view.list.rowCount() == 1
    view.list.selectRow(0)
    view.open_button.click()
    qloop.run_until_complete(view.tasks.wait())
    assert not view.warning.isHidden()
    assert "isolated peak" in view.warning.text() and "fast=10, slow=30" in view.warning.text()
    assert view.column_values("sharpe")[0] == "2.00"
    view.sort_by("sharpe", descending=False)
    assert view.column_values("sharpe") == ["0.10", "0.20", "0.30", "0.35", "0.40", "2.00"]
    view.sort_by("final_equity")
    assert set(view.column_values("final_equity")) == {"10123.45000000"}


def test_a_folder_that_is_not_a_sweep_is_said_so(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    view = make(qtbot, [tmp_path])
    assert qloop.run_until_complete(view.open_sweep(tmp_path)) is None
    assert "cannot be shown" in view.title.text() and "holds no sweep" in view.title.text()


def test_the_backtest_view_has_a_sweeps_tab_over_the_workspaces_sweeps(
    qtbot: Any, qloop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    workspace = Workspace(tmp_path / "ws").ensure()
    grid_sweep(workspace.root / "sweeps" / "first", AXES, PEAK)
    view = BacktestView(workspace, [BTC_USDT_1H])
    qtbot.addWidget(view)
    view.resize(1300, 860)
    view.show()
    qloop.run_until_complete(view.tasks.wait())
    pages = view.pages
    assert [w for w in view.findChildren(QTabWidget) if w.indexOf(view.sweeps) >= 0] == [pages]
    tabs = [pages.tabText(i) for i in range(pages.count())]
    assert tabs == ["Setup", "Summary", "Trades", "Past runs", "Compare", "Sweeps"]
    assert view.start_button.window() is view.window()
    pages.setCurrentWidget(view.sweeps)  # shown for the first time: it reads the folder
    qloop.run_until_complete(view.sweeps.tasks.wait())
    assert [s.folder.name for s in view.sweeps.sweeps] == ["first"]
