"""``kestrel --self-test``: the desk opened offscreen on a fresh workspace, the offline demo run to
its first fill, exit 0; a failure or a timeout says which step and why, and exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings

from app.secrets import SecretStore
from app.ui.main_window import MainWindow
from app.ui.self_test import Deadline, SelfTestFailed, check_bundle, check_desk
from app.ui.settings.prefs import UiPrefs
from app.workspace import Workspace
from tests.helpers.cli import run_main
from tests.helpers.paths import REPO

pytestmark = pytest.mark.qt_log_ignore("propagateSizeHints", "does not support raise",
                                       "does not support activateWindow")


def _kestrel(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``kestrel ARGS`` of this checkout, as a person without a display runs it."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
           and not k.startswith("KESTREL_")}
    return subprocess.run(  # noqa: S603 - this interpreter and the app
        [sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=timeout,
        cwd=REPO, env=env, check=False)


@pytest.mark.slow
def test_the_self_test_opens_the_desk_without_a_display_and_passes_at_the_first_fill() -> None:
    done = _kestrel("--self-test")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kestrel self-test: desk open offscreen on the fresh workspace ")
    assert "Offline replay" in lines[0] and "rule engine (not an LLM)" in lines[0]
    assert lines[1].startswith("kestrel self-test: first fill after ")
    assert " BTC/USD at " in lines[1] and "(market time 2019-" in lines[1]
    assert lines[2] == "kestrel self-test: window icon kestrel.png (256x256)"
    assert lines[3] == "kestrel self-test: tokenizer cl100k_base loaded"
    assert lines[-1].startswith("kestrel self-test: passed in ")
    assert "Traceback" not in done.stderr and "propagateSizeHints" not in done.stderr
    workspace = Path(lines[0].split(" workspace ", 1)[1].split(" after ", 1)[0])
    assert not workspace.exists(), "the temporary workspace is removed"


def test_a_self_test_out_of_time_fails_saying_so() -> None:
    done = _kestrel("--self-test", "--self-test-timeout", "1")
    assert done.returncode == 1
    assert done.stderr.startswith("kestrel self-test: FAILED: the desk did not open the "
                                  "workspace "), done.stderr
    assert done.stderr.rstrip().endswith("within 1 s") and "Traceback" not in done.stderr


@pytest.mark.parametrize(("argv", "said"), [
    (["--self-test", "--workspace", "/tmp/x"],
     "--self-test opens a fresh temporary workspace on the offline demo; it takes no "
     "--workspace"),
    (["--self-test", "--venue", "live-paper", "--speed", "60"], "it takes no --speed, --venue"),
    (["--self-test-timeout", "30"], "--self-test-timeout is an option of --self-test"),
    (["--self-test", "--self-test-timeout", "0"],
     "--self-test-timeout must be a positive number of seconds, got 0"),
    (["gui", "--self-test", "--self-test-timeout", "nan"],
     "--self-test-timeout must be a positive number of seconds, got nan"),
])
def test_self_test_options_it_cannot_honour_are_refused(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        run_main(argv)
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


def test_a_desk_that_cannot_open_its_workspace_fails_the_self_test_with_the_reason(
    tmp_path: Path, qtbot: Any, qloop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.agents import costs

    missing = tmp_path / "bundle" / "resources" / "prices.yaml"  # a bundle built without it
    monkeypatch.setattr(costs, "resource_path", lambda *_parts: missing)
    prefs = UiPrefs(QSettings(str(tmp_path / "ui.ini"), QSettings.Format.IniFormat))
    window = MainWindow(prefs, SecretStore(), interactive_errors=False)
    qtbot.addWidget(window)
    window.show()
    said: list[str] = []
    with pytest.raises(SelfTestFailed) as failed:
        qloop.run_until_complete(check_desk(window, Workspace.at(tmp_path / "ws"),
                                            Deadline(60), said.append))
    message = str(failed.value)
    assert message.startswith(f"the desk cannot open the workspace {tmp_path / 'ws'}: ")
    assert f"{missing}: cannot read the price file" in message
    assert said == []
    window.close()
    qloop.run_until_complete(window.aclose())


def test_the_bundle_check_names_every_module_that_does_not_import_and_file_that_is_missing(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "kestrel-bundle.json"
    manifest.write_text(json.dumps({
        "lazy_imports": ["json", "kestrel_no_such_module", "ccxt.async_support"],
        "resources": ["prices.yaml", "prompts/no_such_prompt.md"],
    }), encoding="utf-8")
    with pytest.raises(SelfTestFailed) as failed:
        check_bundle(manifest)
    assert str(failed.value) == (
        "the bundle is incomplete: resource prompts/no_such_prompt.md is missing; "
        "kestrel_no_such_module does not import (ModuleNotFoundError: No module named "
        "'kestrel_no_such_module')")
    manifest.write_text(json.dumps({"lazy_imports": ["json", "ccxt.async_support"],
                                    "resources": ["prices.yaml", "model_cutoffs.yaml"]}))
    assert check_bundle(manifest) == (
        "bundle complete: 2 resource files, 2 lazily imported modules import "
        "(json, ccxt.async_support)")
    manifest.write_text("{not json")
    with pytest.raises(SelfTestFailed, match="the bundle's manifest .* cannot be read"):
        check_bundle(manifest)
