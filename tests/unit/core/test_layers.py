"""The drawing of the code, executable: runtime -> ports <- adapters, and no layer reaching up.

Every module under ``app/`` is parsed (``ast``, nothing imported) and every import it makes is
collected, wherever it stands (top of the file, inside a function, under ``TYPE_CHECKING``): a
lazy or type-only import still ties the lower layer to the upper one. The rules:

- agents hold agents: they never import the runtime (composition, replay loop, backtest runners),
  the CLI or the backtest package; the backtest package's pure pieces never import agents;
- app/store depends on the domain only (not tools, not risk); the paper broker (app/exchange)
  never imports the risk package; app/config imports nothing above the domain;
- order entry (app/trading: ``OrderEntry``, the Broker port) is typed against the port: it never
  imports an adapter (app/exchange, app/ccxt), the tools or a front; the layers it is built on
  (domain, config, store, risk, market, indicators, memory, orchestration) never import it;
- only the runtime imports the live adapter (app/ccxt); the window imports no adapter package
  at all, and reaches a live account's reconciliation and grants through ``Venue.live``;
- a tool result is read back by the protocol package (app/tools/protocol/result.py): Telegram
  never reaches into the rule engine for it;
- only app/ui imports Qt;
- only the fronts (ui, cli, telegram, and the sweep, which runs the runtime's backtests once per
  cell) and the runtime itself import app/runtime: a lower layer that needs the world is upside
  down;
- the venue adapters (ReplayMarketData, PaperBroker, ReplayClock, CcxtMarketData, CcxtBroker) are
  named only by the runtime, which composes them, and by their own homes; everything else is typed
  against the ports (Clock, MarketData, Broker), so a new venue needs no edit outside the runtime;
  and no code asks ``isinstance(x, <adapter>)`` anywhere;
- the packages form no import cycle at module level.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import app

APP = Path(app.__file__).parent
QT = {"PySide6", "pyqtgraph", "qasync", "shiboken6"}
ADAPTERS = {"ReplayMarketData", "PaperBroker", "ReplayClock", "CcxtMarketData", "CcxtBroker"}
# the composition (app.runtime) and the adapters' own homes may name them
ADAPTER_HOMES = ("app.runtime", "app.ccxt", "app.exchange.paper", "app.market.replay",
                 "app.domain.clock")
FRONTS = ("app.ui", "app.cli", "app.telegram", "app.sweep", "app.runtime", "app.__main__")
# package -> (packages it must never import, why)
FORBIDDEN: dict[str, tuple[tuple[str, ...], str]] = {
    "app.agents": (("app.runtime", "app.cli", "app.backtest"),
                   "agents hold agents; composing and running them is the runtime's job"),
    "app.backtest": (("app.agents",), "the backtest's pure pieces know nothing of agents"),
    "app.store": (("app.tools", "app.risk"), "the store keeps domain records only"),
    "app.exchange": (("app.risk",), "the broker builds the RiskView the guard reads"),
    "app.config": (("app.",), "settings sit just above the domain"),
    "app.trading": (("app.exchange", "app.ccxt", "app.tools", "app.agents", "app.mcp",
                     "app.telegram"),
                    "order entry is typed against the Broker port; the tools and fronts call it"),
    "app.telegram": (("app.agents.rules",),
                     "a tool's answer is read by the protocol package, not the rule engine"),
    "app.ui": (("app.exchange",),
               "the window holds the ports and the venue's live facet, never an adapter"),
}
# the layers below order entry: none of them may import it (it is built on them)
BELOW_TRADING = ("app.domain", "app.config", "app.store", "app.risk", "app.market",
                 "app.indicators", "app.memory", "app.orchestration")
# the live adapter: composed by the runtime only; nothing else imports it
CCXT_HOMES = ("app.runtime", "app.ccxt")
CONFIG_MAY_IMPORT = ("app.config", "app.domain")


@dataclass
class Module:
    """What one source file imports and names."""

    name: str
    imports: set[str] = field(default_factory=set)
    top_level: set[str] = field(default_factory=set)  # imported when the module loads
    adapter_names: set[str] = field(default_factory=set)
    isinstance_checks: list[str] = field(default_factory=list)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(node: ast.Import | ast.ImportFrom, module: str) -> Iterator[str]:
    """Absolute names a statement imports: ``from a import b`` gives ``a`` and ``a.b``."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: resolved against the importing module's package
        package = module.split(".")[: -node.level]  # (app has no relative import in an __init__)
        base = ".".join([*package, base] if base else package)
    yield base
    yield from (f"{base}.{alias.name}" for alias in node.names)


def _load_time_imports(body: Iterable[ast.stmt], module: str) -> Iterator[str]:
    """Imports run when the module loads: not in functions, not under ``TYPE_CHECKING``."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _imported(node, module)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node):
                yield from _load_time_imports(node.body, module)
            yield from _load_time_imports(node.orelse, module)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(h.body for h in node.handlers)):
                yield from _load_time_imports(block, module)


def _identifiers(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
            if isinstance(n, ast.Name | ast.Attribute)}


def scan(source: str, name: str) -> Module:
    tree = ast.parse(source)
    found = Module(name, top_level=set(_load_time_imports(tree.body, name)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = list(_imported(node, name))
            found.imports.update(names)
            found.adapter_names.update(n.rsplit(".", 1)[-1] for n in names[1:]
                                       if n.rsplit(".", 1)[-1] in ADAPTERS)
        elif isinstance(node, ast.Name) and node.id in ADAPTERS:
            found.adapter_names.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in ADAPTERS:
            found.adapter_names.add(node.attr)
        elif isinstance(node, ast.Constant) and node.value in ADAPTERS:  # a quoted annotation
            found.adapter_names.add(str(node.value))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance" and len(node.args) == 2
                and ADAPTERS & _identifiers(node.args[1])):
            found.isinstance_checks.append(ast.unparse(node))
    return found


def modules() -> list[Module]:
    return [scan(path.read_text(encoding="utf-8"), _module_name(path, APP))
            for path in sorted(APP.rglob("*.py"))]


def _within(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p if p.endswith(".") else p + ".") for p in prefixes)


def _app_imports(module: Module) -> set[str]:
    return {i for i in module.imports if _within(i, ("app",))}


def violations(found: Iterable[Module]) -> list[str]:
    """Every broken rule, one line each (empty: the drawing holds)."""
    problems: list[str] = []
    for m in found:
        for package, (forbidden, why) in FORBIDDEN.items():
            if not _within(m.name, (package,)):
                continue
            if package == "app.config":
                bad = {i for i in _app_imports(m) if not _within(i, CONFIG_MAY_IMPORT)}
            else:
                bad = {i for i in m.imports if _within(i, forbidden)}
            problems += [f"{m.name} imports {i}: {why}" for i in sorted(bad)]
        if not _within(m.name, ("app.ui",)):
            problems += [f"{m.name} imports {i}: only app/ui may use Qt"
                         for i in sorted(m.imports) if i.split(".")[0] in QT]
        if _within(m.name, BELOW_TRADING):
            problems += [f"{m.name} imports {i}: order entry is built on this layer, not under "
                         "it" for i in sorted(m.imports) if _within(i, ("app.trading",))]
        if not _within(m.name, CCXT_HOMES):
            problems += [f"{m.name} imports {i}: only app/runtime composes the live adapter"
                         for i in sorted(m.imports) if _within(i, ("app.ccxt",))]
        if not _within(m.name, FRONTS):
            problems += [f"{m.name} imports {i}: only the fronts and the runtime use the runtime"
                         for i in sorted(m.imports) if _within(i, ("app.runtime",))]
        if not _within(m.name, ADAPTER_HOMES):
            problems += [f"{m.name} names {n}: type it against the port; only app/runtime "
                         "composes adapters" for n in sorted(m.adapter_names)]
        problems += [f"{m.name} asks {check}: a property of the port says what it needs"
                     for check in m.isinstance_checks]
    return problems


def package_cycles(found: Iterable[Module]) -> list[list[str]]:
    """Cycles between app's packages through imports made when modules load."""
    def package(name: str) -> str:
        return ".".join(name.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for m in found:
        for i in _app_imports(Module(m.name, imports=m.top_level)):
            if package(i) != package(m.name):
                graph.setdefault(package(m.name), set()).add(package(i))
    cycles: list[list[str]] = []
    for start in sorted(graph):  # depth-first from each package back to itself
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    cycles.append(path)
                elif nxt not in path and nxt > start:  # each cycle once, from its least member
                    stack.append((nxt, [*path, nxt]))
    return cycles


def test_the_layers_hold_across_app() -> None:
    found = modules()
    names = {m.name for m in found}
    assert {"app.runtime.venues", "app.agents.loop", "app.store", "app.config"} <= names
    venues = next(m for m in found if m.name == "app.runtime.venues")
    assert {"ReplayMarketData", "PaperBroker", "ReplayClock"} <= venues.adapter_names
    assert violations(found) == []


def test_the_packages_import_each_other_without_a_cycle() -> None:
    found = modules()
    assert package_cycles(found) == []


def test_the_checker_sees_each_kind_of_leak() -> None:
    """The rules catch what they claim to, however the import is written."""
    leaky = {
        "app.agents.leak": "def f():\n    from app.runtime.world import build_world\n",
        "app.backtest.leak": "from app.agents import loop\n",
        "app.store.leak": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                          "    from app.risk.guard import RiskGuard\n",
        "app.exchange.leak": "import app.risk.config\n",
        "app.config.leak": "from app.trading.approval import ApprovalSettings\n",
        "app.tools.leak": "from PySide6.QtCore import QObject\n",
        "app.orchestration.leak": "from ..runtime import world\n",
        "app.ui.panels.leak": "def f(market: 'ReplayMarketData') -> None: ...\n",
        "app.runtime.leak": "def f(m, R):\n    return isinstance(m, R.PaperBroker)\n",
        "app.trading.leak": "from app.exchange.paper import venue_name\n",
        "app.orchestration.leak2": "from app.trading.port import Broker\n",
        "app.cli.leak": "def f():\n    from app.ccxt.reconcile import Reconciler\n",
        "app.ui.agents.leak": "from app.exchange.paper import venue_name\n",
    }
    problems = violations(scan(source, name) for name, source in leaky.items())
    assert {p.split(" ", 1)[0] for p in problems} == set(leaky), problems
    cyclic = [scan("import app.b.x\n", "app.a.x"), scan("from app.a import x\n", "app.b.x")]
    assert package_cycles(cyclic) == [["app.a", "app.b"]]
    lazy = [scan("import app.b.x\n", "app.a.x"),
            scan("def f():\n    from app.a import x\n", "app.b.x")]
    assert package_cycles(lazy) == []
