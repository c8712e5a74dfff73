"""The window opened on a workspace it may not write says why in a dialog, in words."""

from __future__ import annotations

import os

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from app.secrets import SecretStore
from app.ui.app import open_or_explain
from app.ui.main_window import MainWindow
from app.ui.settings.prefs import UiPrefs
from app.workspace import Workspace

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")


def test_a_workspace_held_by_another_process_is_refused_in_a_dialog(tmp_path, qtbot, qloop):
    workspace = Workspace.at(tmp_path / "ws")
    hold = workspace.hold_for_writing()  # as another kestrel would: the lock is per open file
    prefs = UiPrefs(QSettings(str(tmp_path / "ui.ini"), QSettings.Format.IniFormat))
    window = MainWindow(prefs, SecretStore(), interactive_errors=False)
    qtbot.addWidget(window)
    window.show()
    try:
        box = qloop.run_until_complete(open_or_explain(window, workspace))
    finally:
        hold.release()
    assert isinstance(box, QMessageBox) and box.isVisible()
    assert box.windowTitle() == "Kestrel cannot open this workspace"
    assert f"is in use by process {os.getpid()}" in box.text()
    assert "A workspace has one writer" in box.text()
    assert window.world is None and not window.errors.reports, "a refusal, not a crash report"
    box.close()
    window.close()
    qloop.run_until_complete(window.aclose())
