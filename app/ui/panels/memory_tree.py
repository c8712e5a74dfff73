"""The memory browser's tree: one branch per agent, its folders and files, changed files marked.

Updates are diffs, not rebuilds: when an agent writes a file, only that agent's branch is compared
with a fresh listing, so the person's selection, expanded folders and scroll position survive a
busy agent. A file an agent changed is shown bold with a dot until the person opens it; its
folders and agent are bold too, so the mark is visible with the branch collapsed.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeWidget, QTreeWidgetItem

from app.memory.bank import FileInfo
from app.ui.panels.style import COLORS, format_bytes, format_time

ROLE = Qt.ItemDataRole.UserRole
Key = tuple[str, str]  # (agent_id, path); path "" is the agent itself, "a/b/" a folder
MARK = "● "


class MemoryTree(QTreeWidget):
    """Agents → folders → files; emits ``file_selected(agent_id, path)``."""

    file_selected = Signal(str, str)

    def __init__(self) -> None:
        super().__init__()
        self.setColumnCount(3)
        self.setHeaderLabels(["Name", "Size", "Modified"])
        self.setUniformRowHeights(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        # fixed widths that fit the widest size and time text: "resize to contents" measured up
        # to 1,000 rows again after every change, and running agents change files constantly
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Fixed)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Fixed)
        self._fit_columns()
        self._items: dict[Key, QTreeWidgetItem] = {}
        self._names: dict[str, str] = {}
        self.marked: set[Key] = set()
        self._styled: dict[Key, bool] = {}  # the mark each item is drawn with now
        self.currentItemChanged.connect(self._current_changed)

    def _fit_columns(self) -> None:
        metrics = self.fontMetrics()
        padding = 3 * metrics.horizontalAdvance("M")
        widest = {1: ("1023.9 KB", "9999 files", "empty"), 2: ("2026-12-31 23:59", "Modified")}
        self._widths = {
            column: max(metrics.horizontalAdvance(t) for t in texts) + padding
            for column, texts in widest.items()
        }
        for column, width in self._widths.items():
            self.header().resizeSection(column, width)
        self._fit_to_width()

    def _fit_to_width(self) -> None:
        """In a narrow pane the names matter most: the time, then the size column give way."""
        room = self.viewport().width() - 16 * self.fontMetrics().horizontalAdvance("M")
        self.setColumnHidden(2, room < self._widths[1] + self._widths[2])
        self.setColumnHidden(1, room < self._widths[1])

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt's name
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._fit_columns()
        super().changeEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_to_width()

    # ------------------------------------------------------------------ agents and files

    def set_agents(self, agents: Sequence[tuple[str, str]]) -> None:
        """Show exactly these agents (id, display name), in this order."""
        wanted = [agent_id for agent_id, _ in agents]
        for agent_id in [k[0] for k in self._items if k[1] == "" and k[0] not in wanted]:
            self._remove_agent(agent_id)
        for position, (agent_id, name) in enumerate(agents):
            self._names[agent_id] = name
            item = self._items.get((agent_id, ""))
            if item is None:
                item = QTreeWidgetItem([self._agent_label(agent_id), "", ""])
                item.setData(0, ROLE, ("agent", agent_id, ""))
                item.setToolTip(0, self._agent_tip(agent_id))
                self._items[(agent_id, "")] = item
                self.insertTopLevelItem(position, item)
            else:  # a new name: the label is drawn again, with its mark if it has one
                item.setToolTip(0, self._agent_tip(agent_id))
                self._styled.pop((agent_id, ""), None)
                self._restyle(agent_id)

    def agents(self) -> list[str]:
        return [key[0] for key in self._items if key[1] == ""]

    def _agent_label(self, agent_id: str) -> str:
        """The agent's name alone (its id is the branch's tooltip): a UUID beside every name
        filled a narrow dock with digits."""
        return self._names.get(agent_id, agent_id)

    def _agent_tip(self, agent_id: str) -> str:
        name = self._names.get(agent_id, agent_id)
        return f"{name}'s memory\nid {agent_id}" if name != agent_id else f"id {agent_id}"

    def _remove_agent(self, agent_id: str) -> None:
        item = self._items.get((agent_id, ""))
        if item is not None:
            self.takeTopLevelItem(self.indexOfTopLevelItem(item))
        for key in [k for k in self._items if k[0] == agent_id]:
            del self._items[key]
            self._styled.pop(key, None)
        self.marked = {k for k in self.marked if k[0] != agent_id}

    def set_files(self, agent_id: str, files: Sequence[FileInfo]) -> None:
        """Make the agent's branch match ``files``: add, update and remove only what changed."""
        root = self._items.get((agent_id, ""))
        if root is None:
            return
        present = {info.path for info in files}
        for key in [k for k in self._items if k[0] == agent_id and k[1] and not k[1].endswith("/")]:
            if key[1] not in present:
                self._take(key)
        for info in sorted(files, key=lambda f: f.path):
            item = self._items.get((agent_id, info.path)) or self._add_file(agent_id, info.path)
            item.setText(1, format_bytes(info.size))
            item.setText(2, format_time(info.modified_ms, seconds=False))
            item.setToolTip(2, "file modified (wall clock, UTC)")
        folders = [k for k in self._items if k[0] == agent_id and k[1].endswith("/")]
        for key in sorted(folders, key=lambda k: -len(k[1])):  # deepest first
            item = self._items[key]
            if item.childCount() == 0:
                self._take(key)
        root.setText(1, f"{len(files)} files" if files else "empty")
        self._restyle(agent_id)

    def _add_file(self, agent_id: str, path: str) -> QTreeWidgetItem:
        parts = path.split("/")
        parent = self._items[(agent_id, "")]
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[: depth + 1]) + "/"
            item = self._items.get((agent_id, folder))
            if item is None:
                item = QTreeWidgetItem([parts[depth] + "/", "", ""])
                item.setData(0, ROLE, ("folder", agent_id, folder))
                item.setForeground(0, QBrush(QColor(COLORS["muted"])))
                _insert_sorted(parent, item)
                self._items[(agent_id, folder)] = item
            parent = item
        item = QTreeWidgetItem([parts[-1], "", ""])
        item.setData(0, ROLE, ("file", agent_id, path))
        item.setToolTip(0, f"{self._agent_label(agent_id)} / {path}\nmemory/{agent_id}/{path}")
        for column in (1, 2):
            item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight)
        _insert_sorted(parent, item)
        self._items[(agent_id, path)] = item
        return item

    def _take(self, key: Key) -> None:
        item = self._items.pop(key)
        self._styled.pop(key, None)
        parent = item.parent()
        if parent is not None:
            parent.removeChild(item)
        self.marked.discard(key)

    # ------------------------------------------------------------------ marks

    def mark(self, agent_id: str, path: str) -> None:
        self.marked.add((agent_id, path))
        self._restyle(agent_id)

    def unmark(self, agent_id: str, path: str) -> None:
        if (agent_id, path) in self.marked:
            self.marked.discard((agent_id, path))
            self._restyle(agent_id)

    def is_marked(self, agent_id: str, path: str) -> bool:
        """Whether the file is shown as changed-and-not-yet-viewed (and exists in the tree)."""
        item = self._items.get((agent_id, path))
        return (agent_id, path) in self.marked and item is not None and item.text(0)[:2] == MARK

    def _restyle(self, agent_id: str) -> None:
        """Draw the agent's changed files (and their folders) marked, the others plain.

        Runs for every memory write of a running agent, and an agent's tree grows to hundreds of
        files: only the items whose mark changes are touched (each Qt call on an item repaints).
        """
        marked = {p for a, p in self.marked if a == agent_id}
        for (owner, path), item in self._items.items():
            if owner != agent_id:
                continue
            if path == "":
                hot = bool(marked)
            elif path.endswith("/"):
                hot = any(p.startswith(path) for p in marked)
            else:
                hot = path in marked
            if self._styled.get((owner, path)) == hot:
                continue
            self._styled[(owner, path)] = hot
            if path == "":
                name = self._agent_label(agent_id)
                item.setText(0, f"{MARK}{name}" if hot else name)
            elif not path.endswith("/"):
                base = path.rsplit("/", 1)[-1]
                item.setText(0, f"{MARK}{base}" if hot else base)
                # a plain file takes the view's text colour, so it follows the theme
                item.setData(0, Qt.ItemDataRole.ForegroundRole,
                             QBrush(QColor(COLORS["warning"])) if hot else None)
                note = " — changed by the agent" if hot else ""
                item.setToolTip(0, f"{self._agent_label(agent_id)} / {path}{note}\n"
                                   f"memory/{agent_id}/{path}")
            font = item.font(0)
            font.setBold(hot)
            item.setFont(0, font)

    # ------------------------------------------------------------------ selection

    def recolor(self) -> None:
        """Draw folders and changed files in the current theme's colours (after a switch)."""
        for (agent_id, path), item in self._items.items():
            if path.endswith("/"):
                item.setForeground(0, QBrush(QColor(COLORS["muted"])))
            elif path and self._styled.get((agent_id, path)):
                item.setForeground(0, QBrush(QColor(COLORS["warning"])))

    def item_for(self, agent_id: str, path: str) -> QTreeWidgetItem | None:
        return self._items.get((agent_id, path))

    def select(self, agent_id: str, path: str) -> None:
        item = self._items.get((agent_id, path))
        if item is None:
            return
        parent = item.parent()
        while parent is not None:
            parent.setExpanded(True)
            parent = parent.parent()
        self.blockSignals(True)
        self.setCurrentItem(item)
        self.blockSignals(False)
        self.scrollToItem(item)

    def _current_changed(self, item: QTreeWidgetItem | None, _previous: object) -> None:
        if item is None:
            return
        kind, agent_id, path = item.data(0, ROLE)
        if kind == "file":
            self.file_selected.emit(agent_id, path)


def _insert_sorted(parent: QTreeWidgetItem, item: QTreeWidgetItem) -> None:
    """Folders first, then files, each by name (the order a file manager uses)."""
    kind = item.data(0, ROLE)[0]
    key = (kind != "folder", item.data(0, ROLE)[2])
    for index in range(parent.childCount()):
        other = parent.child(index)
        if key < (other.data(0, ROLE)[0] != "folder", other.data(0, ROLE)[2]):
            parent.insertChild(index, item)
            return
    parent.addChild(item)
