"""The type gate: mypy over the packages ``[tool.mypy]`` in pyproject.toml lists, as configured
there (strict on them, silent on the rest of app). It runs as a test so that the README's test
command, which CI runs, enforces it, with no separate step to forget."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_core_packages_type_check(tmp_path: Path) -> None:
    # a fresh cache each run: a stale one from another checkout could hide an error
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, (
        f"mypy found type errors (exit {result.returncode}):\n{result.stdout}{result.stderr}"
    )
