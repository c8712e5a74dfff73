"""Everything below app/ui imports without Qt: the core must run headless and in tests."""

import pkgutil
import subprocess
import sys

import app

BLOCK_QT = """
import importlib, importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {'PySide6', 'pyqtgraph', 'qasync', 'shiboken6'}:
            raise ImportError('Qt is blocked in the core: ' + name)
sys.meta_path.insert(0, Block())
for name in sys.argv[1:]:
    importlib.import_module(name)
print('ok', len(sys.argv) - 1)
"""


def core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(app.__path__, "app."):
        if info.name.startswith("app.ui") or "tray" in info.name:
            continue
        names.append(info.name)
    return names


def test_every_core_module_imports_with_qt_unavailable():
    modules = core_modules()
    assert "app.tools.executor" in modules and "app.market.replay" in modules
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_QT, *modules], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"ok {len(modules)}"
