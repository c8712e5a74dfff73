"""The blocking core of the memory bank: sandboxed files, quota, indexing and rescans.

Everything here blocks (files, fsync, SQLite) and is meant to run in a worker thread; ``MemoryBank``
(``bank.py``) wraps it for the event loop and announces the changes. Each ``_``-operation returns
its result together with the ``MemoryFileChanged`` events it caused, so the caller decides how to
publish them. Market time: the injected clock is the *market* clock, and every indexed chunk carries
the market time it was written at, so recall never returns a chunk written after the clock's now.
Content of unknown age found in files edited by hand gets its entry header's time, else the file's
modification time, which is never earlier than the truth.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.clock import Clock, ms_to_iso
from app.domain.errors import (
    AccessDeniedError,
    ErrorCode,
    InvalidParameterError,
    NotFoundError,
    OperationalError,
    ToolError,
)
from app.events import MemoryFileChanged
from app.memory import appending, fsops
from app.memory.index import FileState, Hit, RecallIndex, remove_index
from app.memory.locks import PathLocks
from app.memory.paths import check_agent_id, note_path, split_memory_path
from app.memory.text import ENTRY_HEADER, build_query, entry_header, sniff_type
from app.store.disk_full import MEMORY_WRITES, DiskFullWatch, disk_full_reason

logger = logging.getLogger(__name__)
INDEX_DIR = ".index"
_TEXT_CONTROL = frozenset(chr(c) for c in range(32) if chr(c) not in "\t\n\r") | {"\x7f"}
Changes = list[MemoryFileChanged]


@dataclass(frozen=True, slots=True)
class MemoryLimits:
    """Size limits of one agent's memory; ``durable`` fsyncs every write and append."""

    max_file_bytes: int = 1 << 20
    quota_bytes: int = 50 << 20
    max_index_bytes: int = 4 << 20
    durable: bool = True


@dataclass(frozen=True, slots=True)
class FileContent:
    path: str
    data: bytes
    exists: bool
    type_hint: str


@dataclass(frozen=True, slots=True)
class FileInfo:
    path: str
    size: int
    modified_ms: int


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """A completed write: the path, the event kind, the new size and the market time stamped."""

    path: str
    kind: str
    size: int
    market_ms: int
    line: int = 1


def _market_ms(state: FileState | None, st: Any, now_ms: int) -> int:
    """When a file last changed by the market clock: the time its index recorded for the last
    change Kestrel made or found, else (changed by hand since, or never indexed) its modification
    time; never later than now."""
    if state is not None and state.market_ms is not None and appending.same(state, st):
        return min(state.market_ms, now_ms)
    return min(st.st_mtime_ns // 1_000_000, now_ms)


def check_text(text: str, what: str) -> str:
    """Refuse control characters (other than tab and newlines) in plain-text content."""
    bad = next((ch for ch in text if ch in _TEXT_CONTROL), None)
    if bad is not None:
        raise InvalidParameterError(
            f"<{what}> contains the control character U+{ord(bad):04X}; send plain text.",
            details={"parameter": what, "reason": "control_character"},
        )
    return text


class MemoryStore:
    """Sandboxed per-agent memory folders with atomic writes, serialised appends and recall.

    Args:
        root: the memory root (``<workspace>/memory``); created when first written.
        clock: the market clock (replay cursor in a backtest, wall clock otherwise).
        limits: per-file size limit, per-agent quota, fsync policy.
        scratch: a memory that is made again after a crash (a backtest's, whose run is run
            again): its recall indexes commit only at ``commit`` (once a bar), each change a
            savepoint inside the open transaction, and are not synced to disk; a file is
            rewritten in place instead of through a temporary file and a rename (whole after
            each write, not across a crash), an append's write-ahead intent is not
            committed before its bytes, and the recall index is written before each search
            rather than at each change (``RecallIndex(deferred=True)``).
        disk: told of a write the full disk refused (named as not recorded; the run stops).
    """

    def __init__(
        self, root: Path, clock: Clock, *, limits: MemoryLimits | None = None,
        scratch: bool = False,
        disk: DiskFullWatch | None = None,
    ) -> None:
        if not fsops.supported():
            raise OperationalError(
                "The agent memory bank needs a POSIX system (Linux or macOS): its sandbox relies "
                "on no-follow opens relative to folder descriptors and on flock."
            )
        self.root = Path(root)
        self.clock = clock
        self.limits = limits or MemoryLimits()
        self._locks = PathLocks()
        self._indexes: dict[str, RecallIndex] = {}
        self._index_guard = threading.Lock()
        self._usage: dict[str, int] = {}
        self._usage_lock = threading.Lock()
        self._pending: Changes = []
        self._pending_lock = threading.Lock()
        self.scratch = scratch
        self.disk = disk

    def commit(self) -> None:
        """Commit the open indexes' changes since the last call (a ``scratch`` memory's;
        otherwise each change has committed already)."""
        if not self.scratch:
            return
        with self._index_guard:
            for index in self._indexes.values():
                index.commit_group()

    def agent_folder(self, agent_id: str) -> Path:
        """Where an agent's files live (for the GUI's memory browser and for people)."""
        return self.root / check_agent_id(agent_id)

    def close(self) -> None:
        with self._index_guard:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()

    # ----------------------------------------------------------------- plumbing

    def _index(self, agent_id: str, unknown_ms: int | None = None) -> RecallIndex:
        """The agent's index; opening it the first time catches up with edits made by hand
        (the changes found wait in ``_pending`` to be announced)."""
        index = self._indexes.get(agent_id)
        if index is not None and not index.damaged:
            return index
        with self._index_guard:
            index = self._indexes.get(agent_id)
            rebuild = index is not None and index.damaged
            if index is not None and rebuild:
                # on a full disk the run is stopping and says so once: not a warning each time
                level = logging.INFO if self._disk_full() else logging.WARNING
                logger.log(level, "rebuilding the recall index of %s from its files", agent_id)
                index.close()
                remove_index(index.path)
                del self._indexes[agent_id]
                index = None
            if index is None:
                index = RecallIndex(
                    self.root / INDEX_DIR / f"{agent_id}.sqlite3", synced=not self.scratch,
                    deferred=self.scratch,
                )
                # what a rebuilt index finds was written before now, whatever the files' times
                cap = self.clock.now_ms() if rebuild or index.rebuilt else None
                events = self._rescan(agent_id, index, unknown_ms, not_after_ms=cap)
                self._indexes[agent_id] = index
                with self._pending_lock:
                    self._pending.extend(events)
        return index

    def healing(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run one operation; if an index turned out unreadable (or could not write what it had
        staged), rebuild it and run it again.

        Repeating is safe: an index error after the operation changed a file is not raised
        (``_written_but_not_indexed``), so one that escapes came before any change.
        """
        try:
            return fn(*args)
        except sqlite3.DatabaseError as exc:
            damaged = [
                i for i in list(self._indexes.values()) if i.damaged or not i.readable()
            ]
            if not damaged:
                raise
            for index in damaged:
                logger.warning("the recall index %s is unreadable (%s)", index.path, exc)
                index.damaged = True
        return fn(*args)

    def _written_but_not_indexed(self, index: RecallIndex, rel: str, exc: Exception) -> None:
        """The file is written; its index failed: mark the index for a rebuild from the files
        (which then include this change) instead of failing a write that happened."""
        level = logging.INFO if self._disk_full(exc) else logging.WARNING
        logger.log(level, "%s is written but its recall index failed (%s): rebuilding it", rel,
                   exc)
        index.damaged = True

    def _disk_full(self, exc: BaseException | None = None) -> bool:
        """Whether the disk is full (``exc`` says so, or the watch already knows)."""
        if self.disk is None:
            return exc is not None and disk_full_reason(exc, self.root) is not None
        return self.disk.check(exc) if exc is not None else self.disk.full

    @contextmanager
    def _os_errors(self, agent_id: str, path: str) -> Iterator[None]:
        """Translate an unexpected OS error into a tool error naming the file, once, at the
        border; a full disk (the file's bytes, or its index's write-ahead intent) is named to
        ``disk`` as a memory write that was not recorded."""
        try:
            yield
        except (OSError, sqlite3.Error) as exc:
            reason = disk_full_reason(exc, self.root)
            if reason is None and isinstance(exc, sqlite3.Error):
                raise
            if reason is not None:
                if self.disk is not None:
                    self.disk.trip(reason)
                    self.disk.unrecorded(MEMORY_WRITES, path, agent_id)
                message = f"the disk is full ({reason})"
            else:
                message = str(getattr(exc, "strerror", None) or exc)
            raise ToolError(
                f"'{path}' could not be saved: {message}.",
                code=ErrorCode.INTERNAL_ERROR,
                details={"path": path, "errno": getattr(exc, "errno", None),
                         **({"reason": "disk_full"} if reason is not None else {})},
            ) from exc

    def _usage_of(self, agent_id: str) -> int:
        if agent_id not in self._usage:
            self._usage[agent_id] = sum(info.size for info in self._walk(agent_id, ()))
        return self._usage[agent_id]

    def _admitter(self, agent_id: str, path: str) -> fsops.Admit:
        limits = self.limits

        def admit(old_size: int, new_size: int) -> None:
            if new_size > limits.max_file_bytes:
                raise InvalidParameterError(
                    f"'{path}' would be {new_size} bytes; the limit is {limits.max_file_bytes} "
                    "bytes per file. Split the content over several files.",
                    details={"path": path, "size": new_size, "limit": limits.max_file_bytes},
                )
            with self._usage_lock:
                projected = self._usage_of(agent_id) - old_size + new_size
                if new_size > old_size and projected > limits.quota_bytes:
                    raise AccessDeniedError(
                        f"Your memory folder would hold {projected} bytes, over its quota of "
                        f"{limits.quota_bytes} bytes. Shorten or overwrite old files first.",
                        details={"path": path, "usage": projected, "quota": limits.quota_bytes},
                    )
                self._usage[agent_id] = projected

        return admit

    def _forget_usage(self, agent_id: str) -> None:
        with self._usage_lock:
            self._usage.pop(agent_id, None)

    def _walk(self, agent_id: str, parts: tuple[str, ...]) -> list[FileInfo]:
        return [
            FileInfo(rel, st.st_size, st.st_mtime_ns // 1_000_000)
            for rel, st in self._walk_stats(agent_id, parts)
        ]

    def _walk_stats(self, agent_id: str, parts: tuple[str, ...]) -> list[tuple[str, Any]]:
        prefix = "".join(f"{p}/" for p in parts)
        with fsops.folder(self.root, (agent_id, *parts), create=False) as fd:
            if fd is None:
                if parts:
                    shown = "/".join(parts)
                    raise NotFoundError(
                        f"Folder '{shown}' does not exist.", details={"path": shown}
                    )
                return []
            return [
                (rel, st) for rel, st in fsops.walk_files(fd, prefix, len(parts)) if _usable(rel)
            ]

    def _drain(self) -> list[MemoryFileChanged]:
        with self._pending_lock:
            events, self._pending = self._pending, []
        return events

    def _recover(self, index: RecallIndex, fd: int, name: str, rel: str) -> None:
        """Roll back an append a dead writer left unfinished; the caller holds the folder lock."""
        if index.pending_append(rel) is None:
            return
        if fsops.existing(fd, name, rel) is None:
            index.clear_append(rel)
            return
        file_fd, st, _ = fsops.open_append(fd, name, rel)
        try:
            appending.recover(index, rel, file_fd, st, self.limits.max_index_bytes)
        finally:
            os.close(file_fd)

    def _read(self, agent_id: str, path: str) -> tuple[FileContent, list[MemoryFileChanged]]:
        parts = split_memory_path(path)
        rel = "/".join(parts)
        index = self._index(check_agent_id(agent_id))
        if index.pending_append(rel) is not None:
            with (
                self._locks.thread_lock(agent_id, rel),
                fsops.folder(self.root, (agent_id, *parts[:-1]), create=False) as fd,
            ):
                if fd is not None:
                    with fsops.locked(fd):
                        self._recover(index, fd, parts[-1], rel)
        with fsops.folder(self.root, (check_agent_id(agent_id), *parts[:-1]), create=False) as fd:
            if fd is None:
                return FileContent(rel, b"", False, sniff_type(rel, None)), []
            try:
                data, _ = fsops.read_file(fd, parts[-1], rel, self.limits.max_file_bytes)
            except NotFoundError:
                return FileContent(rel, b"", False, sniff_type(rel, None)), []
        return FileContent(rel, data, True, sniff_type(rel, data)), []

    def _write(
        self, agent_id: str, path: str, data: bytes
    ) -> tuple[WriteOutcome, list[MemoryFileChanged]]:
        parts = split_memory_path(path)
        rel = "/".join(parts)
        index = self._index(check_agent_id(agent_id))
        now = self.clock.now_ms()
        with self._locks.thread_lock(agent_id, rel), self._os_errors(agent_id, rel):
            try:
                with (
                    fsops.folder(self.root, (agent_id, *parts[:-1]), create=True) as fd,
                    fsops.locked(fd),
                ):
                    if self.scratch:
                        done = fsops.overwrite(
                            fd, parts[-1], rel, data, self._admitter(agent_id, rel)
                        )
                    else:
                        done = fsops.atomic_write(
                            fd,
                            parts[-1],
                            rel,
                            data,
                            self._admitter(agent_id, rel),
                            durable=self.limits.durable,
                        )
                    try:
                        appending.index_content(
                            index, rel, data, done.st, self.limits.max_index_bytes, write_ms=now
                        )
                    except sqlite3.DatabaseError as exc:
                        self._written_but_not_indexed(index, rel, exc)
            except (OSError, sqlite3.Error):
                self._forget_usage(agent_id)
                raise
        kind = "created" if done.created else "written"
        return WriteOutcome(rel, kind, done.new_size, now), [MemoryFileChanged(agent_id, rel, kind)]

    def _append(
        self, agent_id: str, path: str, data: bytes, ensure_newline: bool, journal_day: str = ""
    ) -> tuple[WriteOutcome, list[MemoryFileChanged]]:
        parts = split_memory_path(path)
        rel = "/".join(parts)
        index = self._index(check_agent_id(agent_id))
        now = self.clock.now_ms()
        header = f"# Journal {journal_day}\n".encode() if journal_day else b""
        with self._locks.thread_lock(agent_id, rel), self._os_errors(agent_id, rel):
            try:
                with (
                    fsops.folder(self.root, (agent_id, *parts[:-1]), create=True) as fd,
                    fsops.locked(fd),
                ):
                    done = appending.append(
                        index,
                        self._written_but_not_indexed,
                        rel,
                        fd,
                        parts[-1],
                        data,
                        self._admitter(agent_id, rel),
                        ensure_newline=ensure_newline,
                        durable=self.limits.durable,
                        header=header,
                        now=now,
                        max_index_bytes=self.limits.max_index_bytes,
                    )
            except (OSError, sqlite3.Error):
                self._forget_usage(agent_id)
                raise
        kind = "created" if done.created else "appended"
        return WriteOutcome(rel, kind, done.new_size, now, done.line), [
            MemoryFileChanged(agent_id, rel, kind)
        ]

    def _rescan(
        self,
        agent_id: str,
        index: RecallIndex,
        unknown_ms: int | None,
        *,
        not_after_ms: int | None = None,
    ) -> list[MemoryFileChanged]:
        """Re-index files whose size, mtime or inode changed since indexing; drop deleted ones."""
        indexed = index.indexed_files()
        files = self._walk_stats(agent_id, ())
        with self._usage_lock:
            self._usage[agent_id] = sum(st.st_size for _, st in files)
        events = []
        for rel, seen in files:
            prev = indexed.pop(rel, None)
            if prev is not None and appending.same(prev, seen):
                continue
            parts = tuple(rel.split("/"))
            with (
                self._locks.thread_lock(agent_id, rel),
                fsops.folder(self.root, (agent_id, *parts[:-1]), create=False) as fd,
            ):
                if fd is None:
                    continue
                with fsops.locked(fd):
                    try:
                        self._recover(index, fd, parts[-1], rel)
                        st = fsops.existing(fd, parts[-1], rel)
                        current = index.file_state(rel)
                        if st is None or (current is not None and appending.same(current, st)):
                            continue
                        raw = b""
                        if st.st_size <= self.limits.max_index_bytes:
                            raw, st = fsops.read_file(fd, parts[-1], rel, st.st_size)
                    except (ToolError, OSError) as exc:
                        logger.info("not indexing %s/%s: %s", agent_id, rel, exc)
                        continue
                    appending.index_content(
                        index,
                        rel,
                        raw,
                        st,
                        self.limits.max_index_bytes,
                        write_ms=None,
                        unknown_ms=unknown_ms,
                        not_after_ms=not_after_ms,
                    )
            events.append(
                MemoryFileChanged(agent_id, rel, "created" if prev is None else "written")
            )
        for gone in indexed:
            index.remove_file(gone)
            events.append(MemoryFileChanged(agent_id, gone, "deleted"))
        return events

    def _journal(self, agent_id: str, content: str) -> tuple[WriteOutcome, list[Any]]:
        text = check_text(content, "content").strip()
        if not text:
            raise InvalidParameterError(
                "<content> is empty; write what you observed or decided.",
                details={"parameter": "content"},
            )
        now = self.clock.now_ms()
        day = ms_to_iso(now)[:10]
        lines = [f"\\{ln}" if ENTRY_HEADER.match(ln) else ln for ln in text.splitlines()]
        entry = f"\n{entry_header(now)}\n" + "\n".join(lines) + "\n"
        outcome, events = self._append(
            agent_id, f"journal/{day}.md", entry.encode("utf-8"), True, day
        )
        header_line = outcome.line + (2 if outcome.kind == "created" else 1)
        return WriteOutcome(outcome.path, outcome.kind, outcome.size, now, header_line), events

    def _note(self, agent_id: str, key: str, content: str) -> tuple[WriteOutcome, list[Any]]:
        text = check_text(content, "content")
        if not text.endswith("\n"):
            text += "\n"
        return self._write(agent_id, note_path(key), text.encode("utf-8"))

    def _recall(self, agent_id: str, query: str, limit: int) -> tuple[list[Hit], list[Any]]:
        built = build_query(query)
        if built is None:
            raise InvalidParameterError(
                f"<query> {query[:80]!r} has no searchable words; give words, symbols or "
                "numbers, e.g. 'BTC/USDT RSI oversold'.",
                details={"parameter": "query"},
            )
        index = self._index(check_agent_id(agent_id))
        return index.search(built, limit, self.clock.now_ms()), []

    def _list(self, agent_id: str, folder: str) -> tuple[list[FileInfo], list[Any]]:
        """The files under ``folder``, each with the market time it last changed: a listing is
        read by an agent, whose only clock is the market's (in a replay, or a blind one, a
        file's modification time would show the wall clock's date)."""
        parts = split_memory_path(folder, allow_empty=True)
        agent = check_agent_id(agent_id)
        index = self._index(agent)
        now = self.clock.now_ms()
        return [FileInfo(rel, st.st_size, _market_ms(index.file_state(rel), st, now))
                for rel, st in self._walk_stats(agent, parts)], []

    def _update(
        self, agent_id: str, path: str, transform: Callable[[bytes | None], bytes]
    ) -> tuple[WriteOutcome, list[MemoryFileChanged]]:
        self._index(check_agent_id(agent_id))
        with self._locks.thread_lock(agent_id, "/".join(split_memory_path(path))):
            current, _ = self._read(agent_id, path)
            new = transform(current.data if current.exists else None)
            return self._write(agent_id, path, new)

    def _rescan_public(
        self, agent_id: str, unknown_ms: int | None
    ) -> tuple[list[MemoryFileChanged], list[MemoryFileChanged]]:
        check_agent_id(agent_id)
        if agent_id in self._indexes:
            events = self._rescan(agent_id, self._indexes[agent_id], unknown_ms)
            return events, events
        self._index(agent_id, unknown_ms)  # the first open is itself the rescan
        with self._pending_lock:
            events = [e for e in self._pending if e.agent_id == agent_id]
            self._pending = [e for e in self._pending if e.agent_id != agent_id]
        return events, events

    def _rescan_all(self, unknown_ms: int | None) -> tuple[Changes, Changes]:
        """Rescan every agent folder under the root (folders that cannot be agent ids are left
        alone)."""
        events: Changes = []
        if self.root.is_dir():
            for entry in sorted(self.root.iterdir()):
                if entry.is_dir() and not entry.is_symlink() and _is_agent_id(entry.name):
                    events += self._rescan_public(entry.name, unknown_ms)[0]
        return events, events


def _is_agent_id(name: str) -> bool:
    try:
        check_agent_id(name)
    except ToolError:
        return False
    return True


def _usable(rel: str) -> bool:
    """Whether a file found on disk has a name the tools accept (others are not listed)."""
    try:
        split_memory_path(rel)
    except ToolError:
        return False
    return True

