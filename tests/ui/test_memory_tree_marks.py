"""Memory files an agent changed are marked in the tree, with their folders and the agent."""

from __future__ import annotations

import pytest

from app.memory.bank import FileInfo
from app.ui.panels.memory_tree import MARK, MemoryTree
from tests.helpers.eventually import eventually_qt

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


@pytest.fixture
def tree(qtbot) -> MemoryTree:
    tree = MemoryTree()
    qtbot.addWidget(tree)
    tree.set_agents([("analyst-1", "Analyst")])
    files = [FileInfo(f"journal/2024-01-{day:02d}/entry_{n}.md", 100, 0)
             for day in range(1, 21) for n in range(10)]
    tree.set_files("analyst-1", [*files, FileInfo("config.yaml", 10, 0)])
    tree.show()
    return tree


def test_marking_one_file_marks_it_its_folders_and_the_agent_and_nothing_else(
    tree: MemoryTree,
) -> None:
    changes: list[object] = []
    tree.model().dataChanged.connect(lambda *args: changes.append(args))
    path = "journal/2024-01-05/entry_3.md"
    tree.mark("analyst-1", path)
    assert tree.is_marked("analyst-1", path)
    touched = {tree.itemFromIndex(args[0]) for args in changes}  # type: ignore[index]
    expected = {tree.item_for("analyst-1", key) for key in
                ("", "journal/", "journal/2024-01-05/", path)}
    assert touched == expected  # 4 of the 222 items
    assert tree.item_for("analyst-1", "journal/").font(0).bold()
    assert not tree.item_for("analyst-1", "journal/2024-01-06/").font(0).bold()
    assert tree.item_for("analyst-1", "").text(0).startswith(MARK)


def test_unmarking_the_last_changed_file_clears_every_mark(tree: MemoryTree) -> None:
    path = "config.yaml"
    tree.mark("analyst-1", path)
    tree.unmark("analyst-1", path)
    assert not tree.is_marked("analyst-1", path)
    assert tree.item_for("analyst-1", path).text(0) == "config.yaml"
    assert not tree.item_for("analyst-1", "").text(0).startswith(MARK)
    assert not tree.item_for("analyst-1", "").font(0).bold()


def test_renaming_a_marked_agent_keeps_its_mark(tree: MemoryTree) -> None:
    tree.mark("analyst-1", "config.yaml")
    tree.set_agents([("analyst-1", "Trend analyst")])
    label = tree.item_for("analyst-1", "").text(0)
    assert label.startswith(MARK) and "Trend analyst" in label


def test_a_narrow_tree_gives_the_names_room_and_a_wide_one_shows_every_column(
    tree: MemoryTree, qtbot
) -> None:
    tree.resize(700, 400)
    eventually_qt(lambda: not tree.isColumnHidden(1) and not tree.isColumnHidden(2))
    tree.resize(240, 400)
    eventually_qt(lambda: tree.isColumnHidden(2))
    assert tree.header().sectionSize(0) >= 15 * tree.fontMetrics().horizontalAdvance("M")
    tree.resize(120, 400)
    eventually_qt(lambda: tree.isColumnHidden(1))
    tree.resize(700, 400)
    eventually_qt(lambda: not tree.isColumnHidden(1) and not tree.isColumnHidden(2))


def test_the_size_and_time_columns_fit_their_widest_text(tree: MemoryTree, qtbot) -> None:
    tree.resize(700, 400)
    eventually_qt(lambda: not tree.isColumnHidden(2))
    metrics = tree.fontMetrics()
    header = tree.header()
    assert header.sectionSize(1) > metrics.horizontalAdvance("1023.9 KB")
    assert header.sectionSize(2) > metrics.horizontalAdvance("2026-12-31 23:59")
    root = tree.item_for("analyst-1", "")
    assert header.sectionSize(1) > metrics.horizontalAdvance(root.text(1))  # "201 files"
