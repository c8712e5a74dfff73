"""Windows opened on one workspace, as a person's restarts of the app would open them (the
``desk`` fixture of ``conftest`` hands out a ``Desk``), and helpers the window's tests share."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, QPointF, QSettings, QSize, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication, QWidget

from app.secrets import SecretStore
from app.ui.main_window import MainWindow
from app.ui.settings.prefs import UiPrefs
from app.workspace import Workspace


class Desk:
    """Opens windows on one workspace with one QSettings file, as restarts of the app would.

    Everything happens inside the running qasync loop, as in the app (``app.ui.app``): a
    scenario is one coroutine, run with ``desk.run(scenario)``.
    """

    def __init__(self, tmp_path: Path, qtbot, qloop) -> None:
        self.workspace = Workspace.at(tmp_path / "ws")
        self.settings_file = str(tmp_path / "kestrel-ui.ini")
        self.qtbot = qtbot
        self.qloop = qloop
        self.windows: list[MainWindow] = []

    def run(self, scenario: Callable[[], Awaitable[None]]) -> None:
        async def guarded() -> None:
            try:
                await scenario()
            finally:
                for window in list(self.windows):
                    await self.close(window)

        self.qloop.run_until_complete(guarded())

    async def open(
        self, *, paced: bool = False, speed: float | None = None, size: QSize | None = None,
        start_ms: int | None = None,
    ) -> MainWindow:
        prefs = UiPrefs(QSettings(self.settings_file, QSettings.Format.IniFormat))
        window = MainWindow(prefs, SecretStore(), interactive_errors=False)
        self.qtbot.addWidget(window)
        if size is not None:  # a screen of this size: the window opens filling it
            window.setWindowState(Qt.WindowState.WindowNoState)
            window.resize(size)
        window.show()
        await window.open_workspace(self.workspace, paced=paced, speed=speed, start_ms=start_ms)
        self.windows.append(window)
        return window

    async def settle(self, window: MainWindow) -> None:
        assert window.world is not None
        await asyncio.wait_for(window.world.agents.manager.wait_idle(), 30)

    async def close(self, window: MainWindow) -> None:
        window.close()
        await window.aclose()
        self.windows.remove(window)


def focus_back(window: QWidget) -> None:
    """Make ``window`` the active one again, as a desktop does when a dialog over it closes (the
    offscreen screen has no window manager to do it), so its shortcuts answer the next key."""
    with warnings.catch_warnings():  # deprecated for apps; a test's screen needs it
        warnings.simplefilter("ignore", DeprecationWarning)
        QApplication.setActiveWindow(window)


def on_screen(dock: QWidget) -> bool:
    """Whether a person sees the dock: shown, and not behind another panel's tab."""
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def send_mouse(
    widget: QWidget, kind: QEvent.Type, pos: QPoint,
    button: Qt.MouseButton = Qt.MouseButton.NoButton,
    buttons: Qt.MouseButton = Qt.MouseButton.NoButton,
) -> None:
    """A mouse event sent straight to ``widget`` (a chart's viewport), not through QTest: QTest's
    mouse functions spin Qt's loop inside the coroutine's step, and the qasync loop can lose the
    step (the test then waits forever)."""
    QApplication.sendEvent(widget, QMouseEvent(
        kind, QPointF(pos), QPointF(widget.mapToGlobal(pos)), button, buttons,
        Qt.KeyboardModifier.NoModifier))


def click(widget: QWidget, pos: QPoint, button: Qt.MouseButton) -> None:
    """Press and release ``button`` at ``pos`` (``send_mouse``'s way)."""
    send_mouse(widget, QEvent.Type.MouseButtonPress, pos, button, button)
    send_mouse(widget, QEvent.Type.MouseButtonRelease, pos, button)
