"""A sweep's folder: the manifest written once, one process at a time, another grid refused with
what differs (and the folder left as it was), each cell kept folder first and record last, and
what an interrupted cell left cleared before it runs again."""

from __future__ import annotations

import io
import json
import zipfile
from decimal import Decimal
from pathlib import Path

import pytest

from app.runtime.output_folder import OutputFolderRefused
from app.sweep.cells import CellOutcome, unzip
from app.sweep.space import SweepRequest, plan_sweep
from app.sweep.store import SweepBusy, SweepFolder, SweepRefused, is_sweep
from tests.helpers.files import tree
from tests.helpers.paths import BTC_USDT_1H


def plan(*grid: str, **options: object):  # noqa: ANN201 - a SweepPlan
    request = SweepRequest(data=[BTC_USDT_1H], grid=list(grid), **options)  # type: ignore[arg-type]
    return plan_sweep(request)


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def outcome(cell: str, status: str = "ok") -> CellOutcome:
    return CellOutcome(cell, {"cell": cell, "status": status, "sharpe": 1.0},
                       zipped({"summary.json": b"{}", "workspace/kestrel.db": b"db"}))


def test_a_new_folder_gets_the_manifest_and_is_held_while_the_sweep_runs(tmp_path: Path
                                                                        ) -> None:
    swept = plan("fast=5,10", "slow=30")
    folder = SweepFolder.open(tmp_path / "out", swept)
    try:
        assert is_sweep(tmp_path / "out")
        manifest = json.loads((tmp_path / "out" / "sweep.json").read_text(encoding="utf-8"))
        assert manifest["identity"] == swept.identity
        assert [c["labels"] for c in manifest["cells"]] == [{"fast": "5", "slow": "30"},
                                                            {"fast": "10", "slow": "30"}]
        with pytest.raises(SweepBusy, match="is being run by process"):
            SweepFolder.open(tmp_path / "out", swept)
    finally:
        folder.close()
    SweepFolder.open(tmp_path / "out", swept).close()  # free again once closed


def test_another_grid_in_the_same_folder_is_refused_naming_the_difference(tmp_path: Path
                                                                          ) -> None:
    out = tmp_path / "out"
    folder = SweepFolder.open(out, plan("fast=5,10,20", "slow=30,50"))
    folder.keep(outcome("c0001"), {"fast": "5", "slow": "30"}, "run-1")
    folder.close()
    before = tree(out)
    with pytest.raises(SweepRefused, match="its fast is 5, 10, 20, not 5, 10") as refused:
        SweepFolder.open(out, plan("fast=5,10", "slow=30,50"))
    assert "Nothing was changed" in str(refused.value)
    with pytest.raises(SweepRefused, match="it also sweeps slow"):
        SweepFolder.open(out, plan("fast=5,10,20", fixed=["slow=30"]))
    with pytest.raises(SweepRefused, match="its cash is 10000, not 500"):
        SweepFolder.open(out, plan("fast=5,10,20", "slow=30,50", cash=Decimal(500)))
    assert tree(out) == before


def test_a_folder_holding_something_else_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(OutputFolderRefused, match="already holds files"):
        SweepFolder.open(out, plan("fast=5"))
    assert tree(out) == {"notes.txt": b"mine"}


def test_a_kept_cell_has_its_whole_folder_before_its_record(tmp_path: Path) -> None:
    folder = SweepFolder.open(tmp_path / "out", plan("fast=5,10", "slow=30"))
    try:
        record = folder.keep(outcome("c0002"), {"fast": "10", "slow": "30"}, "run-1")
        assert record["params"] == {"fast": "10", "slow": "30"} and record["run"] == "run-1"
        cell = tmp_path / "out" / "cells" / "c0002"
        assert (cell / "workspace" / "kestrel.db").read_bytes() == b"db"
        assert list(folder.done()) == ["c0002"]
        leftovers = [p.name for p in (tmp_path / "out").rglob("*") if ".tmp" in p.name]
        assert leftovers == []
    finally:
        folder.close()


def test_what_an_interrupted_cell_left_is_cleared_before_it_runs_again(tmp_path: Path) -> None:
    out = tmp_path / "out"
    folder = SweepFolder.open(out, plan("fast=5,10", "slow=30"))
    try:
        (out / "cells" / "c0001" / "workspace").mkdir(parents=True)
        (out / "cells" / "c0001.partial").mkdir()
        (out / "results" / "c0002.json").write_text("{\"cell\": \"c00", encoding="utf-8")
        assert folder.done() == {}  # a torn record is no record: the cell runs again
        folder.prepare("c0001")
        assert sorted(p.name for p in (out / "cells").iterdir()) == []
        folder.keep(outcome("c0001", "failed"), {"fast": "5", "slow": "30"}, "run-1")
        folder.forget("c0001")
        assert folder.done() == {} and not (out / "cells" / "c0001").exists()
    finally:
        folder.close()


def test_an_archive_cannot_write_outside_the_cell_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside its folder"):
        unzip(zipped({"../escape.txt": b"x"}), tmp_path / "cell")
    assert not (tmp_path / "escape.txt").exists()
