"""A folder's whole content, to show a command left it exactly as it was."""

from __future__ import annotations

from pathlib import Path


def tree(root: Path, *, skip: frozenset[str] = frozenset()) -> dict[str, object]:
    """Every entry under ``root`` (but those named in ``skip``): a file's bytes, a link's target,
    or "dir"."""
    found: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        if path.name in skip:
            continue
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = ("link", str(path.readlink()))
        elif path.is_dir():
            found[key] = "dir"
        else:
            found[key] = path.read_bytes()
    return found
