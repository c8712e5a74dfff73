"""Search outputs for a planted key: whole, any piece of 8 characters, or masked around its ends,
in any letter case (a library that re-cases an error message re-cases the key it quotes).

Why bytes: the search runs over everything a run leaves behind (SQLite pages, the WAL, memory
files, reports, the chart, captured stdout and stderr) exactly as written, without decoding.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path

PIECE = 8
_MASK = rb"(?:\*{2,}|\.{3}|\xe2\x80\xa6|\xe2\x80\xa2{2,})"  # ** ... … ••


def leak_patterns(key: str) -> list[tuple[str, re.Pattern[bytes]]]:
    """What counts as the key leaking: the key, each piece of ``PIECE`` characters, its first 4
    characters before a mask and its last 4 after one."""
    raw = key.encode()
    anycase = re.IGNORECASE
    patterns = [("whole key", re.compile(re.escape(raw), anycase))]
    patterns += [
        (f"piece {raw[i:i + PIECE].decode()!r}", re.compile(re.escape(raw[i:i + PIECE]), anycase))
        for i in range(len(raw) - PIECE + 1)
    ]
    patterns.append(("masked start", re.compile(re.escape(raw[:4]) + _MASK, anycase)))
    patterns.append(("masked end", re.compile(_MASK + re.escape(raw[-4:]), anycase)))
    return patterns


def encoded_forms(key: str) -> dict[str, bytes]:
    """The key as foreign code may echo it re-encoded. Base64 at each of the three byte offsets
    it can stand at inside a longer base64 text (an HTTP Basic credential "user:key"): only the
    characters that encode bytes of the key alone, so what surrounds it changes none of them.
    Standard and URL-safe alphabets; padding is outside these, so padded or not is the same."""
    raw = key.encode()
    forms: dict[str, bytes] = {}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw)
        core = encoded[-(-offset * 8 // 6):(offset + len(raw)) * 8 // 6]
        forms[f"base64 at byte offset {offset}"] = core
        forms[f"url-safe base64 at byte offset {offset}"] = core.translate(
            bytes.maketrans(b"+/", b"-_"))
    forms["reversed"] = raw[::-1]
    forms["hex"] = raw.hex().encode()
    forms["url-encoded"] = urllib.parse.quote(key, safe="").encode()
    return forms


def encoded_leaks(data: bytes, key: str) -> list[str]:
    """The encoded forms of the key found in ``data``: whole or any piece of ``PIECE``
    characters, in any letter case."""
    found = []
    for name, form in encoded_forms(key).items():
        pieces = {form[i:i + PIECE] for i in range(len(form) - PIECE + 1)}
        pattern = re.compile(b"|".join(re.escape(p) for p in pieces), re.IGNORECASE)
        if pattern.search(data):
            found.append(name)
    return found


def leaks(data: bytes, key: str) -> list[str]:
    """The kinds of leak found in ``data`` (empty: none)."""
    return [name for name, pattern in leak_patterns(key) if pattern.search(data)]


def files_under(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*") if p.is_file())


def search(outputs: Mapping[str, bytes], key: str) -> dict[str, list[str]]:
    """Every output that leaks the key, with what was found in it."""
    found = {name: leaks(data, key) for name, data in outputs.items()}
    return {name: kinds for name, kinds in found.items() if kinds}


def read_all(paths: Iterable[Path]) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in paths}
