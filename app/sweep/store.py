"""A sweep's folder: its manifest, each finished cell kept durably, and the resume rules.

Layout of ``--out DIR``::

    .kestrel-output     made by ``kestrel sweep`` (``app.runtime.output_folder``)
    sweep.json          the manifest: the definition (grid, data digests, money, ...) and cells
    sweep.lock          held while a process runs the sweep
    cells/<id>/         each cell's output, the same report as a single ``kestrel backtest``
    results/<id>.json   each finished cell's record, written last and atomically
    results.csv, results.json, heatmap.png   the table, written when the sweep ends or stops

Why one record file per cell, written last with ``os.replace`` after an ``fsync``: a sweep killed
at any moment (``kill -9``, a power cut) leaves every record either whole or absent, never half
written, so a cell counts as done exactly when its record is there. Resuming runs only the cells
without one; a cell folder without its record (killed while it was being written) is cleared
first, so each cell ends with exactly one record and one folder. Only the driving process writes
here (workers return their output as bytes), so no orphaned worker can write into a resumed sweep.

A resumed sweep must be the same sweep: the manifest's identity covers the grid, the settings and
the data's digests. Another grid into the same folder is refused, naming what differs, and the
folder is left as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.domain.errors import OperationalError
from app.runtime.output_folder import OutputKind, is_output_of, prepare_output_folder
from app.store.lock import WorkspaceBusyError, WorkspaceLock
from app.sweep.cells import CellOutcome, unzip
from app.sweep.space import SweepPlan, canonical

MANIFEST = "sweep.json"
LOCK = "sweep.lock"
CELLS = "cells"
RESULTS = "results"
TABLE_CSV = "results.csv"
TABLE_JSON = "results.json"
HEATMAP = "heatmap.png"
SWEEP_OUTPUT = OutputKind("kestrel sweep", (MANIFEST, LOCK, CELLS, RESULTS, TABLE_CSV,
                                            TABLE_JSON, HEATMAP))
_PARTIAL = ".partial"


class SweepRefused(OperationalError):
    """The folder holds another sweep (or is not a sweep's to use); nothing was changed."""


class SweepBusy(OperationalError):
    """Another process is running this sweep."""


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all, even across a crash: a temporary file beside it,
    forced to disk, renamed over it, and the rename itself forced to disk."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    temporary.replace(path)
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every system can open a folder to sync it
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def is_sweep(folder: Path) -> bool:
    """Whether ``folder`` holds a sweep (its marker and manifest)."""
    return is_output_of(folder, SWEEP_OUTPUT) and (Path(folder) / MANIFEST).is_file()


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of the sweep in ``folder``.

    Raises:
        OperationalError: there is none, or it cannot be read.
    """
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OperationalError(f"{folder} holds no sweep ({MANIFEST} is missing)") from None
    except (OSError, ValueError) as exc:
        raise OperationalError(f"the sweep manifest {path} cannot be read: {exc}") from None
    if not isinstance(manifest, dict) or "cells" not in manifest:
        raise OperationalError(f"the sweep manifest {path} is not a sweep's manifest")
    return manifest


def read_records(folder: Path, cell_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The finished cells' records, by cell id (a record that cannot be read counts as not
    finished: it is run again)."""
    records: dict[str, dict[str, Any]] = {}
    results = Path(folder) / RESULTS
    for cell_id in cell_ids:
        path = results / f"{cell_id}.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("cell") == cell_id:
            records[cell_id] = record
    return records


class SweepFolder:
    """The folder of one sweep, held by this process while it runs.

    Use ``SweepFolder.open(out, plan)`` (creates or checks the folder, takes its lock), then
    ``done()``, ``prepare(cell_id)`` before a cell runs again, ``keep(outcome, labels)`` for each
    finished cell, and ``close()``.
    """

    def __init__(self, root: Path, lock: WorkspaceLock, manifest: dict[str, Any]) -> None:
        self.root = root
        self._lock = lock
        self.manifest = manifest

    @classmethod
    def open(cls, root: Path, plan: SweepPlan, *, command: str = "kestrel sweep"
             ) -> SweepFolder:
        """Create the sweep's folder, or take up the same sweep where it stopped.

        Raises:
            OutputFolderRefused: the folder is a workspace, another command's output, or holds
                other files.
            SweepRefused: it holds a sweep of another grid, settings or data.
            SweepBusy: another process is running this sweep.
        """
        root = Path(root)
        prepare_output_folder(root, SWEEP_OUTPUT, replace=False)
        if (root / MANIFEST).exists():  # refused before the lock's file is even rewritten
            cls._check(root, plan)
        try:
            lock = WorkspaceLock.acquire(root / LOCK, command)
        except WorkspaceBusyError as exc:
            who = exc.holder.describe() if exc.holder is not None else "another process"
            raise SweepBusy(f"the sweep in {root} is being run by {who}; wait for it to end "
                            "(or stop it), then run this again to resume it") from None
        try:
            manifest = cls._manifest(root, plan)
        except BaseException:
            lock.release()
            raise
        (root / CELLS).mkdir(exist_ok=True)
        (root / RESULTS).mkdir(exist_ok=True)
        return cls(root, lock, manifest)

    @staticmethod
    def _manifest(root: Path, plan: SweepPlan) -> dict[str, Any]:
        wanted = {
            "identity": plan.identity,
            "definition": plan.definition,
            "columns": plan.columns,
            "cells": [{"cell": c.task.cell_id, "labels": c.labels, "values": c.values}
                      for c in plan.cells],
            "skipped": [{"labels": s.labels, "reason": s.reason} for s in plan.skipped],
            "grid_size": plan.grid_size,
        }
        path = root / MANIFEST
        if not path.exists():
            write_atomically(path, (json.dumps(wanted, indent=2, ensure_ascii=False) + "\n")
                             .encode("utf-8"))
            return wanted
        return SweepFolder._check(root, plan)

    @staticmethod
    def _check(root: Path, plan: SweepPlan) -> dict[str, Any]:
        """The stored manifest, if it is this plan's; else refused, saying what differs."""
        stored = read_manifest(root)
        if stored.get("identity") != plan.identity:
            what = differences(stored.get("definition", {}), plan.definition)
            raise SweepRefused(
                f"{root} holds another sweep ({what}); "
                "a sweep resumes only with the same grid, settings and data. Nothing was "
                "changed: run it with the same options to resume it, or give --out another "
                "folder")
        return stored

    @property
    def cell_ids(self) -> list[str]:
        return [c["cell"] for c in self.manifest["cells"]]

    def done(self) -> dict[str, dict[str, Any]]:
        return read_records(self.root, self.cell_ids)

    def prepare(self, cell_id: str) -> None:
        """Clear what a cell that did not finish left behind (its record is absent)."""
        for name in (cell_id, cell_id + _PARTIAL):
            path = self.root / CELLS / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()

    def forget(self, cell_id: str) -> None:
        """Drop a finished cell's record and folder, so it runs again (``--retry-failed``)."""
        (self.root / RESULTS / f"{cell_id}.json").unlink(missing_ok=True)
        self.prepare(cell_id)

    def keep(self, outcome: CellOutcome, labels: Mapping[str, str], run: str) -> dict[str, Any]:
        """Store a finished cell: its folder first, then its record (atomically), so a record
        on disk always has its whole folder beside it."""
        cell_id = outcome.cell_id
        self.prepare(cell_id)
        partial = self.root / CELLS / (cell_id + _PARTIAL)
        unzip(outcome.archive, partial)
        partial.replace(self.root / CELLS / cell_id)
        record = {**outcome.record, "cell": cell_id, "params": dict(labels), "run": run,
                  "folder": f"{CELLS}/{cell_id}"}
        write_atomically(self.root / RESULTS / f"{cell_id}.json",
                         (json.dumps(record, indent=2, ensure_ascii=False) + "\n")
                         .encode("utf-8"))
        return record

    def close(self) -> None:
        self._lock.release()


def differences(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> str:
    """What differs between two sweep definitions, in words (the first few things)."""
    said: list[str] = []
    old_grid = {g["name"]: g["values"] for g in stored.get("grid", [])}
    new_grid = {g["name"]: g["values"] for g in wanted.get("grid", [])}
    for name in [*old_grid, *[n for n in new_grid if n not in old_grid]]:
        old, new = old_grid.get(name), new_grid.get(name)
        if old == new:
            continue
        if old is None:
            said.append(f"it does not sweep {name}")
        elif new is None:
            said.append(f"it also sweeps {name} ({', '.join(old)})")
        else:
            said.append(f"its {name} is {', '.join(old)}, not {', '.join(new)}")
    old_data, new_data = stored.get("data", {}), wanted.get("data", {})
    if old_data != new_data:
        changed = sorted(n for n in set(old_data) & set(new_data) if old_data[n] != new_data[n])
        said.append(f"{', '.join(changed)} changed since" if changed else
                    f"it ran on {', '.join(old_data) or 'other data'}")
    for key in sorted(set(stored) | set(wanted)):
        if key in ("grid", "data", "version"):
            continue
        if canonical(stored.get(key)) != canonical(wanted.get(key)):
            said.append(f"its {key} is {_shown(stored.get(key))}, not {_shown(wanted.get(key))}")
    return "; ".join(said[:4]) or "its cells differ"


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    if value is None:
        return "unset"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "none"
    return str(value)
