"""The memory browser's recall widgets: the search bar (query, agent scope) and the hit list.

Kept apart from the browser, which owns the bank and decides what a click opens; this module only
lays out the search box and draws recalled snippets, best first, each naming its agent, file and
line so a click can open the file at that line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.memory.index import Hit
from app.ui.panels.memory_tree import ROLE
from app.ui.theme import set_look

SNIPPET_CHARS = 160


class RecallView:
    """``bar`` (search box, scope, button) and ``results`` (count line and hit list) widgets."""

    def __init__(self) -> None:
        self.bar = QWidget()
        row = QHBoxLayout(self.bar)
        row.setContentsMargins(0, 0, 0, 0)
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Recall: words, symbols, numbers…")
        self.search_box.setClearButtonEnabled(True)
        self.scope = QComboBox()
        self.scope.addItem("All agents", None)
        self.scope.setToolTip("Whose memory recall searches")
        self.button = QPushButton("Recall")
        row.addWidget(self.search_box, 1)
        row.addWidget(self.scope)
        row.addWidget(self.button)
        self.results = QWidget()
        column = QVBoxLayout(self.results)
        column.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.hits = QListWidget()
        self.hits.setWordWrap(True)
        self.hits.setAlternatingRowColors(True)
        column.addWidget(self.label)
        column.addWidget(self.hits, 1)
        # shown once there is something to show: until a recall, the tree has the room
        self.results.hide()

    def set_agents(self, agents: Sequence[tuple[str, str]]) -> None:
        """Offer these agents as scopes, keeping the chosen one if it is still there."""
        chosen = self.scope.currentData()
        self.scope.blockSignals(True)
        self.scope.clear()
        self.scope.addItem("All agents", None)
        for agent_id, name in agents:
            self.scope.addItem(name, agent_id)
        self.scope.setCurrentIndex(max(self.scope.findData(chosen), 0))
        self.scope.blockSignals(False)

    def scope_to(self, agent_id: str) -> None:
        index = self.scope.findData(agent_id)
        if index >= 0:
            self.scope.setCurrentIndex(index)

    def clear(self) -> None:
        self.hits.clear()
        self.label.setText("")
        self.results.hide()

    def show_refusal(self, text: str) -> None:
        self.hits.clear()
        self.results.show()
        set_look(self.label, "error")
        self.label.setText(text)

    def show_hits(
        self, query: str, found: Sequence[tuple[str, Hit]], names: Mapping[str, str]
    ) -> None:
        """List ``found`` (already best first) as "agent · path:line" over a one-line snippet."""
        self.hits.clear()
        self.results.show()
        for agent_id, hit in found:
            snippet = " ".join(hit.snippet.split())
            if len(snippet) > SNIPPET_CHARS:
                snippet = snippet[: SNIPPET_CHARS - 1] + "…"
            name = names.get(agent_id, agent_id)
            item = QListWidgetItem(f"{name} · {hit.path}:{hit.line}\n{snippet}")
            item.setData(ROLE, (agent_id, hit.path, hit.line))
            item.setToolTip(hit.snippet)
            self.hits.addItem(item)
        set_look(self.label, "muted")
        self.label.setText(
            f"{len(found)} recalled for “{query}”" if found else f"Nothing recalled for “{query}”"
        )
