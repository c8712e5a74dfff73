"""The Linux desktop integration the bundle carries: the menu entry names the window's desktop
file and icon, and the install script writes an entry that runs the bundle it sits in, whatever
that folder is called, and takes it away again."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from app.ui.app import DESKTOP_FILE, icon_path
from tests.helpers.paths import REPO

LINUX = REPO / "packaging" / "linux"


def _entry(text: str) -> dict[str, str]:
    lines = text.splitlines()
    assert lines[0] == "[Desktop Entry]"
    return dict(line.split("=", 1) for line in lines[1:] if line and not line.startswith("#"))


def test_the_menu_entry_names_the_window_s_desktop_file_and_icon() -> None:
    entry = _entry((LINUX / "kestrel.desktop").read_text(encoding="utf-8"))
    assert entry["Type"] == "Application" and entry["Name"] == "Kestrel"
    assert entry["Exec"] == entry["TryExec"] == "kestrel"
    assert entry["Icon"] == entry["StartupWMClass"] == DESKTOP_FILE
    assert entry["Terminal"] == "false" and entry["Categories"].endswith(";")
    assert icon_path() == REPO / "resources" / "icons" / "kestrel.png"
    assert icon_path().read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert (REPO / "resources" / "icons" / "kestrel.svg").read_text().lstrip().startswith("<?xml")


def _bundle(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for source in [*LINUX.iterdir(), *(REPO / "resources" / "icons").iterdir()]:
        (folder / source.name).write_bytes(source.read_bytes())
        (folder / source.name).chmod(source.stat().st_mode)
    (folder / "kestrel").write_text("#!/bin/sh\n", encoding="utf-8")
    (folder / "kestrel").chmod(0o755)
    return folder


def _install(bundle: Path, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the repository's own script
        [str(bundle / "install-desktop-entry.sh"), *args], capture_output=True, text=True,
        timeout=60, env={**os.environ, "XDG_DATA_HOME": str(data)}, check=False)


def test_the_entry_runs_a_bundle_whose_path_has_spaces_quotes_and_dollars(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / 'my apps' / 'kestrel "v1" $HOME \\ x')
    data = tmp_path / "data"
    done = _install(bundle, data)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"installed {data}/applications/kestrel.desktop (runs ")
    entry = _entry((data / "applications" / "kestrel.desktop").read_text(encoding="utf-8"))
    # the Desktop Entry spec's quoting: \" \$ and \\ inside quotes, each backslash doubled
    assert entry["Exec"] == (f'"{tmp_path}/my apps/kestrel \\\\"v1\\\\" \\\\$HOME '
                             '\\\\\\\\ x/kestrel"')
    assert entry["TryExec"] == f'{tmp_path}/my apps/kestrel "v1" $HOME \\\\ x/kestrel'
    assert entry["Icon"] == "kestrel" and entry["Name"] == "Kestrel"

    removed = _install(bundle, data, "--remove")
    assert removed.returncode == 0, removed.stderr
    assert not (data / "applications" / "kestrel.desktop").exists()
    assert not (data / "icons" / "hicolor" / "scalable" / "apps" / "kestrel.svg").exists()


def test_the_install_script_refuses_what_it_cannot_do(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "bundle")
    wrong = _install(bundle, tmp_path / "data", "--everywhere")
    assert wrong.returncode == 2 and "usage:" in wrong.stderr
    (bundle / "kestrel").unlink()
    missing = _install(bundle, tmp_path / "data")
    assert missing.returncode == 1
    assert f"{bundle}/kestrel is missing; run this script from the Kestrel bundle" in missing.stderr
    assert not (tmp_path / "data" / "applications").exists()
