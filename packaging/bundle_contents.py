"""What the bundle must hold, derived from the code and ``resources/`` themselves.

``kestrel.spec`` builds from ``plan()`` and nothing else, so nothing here is a hand-kept list of
what the app uses:

- every file under ``resources/`` (the price table, the training cutoffs, prompts, templates,
  market data, icons...), at the same place under the bundle's ``resources/``;
- every package the app imports lazily: inside a function (optional features: ccxt for live
  markets, python-telegram-bot, the MCP SDK, tiktoken's offline vocabulary, pandas-ta...) or
  through ``importlib.import_module``. PyInstaller follows the import statement it sees, but such
  packages load their own parts by name at run time (ccxt's exchanges, tiktoken's encodings,
  python-telegram-bot's extensions), so each is collected whole: submodules, data files and
  its distribution's metadata;
- the plug-ins a bundled package finds through entry points named after it (keyring's
  backends: the Secret Service and KWallet are found that way);
- the Qt modules: only those the app imports, and those loaded when every module of the app is
  imported (pyqtgraph's plot items need QtOpenGL, which the app never names); every other
  installed ``PySide6.Qt*`` module (WebEngine, Qml/Quick, 3D, Multimedia, Designer... when
  installed) is excluded.
- Qt's translations only when the app loads them (a ``QTranslator``); and ``strip_debug_info``
  takes the debug information out of the binaries that carry it, once the bundle is made.

A dynamic import whose module name is not written as string literals cannot be seen, so
``lazy_imports`` refuses it (``UnresolvedImport``) instead of building a bundle without it;
a call that only imports what the bundle holds anyway (the self-test importing the modules the
build listed) says so with ``# bundle-scan: ignore`` on its line.

Pure Python on purpose (no PyInstaller import): ``tests/unit/bundle/test_bundle_contents.py``
checks it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

APP_PACKAGE = "app"
DYNAMIC_IMPORTERS = frozenset({"importlib.import_module", "import_module", "__import__"})
IGNORE = "# bundle-scan: ignore"

# Not used by the app at run time although something it bundles may mention them: Tk (the app
# is Qt), the test and benchmark tools of the dev extra, PySide6's developer tools, and uvloop
# (an optional event loop anyio and uvicorn use only when asked; the app runs asyncio's and
# Qt's loops). ``plan`` refuses to build when the app itself imports one of them.
UNUSED = ("tkinter", "_tkinter", "pytest", "_pytest", "hypothesis", "talib", "backtesting",
          "backtrader", "IPython", "uvloop", "PySide6.scripts")
QT_PACKAGE = "PySide6"
# Qt's own translations (its dialogs in other languages), loaded only through a QTranslator
QT_TRANSLATIONS = "PySide6/Qt/translations/"
# Shared libraries are not data: those a package needs reach the bundle as the binaries its
# extension modules link (PySide6's data files would otherwise bring every Qt library).
BINARY_FILES = ("**/*.so", "**/*.so.*", "**/*.dylib", "**/*.dll")
# Parts of a package collected whole that the app never runs: its test suite, examples and own
# command line (the MCP SDK's needs typer, which is not installed). Collecting them would import
# them at build time; whatever the app does import from them PyInstaller still follows.
NOT_RUNTIME = frozenset({"tests", "test", "testing", "examples", "benchmarks", "cli",
                         "__main__"})


class UnresolvedImport(ValueError):
    """A dynamic import whose module cannot be read from the source."""


@dataclass(frozen=True, order=True)
class LazyImport:
    module: str  # the dotted name imported, e.g. "ccxt.async_support"
    where: str  # "app/ccxt/client.py:49"

    @property
    def root(self) -> str:
        return self.module.split(".", 1)[0]


@dataclass
class Plan:
    """What ``kestrel.spec`` collects."""

    datas: list[tuple[str, str]]  # (source file, folder in the bundle)
    lazy: list[LazyImport]
    # third-party modules the app's lazily loaded modules import at their top (the LLM SDKs of
    # the provider modules...): PyInstaller follows them; the self-test checks they import
    optional: list[LazyImport]
    lazy_roots: list[str]  # third-party top-level packages imported lazily: collected whole
    # (PySide6 is not among them: the Qt modules the app imports are ``qt_used``)
    entry_point_modules: list[str]  # plug-ins found through entry points of bundled packages
    distributions: list[str]  # whose metadata the bundle carries (entry points, versions)
    qt_used: list[str]
    excludes: list[str]
    qt_translations: bool = False  # whether the app loads Qt's translations (a QTranslator)
    resources: list[str] = field(default_factory=list)  # paths under resources/, for checks

    def manifest(self) -> dict[str, object]:
        """What the bundle says it holds; ``kestrel --self-test`` checks it in the bundle."""
        modules = sorted({i.module for i in self.lazy if i.root in self.lazy_roots}
                         | {i.module for i in self.optional}
                         | set(self.qt_used) | set(self.entry_point_modules))
        return {"lazy_imports": modules, "resources": self.resources}


# -- reading the code ------------------------------------------------------------------------


def _dotted(node: ast.expr) -> str:
    """``importlib.import_module`` for that call's function; "" for anything but names."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return f"{owner}.{node.attr}" if owner else ""
    return ""


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _strings(node: ast.expr) -> list[str] | None:
    """The strings an expression can evaluate to, when it is made only of string literals
    (``"a"``, ``"a" if x else "b"``, ``x and "a" or "b"``); else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = _strings(node.body), _strings(node.orelse)
        return None if body is None or orelse is None else body + orelse
    if isinstance(node, ast.BoolOp):
        found: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Name | ast.Compare | ast.Call | ast.Attribute):
                continue  # a condition, not a name
            strings = _strings(value)
            if strings is None:
                return None
            found += strings
        return found or None
    return None


def _assigned_strings(scope: ast.AST, name: str) -> list[str] | None:
    """What ``name`` may hold in ``scope``, when every assignment to it is string literals."""
    found: list[str] = []
    for node in ast.walk(scope):
        value = None
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and node.target.id == name):
            value = node.value
        if value is None:
            continue
        strings = _strings(value)
        if strings is None:
            return None
        found += strings
    return found or None


class _Finder(ast.NodeVisitor):
    def __init__(self, where: str, lines: list[str]) -> None:
        self.where = where
        self.lines = lines
        self.depth = 0  # functions the walk is inside
        self.scopes: list[ast.AST] = []
        self.found: list[tuple[str, bool, int]] = []  # (module, lazy, line)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.depth += 1
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function  # noqa: N815

    def visit_If(self, node: ast.If) -> None:  # noqa: N802 - ast's name
        if _is_type_checking(node.test):
            for child in node.orelse:  # the TYPE_CHECKING body never runs
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:  # noqa: N802
        for alias in node.names:
            self.found.append((alias.name, self.depth > 0, node.lineno))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:  # noqa: N802
        if node.level == 0 and node.module:
            self.found.append((node.module, self.depth > 0, node.lineno))
            if node.module.split(".", 1)[0] == APP_PACKAGE:  # a name may be a submodule
                self.found += [(f"{node.module}.{alias.name}", self.depth > 0, node.lineno)
                               for alias in node.names if alias.name != "*"]

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        dynamic = _dotted(node.func) in DYNAMIC_IMPORTERS and node.args
        if dynamic and IGNORE not in self.lines[node.lineno - 1]:
            argument = node.args[0]
            names = _strings(argument)
            if names is None and isinstance(argument, ast.Name):
                names = _assigned_strings(self.scopes[-1] if self.scopes else ast.Module(),
                                          argument.id)
            if not names:
                raise UnresolvedImport(
                    f"{self.where}:{node.lineno}: {ast.unparse(node)} imports a module whose "
                    "name is not written as string literals, so the bundle cannot know to "
                    "include it; name the module(s) with string literals in that function")
            for name in names:
                self.found.append((name, True, node.lineno))
        self.generic_visit(node)


Found = tuple[str, bool, str]  # (module, lazy, where)


def imports(package_dir: Path) -> list[Found]:
    """Every absolute import of every module under ``package_dir``: (module, lazy, where).

    ``lazy``: made inside a function, or through ``importlib.import_module`` / ``__import__``.
    Imports under ``if TYPE_CHECKING:`` are left out: they never run.

    Raises:
        UnresolvedImport: a dynamic import whose module name is not string literals.
        SyntaxError: a module does not parse.
    """
    found: list[Found] = []
    for path in sorted(package_dir.rglob("*.py")):
        where = path.relative_to(package_dir.parent).as_posix()
        source = path.read_text(encoding="utf-8")
        finder = _Finder(where, source.splitlines())
        finder.visit(ast.parse(source, filename=str(path)))
        found += [(module, lazy, f"{where}:{line}") for module, lazy, line in finder.found]
    return found


def _third_party(module: str) -> bool:
    root = module.split(".", 1)[0]
    return root != APP_PACKAGE and root not in sys.stdlib_module_names


def lazy_imports(package_dir: Path, found: Sequence[Found] | None = None) -> list[LazyImport]:
    """The third-party modules the app imports lazily, with where, sorted (from ``found``, what
    ``imports`` returned, when given)."""
    found = imports(package_dir) if found is None else found
    return sorted({LazyImport(module, where) for module, lazy, where in found
                   if lazy and _third_party(module)})


def _module_of(where: str) -> str:
    """``app.x.y`` for ``app/x/y.py:12``; ``app.x`` for ``app/x/__init__.py:3``."""
    return where.rsplit(":", 1)[0].removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def optional_imports(package_dir: Path, found: Sequence[Found] | None = None) -> list[LazyImport]:
    """The third-party modules imported at the top of the app's modules that the app itself
    imports lazily: an optional feature's dependencies (the LLM SDKs of the provider modules,
    python-telegram-bot of the bot), loaded only when that feature is used, so only a run that
    uses it would find one missing."""
    found = imports(package_dir) if found is None else found
    loaded_lazily = {module for module, lazy, _where in found
                     if lazy and module.split(".", 1)[0] == APP_PACKAGE}
    return sorted({LazyImport(module, where) for module, lazy, where in found
                   if not lazy and _third_party(module) and _module_of(where) in loaded_lazily})


def qt_modules_used(package_dir: Path, found: Sequence[Found] | None = None) -> list[str]:
    """The ``PySide6.Qt*`` modules the app imports (statically or lazily)."""
    used = set()
    for module, _lazy, _where in imports(package_dir) if found is None else found:
        parts = module.split(".")
        if parts[0] == QT_PACKAGE and len(parts) > 1 and parts[1].startswith("Qt"):
            used.add(f"{QT_PACKAGE}.{parts[1]}")
    return sorted(used)


# -- reading what is installed ---------------------------------------------------------------

_LOADED_QT = """
import importlib, json, pkgutil, sys
import app
for found in pkgutil.walk_packages(app.__path__, "app."):
    importlib.import_module(found.name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith("PySide6.Qt"))))
"""


def qt_modules_loaded(repo_root: Path, python: str = sys.executable) -> list[str]:
    """The ``PySide6.Qt*`` modules loaded once every module of the app is imported (in a
    child process of ``python``, offscreen): the app's own and those its Qt libraries import.

    Raises:
        RuntimeError: a module of the app does not import (its error included).
    """
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(  # noqa: S603 - the build's own interpreter on the checkout's app
        [python, "-c", _LOADED_QT], cwd=repo_root, env=env, capture_output=True, text=True,
        timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError("importing every module of the app failed, so the Qt modules it "
                           f"needs are unknown:\n{done.stderr[-3000:]}")
    return list(json.loads(done.stdout.strip().splitlines()[-1]))



def loads_qt_translations(package_dir: Path) -> bool:
    """Whether the app loads Qt's translations: only a ``QTranslator`` does, so without one the
    bundle leaves ``QT_TRANSLATIONS`` out."""
    return any("QTranslator" in path.read_text(encoding="utf-8")
               for path in package_dir.rglob("*.py"))


def installed_qt_modules() -> list[str]:
    """Every ``PySide6.Qt*`` module (extension or package) installed, e.g. ``PySide6.QtQml``."""
    spec = importlib.util.find_spec(QT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return []
    names = set()
    for folder in spec.submodule_search_locations:
        for entry in Path(folder).iterdir():
            name = entry.name.split(".", 1)[0]
            is_module = entry.suffix in (".so", ".pyd", ".py") or (entry / "__init__.py").is_file()
            if name.startswith("Qt") and is_module:
                names.add(f"{QT_PACKAGE}.{name}")
    return sorted(names)


def distributions_of(roots: Iterable[str]) -> list[str]:
    """The installed distributions that provide these top-level packages."""
    providers = importlib.metadata.packages_distributions()
    return sorted({dist for root in roots for dist in providers.get(root, [])})


def entry_point_plugins(roots: Iterable[str]) -> tuple[list[str], list[str]]:
    """Modules registered under entry-point groups named after one of ``roots`` (e.g.
    ``keyring.backends``), and the distributions registering them: (modules, distributions)."""
    wanted = set(roots)
    modules, dists = set(), set()
    for dist in importlib.metadata.distributions():
        for entry in dist.entry_points:
            owner = entry.group.replace("_", ".").split(".", 1)[0]
            if owner in wanted and "." in entry.group:
                modules.add(entry.module)
                dists.add(dist.metadata["Name"])
    return sorted(modules), sorted(dists)


# -- the plan ---------------------------------------------------------------------------------


# -- stripping --------------------------------------------------------------------------------
# Some binaries come with their debug information (numba's LLVM: 25 MB of its 130; libpython: 22
# of 30), which nobody running the bundle uses. Stripping every binary (PyInstaller's strip=True)
# breaks those a wheel repair tool rewrote (auditwheel's patchelf: numpy's C extensions no longer
# load), so only the debug information goes, and only from binaries no such tool touched: their
# library search path does not name $ORIGIN, which is what the repair writes.

_SECTION = struct.Struct("<IIQQQQIIQQ")  # an ELF64 section header
_SHT_DYNAMIC = 6
_DT_RPATH, _DT_RUNPATH = 15, 29


def _elf_sections(handle: object) -> list[tuple[str, tuple[int, ...]]] | None:
    """The sections (name, header) of a 64-bit little-endian ELF file, or None for another file."""
    read, seek = handle.read, handle.seek  # type: ignore[attr-defined]
    ident = read(64)
    if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", ident, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
    if not shoff or shentsize != _SECTION.size or shstrndx >= shnum:
        return None
    seek(shoff)
    headers = [_SECTION.unpack(read(_SECTION.size)) for _ in range(shnum)]
    names_header = headers[shstrndx]
    seek(names_header[4])
    names = read(names_header[5])
    return [(names[h[0]:names.index(b"\0", h[0])].decode(errors="replace"), h)
            for h in headers]


def strippable(path: Path) -> bool:
    """Whether ``path`` is an ELF binary carrying debug information (a ``.debug_info``
    section) whose library search path does not name ``$ORIGIN`` (no wheel repair rewrote it)."""
    with path.open("rb") as handle:
        sections = _elf_sections(handle)
        if sections is None or not any(name == ".debug_info" for name, _h in sections):
            return False
        for _name, header in sections:
            if header[1] != _SHT_DYNAMIC or header[6] >= len(sections):
                continue
            strings = sections[header[6]][1]
            handle.seek(header[4])
            dynamic = handle.read(header[5])
            for tag, value in struct.iter_unpack("<qQ", dynamic[:len(dynamic) // 16 * 16]):
                if tag in (_DT_RPATH, _DT_RUNPATH):
                    handle.seek(strings[4] + value)
                    if b"$ORIGIN" in handle.read(4096).split(b"\0", 1)[0]:
                        return False
    return True


def strip_debug_info(folder: Path, strip: str | None = None) -> tuple[list[Path], int]:
    """Remove the debug information of every ``strippable`` binary under ``folder`` with
    binutils' ``strip --strip-debug``; returns the files stripped and the bytes saved (none
    when ``strip`` is not installed).

    Raises:
        subprocess.CalledProcessError: strip failed on a file.
    """
    strip = strip or shutil.which("strip")
    if strip is None:
        return [], 0
    stripped, saved = [], 0
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file() or not strippable(path):
            continue
        before = path.stat().st_size
        subprocess.run([strip, "--strip-debug", str(path)], check=True)  # noqa: S603
        stripped.append(path)
        saved += before - path.stat().st_size
    return stripped, saved


def resource_files(resources: Path) -> list[Path]:
    """Every file under ``resources/`` (caches left out), sorted."""
    if not resources.is_dir():
        raise FileNotFoundError(f"{resources} does not exist: the bundle needs its resources")
    return sorted(p for p in resources.rglob("*") if p.is_file()
                  and "__pycache__" not in p.parts and p.suffix != ".pyc")


def excluded(module: str, excludes: Iterable[str]) -> bool:
    """Whether ``module`` is one of ``excludes`` or inside one."""
    return any(module == e or module.startswith(e + ".") for e in excludes)


def collected(module: str, excludes: Iterable[str]) -> bool:
    """Whether a submodule of a package collected whole goes into the bundle."""
    return not excluded(module, excludes) and not NOT_RUNTIME & set(module.split(".")[1:])


def plan(repo_root: Path, python: str = sys.executable) -> Plan:
    """What the bundle of the checkout at ``repo_root`` must hold (``python``: the build's
    interpreter, which imports the app to see the Qt modules it loads).

    Raises:
        UnresolvedImport: a dynamic import the bundle cannot follow.
        ValueError: the app imports a module ``UNUSED`` leaves out.
        RuntimeError: a module of the app does not import.
        FileNotFoundError: no ``resources/`` folder.
    """
    package_dir = repo_root / APP_PACKAGE
    resources = repo_root / "resources"
    files = resource_files(resources)
    datas = [(str(p), (Path("resources") / p.parent.relative_to(resources)).as_posix())
             for p in files]
    found = imports(package_dir)
    unused = [(module, where) for module, _lazy, where in found if excluded(module, UNUSED)]
    if unused:
        module, where = unused[0]
        raise ValueError(f"{where} imports {module}, which bundle_contents.UNUSED leaves out "
                         "of the bundle as unused: take it off that list")
    lazy = lazy_imports(package_dir, found)
    qt_used = sorted({*qt_modules_used(package_dir, found),
                      *qt_modules_loaded(repo_root, python)})
    excludes = sorted({*UNUSED, *(m for m in installed_qt_modules() if m not in qt_used)})
    lazy_roots = sorted({i.root for i in lazy} - {QT_PACKAGE})
    optional = [i for i in optional_imports(package_dir, found)
                if not excluded(i.module, excludes)]
    static_roots = {module.split(".", 1)[0] for module, _lazy, _where in found
                    if _third_party(module)}
    plugins, plugin_dists = entry_point_plugins(static_roots | set(lazy_roots))
    plugins = [m for m in plugins if not excluded(m, excludes)]
    return Plan(
        datas=datas, lazy=lazy, optional=optional, lazy_roots=lazy_roots,
        entry_point_modules=plugins,
        distributions=sorted({*distributions_of(lazy_roots), *plugin_dists}),
        qt_used=qt_used, excludes=excludes,
        resources=[p.relative_to(resources).as_posix() for p in files],
        qt_translations=loads_qt_translations(package_dir),
    )


def main() -> None:
    """``python packaging/bundle_contents.py``: print the plan (what a build would collect)."""
    root = Path(__file__).resolve().parent.parent
    found = plan(root)
    print(f"resources ({len(found.resources)} files): {', '.join(found.resources)}")
    print("lazily imported packages, collected whole:")
    for package in found.lazy_roots:
        places = sorted({i.where for i in found.lazy if i.root == package})
        print(f"  {package}: {', '.join(places[:3])}{' ...' if len(places) > 3 else ''}")
    optional = sorted({i.module for i in found.optional})
    print(f"imported by lazily loaded modules of the app: {', '.join(optional)}")
    print(f"entry-point plug-ins: {', '.join(found.entry_point_modules) or '(none)'}")
    print(f"metadata of: {', '.join(found.distributions)}")
    print(f"Qt modules used (by the app and the Qt libraries it uses): "
          f"{', '.join(found.qt_used)}")
    print(f"excluded: {', '.join(found.excludes)}")
    print(f"Qt's translations: {'kept' if found.qt_translations else 'left out (no QTranslator)'}")


if __name__ == "__main__":
    main()
