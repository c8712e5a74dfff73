"""No function in app/ is longer than a reader can hold at once: 120 lines, docstring included.

A function that grows past it is usually several steps that want names of their own (a group of
tools, a window's panels, a parser's commands); the check keeps that from drifting back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import app

APP = Path(app.__file__).parent
MAX_LINES = 120


def long_functions(root: Path, limit: int) -> list[str]:
    """Every function or method under ``root`` longer than ``limit`` lines, with its place."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} "
                                 f"({lines} lines)")
    return found


def test_no_function_in_the_app_is_over_120_lines() -> None:
    assert long_functions(APP, MAX_LINES) == []


def test_the_check_finds_a_long_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(130))
    (package / "mod.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(package, MAX_LINES) == ["pkg/mod.py:5 long (131 lines)"]
