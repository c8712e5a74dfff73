"""Sandboxed file operations inside one agent's memory folder, built on directory descriptors.

Every operation starts from the open descriptor of the agent's folder and opens each path component
relative to its parent with ``O_NOFOLLOW`` (``openat`` semantics), so a symlink is refused whether
it was there before the call or swapped in while it ran; a file's type and link count are checked
on the open descriptor itself (``fstat``), so a hard link to a file outside the folder is refused
too. Writes go to a hidden temporary file in the same folder, are fsynced and renamed over the
target (then the folder is fsynced), so a crash leaves the old or the new content, never a mix.
Appends are written in place (O_APPEND) under a write-ahead intent the index records first (see
``store``), so a kill mid-append is rolled back to the old size on the next access. Each change
holds the folder's ``flock`` (threads and processes alike) while it writes and indexes the file, so
concurrent appenders lose nothing and never interleave. POSIX only: the dir_fd and
flock primitives this relies on do not exist on Windows.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from app.domain.errors import AccessDeniedError, InvalidParameterError, NotFoundError

try:
    import fcntl
except ImportError:  # Windows: importable, but MemoryBank refuses to start (see ``supported``)
    fcntl = None  # type: ignore[assignment]

TEMP_PREFIX = ".kestrel-tmp-"


def supported() -> bool:
    """Whether this platform has the no-follow, dir_fd and flock primitives the sandbox needs."""
    return (
        fcntl is not None
        and hasattr(os, "O_NOFOLLOW")
        and hasattr(os, "O_DIRECTORY")
        and os.open in os.supports_dir_fd
        and os.stat in os.supports_dir_fd
    )


STALE_TEMP_S = 600.0
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | _NOFOLLOW | _NONBLOCK | _CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
_OVERWRITE_FLAGS = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC

# Called with (old_size, new_size) before any byte is written; raises to refuse (size, quota).
Admit = Callable[[int, int], None]


def _symlink_denied(path: str) -> AccessDeniedError:
    return AccessDeniedError(
        f"'{path}' is a symbolic link; memory files must be plain files inside your own folder.",
        details={"path": path, "reason": "symlink"},
    )


def _diagnose(dir_fd: int, name: str, path: str, exc: OSError) -> Exception:
    """Turn a failed open into a specific error by looking at what is there (without following)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return NotFoundError(f"'{path}' does not exist.", details={"path": path})
    if stat.S_ISLNK(st.st_mode):
        return _symlink_denied(path)
    if stat.S_ISDIR(st.st_mode):
        return InvalidParameterError(
            f"'{path}' is a folder, not a file; use list_agent_memory_files to see its files.",
            details={"path": path, "reason": "is_folder"},
        )
    if exc.errno == errno.ENOTDIR:
        return InvalidParameterError(
            f"'{path}' is a file, not a folder.", details={"path": path, "reason": "not_folder"}
        )
    return AccessDeniedError(
        f"'{path}' cannot be opened ({exc.strerror}).",
        details={"path": path, "reason": "os_error", "errno": exc.errno},
    )


def check_regular(st: os.stat_result, path: str) -> None:
    """Refuse anything but a plain file with exactly one link.

    Raises:
        AccessDeniedError: a device, FIFO or socket, or a hard link (``st_nlink > 1``) that might
            also live outside the agent's folder.
        InvalidParameterError: a folder.
    """
    if stat.S_ISDIR(st.st_mode):
        raise InvalidParameterError(
            f"'{path}' is a folder, not a file; use list_agent_memory_files to see its files.",
            details={"path": path, "reason": "is_folder"},
        )
    if not stat.S_ISREG(st.st_mode):
        raise AccessDeniedError(
            f"'{path}' is not a regular file.", details={"path": path, "reason": "not_regular"}
        )
    if st.st_nlink > 1:
        raise AccessDeniedError(
            f"'{path}' is a hard link shared with another file; memory files must have exactly "
            "one name.",
            details={"path": path, "reason": "hard_link"},
        )


def open_dir(parent_fd: int, name: str, path: str, *, create: bool) -> int | None:
    """Open the folder ``name`` under ``parent_fd`` without following links; ``None`` if missing."""
    for _ in range(3):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            if not create:
                return None
            with suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=parent_fd)
        except OSError as exc:
            raise _diagnose(parent_fd, name, path, exc) from None
    raise AccessDeniedError(f"'{path}' keeps changing while being opened.", details={"path": path})


@contextmanager
def folder(root: Path, parts: tuple[str, ...], *, create: bool) -> Iterator[int | None]:
    """Yield a descriptor of ``root/parts...`` (every part opened no-follow), or ``None``.

    ``root`` is the trusted memory root (it may itself be a symlink the person set up); the parts
    below it are untrusted and each is opened relative to its parent's descriptor.
    """
    if create:
        root.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    except FileNotFoundError:
        yield None
        return
    opened = [fd]
    try:
        for depth, part in enumerate(parts):
            shown = "/".join(parts[1 : depth + 1]) or "(your memory folder)"
            child = open_dir(opened[-1], part, shown, create=create)
            if child is None:
                yield None
                return
            opened.append(child)
        yield opened[-1]
    finally:
        for each in reversed(opened):
            os.close(each)


def read_file(dir_fd: int, name: str, path: str, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """Read a whole file (always a complete version: files are only ever replaced by rename).

    Raises:
        NotFoundError: no such file.
        AccessDeniedError, InvalidParameterError: not a plain single-link file, or too large.
    """
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise NotFoundError(f"'{path}' does not exist.", details={"path": path}) from None
    except OSError as exc:
        raise _diagnose(dir_fd, name, path, exc) from None
    try:
        st = os.fstat(fd)
        check_regular(st, path)
        if st.st_size > max_bytes:
            raise InvalidParameterError(
                f"'{path}' is {st.st_size} bytes; files over {max_bytes} bytes cannot be read "
                "through the memory tools.",
                details={"path": path, "size": st.st_size, "limit": max_bytes},
            )
        chunks = []
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
        return b"".join(chunks), st
    finally:
        os.close(fd)


@contextmanager
def locked(dir_fd: int) -> Iterator[None]:
    """Hold the folder's exclusive ``flock`` (taken on a descriptor of our own, so it excludes
    other threads and other processes alike) while one file in it is replaced and indexed."""
    fcntl.flock(dir_fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(dir_fd, fcntl.LOCK_UN)


def _fsync_dir(dir_fd: int) -> None:
    with suppress(OSError):  # some filesystems cannot fsync a folder; the rename still holds
        os.fsync(dir_fd)


@dataclass(slots=True)
class WriteResult:
    """What a write or an append changed, for the index, the quota and the event."""

    created: bool
    old_size: int
    new_size: int
    st: os.stat_result
    before: os.stat_result | None = None
    leading_newline: bool = False
    payload: bytes = b""


def existing(dir_fd: int, name: str, path: str) -> os.stat_result | None:
    """The stat of the plain file ``name`` (not followed), ``None`` if there is none.

    Raises:
        AccessDeniedError: a symlink, special file or hard link is in its place.
    """
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _symlink_denied(path)
    check_regular(st, path)
    return st


def _replace(dir_fd: int, name: str, data: bytes, durable: bool) -> os.stat_result:
    """Temp file in the same folder, fsync, rename over ``name``, fsync the folder."""
    temp = f"{TEMP_PREFIX}{secrets.token_hex(8)}"
    fd = os.open(temp, _CREATE_FLAGS, 0o644, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        st = os.fstat(fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    finally:
        os.close(fd)
    if durable:
        _fsync_dir(dir_fd)
    return st


def atomic_write(
    dir_fd: int, name: str, path: str, data: bytes, admit: Admit, *, durable: bool = True
) -> WriteResult:
    """Replace ``name`` with ``data`` atomically; the caller holds ``locked(dir_fd)``."""
    before = existing(dir_fd, name, path)
    old_size = before.st_size if before is not None else 0
    admit(old_size, len(data))
    st = _replace(dir_fd, name, data, durable)
    return WriteResult(before is None, old_size, len(data), st, before)


def overwrite(dir_fd: int, name: str, path: str, data: bytes, admit: Admit) -> WriteResult:
    """Rewrite ``name`` in place with ``data`` (no temporary file, no rename, no fsync); the
    caller holds ``locked(dir_fd)``. Not atomic across a crash: only for a scratch memory that
    is made again after one (a backtest's), where a rename per write costs more than the write.

    Raises:
        AccessDeniedError, InvalidParameterError: a symlink, special file or hard link is there.
    """
    before = existing(dir_fd, name, path)
    old_size = before.st_size if before is not None else 0
    admit(old_size, len(data))
    try:
        fd = os.open(name, _OVERWRITE_FLAGS, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        raise _diagnose(dir_fd, name, path, exc) from None
    try:
        check_regular(os.fstat(fd), path)  # what was opened, before a byte of it changes
        write_all(fd, data)
        os.ftruncate(fd, len(data))
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return WriteResult(before is None, old_size, len(data), st, before)


def open_append(dir_fd: int, name: str, path: str) -> tuple[int, os.stat_result, bool]:
    """Open (or create) ``name`` for appending, no-follow; returns ``(fd, stat, created)``.

    Raises:
        AccessDeniedError, InvalidParameterError: a symlink, special file, hard link or folder.
    """
    created = False
    try:
        fd = os.open(name, _APPEND_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        try:
            fd = os.open(name, _APPEND_FLAGS | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
        except OSError as exc:
            raise _diagnose(dir_fd, name, path, exc) from None
        created = True
    except OSError as exc:
        raise _diagnose(dir_fd, name, path, exc) from None
    try:
        st = os.fstat(fd)
        check_regular(st, path)
    except BaseException:
        os.close(fd)
        raise
    return fd, st, created


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_all(fd: int, size: int) -> bytes:
    chunks, offset = [], 0
    while offset < size:
        block = os.pread(fd, min(1 << 20, size - offset), offset)
        if not block:
            break
        chunks.append(block)
        offset += len(block)
    return b"".join(chunks)


def sync_folder(dir_fd: int) -> None:
    """Make a new file's name durable (its data is fsynced on its own descriptor)."""
    _fsync_dir(dir_fd)


def walk_files(
    dir_fd: int, prefix: str = "", depth: int = 0, max_depth: int = 16
) -> Iterator[tuple[str, os.stat_result]]:
    """Yield ``(relative_path, stat)`` of every plain file below ``dir_fd``, sorted by path.

    Symlinks, hard-linked files, special files and hidden names (the bank's temp files) are
    skipped, never followed; stale temp files left by a crash are removed on the way.
    """
    with os.scandir(dir_fd) as entries:
        items = sorted(entries, key=lambda entry: entry.name)
    for entry in items:
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if entry.name.startswith("."):
            if entry.name.startswith(TEMP_PREFIX) and time.time() - st.st_mtime > STALE_TEMP_S:
                with suppress(OSError):
                    os.unlink(entry.name, dir_fd=dir_fd)
            continue
        rel = f"{prefix}{entry.name}"
        if stat.S_ISDIR(st.st_mode) and depth + 1 < max_depth:
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                yield from walk_files(child, f"{rel}/", depth + 1, max_depth)
            finally:
                os.close(child)
        elif stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
            yield rel, st
