"""Find bundled resources in a source checkout, an installed package and a PyInstaller bundle."""

from __future__ import annotations

import sys
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def is_frozen() -> bool:
    """True inside a PyInstaller bundle."""
    return bool(getattr(sys, "frozen", False)) and hasattr(sys, "_MEIPASS")


def source_root() -> Path | None:
    """The repository root when running from a source checkout, else ``None``."""
    if is_frozen():
        return None
    candidate = _PACKAGE_DIR.parent
    if (candidate / "pyproject.toml").is_file() and (candidate / "resources").is_dir():
        return candidate
    return None


def resources_dir() -> Path:
    """The ``resources/`` folder: next to the package in a checkout, inside the bundle when
    frozen."""
    if is_frozen():
        return Path(sys._MEIPASS) / "resources"  # type: ignore[attr-defined]
    root = source_root()
    if root is not None:
        return root / "resources"
    return _PACKAGE_DIR / "resources"


def resource_path(*parts: str) -> Path:
    return resources_dir().joinpath(*parts)


def bundle_manifest() -> Path | None:
    """Inside a bundle, what its build says it holds (``packaging/kestrel.spec`` writes it):
    its lazily imported modules and resource files, for ``--self-test``; else ``None``."""
    if is_frozen():
        return Path(sys._MEIPASS) / "kestrel-bundle.json"  # type: ignore[attr-defined]
    return None


def sample_data_files() -> list[Path]:
    """The bundled market data files of the offline demo, sorted by name."""
    return sorted(resource_path("sample_data").glob("*.csv"))
