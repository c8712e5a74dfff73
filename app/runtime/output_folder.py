"""The output folder of a command that writes a run (``kestrel backtest``, ``backtest --agents``,
``eval``): created, or reused only when it is that command's own.

``--out DIR`` used to be emptied with ``rmtree`` before a run. Given a workspace, that deleted its
database, backups and memory, even while ``kestrel run`` was writing it. So a command now uses a
folder only when it does not exist yet, is empty, or carries the marker file (``.kestrel-output``)
the same command wrote into it when it made it. Anything else (a workspace, another command's
output, a folder with other files) is refused, left exactly as it was, and the refusal says what
was found and what to do.

Reusing its own folder, a command replaces only the entries it writes (``OutputKind.writes``),
never another file put beside them. A workspace among those entries (an agent backtest's run
workspace) is cleared only while this process holds its lock: one another process writes is
refused and left whole. Its lock file stays, as every lock file does (``app.store.lock``: deleting
one lets two processes lock two different files), and so does the marker of an output folder
nested in a cleared entry (an eval's window runs), so it can be reused in turn.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from app.domain.errors import OperationalError
from app.store.backups import BACKUP_DIR_NAME
from app.store.identity import WORKSPACE_ID_FILE
from app.store.lock import (
    LOCK_FILE_NAME,
    Holder,
    WorkspaceBusyError,
    WorkspaceLock,
    read_holder,
)

MARKER_NAME = ".kestrel-output"
# what makes a folder a workspace: its database, memory, lock, backups or id
WORKSPACE_SIGNS = ("kestrel.db", "memory", LOCK_FILE_NAME, BACKUP_DIR_NAME, WORKSPACE_ID_FILE)
_KEPT = frozenset({MARKER_NAME, LOCK_FILE_NAME})  # never removed when an entry is cleared
_SHOWN = 5  # foreign entries named in a refusal


@dataclass(frozen=True, slots=True)
class OutputKind:
    """One command's output: its name as a person types it, and what it writes into its folder.

    Attributes:
        command: e.g. ``kestrel eval``; written into the marker and named in refusals.
        writes: the files and folders it writes at the top of its folder; only these are
            replaced when the folder is reused.
    """

    command: str
    writes: tuple[str, ...]


class OutputFolderRefused(OperationalError):
    """The output folder is not this command's to write; nothing in it was changed."""


def prepare_output_folder(folder: Path, kind: OutputKind, *, replace: bool = True) -> Path:
    """Make ``folder`` ready for a run of ``kind``: create it, or check it may be reused.

    Args:
        replace: clear the entries a previous run of ``kind`` wrote (off: only check the folder
            and mark it, to add a file to whatever is there).

    Raises:
        OutputFolderRefused: the folder is a file, a workspace, another command's output or
            holds other files, or a workspace among its entries is in use; nothing was changed.
        OSError: the folder cannot be created or written.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputFolderRefused(
            f"the output folder {folder} is a file, not a folder; nothing was changed. Give "
            "--out a new or empty folder")
    if not folder.exists():
        folder.mkdir(parents=True)
        _write_marker(folder, kind)
        return folder
    signs = [name for name in WORKSPACE_SIGNS if (folder / name).exists()]
    if signs:
        raise OutputFolderRefused(_workspace_refusal(folder, kind, signs))
    marker = _read_marker(folder)
    others = sorted(entry.name for entry in folder.iterdir() if entry.name != MARKER_NAME)
    if marker is None:
        if others:
            raise OutputFolderRefused(_foreign_refusal(folder, kind, others))
        _write_marker(folder, kind)
        return folder
    if marker != kind.command:
        made_by = marker or "an unknown command (its marker cannot be read)"
        raise OutputFolderRefused(
            f"the output folder {folder} holds the output of {made_by}, not of {kind.command}; "
            f"nothing was changed. Give --out another folder, or delete this one yourself if "
            "you no longer need that output")
    if replace:
        _clear(folder, kind)
    return folder


def is_output_of(folder: Path, kind: OutputKind) -> bool:
    """Whether ``folder`` carries the marker of ``kind``."""
    return _read_marker(Path(folder)) == kind.command


def _workspace_refusal(folder: Path, kind: OutputKind, signs: list[str]) -> str:
    holder = read_holder(folder / LOCK_FILE_NAME)
    busy = f"; it is in use by {holder.describe()}" if holder is not None else ""
    shown = ", ".join(f"{name}/" if (folder / name).is_dir() else name for name in signs)
    return (
        f"the output folder {folder} is a Kestrel workspace (it holds {shown}){busy}. "
        f"{kind.command} never writes into a workspace, and nothing in it was changed: give "
        "--out another folder (a new or empty one)"
    )


def _foreign_refusal(folder: Path, kind: OutputKind, others: list[str]) -> str:
    shown = ", ".join(others[:_SHOWN]) + (f" and {len(others) - _SHOWN} more"
                                          if len(others) > _SHOWN else "")
    return (
        f"the output folder {folder} already holds files {kind.command} did not make ({shown}); "
        f"it writes only into a new or empty folder, or one it made itself. Nothing was "
        "changed: give --out another folder, or delete this one yourself if you no longer need "
        "what is in it"
    )


def _read_marker(folder: Path) -> str | None:
    """The command named in the folder's marker; None without one, "" when unreadable."""
    path = folder / MARKER_NAME
    if not path.exists() and not path.is_symlink():
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError):
        return ""
    return lines[0].strip() if lines else ""


def _write_marker(folder: Path, kind: OutputKind) -> None:
    (folder / MARKER_NAME).write_text(
        f"{kind.command}\n"
        f"This folder holds the output of `{kind.command}`. Running it again with this folder as\n"
        "its output replaces what it wrote here and nothing else; other commands refuse it.\n",
        encoding="utf-8",
    )


def _clear(folder: Path, kind: OutputKind) -> None:
    """Remove what a previous run of ``kind`` wrote, each workspace among it under its lock.

    Every lock is checked, then taken, before anything is removed, so a workspace in use refuses
    the whole clearing and nothing is removed at all. The check reads who the lock files name
    (a holder that is this process is a run of its own that has ended: a lock this process held
    would refuse it all the same); taking them then decides.
    """
    targets = [folder / name for name in kind.writes if os.path.lexists(folder / name)]
    locks = [path for target in targets if target.is_dir() and not target.is_symlink()
             for path in _lock_files(target)]
    for path in locks:  # first without touching any: taking a lock rewrites its file
        holder = read_holder(path)
        if holder is not None and holder.pid != os.getpid():
            raise _busy(folder, path, holder)
    held: list[WorkspaceLock] = []
    try:
        for path in locks:
            try:
                held.append(WorkspaceLock.acquire(path, f"{kind.command} (replacing its output)"))
            except WorkspaceBusyError as exc:
                raise _busy(folder, path, exc.holder) from None
        for target in targets:
            _remove_keeping_locks(target)
    finally:
        for lock in held:
            lock.release()


def _busy(folder: Path, lock: Path, holder: Holder | None) -> OutputFolderRefused:
    who = holder.describe() if holder is not None else "another process"
    return OutputFolderRefused(
        f"the workspace {lock.parent} in the output folder {folder} is in use by {who}; "
        "nothing was changed. Wait for it to finish, or give --out another folder")


def _lock_files(root: Path) -> list[Path]:
    """The lock files under ``root``, without following a symbolic link out of it."""
    found = []
    for here, _dirs, files in os.walk(root, followlinks=False):
        if LOCK_FILE_NAME in files:
            found.append(Path(here) / LOCK_FILE_NAME)
    return found


def _remove_keeping_locks(target: Path) -> None:
    """Remove ``target`` (a link is removed, never followed), keeping lock and marker files."""
    if target.is_symlink() or not target.is_dir():
        target.unlink()
        return
    for here, dirs, files in os.walk(target, topdown=False, followlinks=False):
        for name in files:
            if name not in _KEPT:
                (Path(here) / name).unlink()
        for name in dirs:
            path = Path(here) / name
            if path.is_symlink():
                path.unlink()
            else:
                _rmdir_if_empty(path)
    _rmdir_if_empty(target)


def _rmdir_if_empty(path: Path) -> None:
    with contextlib.suppress(OSError):  # it keeps a lock or a marker file
        path.rmdir()
