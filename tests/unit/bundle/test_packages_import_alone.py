"""Each package of the desktop imports on its own, first, in a fresh interpreter.

The bundle's builder imports every package of the app that way to find its modules; a package
that fails there leaves its modules out of the list (the Settings dialog's did, through
PySide6's import hook and pydantic's lazy imports), and a person's script or plugin importing it
first would fail the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import app.ui

UI = Path(app.ui.__file__).parent


def _packages() -> list[str]:
    found = ["app.ui"]
    for init in sorted(UI.rglob("__init__.py")):
        if init.parent != UI:
            found.append(".".join(init.parent.relative_to(UI.parent.parent).parts))
    return found


def test_every_desktop_package_imports_first_in_a_fresh_interpreter() -> None:
    packages = _packages()
    assert "app.ui.settings" in packages
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    running = {
        name: subprocess.Popen(  # noqa: S603 - this interpreter, a fixed import
            [sys.executable, "-c", f"import {name}"], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        for name in packages
    }
    failed = {}
    for name, process in running.items():
        _, err = process.communicate(timeout=300)
        if process.returncode != 0:
            failed[name] = err.strip().splitlines()[-1:]
    assert failed == {}
