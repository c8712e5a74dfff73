"""The memory browser driven as a person would: open, edit, save, recall, and watch agents write."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt

from app.domain.clock import parse_time
from app.events import EventBus, MemoryFileChanged
from app.runtime.world import World
from app.ui.panels.memory_browser import MemoryBrowser
from app.workspace import Workspace
from tests.helpers.agents import tool_world
from tests.helpers.eventually import eventually

# the offscreen platform plugin warns about window size hints whenever a top-level is shown
pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints")

AGENTS = [("analyst-1", "Analyst"), ("trader-1", "Trader")]
PLAN = b"# Plan\n\nWatch BTC/USD on the 4h chart.\n"


@pytest.fixture
def world(tmp_path, qloop) -> Iterator[World]:
    rt = tool_world(
        Workspace(tmp_path), at_ms=parse_time("2019-10-10T00:00:00Z"), bus=EventBus()
    )
    rt.memory.write_file("analyst-1", "notes/plan.md", PLAN)
    rt.memory.write_file("trader-1", "notes/rules.md", b"# Rules\n\nRisk 1% per trade.\n")
    yield rt
    rt.close()


@pytest.fixture
def browser(world, qtbot, qloop) -> MemoryBrowser:
    assert world.memory.bus is not None
    w = MemoryBrowser(world.memory, world.memory.bus, lambda: AGENTS)
    qtbot.addWidget(w)
    w.resize(1000, 600)
    w.show()
    qtbot.waitExposed(w)
    loaded = (("analyst-1", "notes/plan.md"), ("trader-1", "notes/rules.md"))
    qloop.run_until_complete(
        eventually(lambda: all(w.tree.item_for(*key) is not None for key in loaded))
    )
    return w


def click_tree(qtbot, w: MemoryBrowser, agent_id: str, path: str) -> None:
    w.tree.select(agent_id, path)  # expands the folders so the row is on screen
    item = w.tree.item_for(agent_id, path)
    assert item is not None
    w.tree.setCurrentItem(None)
    rect = w.tree.visualItemRect(item)
    qtbot.mouseClick(w.tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())


async def open_by_click(qtbot, w: MemoryBrowser, agent_id: str, path: str) -> None:
    click_tree(qtbot, w, agent_id, path)
    await eventually(lambda: w.current is not None and w.current.path == path)


def test_person_edits_a_file_saves_it_and_finds_it_by_recall(browser, world, qtbot, qloop):
    async def scenario() -> None:
        w = browser
        await open_by_click(qtbot, w, "analyst-1", "notes/plan.md")
        assert "Watch BTC/USD" in w.pane.viewer.toPlainText()
        assert w.pane.viewer.toPlainText().startswith("Plan")  # Markdown rendered, not raw "# Plan"

        qtbot.mouseClick(w.pane.edit_button, Qt.MouseButton.LeftButton)
        assert w.pane.editing
        w.pane.editor.moveCursor(w.pane.editor.textCursor().MoveOperation.End)
        qtbot.keyClicks(w.pane.editor, "Quokka breakout above 9100 confirmed.")
        qtbot.mouseClick(w.pane.save_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: not w.pane.editing)

        on_disk = world.memory.read_file("analyst-1", "notes/plan.md").data.decode()
        assert on_disk.endswith("Quokka breakout above 9100 confirmed.")
        assert "Saved notes/plan.md" in w.pane.banner.text
        assert "Quokka breakout" in w.pane.viewer.toPlainText()

        await open_by_click(qtbot, w, "trader-1", "notes/rules.md")  # look elsewhere first
        qtbot.keyClicks(w.search_box, "quokka breakout")
        qtbot.keyClick(w.search_box, Qt.Key.Key_Return)
        await eventually(lambda: w.hits.count() > 0)
        hit = w.hits.item(0)
        assert hit.text().startswith("Analyst · notes/plan.md:")
        assert "Quokka breakout" in hit.text()

        rect = w.hits.visualItemRect(hit)
        qtbot.mouseClick(w.hits.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        await eventually(lambda: w.current is not None and w.current.path == "notes/plan.md")
        assert w.current.agent_id == "analyst-1"
        assert "Quokka breakout" in w.pane.viewer.toPlainText()
        assert w.pane.viewer.textCursor().selectedText().startswith("Quokka breakout")

    qloop.run_until_complete(scenario())

def test_a_file_an_agent_writes_appears_marked_until_viewed(browser, world, qtbot, qloop):
    async def scenario() -> None:
        w = browser
        await world.memory.alog_journal_entry("trader-1", "Bought 0.1 BTC on the RSI signal.")
        journal = "journal/2019-10-10.md"
        await eventually(lambda: w.tree.item_for("trader-1", journal) is not None)
        item = w.tree.item_for("trader-1", journal)
        assert w.tree.is_marked("trader-1", journal)
        assert item.font(0).bold()
        assert w.tree.item_for("trader-1", "").font(0).bold()  # visible with the branch collapsed
        assert not w.tree.is_marked("analyst-1", "notes/plan.md")

        await open_by_click(qtbot, w, "trader-1", journal)
        assert "Bought 0.1 BTC" in w.pane.viewer.toPlainText()
        assert not w.tree.is_marked("trader-1", journal)
        assert not item.font(0).bold()

    qloop.run_until_complete(scenario())

def test_a_hostile_save_path_is_refused_with_the_reason_and_the_edit_kept(
    browser, world, qtbot, qloop
):
    async def scenario() -> None:
        w = browser
        await open_by_click(qtbot, w, "analyst-1", "notes/plan.md")
        qtbot.mouseClick(w.pane.edit_button, Qt.MouseButton.LeftButton)
        w.pane.editor.selectAll()
        qtbot.keyClicks(w.pane.editor, "My careful analysis")
        w.pane.path_edit.clear()
        qtbot.keyClicks(w.pane.path_edit, "../trader-1/notes/rules.md")
        qtbot.mouseClick(w.pane.save_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: w.pane.banner.kind == "error")

        assert "Not saved" in w.pane.banner.text and "'..'" in w.pane.banner.text
        assert "Your text is still in the editor" in w.pane.banner.text
        assert w.pane.editing
        assert w.pane.editor.toPlainText() == "My careful analysis"
        assert world.memory.read_file("trader-1", "notes/rules.md").data.startswith(b"# Rules")
        assert world.memory.read_file("analyst-1", "notes/plan.md").data == PLAN

    qloop.run_until_complete(scenario())

def test_the_open_file_reloads_on_an_agent_write_but_an_edit_is_never_overwritten(
    browser, world, qtbot, qloop
):
    async def scenario() -> None:
        w = browser
        memory = world.memory
        await open_by_click(qtbot, w, "analyst-1", "notes/plan.md")
        await memory.awrite_file("analyst-1", "notes/plan.md", b"# Plan v2\n")
        await eventually(lambda: "Plan v2" in w.pane.viewer.toPlainText())

        qtbot.mouseClick(w.pane.edit_button, Qt.MouseButton.LeftButton)
        w.pane.editor.selectAll()
        qtbot.keyClicks(w.pane.editor, "# Mine")
        await memory.awrite_file("analyst-1", "notes/plan.md", b"# Plan v3\n")
        await eventually(lambda: w.pane.banner.kind == "warning")
        assert "changed notes/plan.md while you were editing" in w.pane.banner.text
        assert w.pane.editor.toPlainText() == "# Mine"

        qtbot.mouseClick(w.pane.save_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: "Not saved" in w.pane.banner.text)
        assert memory.read_file("analyst-1", "notes/plan.md").data == b"# Plan v3\n"
        assert w.pane.editing and w.pane.editor.toPlainText() == "# Mine"

        overwrite = w.pane.banner.button("Overwrite with mine")
        assert overwrite is not None
        qtbot.mouseClick(overwrite, Qt.MouseButton.LeftButton)
        await eventually(lambda: not w.pane.editing)
        assert memory.read_file("analyst-1", "notes/plan.md").data == b"# Mine"

    qloop.run_until_complete(scenario())

def test_a_new_file_is_created_in_the_selected_agents_folder(browser, world, qtbot, qloop):
    async def scenario() -> None:
        w = browser
        await open_by_click(qtbot, w, "trader-1", "notes/rules.md")
        qtbot.mouseClick(w.pane.new_button, Qt.MouseButton.LeftButton)
        assert w.pane.editing and w.pane.path_edit.text() == "notes/untitled.md"
        w.pane.path_edit.clear()
        qtbot.keyClicks(w.pane.path_edit, "notes/levels.yaml")
        qtbot.keyClicks(w.pane.editor, "support: 8000")
        qtbot.mouseClick(w.pane.save_button, Qt.MouseButton.LeftButton)
        await eventually(lambda: w.tree.item_for("trader-1", "notes/levels.yaml") is not None)
        assert not w.pane.editing
        assert world.memory.read_file("trader-1", "notes/levels.yaml").data == b"support: 8000"
        assert w.pane.viewer.toPlainText() == "support: 8000"  # YAML shown verbatim

    qloop.run_until_complete(scenario())


def test_a_browser_closed_while_agents_write_lets_go_of_the_bus(world, qtbot, qloop):
    bus = world.memory.bus
    assert bus is not None
    w = MemoryBrowser(world.memory, bus, lambda: AGENTS)
    destroyed: list[bool] = []
    w.destroyed.connect(lambda *_: destroyed.append(True))

    async def scenario() -> None:
        await world.memory.awrite_file("trader-1", "notes/a.md", b"one\n")
        w.deleteLater()  # while its tree refresh and reload work are still scheduled
        await eventually(lambda: bool(destroyed))
        await world.memory.awrite_file("trader-1", "notes/b.md", b"two\n")
        await asyncio.sleep(0.3)  # any refresh left over would run (and fail) here

    qloop.run_until_complete(scenario())
    assert bus._handlers_for(MemoryFileChanged("trader-1", "notes/b.md", "created")) == []
