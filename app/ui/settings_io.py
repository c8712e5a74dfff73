"""Write the Settings model back to ``settings.toml``: a small TOML writer and an atomic save.

Why our own writer: the standard library reads TOML (``tomllib``) but cannot write it, and the
settings are plain tables of strings, numbers, booleans and lists, so a hundred lines beat a new
dependency. Why section by section: a person may keep comments and hand-written sections in the
file; only the sections the Settings dialog changed are rewritten, every other block of lines is
kept verbatim. The result is always parsed back and compared with what was meant; if the surgical
edit ever disagrees (an odd hand-written layout), the whole file is regenerated from the values.
Decimals are written as strings so ``0.001`` stays exactly ``0.001`` (pydantic reads them back).
The file is replaced atomically (temp file + rename), so a crash never leaves half a file.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from app.config import Settings, load_settings

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_HEADER = re.compile(r"^\s*\[(?!\[)\s*([^\]]+?)\s*\]\s*(#.*)?$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}


class TomlWriteError(ValueError):
    """A value has no TOML form (e.g. a list mixing tables and scalars)."""


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else _string(name)


def _string(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, Decimal):
        return _string(format(value, "f"))
    if isinstance(value, Enum):
        return _scalar(value.value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(str(k))} = {_scalar(v)}" for k, v in value.items()
                          if v is not None)
        return "{ " + inner + " }" if inner else "{}"
    raise TomlWriteError(f"cannot write a {type(value).__name__} to TOML: {value!r}")


def _table(path: tuple[str, ...], data: Mapping[str, Any], out: list[str]) -> None:
    """``data``'s plain keys under the ``[path]`` header, then each sub-table as its own header.

    A table whose values are all scalars but that is empty (``allotments = {}``) is written inline;
    ``None`` is left out (TOML has no null, and every optional setting defaults to None).
    """
    plain = [(k, v) for k, v in data.items()
             if v is not None and not (isinstance(v, Mapping) and v)]
    nested = [(k, v) for k, v in data.items() if isinstance(v, Mapping) and v]
    if path and (plain or not nested):
        out.append("[" + ".".join(_key(p) for p in path) + "]")
    for key, value in plain:
        out.append(f"{_key(str(key))} = {_scalar(value)}")
    if path and (plain or not nested):
        out.append("")
    for key, value in nested:
        _table((*path, str(key)), value, out)


def dumps(data: Mapping[str, Any]) -> str:
    """A mapping (tables of scalars, lists and sub-tables) as TOML text."""
    out: list[str] = []
    top_plain = {k: v for k, v in data.items() if not isinstance(v, Mapping)}
    for key, value in top_plain.items():
        if value is not None:
            out.append(f"{_key(str(key))} = {_scalar(value)}")
    if top_plain:
        out.append("")
    for key, value in data.items():
        if isinstance(value, Mapping):
            _table((str(key),), value, out)
    return "\n".join(out).rstrip("\n") + "\n"


def section_data(model: BaseModel | None) -> dict[str, Any] | None:
    """What of a section differs from its defaults, as TOML-ready values (Decimal kept exact)."""
    if model is None:
        return None
    return _python(model.model_dump(mode="python", exclude_defaults=True))


def _python(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _python(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_python(v) for v in value]
    return value


def settings_mapping(settings: Settings) -> dict[str, Any]:
    """Every section that differs from the defaults, ready for ``dumps``."""
    out: dict[str, Any] = {}
    for name in type(settings).model_fields:
        data = section_data(getattr(settings, name))
        if data:
            out[name] = data
    return out


def _blocks(text: str) -> list[tuple[str | None, list[str]]]:
    """The file as (top-level section or None for the preamble, lines) blocks, in order."""
    blocks: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in text.splitlines():
        match = _HEADER.match(line)
        if match:
            name = match.group(1).split(".")[0].strip().strip('"').strip("'")
            blocks.append((name, [line]))
        else:
            blocks[-1][1].append(line)
    return blocks


def _semantic(data: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping with Decimals as their text, so a written file compares equal to the intent."""
    def norm(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): norm(v) for k, v in value.items() if v is not None}
        if isinstance(value, list | tuple):
            return [norm(v) for v in value]
        if isinstance(value, Decimal):
            return format(value, "f")
        return value

    return {k: v for k, v in norm(data).items() if v != {}}


def render_file(old_text: str, new: Settings, changed: set[str]) -> str:
    """The new file text: ``changed`` sections rewritten from ``new``, everything else verbatim."""
    wanted = settings_mapping(new)
    old_data = tomllib.loads(old_text) if old_text.strip() else {}
    intended = dict(old_data)
    for name in changed:
        intended.pop(name, None)
        if name in wanted:
            intended[name] = wanted[name]
    out_lines: list[str] = []
    written: set[str] = set()
    for name, lines in _blocks(old_text):
        if name is None or name not in changed:
            out_lines.extend(lines)
            continue
        if name not in written and name in wanted:
            out_lines.extend(dumps({name: wanted[name]}).rstrip("\n").splitlines())
            out_lines.append("")
        written.add(name)
    for name in sorted(changed - written):
        if name in wanted:
            if out_lines and out_lines[-1].strip():
                out_lines.append("")
            out_lines.extend(dumps({name: wanted[name]}).rstrip("\n").splitlines())
    text = "\n".join(out_lines).strip("\n") + "\n"
    try:
        ok = _semantic(tomllib.loads(text)) == _semantic(intended)
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:  # an unusual hand-written layout: regenerate the whole file from the values
        text = dumps(intended)
    return text


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step: a temp file beside it, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            Path(temp).chmod(path.stat().st_mode & 0o777)
        Path(temp).replace(path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def save_settings(path: Path, new: Settings, old: Settings | None = None) -> set[str]:
    """Write the sections of ``new`` that differ from ``old`` (default: the file's current values).

    Returns the names of the sections written (empty: nothing changed, the file is untouched).

    Raises:
        OperationalError: the current file is unreadable or invalid (nothing is written then).
        OSError: the file cannot be written.
    """
    old_text = path.read_text(encoding="utf-8") if path.exists() else ""
    current = old if old is not None else load_settings(path)
    changed = {name for name in type(new).model_fields
               if getattr(new, name) != getattr(current, name)}
    if not changed:
        return set()
    atomic_write(path, render_file(old_text, new, changed))
    return changed


def save_replay_speed(path: Path, speed: float) -> bool:
    """Keep the replay speed chosen in the window in ``[agents] replay_speed``, the setting the
    workspace starts its replay at; True when the file changed.

    Raises:
        OperationalError: the current file is unreadable or invalid (nothing is written then).
        OSError: the file cannot be written.
    """
    current = load_settings(path)
    if current.agents.replay_speed == speed:
        return False
    agents = current.agents.model_copy(update={"replay_speed": speed})
    return bool(save_settings(path, current.model_copy(update={"agents": agents}), current))
