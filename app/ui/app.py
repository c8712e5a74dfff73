"""Start the desktop app: one QApplication, one qasync event loop, the main window, then the desk.

``asyncio.run(main(), loop_factory=QEventLoop)`` runs asyncio inside Qt's loop (qasync's own
pattern), so the agents, the tools and the window share one thread and one loop; nothing else
starts a loop. The window is shown before the workspace is opened, so a person sees it within the
first second; the heavy parts (pandas, the market data, the agents) load behind it. The app ends
when the window really closes (not when it hides to the tray), after the agents and the stores
have been shut down cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.ui.main_window import MainWindow
    from app.ui.settings.prefs import UiPrefs
    from app.workspace import Workspace

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_NO_DISPLAY = 3
DESKTOP_FILE = "kestrel"  # packaging/linux/kestrel.desktop


def has_display() -> bool:
    """False on a Linux without X11/Wayland and without an explicit Qt platform (e.g. CI)."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
                or os.environ.get("QT_QPA_PLATFORM"))


def icon_path() -> Path:
    """Kestrel's icon (the PNG: it needs no SVG plug-in to be read)."""
    from app.resources import resource_path

    return resource_path("icons", "kestrel.png")


def make_application(
    *, reset_layout: bool = False, prefs: UiPrefs | None = None
) -> tuple[QApplication, UiPrefs]:
    """The QApplication with Kestrel's names, icon, theme and preferences (created once).

    Args:
        prefs: the preferences to use; default: this desktop user's.
    """
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from app.ui.settings.prefs import APPLICATION, ORGANISATION, UiPrefs
    from app.ui.theme import apply_theme

    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    app.setOrganizationName(ORGANISATION)
    app.setApplicationName(APPLICATION)
    app.setDesktopFileName(DESKTOP_FILE)  # the menu entry the window belongs to
    icon = icon_path()
    if icon.is_file():
        app.setWindowIcon(QIcon(str(icon)))
    else:
        logger.warning("Kestrel's icon %s is missing; the window has none", icon)
    app.setQuitOnLastWindowClosed(False)  # the window may hide to the tray; main() decides
    prefs = prefs if prefs is not None else UiPrefs()
    if reset_layout:
        prefs.store.remove("window")
    apply_theme(app, prefs.theme)
    _collect_on_the_gui_thread(app)
    return app, prefs


def _collect_on_the_gui_thread(app: QApplication) -> None:
    """Run Python's cycle collector only on the GUI thread, from a timer.

    The agents' tools and the panels' reads run in worker threads; left automatic, a collection
    could start in one of them and destroy a Qt object there, which crashes Qt. pyqtgraph's
    collector disables automatic collection and collects on a timer instead (generation by
    generation, as the thresholds would).
    """
    from pyqtgraph.util.garbage_collector import GarbageCollector

    if not hasattr(app, "_kestrel_gc"):
        app._kestrel_gc = GarbageCollector(interval=1.0)  # type: ignore[attr-defined]


def show_window(prefs: UiPrefs) -> MainWindow:
    """The main window's shell, shown: what a person sees before the workspace is open."""
    from app.secrets import SecretStore
    from app.ui.main_window import MainWindow

    window = MainWindow(prefs, SecretStore())
    window.show()
    return window


async def open_or_explain(
    window: MainWindow,
    workspace: Workspace,
    *,
    data_files: Sequence[Path] = (),
    speed: float | None = None,
    venue_kind: str | None = None,
    exchange: str | None = None,
    venue: Any = None,
    start_ms: int | None = None,
) -> QMessageBox | None:
    """Open ``workspace`` in the window; when it cannot be, say why in a dialog and stay open.

    A workspace another process writes, or whose database is damaged, is a known refusal (a
    person must act: close the other one, restore a backup), not a crash report. A live market
    out of reach is said in the window itself, with Retry and (paper on live quotes) the
    offline replay (``MainWindow.show_open_failure``).
    """
    from app.domain.errors import OperationalError

    try:
        await window.open_workspace(workspace, data_files=data_files, speed=speed,
                                    venue_kind=venue_kind, exchange=exchange, venue=venue,
                                    start_ms=start_ms)
        logger.info("desk open: %s", window.describe())
    except OperationalError as exc:
        logger.warning("cannot open the workspace %s: %s", workspace.root, exc)
        if window.opening_live:  # the market is out of reach: try again, or the replay
            def again() -> Any:
                return open_or_explain(window, workspace, data_files=data_files, speed=speed,
                                       venue_kind=venue_kind, exchange=exchange, venue=venue)

            def replay() -> Any:
                return open_or_explain(window, workspace, data_files=data_files, speed=speed,
                                       venue_kind="replay")

            window.show_open_failure(workspace, exc, retry=again,
                                     replay=None if venue is not None and venue.kind == "live"
                                     else replay)
            return None
        return show_cannot_open(window, workspace, exc)
    except Exception as exc:  # noqa: BLE001 - shown in the window; it stays open to say so
        logger.exception("cannot open the workspace %s", workspace.root)
        window.errors.report(f"Cannot open the workspace {workspace.root}: {exc}", repr(exc))
    return None


def show_cannot_open(window: MainWindow, workspace: Workspace, exc: Exception) -> QMessageBox:
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox(window)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Kestrel cannot open this workspace")
    why = str(exc)
    box.setText(f"Kestrel cannot open the workspace {workspace.root}.\n\n"
                f"{why[:1].upper()}{why[1:]}")
    box.setStandardButtons(QMessageBox.StandardButton.Ok)
    box.open()
    return box


def run_gui(
    workspace: Path | None = None,
    *,
    data_files: list[Path] | None = None,
    speed: float | None = None,
    reset_layout: bool = False,
    venue_kind: str | None = None,
    exchange: str | None = None,
    venue: Any = None,
    start_ms: int | None = None,
) -> int:
    """Open the window on ``workspace`` (default: this checkout's or the platform's), on the
    offline replay or the ``venue`` given (a ``VenueSpec``: a live market or account)."""
    if not has_display():
        print(
            "kestrel: there is no display to open the window on (DISPLAY is not set). Run "
            "'kestrel demo' for the terminal demo, 'kestrel chat' to talk to the agents, or set "
            "QT_QPA_PLATFORM=offscreen.",
            file=sys.stderr,
        )
        return EXIT_NO_DISPLAY
    _app, prefs = make_application(reset_layout=reset_layout)

    import qasync

    async def main() -> int:
        from app.workspace import Workspace

        window = show_window(prefs)
        window.errors.install(asyncio.get_running_loop())
        closed = asyncio.Event()
        window.closed.connect(closed.set)
        chosen = Workspace.at(workspace) if workspace is not None else Workspace.default()
        await open_or_explain(window, chosen, data_files=data_files or (), speed=speed,
                              venue_kind=venue_kind, exchange=exchange, venue=venue,
                              start_ms=start_ms)
        await closed.wait()
        await window.aclose()
        return EXIT_OK

    return asyncio.run(main(), loop_factory=qasync.QEventLoop)
