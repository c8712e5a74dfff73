"""``kestrel --self-test``: what a new user's first launch does, checked without a person.

It opens the desk offscreen (no display needed) on a fresh temporary workspace with its own
window preferences, so nothing of the user's is read or changed; the offline demo starts as on a
first launch (the bundled candles at 600x, the rule-engine agents), and the test waits for the
demo's first fill. It then checks that the window carries Kestrel's icon and, inside a bundle,
that everything the build promised is there: each lazily imported module imports (ccxt, the
Telegram bot, the MCP SDK, the tokenizer...) and each resource file exists. Every step prints
one line; the first failure ends it with ``kestrel self-test: FAILED: ...`` on standard error and
exit code 1. Everything, the opening included, must finish within the timeout.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.ui.main_window import MainWindow
    from app.workspace import Workspace

EXIT_PASSED = 0
EXIT_FAILED = 1
DEFAULT_TIMEOUT_S = 180.0
DEMO_SPEED = 600.0
POLL_S = 0.1
PREFIX = "kestrel self-test"


class SelfTestFailed(Exception):
    """A step failed; the message says which and why."""


@dataclass
class Deadline:
    """The time the whole self-test has left."""

    seconds: float
    started: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


def _say(text: str) -> None:
    print(f"{PREFIX}: {text}", flush=True)


async def check_desk(
    window: MainWindow, workspace: Workspace, deadline: Deadline,
    say: Callable[[str], None] = _say,
) -> str:
    """Open ``workspace`` (fresh: the offline demo) in ``window`` and wait for the first fill;
    returns the fill in words.

    Raises:
        SelfTestFailed: the desk did not open, reported an error, or no order filled in time.
    """
    from app.domain.clock import ms_to_iso
    from app.domain.errors import KestrelError
    from app.domain.numbers import plain

    try:
        await asyncio.wait_for(window.open_workspace(workspace, speed=DEMO_SPEED),
                               max(deadline.left(), 0.001))
    except TimeoutError:
        raise SelfTestFailed(f"the desk did not open the workspace {workspace.root} within "
                             f"{deadline.seconds:g} s") from None
    except KestrelError as exc:
        raise SelfTestFailed(f"the desk cannot open the workspace {workspace.root}: {exc}") from exc
    world = window.world
    assert world is not None
    banner = window.banner.text() if window.banner is not None else ""
    if "Offline replay" not in banner:
        raise SelfTestFailed(f"the desk did not open on the offline demo; its banner says "
                             f"{_plain_text(banner)!r}")
    say(f"desk open offscreen on the fresh workspace {workspace.root} after "
        f"{deadline.elapsed():.1f} s: {_plain_text(banner).split('. ', 1)[0]}")
    start_ms = world.venue.clock.now_ms()
    while True:
        _raise_reported(window)
        fills = world.ledger.fills(limit=1)
        if fills:
            fill = fills[0]
            return (f"{fill.side.value} {plain(fill.quantity)} {fill.symbol} at "
                    f"{plain(fill.price)} (market time {ms_to_iso(fill.time_ms)})")
        if deadline.left() <= 0:
            agents = ", ".join(f"{a.name} {a.state.value}"
                               for a in world.agents.manager.list_agents()) or "none"
            raise SelfTestFailed(
                f"no order filled within {deadline.seconds:g} s; the replay reached "
                f"{ms_to_iso(world.venue.clock.now_ms())} from {ms_to_iso(start_ms)}; agents: "
                f"{agents}")
        await asyncio.sleep(POLL_S)


def _raise_reported(window: MainWindow) -> None:
    """An error the window reported (it would show it to a person) fails the test."""
    if window.errors.reports:
        summary, details = window.errors.reports[0]
        raise SelfTestFailed(f"the window reported an error: {summary} ({details[-500:]})")
    live = window.live
    if live is not None and live.errors:
        raise SelfTestFailed(f"the window's market views failed: {live.errors[0]}")


def _plain_text(html: str) -> str:
    import re

    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def check_icon() -> str:
    """The application's window icon: Kestrel's, loaded.

    Raises:
        SelfTestFailed: it is missing or could not be read.
    """
    from PySide6.QtWidgets import QApplication

    from app.ui.app import icon_path

    icon = QApplication.windowIcon()
    path = icon_path()
    if icon.isNull() or not icon.availableSizes():
        raise SelfTestFailed(f"the window has no icon: {path} "
                             f"{'could not be read' if path.is_file() else 'is missing'}")
    size = max(icon.availableSizes(), key=lambda s: s.width())
    return f"window icon {path.name} ({size.width()}x{size.height()})"


def check_bundle(manifest: Path) -> str:
    """Inside a bundle: every module the build collected for a lazy import imports, and every
    resource file it listed is there.

    Raises:
        SelfTestFailed: the manifest is unreadable, a module does not import or a file is
            missing (all of them named).
    """
    from app.resources import resource_path

    try:
        promised = json.loads(manifest.read_text(encoding="utf-8"))
        modules, resources = list(promised["lazy_imports"]), list(promised["resources"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SelfTestFailed(f"the bundle's manifest {manifest} cannot be read: {exc}") from exc
    problems = [f"resource {name} is missing" for name in resources
                if not resource_path(*name.split("/")).is_file()]
    for module in modules:
        try:
            importlib.import_module(module)  # bundle-scan: ignore (the build's own list)
        except Exception as exc:  # noqa: BLE001 - each failure is named
            problems.append(f"{module} does not import ({type(exc).__name__}: {exc})")
    if problems:
        raise SelfTestFailed("the bundle is incomplete: " + "; ".join(problems))
    return (f"bundle complete: {len(resources)} resource files, {len(modules)} lazily imported "
            f"modules import ({', '.join(modules)})")


def check_tokenizer() -> str:
    """The cl100k tokenizer's vocabulary is loaded (not the approximation).

    Raises:
        SelfTestFailed: it could not be loaded.
    """
    from app.agents.llm.tokens import tokenizer_name

    name = tokenizer_name()
    if name != "cl100k_base":
        raise SelfTestFailed(f"the cl100k_base tokenizer could not be loaded ({name})")
    return f"tokenizer {name} loaded"


def run_self_test(timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    """The whole self-test in this process; returns the exit code."""
    if timeout_s <= 0:
        print(f"{PREFIX}: --self-test-timeout must be positive, got {timeout_s:g}",
              file=sys.stderr)
        return 2
    os.environ["QT_QPA_PLATFORM"] = "offscreen"  # the desk opens without a display
    deadline = Deadline(timeout_s)
    with tempfile.TemporaryDirectory(prefix="kestrel-self-test-",
                                     ignore_cleanup_errors=True) as folder:
        try:
            _run(Path(folder), deadline)
        except SelfTestFailed as exc:
            print(f"{PREFIX}: FAILED: {exc}", file=sys.stderr, flush=True)
            return EXIT_FAILED
    _say(f"passed in {deadline.elapsed():.1f} s")
    return EXIT_PASSED


# what the offscreen platform says of itself: it has no window manager to size, raise or
# activate windows (said on every layout change, and of no concern to the test)
OFFSCREEN_NOTES = ("does not support propagateSizeHints", "does not support raise",
                   "does not support activateWindow")


def _quiet_offscreen_notes() -> None:
    """Qt's messages go to standard error as before, but for ``OFFSCREEN_NOTES``."""
    from PySide6.QtCore import qFormatLogMessage, qInstallMessageHandler

    def handler(kind: object, context: object, message: str) -> None:
        if not any(note in message for note in OFFSCREEN_NOTES):
            print(qFormatLogMessage(kind, context, message), file=sys.stderr)

    qInstallMessageHandler(handler)


def _run(folder: Path, deadline: Deadline) -> None:
    from PySide6.QtCore import QSettings

    from app.resources import bundle_manifest
    from app.ui.app import make_application
    from app.ui.settings.prefs import UiPrefs

    # the window's layout and preferences go to a file of the test, not the user's
    prefs = UiPrefs(QSettings(str(folder / "kestrel-ui.ini"), QSettings.Format.IniFormat))
    _quiet_offscreen_notes()
    _app, prefs = make_application(prefs=prefs)
    import qasync

    async def main() -> None:
        from app.secrets import SecretStore
        from app.ui.main_window import MainWindow
        from app.workspace import Workspace

        window = MainWindow(prefs, SecretStore(), interactive_errors=False)
        try:
            window.show()
            fill = await check_desk(window, Workspace.at(folder / "workspace"), deadline)
            _say(f"first fill after {deadline.elapsed():.1f} s: {fill}")
        finally:
            window.close()
            await window.aclose()

    asyncio.run(main(), loop_factory=qasync.QEventLoop)
    _say(check_icon())
    _say(check_tokenizer())
    manifest = bundle_manifest()
    if manifest is not None:
        _say(check_bundle(manifest))
    if deadline.left() <= 0:
        raise SelfTestFailed(f"it took {deadline.elapsed():.1f} s, more than the "
                             f"{deadline.seconds:g} s allowed")
