"""A fresh clone has everything its tests read, and every data file in it says where it came from.

The repository used to read market data from a folder beside the checkout, which a
person who clones it does not have. These tests keep it self-contained: the test data and the
bundled sample data are in the repository, each file is attributed (source repository, path,
commit, licence) and unchanged since it was copied, and only permissive licences are carried.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.helpers import paths
from tests.helpers.paths import REPO, SAMPLE_DATA, TEST_DATA

PERMISSIVE = {"Apache-2.0", "MIT"}
# folders of tests/data this manifest covers (others, e.g. ccxt fixtures, carry their own notice)
ATTRIBUTED = ("klines", "indicators_reference")
# the only file allowed to look beside the checkout: it holds only the tests that compare the
# prompt with a source document, and they skip, saying why, when that document is absent
SEED_COMPARISON = REPO / "tests" / "unit" / "agents" / "test_prompt_part_d.py"
SCANNED = ("app", "tests", "scripts", ".ci", "packaging")
OUTSIDE = re.compile(
    "|".join((
        r"\.\./" + "shared",
        r"parents?(\[\d+\])?\s*/\s*[\"']" + "shared" + r"[\"']",
        r"[\"']" + "shared" + r"[\"']\s*/\s*[\"'](data|seeds|design|tools)[\"']",
    ))
)


def _manifest() -> dict[str, dict[str, str]]:
    entries = json.loads((TEST_DATA / "MANIFEST.json").read_text(encoding="utf-8"))
    return {entry["file"]: entry for entry in entries}


def _data_files() -> list[Path]:
    return sorted(
        p for folder in ATTRIBUTED for p in (TEST_DATA / folder).rglob("*") if p.is_file()
    )


def test_every_test_data_path_is_inside_the_repository_and_exists() -> None:
    for name in ("SAMPLE_DATA", "TEST_DATA", "KLINES", "INDICATOR_SHEETS", "BTC_USD_1H",
                 "BTC_USD_1D", "BTC_USDT_1H", "BTC_USDT_1D", "BTC_USD_1M"):
        path: Path = getattr(paths, name)
        assert path.resolve().is_relative_to(REPO), f"{name} = {path} is outside the repository"
        assert path.exists(), f"{name} = {path} is missing"


def test_no_code_or_test_reads_the_folder_beside_the_checkout() -> None:
    offenders = []
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*")):
            if (not path.is_file() or path.suffix not in (".py", ".sh", ".spec", "")
                    or path == Path(__file__).resolve() or path.is_relative_to(TEST_DATA)):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                if OUTSIDE.search(line) and path != SEED_COMPARISON:
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def test_the_seed_comparison_skips_with_its_reason_when_the_document_is_absent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.unit.agents import test_prompt_part_d

    monkeypatch.setattr(test_prompt_part_d, "SEED", tmp_path / "absent.txt")
    with pytest.raises(pytest.skip.Exception, match="source document"):
        test_prompt_part_d.part_d()


def test_every_test_data_file_is_listed_with_a_permissive_licence_and_unchanged() -> None:
    manifest = _manifest()
    files = _data_files()
    assert files, "no test data found"
    listed = {str(p.relative_to(TEST_DATA)) for p in files}
    assert listed == set(manifest), "tests/data/MANIFEST.json and the files differ"
    readme = (TEST_DATA / "README.md").read_text(encoding="utf-8")
    for path in files:
        entry = manifest[str(path.relative_to(TEST_DATA))]
        assert entry["license"] in PERMISSIVE, entry
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"], entry["file"]
        for key in ("file", "source_repo", "source_path", "source_commit"):
            assert entry[key] in readme, f"tests/data/README.md does not give {entry[key]}"


def test_every_bundled_sample_data_file_is_attributed() -> None:
    notice = (SAMPLE_DATA / "NOTICE.md").read_text(encoding="utf-8")
    files = sorted(SAMPLE_DATA.glob("*.csv"))
    assert files
    for path in files:
        line = next((ln for ln in notice.splitlines() if f"`{path.name}`" in ln), None)
        assert line is not None, f"{path.name} is not in resources/sample_data/NOTICE.md"
        assert "Apache-2.0" in line and re.search(r"\([0-9a-f]{40}\)", line), line
