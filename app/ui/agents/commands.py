"""The agent panel's commands: one ``QAction`` each, shared by the toolbar and the context menu.

One action object per command means the toolbar button and the menu entry can never disagree on
what is allowed: ``update`` enables each from the selected agents' states through the lifecycle
table, and both places follow. What a command does is the panel's business; this module only
says which commands exist, how they are labelled, and when each may be used.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QToolBar, QToolButton, QWidget

from app.domain.agents import AgentInfo
from app.ui.agents.lifecycle import Action, allows


class AgentCommands(QObject):
    """Create, the lifecycle commands, Delete, Memory and Conversation."""

    def __init__(self, owner: QWidget) -> None:
        super().__init__(owner)
        self.create = self._action("Create…", "Create an agent from a template")
        self.lifecycle: dict[Action, QAction] = {
            Action.START: self._action("Start", "Run the selected agents"),
            Action.PAUSE: self._action("Pause", "Hold the selected agents; their tasks wait"),
            Action.RESUME: self._action("Resume", "Let the paused agents work again"),
            Action.STOP: self._action("Stop", "Stop the selected agents; they take no tasks"),
        }
        self.delete = self._action("Delete…", "Delete the selected agents (asks first)")
        self.delete.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        self.delete.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        owner.addAction(self.delete)  # the Delete key works wherever the focus is in the panel
        self.memory = self._action("Memory", "Open the agent's memory folder")
        self.conversation = self._action("Conversation", "Open the agent's conversation")

    def _action(self, text: str, tip: str) -> QAction:
        made = QAction(text, self)
        made.setToolTip(tip)
        return made

    def toolbar(self) -> QToolBar:
        bar = QToolBar()
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        bar.addAction(self.create)
        bar.addSeparator()
        for made in (*self.lifecycle.values(), self.delete):
            bar.addAction(made)
        bar.addSeparator()
        bar.addAction(self.memory)
        bar.addAction(self.conversation)
        bar.widgetForAction(self.delete).setObjectName("delete")  # drawn red when enabled
        return bar

    def menu(self, parent: QWidget) -> QMenu:
        menu = QMenu(parent)
        for made in (*self.lifecycle.values(), self.delete):
            menu.addAction(made)
        menu.addSeparator()
        menu.addAction(self.memory)
        menu.addAction(self.conversation)
        menu.addSeparator()
        menu.addAction(self.create)
        return menu

    def by_name(self, name: Action | str) -> QAction:
        """``Action.PAUSE`` (any lifecycle action), or ``create``, ``delete``, ``memory``,
        ``conversation``."""
        if isinstance(name, Action):
            return self.lifecycle[name]
        named = {"create": self.create, "delete": self.delete, "memory": self.memory,
                 "conversation": self.conversation}
        return named[name]

    def update(self, selected: Sequence[AgentInfo], busy: bool) -> None:
        """Enable what the selection allows; nothing that changes agents while one runs."""
        for kind, made in self.lifecycle.items():
            made.setEnabled(not busy and any(allows(kind, info.state) for info in selected))
        self.delete.setEnabled(not busy and bool(selected))
        self.memory.setEnabled(len(selected) == 1)
        self.conversation.setEnabled(len(selected) == 1)


def toolbar_button(bar: QToolBar, action: QAction) -> QToolButton:
    widget = bar.widgetForAction(action)
    if not isinstance(widget, QToolButton):
        raise LookupError(f"{action.text()} is not on the toolbar")
    return widget
