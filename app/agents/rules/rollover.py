"""Roll a full memory log over to an archive file, with the memory tools an agent has.

A memory file holds at most ``MemoryLimits.max_file_bytes`` (1 MiB): an analyst appending an
entry per bar fills ``analysis_log.md`` after about 1,100 hourly bars, and from then on every
append is refused (``INVALID_PARAMETER`` with ``path``, ``size`` and ``limit`` in its details).
The analyst then does what the refusal asks, splitting the content over several files and losing
none of it: it reads the log, writes it byte for byte to
``analysis_log_archive/<first entry's date>_<last entry's date>.md`` (a free name: an existing
archive is never overwritten), and only once that write succeeded starts the log over with the
entry that was refused. The archive is written whole before the log is replaced, so a failure at
any step leaves every entry in at least one file.

The roll reacts to the refusal rather than rolling ahead of the limit: the append's result (the
seed's ``<memory_file_appended>``) does not report the file's size, and the refusal is the one
place the tools say, with its numbers, that the file is full. It costs four calls once per
million bytes of log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.agents.rules.calls import unb64
from app.domain.errors import ErrorCode
from app.memory.text import ENTRY_HEADER
from app.tools.protocol.result import Result

ARCHIVE_DIR = "analysis_log_archive"


def refused_as_full(result: Result | None, path: str) -> bool:
    """Whether ``result`` is the memory store's refusal of a write to ``path`` that would take
    the file past its size limit (recognised by the error code and its details, not its words)."""
    if result is None or result.ok or result.error_code != ErrorCode.INVALID_PARAMETER.value:
        return False
    details: Mapping[str, Any] = result.details
    size, limit = details.get("size"), details.get("limit")
    return (
        details.get("path") == path and isinstance(size, int) and isinstance(limit, int)
        and size > limit
    )


@dataclass(frozen=True, slots=True)
class LogContent:
    """A log as ``read_agent_memory_file`` returned it: the base64 text (copied as is, so the
    archive is byte for byte the log) and the entry headers' times found in it."""

    content_base64: str
    size: int
    entry_times: tuple[str, ...]

    @property
    def entries(self) -> int:
        return len(self.entry_times)


def log_content(result: Result) -> LogContent | None:
    """The log a successful read returned, or None when there is nothing to archive."""
    first = result.first() if result.ok else None
    if first is None or (first.findtext("file_exists") or "").strip() != "true":
        return None
    encoded = (first.findtext("content_base64") or "").strip()
    text = unb64(encoded)
    if not text:
        return None
    times = tuple(
        match.group(1) for line in text.split("\n") if (match := ENTRY_HEADER.match(line))
    )
    return LogContent(encoded, len(text.encode("utf-8")), times)


def archived_paths(result: Result) -> frozenset[str]:
    """The paths a ``list_agent_memory_files`` of the archive folder returned; none when the
    folder does not exist yet."""
    if not result.ok:
        return frozenset()
    return frozenset(
        path for element in result.data for file in element
        if (path := file.get("path")) is not None
    )


def archive_path(log: LogContent, taken: Sequence[str] | frozenset[str], today: str) -> str:
    """``analysis_log_archive/<first date>_<last date>.md``, numbered when that name is taken
    (two logs filled within the same days); ``today`` names a log without entry headers."""
    first = log.entry_times[0][:10] if log.entry_times else today
    last = log.entry_times[-1][:10] if log.entry_times else today
    return free_name(f"{ARCHIVE_DIR}/{first}_{last}", ".md", taken)


def free_name(stem: str, suffix: str, taken: Sequence[str] | frozenset[str] | set[str]) -> str:
    """``stem + suffix``, or ``stem_2 + suffix``, ``stem_3``... when taken: an archive file is
    never written over another."""
    path, number = f"{stem}{suffix}", 2
    while path in taken:
        path, number = f"{stem}_{number}{suffix}", number + 1
    return path
