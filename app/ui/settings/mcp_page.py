"""Settings > MCP servers: the configured servers, their tools, and a person's approvals.

A person lists a server's tools, reads each definition (status and SHA-256 pin, and the whole of
the server's description of the selected tool, as plain text: it is what the agents will be told
the tool does, and it may be written to mislead them), approves the ones they trust and enables
each for agent templates. Every tool starts off; a tool whose server
changed it since it was approved shows "changed" and stays off until approved again. Servers are
configured in ``settings.toml`` (``[mcp.servers.<name>]``); this page works on the running
workspace's MCP hub, so what is approved here reaches the agents at their next task.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Coroutine
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.agents.template_files import load_templates
from app.domain.errors import KestrelError, ToolError
from app.mcp.approvals import template_target
from app.mcp.hub import McpHub
from app.mcp.tools import MAX_TOOL_DESCRIPTION, ListedTool
from app.ui.settings.pages import Page, _note
from app.workspace import Workspace

Spawn = Callable[[Coroutine[Any, Any, Any]], Any]
STATUS_WORDS = {
    "new": "new: not approved",
    "approved": "approved",
    "changed": "CHANGED since approval: off",
    "refused": "cannot be offered",
}


class ServerBox(QGroupBox):
    """One server: where it is, a button to list its tools, and the tools' table."""

    def __init__(self, hub: McpHub, name: str, templates: list[str], spawn: Spawn) -> None:
        settings = hub.connections.settings[name]
        super().__init__(f"{name}  ({settings.describe()[:80]})")
        self.setObjectName(f"mcp_server_{name}")
        self.hub = hub
        self.name = name
        self.templates = templates
        self._spawn = spawn
        self.listed: list[ListedTool] = []
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.list_button = QPushButton("List tools")
        self.list_button.setObjectName(f"mcp_list_{name}")
        self.list_button.clicked.connect(lambda: self._spawn(self.refresh()))
        self.status = QLabel("Not listed yet: listing starts the server.")
        self.status.setWordWrap(True)
        row.addWidget(self.list_button)
        row.addWidget(self.status, 1)
        layout.addLayout(row)
        self.table = QTableWidget(0, 4 + len(templates))
        self.table.setObjectName(f"mcp_tools_{name}")
        self.table.setHorizontalHeaderLabels(
            ["Tool", "Status", "SHA-256", "Approve", *[f"for {t}" for t in templates]])
        self.table.verticalHeader().setVisible(False)
        self.table.setMinimumHeight(160)
        self.table.currentCellChanged.connect(lambda row, *_: self._describe(row))
        layout.addWidget(self.table)
        self.about = QLabel("Select a tool to read the server's description of it.")
        self.about.setObjectName(f"mcp_about_{name}")
        self.about.setTextFormat(Qt.TextFormat.PlainText)  # a tool's name is the server's text
        self.about.setWordWrap(True)
        layout.addWidget(self.about)
        self.description = QPlainTextEdit()  # plain text: markup in it is shown, never applied
        self.description.setObjectName(f"mcp_description_{name}")
        self.description.setReadOnly(True)
        self.description.setMaximumHeight(140)
        layout.addWidget(self.description)

    async def refresh(self) -> None:
        row = self.table.currentRow()
        selected = self.listed[row].name if 0 <= row < len(self.listed) else None
        self.list_button.setEnabled(False)
        self.status.setText("Listing…")
        try:
            self.listed = await self.hub.inspect(self.name)
        except ToolError as exc:
            self.status.setText(f"Could not list the tools: {exc.message}")
            return
        finally:
            self.list_button.setEnabled(True)
        self.status.setText(f"{len(self.listed)} tools listed.")
        self._fill()
        names = [tool.name for tool in self.listed]
        if names:  # the tool read before (approving lists again), else the first
            row = names.index(selected) if selected in names else 0
            self.table.setCurrentCell(row, 0)
            self._describe(row)

    def _fill(self) -> None:
        self.table.setRowCount(len(self.listed))
        for row, tool in enumerate(self.listed):
            name = QTableWidgetItem(tool.name)
            said = str(tool.definition.get("description", ""))[:1000]
            name.setToolTip(f"<p>{html.escape(said)}</p>")  # escaped: a tooltip renders HTML
            self.table.setItem(row, 0, name)
            status = QTableWidgetItem(STATUS_WORDS.get(tool.status, tool.status))
            if tool.refused:
                status.setToolTip(tool.refused)
                status.setText(f"cannot be offered: {tool.refused}")
            self.table.setItem(row, 1, status)
            self.table.setItem(row, 2, QTableWidgetItem(tool.sha256[:16]))
            if tool.status in ("new", "changed"):
                button = QPushButton("Approve" if tool.status == "new" else "Re-approve")
                button.setObjectName(f"mcp_approve_{self.name}__{tool.name}")
                button.clicked.connect(lambda _=False, t=tool: self._approve(t))
                self.table.setCellWidget(row, 3, button)
            else:
                self.table.setCellWidget(row, 3, QLabel(""))
            for column, template in enumerate(self.templates, start=4):
                box = QCheckBox()
                box.setObjectName(f"mcp_enable_{self.name}__{tool.name}__{template}")
                approval = tool.approval
                box.setEnabled(tool.status == "approved")
                box.setChecked(approval is not None
                               and template_target(template) in approval.enabled_for)
                box.toggled.connect(
                    lambda on, t=tool, tpl=template: self._enable(t, tpl, on))
                self.table.setCellWidget(row, column, box)
        self.table.resizeColumnsToContents()

    def _describe(self, row: int) -> None:
        """Show the whole description of the tool in ``row``, and how much of it agents see."""
        if not 0 <= row < len(self.listed):
            return
        tool = self.listed[row]
        said = str(tool.definition.get("description") or tool.definition.get("title") or "")
        shown = min(len(said), MAX_TOOL_DESCRIPTION)
        self.about.setText(
            f"What the server says {tool.name} does ({len(said)} characters). Read it before "
            f"you approve: agents are shown {'all' if shown == len(said) else f'the first {shown}'}"
            " of it, quoted as the server's words, never as instructions.")
        self.description.setPlainText(said)

    def _approve(self, tool: ListedTool) -> None:
        try:
            self.hub.approve(tool)
        except KestrelError as exc:
            self.status.setText(f"Not approved: {exc}")
            return
        self.status.setText(f"Approved {tool.name} ({tool.sha256[:16]}); enable it for the "
                            "templates that may use it.")
        self._spawn(self.refresh())

    def _enable(self, tool: ListedTool, template: str, on: bool) -> None:
        try:
            self.hub.enable_for_template(self.name, tool.name, template, on)
        except KestrelError as exc:
            self.status.setText(f"Not changed: {exc}")


class McpPage(Page):
    """The "MCP servers" page of the Settings dialog."""

    title = "MCP servers"

    def __init__(self, workspace: Workspace, spawn: Spawn, hub: McpHub | None) -> None:
        super().__init__(
            "Tools of MCP servers reach an agent only after you approve a tool's exact "
            "definition and enable it for the agent's template. If the server later changes the "
            "tool, it is turned off until you approve it again. MCP tools can never trade. "
            "Servers are configured in settings.toml as [mcp.servers.<name>] (a command or a "
            "url); secret environment values go in the keyring (secret_env).")
        self.boxes: dict[str, ServerBox] = {}
        if hub is None:
            self.body.addWidget(_note(
                "No MCP server is connected in this session. Add one to settings.toml and "
                "restart Kestrel to list and approve its tools."))
        else:
            try:
                templates = sorted(load_templates(extra_folders=[workspace.root / "agents"]))
            except KestrelError as exc:
                templates = []
                self.body.addWidget(_note(f"The agent templates could not be read: {exc}"))
            holder = QWidget()
            column = QVBoxLayout(holder)
            column.setContentsMargins(0, 0, 0, 0)
            for name in hub.connections.settings:
                box = ServerBox(hub, name, templates, spawn)
                self.boxes[name] = box
                column.addWidget(box)
            self.body.addWidget(holder)
        self.finish()
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
