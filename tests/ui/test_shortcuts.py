"""The keyboard in the real window: every shortcut F1 lists is a key the window answers, the second
time as the first (Ctrl+Space paused the replay once: the button's new text took its shortcut),
and F1's list is the window's own actions, so it cannot name a key that does nothing."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox

from app.ui.main_window import MainWindow
from tests.helpers.eventually import eventually
from tests.ui.desk import Desk, focus_back

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")


def press(window: MainWindow, qtbot, action: QAction) -> None:
    combination = action.shortcut()[0]
    qtbot.keyClick(window, combination.key(), combination.keyboardModifiers())


def close_dialogs(window: MainWindow) -> None:
    """Back out of whatever a press opened (Esc, as a person would); the window is active
    again, so the next key reaches it."""
    for widget in QApplication.topLevelWidgets():
        if widget is not window and isinstance(widget, QDialog) and widget.isVisible():
            widget.reject()
    focus_back(window)


def test_every_shortcut_f1_lists_works_twice(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await desk.open()
        await desk.settle(window)
        listed = window.shortcut_list()
        keys = [a.shortcut().toString() for a, _words in listed]
        for expected in ("Ctrl+Space", "F9", "Ctrl+Shift+K", "Ctrl+Shift+F", "Ctrl+Q", "F1",
                         "Ctrl+2", "Ctrl+6"):
            assert expected in keys, f"F1 does not list {expected}"
        assert len(keys) == len(set(keys)), "one key, one action"
        driver = window.world.venue.driver
        for action, words in listed:
            fired: list[bool] = []
            action.triggered.connect(lambda _checked=False, f=fired: f.append(True))
            for time in (1, 2):
                paused = driver.paused
                press(window, qtbot, action)
                try:
                    await eventually(lambda f=fired, n=time: len(f) == n)
                except AssertionError:
                    raise AssertionError(f"{action.shortcut().toString()} ({words}) press {time}"
                                         f" did nothing; active {QApplication.activeWindow()}"
                                         f" focus {QApplication.focusWidget()}") from None
                if action is window.replay_bar.pause_action:
                    assert driver.paused is not paused, f"Ctrl+Space press {time}: no change"
                await eventually(lambda: not window.tasks.busy)  # a question read its counts
                close_dialogs(window)
            assert len(fired) == 2, words
        assert window.isVisible(), "Ctrl+Q asks first while agents run"

    desk.run(scenario)


def test_f1_shows_the_keys_of_the_windows_own_actions(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await desk.open()
        qtbot.keyClick(window, Qt.Key.Key_F1)
        await eventually(lambda: isinstance(window.shortcuts_box, QMessageBox)
                    and window.shortcuts_box.isVisible())
        text = window.shortcuts_box.text()
        for action, words in window.shortcut_list():
            assert f"{action.shortcut().toString()}  {words}" in text
        assert "Ctrl+Space  Pause or resume the replay" in text
        window.shortcuts_box.reject()

    desk.run(scenario)


def test_ctrl_space_pauses_and_resumes_the_replay_every_time(desk: Desk, qtbot) -> None:
    async def scenario() -> None:
        window = await desk.open()
        driver = window.world.venue.driver
        assert not driver.paused
        for expected in (True, False, True, False):
            qtbot.keyClick(window, Qt.Key.Key_Space, Qt.KeyboardModifier.ControlModifier)
            await eventually(lambda e=expected: driver.paused is e)
            assert window.replay_bar.pause_button.text() == ("Play" if expected else "Pause")

    desk.run(scenario)
