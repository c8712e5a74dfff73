"""The memory browser: every agent's memory folder, its files read and edited, and recall search.

Everything goes through the same ``MemoryBank`` the agents use (its ``a``-methods run in worker
threads), so a person's edit is sandboxed exactly like an agent's and is indexed for recall at once.
A save is a compare-and-swap (``aupdate_file`` under the file's lock): it only replaces the version
the person started from, so an agent's newer write is never silently lost; on a conflict, or any
refusal from the bank (a hostile path, a full quota), the person's text stays in the editor and the
reason is shown. Agents' writes arrive as ``MemoryFileChanged`` events: the file is marked in the
tree until viewed, the open file reloads when the person only reads it, and a warning (never an
overwrite) appears when they are editing it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QListWidgetItem,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.domain.errors import KestrelError
from app.events import AgentStateChanged, EventBus, MemoryFileChanged
from app.memory.bank import MemoryBank
from app.memory.index import Hit
from app.memory.text import sniff_type
from app.ui.names import AgentNames
from app.ui.panels.memory_pane import FilePane
from app.ui.panels.memory_recall import RecallView
from app.ui.panels.memory_tree import ROLE, MemoryTree
from app.ui.panels.style import format_bytes
from app.ui.panels.tasks import BusLink, TaskSet, Throttle

logger = logging.getLogger(__name__)
NARROW_PX = 560  # narrower than this, the file is shown under the tree
AgentList = Callable[[], Sequence[tuple[str, str]]]
RECALL_PER_AGENT = 10
NEW_FILE_PATH = "notes/untitled.md"


@dataclass(frozen=True, slots=True)
class OpenFile:
    """The file on the right: ``data`` as last read or saved (``text`` None when binary)."""

    agent_id: str
    path: str
    data: bytes
    exists: bool
    type_hint: str
    text: str | None


class EditConflict(Exception):
    """The file on disk is no longer the version the person started editing."""


class MemoryBrowser(QWidget):
    """Tree of agents' memory folders, a viewer/editor, and a recall search box."""

    def __init__(
        self,
        memory: MemoryBank,
        bus: EventBus | None,
        agents: AgentList,
        parent: QWidget | None = None,
        *,
        names: AgentNames | None = None,
    ) -> None:
        """``agents``: every agent's (id, name) now; ``names``: who an id is, to show the
        agents' ids inside a file (a journal's "signal from agent:…") as their names."""
        super().__init__(parent)
        self.memory = memory
        self._agents = agents
        self.names = names if names is not None else AgentNames(self._listed_name)
        self._names: dict[str, str] = {}
        self.current: OpenFile | None = None
        self._base: bytes | None = None  # the version the edit started from (None: new file)
        self._open_seq = 0
        self._dirty: set[str] = set()
        self.tasks = TaskSet(on_error=lambda exc: self.pane.banner.show_message("error", str(exc)))
        self._build()
        self.tree_throttle = Throttle(self._refresh_dirty, self.tasks, 150, self)
        self.full_throttle = Throttle(self.refresh, self.tasks, 50, self)
        self.link = BusLink(bus)
        self.link.subscribe(MemoryFileChanged, self._on_memory_changed)
        self.link.subscribe(AgentStateChanged, self._on_agent_state)
        self.link.attach(self)
        self.tasks.attach(self)
        self.full_throttle.request()

    # ------------------------------------------------------------------ layout

    def _build(self) -> None:
        root = QHBoxLayout(self)
        root.setContentsMargins(6, 6, 6, 6)
        self.split = split = QSplitter(Qt.Orientation.Horizontal)
        left = QWidget()
        column = QVBoxLayout(left)
        column.setContentsMargins(0, 0, 0, 0)
        self.recall = RecallView()
        self.search_box = self.recall.search_box
        self.scope = self.recall.scope
        self.hits = self.recall.hits
        self.search_box.returnPressed.connect(self._search_clicked)
        self.recall.button.clicked.connect(self._search_clicked)
        self.hits.itemClicked.connect(self._hit_clicked)
        column.addWidget(self.recall.bar)
        inner = QSplitter(Qt.Orientation.Vertical)
        self.tree = MemoryTree()
        self.tree.file_selected.connect(self._file_selected)
        inner.addWidget(self.tree)
        inner.addWidget(self.recall.results)
        inner.setStretchFactor(0, 3)
        inner.setStretchFactor(1, 2)
        column.addWidget(inner, 1)
        self.pane = FilePane()
        self.pane.viewer.anchorClicked.connect(self._link_clicked)
        self.pane.edit_button.clicked.connect(self.begin_edit)
        self.pane.new_button.clicked.connect(lambda: self.new_file())
        self.pane.save_button.clicked.connect(lambda: self.tasks.spawn(self.save()))
        self.pane.discard_button.clicked.connect(self.discard_edit)
        split.addWidget(left)
        split.addWidget(self.pane)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([380, 620])
        root.addWidget(split)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's name
        """Side by side where there is room; in a narrow dock (a small screen's left column)
        the file is shown under the tree, so neither is squeezed to a sliver; the tree, what a
        person scans, gets the larger share."""
        wanted = (Qt.Orientation.Vertical if event.size().width() < NARROW_PX
                  else Qt.Orientation.Horizontal)
        if self.split.orientation() != wanted:
            self.split.setOrientation(wanted)
            if wanted is Qt.Orientation.Vertical:
                height = event.size().height()
                self.split.setSizes([height * 3 // 5, height - height * 3 // 5])
        super().resizeEvent(event)

    # ------------------------------------------------------------------ tree

    async def refresh(self) -> None:
        """Re-read the agent list and every agent's folder."""
        agents = list(self._agents())
        self._names = dict(agents)
        self.tree.set_agents(agents)
        self.recall.set_agents(agents)
        for agent_id, _ in agents:
            await self.refresh_agent(agent_id)

    async def refresh_agent(self, agent_id: str) -> None:
        try:
            files = await self.memory.alist_files(agent_id)
        except (KestrelError, OSError) as exc:
            self.pane.banner.show_message("error", f"Cannot list {agent_id}'s memory: {exc}")
            return
        self.tree.set_files(agent_id, files)

    async def _refresh_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for agent_id in sorted(dirty):
            await self.refresh_agent(agent_id)

    def restyle(self) -> None:
        """Recolour the tree's folders and changed files (the theme changed)."""
        self.tree.recolor()

    def show_agent(self, agent_id: str) -> None:
        """Bring an agent's folder into view and scope recall to it ("open its memory")."""
        item = self.tree.item_for(agent_id, "")
        if item is not None:
            item.setExpanded(True)
            self.tree.scrollToItem(item)
        self.recall.scope_to(agent_id)

    def _name(self, agent_id: str) -> str:
        return self._names.get(agent_id, agent_id)

    def _listed_name(self, agent_id: str) -> str | None:
        return self._names.get(agent_id)

    def _link_clicked(self, url: QUrl) -> None:
        """A name in a file links to that agent: its folder comes into view."""
        if url.scheme() == "agent":
            self.show_agent(url.path())

    def _show(self, title: str, text: str, type_hint: str, line: int | None = None) -> None:
        """Show a file for reading: the agents' ids in it as their names (Markdown: a link
        whose tooltip is the id). The editor gets the file as it is."""
        readable = (self.names.link_ids(text) if type_hint == "MARKDOWN"
                    else self.names.label_ids(text))
        self.pane.show_text(title, readable, type_hint, line)

    # ------------------------------------------------------------------ live events

    def _on_memory_changed(self, event: MemoryFileChanged) -> None:
        self._dirty.add(event.agent_id)
        self.tree_throttle.request()
        cur = self.current
        if cur is not None and (cur.agent_id, cur.path) == (event.agent_id, event.path):
            if self.pane.editing:
                self.tasks.spawn(self._check_conflict())
            else:
                self.tasks.spawn(self._reload_open(event.kind))
        elif event.kind != "deleted":
            self.tree.mark(event.agent_id, event.path)

    def _on_agent_state(self, event: AgentStateChanged) -> None:
        if event.state in ("created", "deleted") or self.tree.item_for(event.agent_id, "") is None:
            self.full_throttle.request()

    async def _reload_open(self, kind: str) -> None:
        cur = self.current
        if cur is None or self.pane.editing:
            return
        await self.open_file(cur.agent_id, cur.path)
        if kind == "deleted":
            self.pane.banner.show_message(
                "warning", f"{self._name(cur.agent_id)} deleted {cur.path}."
            )

    async def _check_conflict(self) -> None:
        cur = self.current
        if cur is None:
            return
        content = await self.memory.aread_file(cur.agent_id, cur.path)
        now = content.data if content.exists else None
        if not self.pane.editing:  # the edit was saved or dropped meanwhile
            shown = self.current
            if shown is None or not shown.exists or shown.data != now:
                await self._reload_open("written" if content.exists else "deleted")
            return
        if now != self._base:
            self._warn_conflict(
                f"{self._name(cur.agent_id)} changed {cur.path} while you were editing it. "
                "Your text is kept here; Save will not replace their version unless you choose "
                "to overwrite it."
            )

    def _warn_conflict(self, text: str) -> None:
        self.pane.banner.show_message(
            "warning",
            text,
            [
                ("Overwrite with mine", lambda: self.tasks.spawn(self.save(force=True))),
                ("Discard mine, show theirs", self.discard_edit),
            ],
        )

    # ------------------------------------------------------------------ viewing

    def _file_selected(self, agent_id: str, path: str) -> None:
        cur = self.current
        if self.pane.editing:
            if cur is not None and (cur.agent_id, cur.path) != (agent_id, path):
                self.pane.banner.show_message(
                    "warning", "You are editing a file: Save or Discard it before opening another."
                )
                self.tree.select(cur.agent_id, cur.path)
            return
        self.tasks.spawn(self.open_file(agent_id, path))

    async def open_file(self, agent_id: str, path: str, line: int | None = None) -> bool:
        """Show a file (scrolled to ``line`` if given) and clear its changed mark."""
        self._open_seq += 1
        seq = self._open_seq
        try:
            content = await self.memory.aread_file(agent_id, path)
        except (KestrelError, OSError) as exc:
            self.pane.banner.show_message("error", f"Cannot open {path}: {_why(exc)}")
            return False
        if seq != self._open_seq or self.pane.editing:
            return False  # the person moved on (or started editing) while this was read
        self.pane.banner.clear()
        title = f"{self._name(agent_id)} / {content.path}"
        text: str | None = None
        if not content.exists:
            self.pane.show_placeholder(title, "This file no longer exists.")
        else:
            try:
                text = content.data.decode("utf-8")
            except UnicodeDecodeError:
                self.pane.show_placeholder(
                    title, f"Binary file, {format_bytes(len(content.data))}: not shown."
                )
            else:
                self._show(title, text, content.type_hint, line)
        self.current = OpenFile(
            agent_id, content.path, content.data, content.exists, content.type_hint, text
        )
        self.pane.set_mode(viewing=True, editable=text is not None)
        self.tree.unmark(agent_id, content.path)
        self.tree.select(agent_id, content.path)
        return True

    # ------------------------------------------------------------------ editing

    def begin_edit(self) -> None:
        cur = self.current
        if cur is None or cur.text is None or self.pane.editing:
            return
        self._base = cur.data if cur.exists else None
        self.pane.banner.clear()
        self.pane.start_edit(self._name(cur.agent_id), cur.path, cur.text)

    def new_file(self, agent_id: str | None = None) -> None:
        """Start editing a new file in ``agent_id``'s folder (default: the selected agent)."""
        if self.pane.editing:
            return
        agent_id = agent_id or self._selected_agent()
        if agent_id is None:
            self.pane.banner.show_message("warning", "There is no agent to create a file for.")
            return
        self.current = OpenFile(agent_id, "", b"", False, "MARKDOWN", "")
        self._base = None
        self.pane.banner.show_message("info", f"New file in {self._name(agent_id)}'s memory.")
        self.pane.start_edit(self._name(agent_id), NEW_FILE_PATH, "")

    def _selected_agent(self) -> str | None:
        item = self.tree.currentItem()
        if item is not None:
            return item.data(0, ROLE)[1]
        agents = self.tree.agents()
        return agents[0] if agents else None

    def discard_edit(self) -> None:
        cur = self.current
        self.pane.set_mode(viewing=True, editable=cur is not None and cur.text is not None)
        self.pane.banner.clear()
        if cur is not None and cur.path:
            self.tasks.spawn(self.open_file(cur.agent_id, cur.path))

    async def save(self, force: bool = False) -> bool:
        """Write the editor's text through the bank; True when saved.

        Refused (text kept, reason shown) when the bank refuses the path or content, or when the
        file is no longer the version the edit began from (unless ``force``).
        """
        cur = self.current
        if cur is None or not self.pane.editing:
            return False
        agent_id = cur.agent_id
        path = self.pane.path_edit.text().strip()
        data = self.pane.editor.toPlainText().encode("utf-8")
        expected = self._base if (cur.exists and path == cur.path) else None

        def swap(found: bytes | None) -> bytes:
            if not force and found != expected:
                raise EditConflict(
                    f"{path} already exists in {self._name(agent_id)}'s memory."
                    if expected is None
                    else f"{path} changed since you began editing it."
                )
            return data

        self.pane.save_button.setEnabled(False)
        try:
            outcome = await self.memory.aupdate_file(agent_id, path, swap)
        except EditConflict as exc:
            self._warn_conflict(f"Not saved: {exc} Your text is still in the editor.")
            return False
        except (KestrelError, OSError) as exc:
            self.pane.banner.show_message(
                "error", f"Not saved: {_why(exc)} Your text is still in the editor."
            )
            return False
        finally:
            self.pane.save_button.setEnabled(True)
        self._base = data
        text = data.decode("utf-8")
        hint = sniff_type(outcome.path, data)
        self.current = OpenFile(agent_id, outcome.path, data, True, hint, text)
        self.pane.set_mode(viewing=True, editable=True)
        self._show(f"{self._name(agent_id)} / {outcome.path}", text, hint)
        self.pane.banner.show_message(
            "info", f"Saved {outcome.path} ({format_bytes(outcome.size)}); recall sees it now."
        )
        await self.refresh_agent(agent_id)
        self.tree.unmark(agent_id, outcome.path)
        self.tree.select(agent_id, outcome.path)
        return True

    # ------------------------------------------------------------------ recall

    def _search_clicked(self) -> None:
        self.tasks.spawn(self.search())

    async def search(self, query: str | None = None) -> list[tuple[str, Hit]]:
        """Run recall for the search box's text over the chosen agents; list the best hits."""
        query = (self.search_box.text() if query is None else query).strip()
        if not query:
            self.recall.clear()
            return []
        scope = self.scope.currentData()
        found: list[tuple[str, Hit]] = []
        for agent_id in [scope] if scope else self.tree.agents():
            try:
                hits = await self.memory.arecall(agent_id, query, RECALL_PER_AGENT)
            except (KestrelError, OSError) as exc:
                self.recall.show_refusal(f"Recall refused: {_why(exc)}")
                return []
            found.extend((agent_id, hit) for hit in hits)
        found.sort(key=lambda pair: -pair[1].score)
        self.recall.show_hits(query, found, self._names)
        return found

    def _hit_clicked(self, item: QListWidgetItem) -> None:
        agent_id, path, line = item.data(ROLE)
        if self.pane.editing:
            self.pane.banner.show_message(
                "warning", "You are editing a file: Save or Discard it before opening another."
            )
            return
        self.tasks.spawn(self.open_file(agent_id, path, line))



def _why(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc)
