"""The broker side does not depend on the Risk Guard: the guard reads a view the broker builds.

``RiskView`` is a plain snapshot in ``app.domain``; a broker (paper now, a venue adapter later)
builds it without importing anything of ``app.risk``, so the guard can change without touching a
broker and a broker can be written without the guard.
"""

from __future__ import annotations

import ast
from pathlib import Path

import app.exchange

EXCHANGE = Path(app.exchange.__file__).parent


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_exchange_module_imports_the_risk_package() -> None:
    modules = sorted(EXCHANGE.glob("*.py"))
    assert any(p.name == "port.py" for p in modules)
    leaks = {p.name: sorted(m for m in _imports(p) if m.split(".")[:2] == ["app", "risk"])
             for p in modules}
    assert {name: found for name, found in leaks.items() if found} == {}
