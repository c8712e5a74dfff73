"""The main window's layout: the docks around the chart, their default arrangement and sizes, and
the geometry and arrangement kept in QSettings between runs.

The window owns its docks (``MainWindow.docks``); this module builds them around the panels, lays
them out and saves or restores where the person left them, so the window itself only says when.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtCore import QByteArray, QSettings, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu, QScrollArea, QWidget

logger = logging.getLogger(__name__)

STATE_VERSION = 1
DEFAULT_SIZE = QSize(1600, 1000)


@dataclass(frozen=True, slots=True)
class DockSpec:
    key: str
    title: str
    area: Qt.DockWidgetArea
    shortcut: str


DOCKS = (
    DockSpec("agents", "Agents", Qt.DockWidgetArea.LeftDockWidgetArea, "Ctrl+3"),
    DockSpec("memory", "Memory", Qt.DockWidgetArea.LeftDockWidgetArea, "Ctrl+4"),
    DockSpec("chat", "Chat", Qt.DockWidgetArea.RightDockWidgetArea, "Ctrl+2"),
    DockSpec("book", "Order book", Qt.DockWidgetArea.BottomDockWidgetArea, "Ctrl+7"),
    DockSpec("account", "Account", Qt.DockWidgetArea.BottomDockWidgetArea, "Ctrl+5"),
    DockSpec("audit", "Tool calls", Qt.DockWidgetArea.BottomDockWidgetArea, "Ctrl+6"),
    DockSpec("notifications", "Notifications", Qt.DockWidgetArea.BottomDockWidgetArea,
             "Ctrl+8"),
)


def _share(total: int, fraction: float, low: int, high: int) -> int:
    return max(low, min(high, int(total * fraction)))


def scrolling(panel: QWidget, key: str) -> QScrollArea:
    """``panel`` in a frameless scroll area, as a dock's body.

    A dock is then allowed smaller than its panel's own minimum: on a small screen the panel
    scrolls inside its dock instead of pushing the window (and its status bar) past the screen.
    Where the dock has the room, the panel fills it and no scroll bar shows.
    """
    area = QScrollArea()
    area.setObjectName(f"scroll_{key}")
    area.setWidgetResizable(True)
    area.setFrameShape(QScrollArea.Shape.NoFrame)
    area.setWidget(panel)
    return area


def restore_geometry(window: QMainWindow, store: QSettings) -> None:
    """The size and place the window had when it last closed, else a first size that fits."""
    geometry = store.value("window/geometry")
    if not (isinstance(geometry, QByteArray) and window.restoreGeometry(geometry)):
        _fit_screen(window)


def _fit_screen(window: QMainWindow) -> None:
    """The first size: the default where the screen has room, else the whole screen
    (maximized where a window manager can do it, its available size where none does)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    room = screen.availableGeometry() if screen is not None else None
    if room is None or (room.width() >= DEFAULT_SIZE.width() + 40
                        and room.height() >= DEFAULT_SIZE.height() + 60):
        window.resize(DEFAULT_SIZE)
        return
    window.resize(DEFAULT_SIZE.boundedTo(room.size()))
    window.move(room.topLeft())
    window.setWindowState(window.windowState() | Qt.WindowState.WindowMaximized)


def build_docks(
    window: QMainWindow,
    panels: Mapping[str, QWidget],
    view_menu: QMenu,
    open_panel: Callable[[str], None],
) -> tuple[dict[str, QDockWidget], dict[str, QAction]]:
    """A dock for each of ``DOCKS`` around its panel, with its View menu toggle and shortcut.

    Returns:
        The docks and the shortcuts that show them, by panel key.
    """
    docks: dict[str, QDockWidget] = {}
    shortcuts: dict[str, QAction] = {}
    for spec in DOCKS:
        dock = QDockWidget(spec.title, window)
        dock.setObjectName(f"dock_{spec.key}")
        dock.setWidget(scrolling(panels[spec.key], spec.key))
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        docks[spec.key] = dock
        # the menu toggles a panel; its shortcut only ever shows and raises it, so a
        # panel behind a tab comes forward instead of being hidden (and the saved layout
        # never keeps a panel hidden by a key pressed to see it)
        toggle = dock.toggleViewAction()
        toggle.setText(f"{spec.title}\t{spec.shortcut}")
        view_menu.addAction(toggle)
        shortcut = QAction(f"Show {spec.title}", window)
        shortcut.setShortcut(QKeySequence(spec.shortcut))
        shortcut.triggered.connect(lambda _=False, key=spec.key: open_panel(key))
        window.addAction(shortcut)
        shortcuts[spec.key] = shortcut
    return docks, shortcuts


def default_arrangement(window: QMainWindow, docks: Mapping[str, QDockWidget]) -> None:
    for spec in DOCKS:
        window.addDockWidget(spec.area, docks[spec.key])
        docks[spec.key].show()
    # left: agents and memory; right: the chat, full height; below the chart: the account,
    # the tool calls and the notifications as tabs, with the order book beside them
    window.splitDockWidget(docks["account"], docks["book"], Qt.Orientation.Horizontal)
    window.tabifyDockWidget(docks["agents"], docks["memory"])
    window.tabifyDockWidget(docks["account"], docks["audit"])
    window.tabifyDockWidget(docks["audit"], docks["notifications"])
    docks["agents"].raise_()
    docks["account"].raise_()
    # sizes only take once the docks are laid out, after this event
    QTimer.singleShot(0, window, lambda: _default_sizes(window, docks))


def _default_sizes(window: QMainWindow, docks: Mapping[str, QDockWidget]) -> None:
    """Shares of the window, so the chart keeps the middle on a 1280x720 screen as on a
    large one: agents a quarter of the width, the chat under a third, the account and
    tool calls below the chart a little over a third of the height (at 1366x768, room for
    five or more rows of their tables)."""
    if not docks:
        return
    width, height = window.width(), window.height()
    window.resizeDocks([docks["agents"], docks["chat"]],
                       [_share(width, 0.24, 260, 400), _share(width, 0.29, 340, 470)],
                       Qt.Orientation.Horizontal)
    book = _share(width, 0.28, 330, 450)
    window.resizeDocks([docks["account"], docks["book"]], [width - book, book],
                       Qt.Orientation.Horizontal)
    window.resizeDocks([docks["account"]], [_share(height, 0.38, 200, 340)],
                       Qt.Orientation.Vertical)


def restore_layout(window: QMainWindow, store: QSettings) -> None:
    state = store.value("window/state")
    if isinstance(state, QByteArray) and not state.isEmpty():
        if window.restoreState(state, STATE_VERSION):
            QTimer.singleShot(0, lambda: window.restoreState(state, STATE_VERSION))
        else:
            logger.info("the saved window layout does not fit this version; using default")


def save_layout(window: QMainWindow, store: QSettings, *, docked: bool) -> None:
    """The window's geometry, and where its docks are once it has them (``docked``)."""
    store.setValue("window/geometry", window.saveGeometry())
    if docked:
        store.setValue("window/state", window.saveState(STATE_VERSION))
    store.sync()
