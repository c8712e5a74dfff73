"""Settings reject unknown keys; the workspace lives where a person expects it."""

from pathlib import Path

import pytest

from app.config import Settings, load_settings, settings_from_mapping
from app.domain.clock import ms_to_iso, parse_time
from app.domain.errors import OperationalError
from app.redaction import Redactor
from app.workspace import Workspace


def test_defaults_need_no_file(tmp_path):
    settings = load_settings(tmp_path / "missing.toml")
    assert settings == Settings()
    assert settings.tools.default_timeout_s == 30.0


def test_a_misspelt_key_is_an_error_naming_it(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("[tools]\ndefault_timeout = 5\n", encoding="utf-8")
    with pytest.raises(OperationalError, match=r"unknown key 'tools.default_timeout'"):
        load_settings(path)


def test_a_wrong_type_is_an_error_naming_the_key():
    with pytest.raises(OperationalError, match=r"'tools.default_timeout_s'"):
        settings_from_mapping({"tools": {"default_timeout_s": "soon"}})


def test_broken_toml_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("[tools\n", encoding="utf-8")
    with pytest.raises(OperationalError, match="not valid TOML"):
        load_settings(path)


def test_settings_are_frozen():
    with pytest.raises(Exception, match="frozen"):
        Settings().tools.default_timeout_s = 1  # type: ignore[misc]


def test_source_checkout_workspace_is_the_repository_with_its_memory_folder():
    workspace = Workspace.default()
    repo = Path(__file__).resolve().parents[3]
    assert workspace.root == repo
    assert workspace.memory_root == repo / "memory"
    assert workspace.db_path == repo / "kestrel.db"


def test_explicit_workspace_creates_its_folders(tmp_path):
    workspace = Workspace.at(tmp_path / "ws").ensure()
    assert workspace.memory_root.is_dir() and workspace.log_dir.is_dir()


def test_secrets_never_reach_a_log_line():
    redactor = Redactor()
    redactor.add_secret("my-exchange-secret-123")
    line = redactor.redact("key=my-exchange-secret-123 openai=sk-abcdefghijklmnop", display=True)
    assert "my-exchange-secret-123" not in line and "sk-abcdefghijklmnop" not in line


def test_times_parse_from_iso_and_milliseconds():
    assert parse_time("2019-01-01T00:00:00Z") == 1546300800000
    assert parse_time("2019-01-01") == 1546300800000
    assert parse_time("1546300800000") == 1546300800000
    assert ms_to_iso(1546300800000) == "2019-01-01T00:00:00Z"
    with pytest.raises(ValueError, match="not a time"):
        parse_time("yesterday")
