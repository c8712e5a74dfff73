"""Settings > MCP servers as a person uses it: list a real server's tools, approve one, enable it
for a template; and saving the dialog keeps the [mcp] servers in settings.toml."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QLabel, QPlainTextEdit, QPushButton, QWidget

from app.config import load_settings
from app.mcp.hub import attach_mcp
from app.secrets import SecretStore
from app.tools.registry import ToolRegistry
from app.ui.settings import SettingsDialog
from app.ui.settings.prefs import UiPrefs
from app.workspace import Workspace
from tests.helpers.eventually import eventually, eventually_on

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints")
HOSTILE = str(Path(__file__).resolve().parents[1] / "helpers" / "hostile_mcp_server.py")
TEMPLATE = "TraderAgent_Default_v1"


class _Team:
    def __init__(self, mcp):
        self.mcp = mcp


class _World:
    def __init__(self, mcp):
        self.agents = _Team(mcp)


class _Window(QWidget):
    """What the dialog reads of its parent window: the running world."""

    def __init__(self, mcp):
        super().__init__()
        self.world = _World(mcp)


def test_a_person_lists_approves_and_enables_an_mcp_tool(qtbot, qloop, tmp_path):
    workspace = Workspace.at(tmp_path).ensure()
    workspace.settings_path.write_text(
        f"[mcp.servers.hostile]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([HOSTILE])}\n")
    hub = attach_mcp(ToolRegistry(), workspace.settings().mcp, tmp_path, SecretStore(environ={}),
                     lambda: int(time.time() * 1000))
    window = _Window(hub)
    qtbot.addWidget(window)
    dialog = SettingsDialog(workspace, SecretStore(environ={}), UiPrefs(), window)
    qtbot.addWidget(dialog)
    box = dialog.mcp_page.boxes["hostile"]
    try:
        qtbot.mouseClick(box.list_button, Qt.MouseButton.LeftButton)
        eventually_on(qloop, lambda: box.table.rowCount() > 0)
        assert box.table.rowCount() == 8, "every listed tool is shown, refused ones too"
        approve = dialog.findChild(QPushButton, "mcp_approve_hostile__echo")
        qtbot.mouseClick(approve, Qt.MouseButton.LeftButton)
        assert hub.approvals.get("hostile", "echo") is not None
        assert hub.grants("a1", TEMPLATE) == frozenset(), "approved but not yet enabled"
        name = f"mcp_enable_hostile__echo__{TEMPLATE}"
        qloop.run_until_complete(eventually(
            lambda: (b := dialog.findChild(QCheckBox, name)) is not None and b.isEnabled()))
        dialog.findChild(QCheckBox, name).setChecked(True)
        assert hub.grants("a1", TEMPLATE) == {"mcp:hostile__echo"}
        assert dialog.findChild(QCheckBox, "mcp_enable_hostile__refs__" + TEMPLATE).isEnabled() \
            is False
        assert dialog.save()
        assert "hostile" in load_settings(workspace.settings_path).mcp.servers
    finally:
        qloop.run_until_complete(hub.aclose())


def test_a_person_reads_the_whole_description_of_a_tool_before_enabling_it(
        qtbot, qloop, tmp_path):
    """The description is what the agents are told the tool does: the page shows all of it, as
    plain text (its markup shown, not applied), and says how much of it the agents see."""
    from tests.helpers.hostile_mcp_server import DESCRIPTION_END, HOSTILE_DESCRIPTION

    workspace = Workspace.at(tmp_path).ensure()
    workspace.settings_path.write_text(
        f"[mcp.servers.hostile]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([HOSTILE, '--mode', 'described'])}\n")
    hub = attach_mcp(ToolRegistry(), workspace.settings().mcp, tmp_path, SecretStore(environ={}),
                     lambda: int(time.time() * 1000))
    window = _Window(hub)
    qtbot.addWidget(window)
    dialog = SettingsDialog(workspace, SecretStore(environ={}), UiPrefs(), window)
    qtbot.addWidget(dialog)
    box = dialog.mcp_page.boxes["hostile"]
    try:
        qtbot.mouseClick(box.list_button, Qt.MouseButton.LeftButton)
        eventually_on(qloop, lambda: box.table.rowCount() > 0)
        row = [box.table.item(r, 0).text() for r in range(box.table.rowCount())].index("forecast")
        box.table.setCurrentCell(row, 0)
        shown = dialog.findChild(QPlainTextEdit, "mcp_description_hostile")
        assert shown is not None and shown.isReadOnly()
        assert shown.toPlainText() == HOSTILE_DESCRIPTION, "all of it, markup as written"
        assert DESCRIPTION_END in shown.toPlainText()
        about = dialog.findChild(QLabel, "mcp_about_hostile").text()
        assert f"({len(HOSTILE_DESCRIPTION)} characters)" in about
        assert "agents are shown the first 500 of it" in about

        qtbot.mouseClick(dialog.findChild(QPushButton, "mcp_approve_hostile__forecast"),
                         Qt.MouseButton.LeftButton)
        name = f"mcp_enable_hostile__forecast__{TEMPLATE}"
        qloop.run_until_complete(eventually(
            lambda: (b := dialog.findChild(QCheckBox, name)) is not None and b.isEnabled()))
        assert shown.toPlainText() == HOSTILE_DESCRIPTION, "still the tool being enabled"
    finally:
        qloop.run_until_complete(hub.aclose())
