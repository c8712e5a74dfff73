"""Appends that are all-or-nothing, and keeping the recall index in step with each file change.

An append is written in place (``O_APPEND``, one ``write``), which is fast but, killed mid-write,
could leave part of a line. So, under the folder lock, the index first commits a write-ahead
*intent* (path, inode, old size, new size); the bytes follow; the index update that follows clears
the intent in the same transaction. An intent still present later means the writer died: if the
file is shorter than promised it is truncated back to its old size (nobody was told the append
succeeded), if it is complete it is kept and re-indexed. ``recover`` runs before any later read,
append or rescan of the file, so nobody sees a torn line after the crash.

Indexing: an append is indexed incrementally (only the new lines) when the index's record of the
file matches the file as it was before the append; otherwise the whole file is re-indexed.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.memory import fsops
from app.memory.index import FileState, RecallIndex


def file_state(st: Any, raw: bytes, market_ms: int | None) -> FileState:
    return FileState(
        st.st_size, st.st_mtime_ns, st.st_ino, raw.count(b"\n"), raw.endswith(b"\n") or not raw,
        market_ms,
    )


def same(prev: FileState, st: Any) -> bool:
    return (prev.size, prev.mtime_ns, prev.ino) == (st.st_size, st.st_mtime_ns, st.st_ino)


def index_content(
    index: RecallIndex,
    rel: str,
    raw: bytes,
    st: Any,
    max_index_bytes: int,
    *,
    write_ms: int | None,
    unknown_ms: int | None = None,
    not_after_ms: int | None = None,
) -> None:
    """Re-index a whole file (binary or oversized files are recorded but not searchable).

    Args:
        not_after_ms: the latest time text of unknown age may get (an index rebuilt at market
            time T holds nothing written after T, whatever the file's modification time).
    """
    binary = len(raw) > max_index_bytes or b"\0" in raw[:8192]
    text = "" if binary else raw.decode("utf-8", "replace")
    stamp = unknown_ms if unknown_ms is not None else st.st_mtime_ns // 1_000_000
    if not_after_ms is not None:
        stamp = min(stamp, not_after_ms)
    state = file_state(st, raw, write_ms if write_ms is not None else stamp)
    index.replace_file(rel, text, state, write_ms=write_ms, unknown_ms=stamp)


def recover(
    index: RecallIndex, rel: str, fd: int, st: os.stat_result, max_index_bytes: int
) -> os.stat_result:
    """Finish the story of an append whose writer died; the caller holds the folder lock.

    Shorter than promised: truncate back to the old size. Complete: index it at the market time
    the writer stamped on it.
    """
    intent = index.pending_append(rel)
    if intent is None:
        return st
    ino, old_size, new_size, market_ms = intent
    if ino == st.st_ino and old_size < st.st_size < new_size:
        os.ftruncate(fd, old_size)
        os.fsync(fd)
        st = os.fstat(fd)
    elif ino == st.st_ino and st.st_size == new_size:
        raw = fsops.read_all(fd, st.st_size)
        index_content(index, rel, raw, st, max_index_bytes, write_ms=market_ms)
        return st
    index.clear_append(rel)
    return st


@dataclass(frozen=True, slots=True)
class Appended:
    created: bool
    new_size: int
    line: int  # where the appended content starts (after any added newline)


def append(
    index: RecallIndex,
    index_failed: Callable[[RecallIndex, str, Exception], None],
    rel: str,
    dir_fd: int,
    name: str,
    data: bytes,
    admit: fsops.Admit,
    *,
    ensure_newline: bool,
    durable: bool,
    header: bytes,
    now: int,
    max_index_bytes: int,
) -> Appended:
    """Append ``data`` as whole lines and index them; the caller holds the folder lock.

    A newline goes first if the file lacks one (when ``ensure_newline``), and last if ``data``
    lacks one; ``header`` goes first when the file is new or empty. When indexing fails after
    the bytes are written, ``index_failed`` is told and the append still counts.
    """
    fd, st, created = fsops.open_append(dir_fd, name, rel)
    try:
        st = recover(index, rel, fd, st, max_index_bytes)
        old_size = st.st_size
        if old_size == 0:
            data = header + data
        leading = ensure_newline and old_size > 0 and os.pread(fd, 1, old_size - 1) != b"\n"
        payload = (b"\n" if leading else b"") + data
        if payload and not payload.endswith(b"\n"):
            payload += b"\n"
        admit(old_size, old_size + len(payload))
        index.begin_append(rel, st.st_ino, old_size, old_size + len(payload), now)
        fsops.write_all(fd, payload)
        if durable:
            os.fsync(fd)
            if created:
                fsops.sync_folder(dir_fd)
        after = os.fstat(fd)
        try:
            first = _index_appended(
                index, rel, fd, st, after, payload, leading, old_size, now, max_index_bytes
            )
        except sqlite3.DatabaseError as exc:
            index_failed(index, rel, exc)
            raw = fsops.read_all(fd, old_size) if old_size else b""
            first = raw.count(b"\n") + 1 + int(leading)
        return Appended(created, after.st_size, first)
    finally:
        os.close(fd)


def _index_appended(
    index: RecallIndex,
    rel: str,
    fd: int,
    st: Any,
    after: Any,
    payload: bytes,
    leading: bool,
    old_size: int,
    now: int,
    max_index_bytes: int,
) -> int:
    """Index the bytes just appended; return the line the appended content starts on."""
    prev = index.file_state(rel)
    in_step = (prev is None and old_size == 0) or (
        prev is not None and same(prev, st) and (prev.ends_newline or leading)
    )
    if in_step and b"\0" not in payload:
        newlines = prev.newlines if prev is not None else 0
        state = FileState(
            after.st_size,
            after.st_mtime_ns,
            after.st_ino,
            newlines + payload.count(b"\n"),
            True,
            now,
        )
        index.append_text(
            rel, payload.decode("utf-8", "replace"), newlines + 1, state, write_ms=now
        )
        return newlines + 1 + int(leading)
    raw = fsops.read_all(fd, after.st_size)
    index_content(index, rel, raw, after, max_index_bytes, write_ms=now)
    return raw[:old_size].count(b"\n") + 1 + int(leading)
