"""The ``[logging]`` settings work: a workspace's rotating log file, at the chosen level, with
every secret redacted, and no file when ``to_file`` is off."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import LoggingSettings, settings_from_mapping
from app.workspace import LOG_FILE_NAME, Workspace, setup_logging

KEY = "sk-live-0123456789abcdefLOGGED"


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Each test configures the process's logging; put the root logger back after it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def _log_text(workspace: Workspace) -> str:
    for handler in logging.getLogger().handlers:
        handler.flush()
    return (workspace.log_dir / LOG_FILE_NAME).read_text(encoding="utf-8")


def test_a_workspace_log_keeps_its_level_and_redacts_secrets(tmp_path: Path) -> None:
    workspace = Workspace.at(tmp_path).ensure()
    setup_logging(workspace, LoggingSettings(level="WARNING"))
    log = logging.getLogger("app.test")
    log.info("an ordinary step")
    log.warning("the server answered 401 for key %s", KEY)
    text = _log_text(workspace)
    assert "an ordinary step" not in text, "INFO is below the WARNING level chosen"
    assert "the server answered 401" in text and KEY not in text and "[redacted]" in text


def test_the_log_rotates_at_its_size_keeping_the_chosen_number_of_files(tmp_path: Path) -> None:
    workspace = Workspace.at(tmp_path).ensure()
    setup_logging(workspace, settings_from_mapping(
        {"logging": {"level": "DEBUG", "max_bytes": 10_000, "backups": 2}}).logging)
    log = logging.getLogger("app.test")
    for i in range(600):
        log.debug("line %04d %s", i, "x" * 60)
    names = sorted(p.name for p in workspace.log_dir.iterdir())
    assert names == [LOG_FILE_NAME, f"{LOG_FILE_NAME}.1", f"{LOG_FILE_NAME}.2"]
    assert all(p.stat().st_size <= 10_200 for p in workspace.log_dir.iterdir())
    assert "line 0599" in _log_text(workspace)


def test_no_file_is_written_when_to_file_is_off_and_settings_can_change_it(tmp_path: Path) -> None:
    workspace = Workspace.at(tmp_path).ensure()
    setup_logging(workspace, LoggingSettings(to_file=False))
    logging.getLogger("app.test").warning("not kept")
    assert not (workspace.log_dir / LOG_FILE_NAME).exists()
    setup_logging(workspace, LoggingSettings())  # saved in Settings: applies at once
    logging.getLogger("app.test").warning("kept now")
    assert "kept now" in _log_text(workspace)


def test_a_log_size_too_small_to_be_useful_is_refused_naming_the_key() -> None:
    with pytest.raises(Exception, match="logging.max_bytes"):
        settings_from_mapping({"logging": {"max_bytes": 10}})
