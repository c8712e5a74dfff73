"""A settings file nested thousands of levels deep is refused naming its file and line, never
with a RecursionError; brackets in strings and comments are not nesting."""

from __future__ import annotations

import pytest

from app.config import load_settings
from app.domain.errors import OperationalError
from tests.helpers.cli import run_cli

MAX_NESTING = 100  # app.config.MAX_NESTING
DEEP = "[" * 5000 + "]" * 5000


def write(tmp_path, text: str):
    path = tmp_path / "settings.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_5000_deep_array_is_refused_naming_the_file_and_the_line(tmp_path):
    path = write(tmp_path, f"[paper]\ninitial_cash = 1000\n\n[market]\ndata_files = {DEEP}\n")
    with pytest.raises(OperationalError) as refused:
        load_settings(path)
    assert str(refused.value) == (
        f"{path}: line 5: arrays or inline tables nest more than {MAX_NESTING} levels deep, "
        "which no setting does; remove the extra brackets or braces there."
    )


def test_deep_inline_tables_are_refused_too(tmp_path):
    path = write(tmp_path, "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n")
    with pytest.raises(OperationalError, match=r"settings.toml: line 1: arrays or inline"):
        load_settings(path)


def test_brackets_in_strings_and_comments_are_not_nesting(tmp_path):
    path = write(tmp_path, (
        f"# {DEEP}\n"
        "[llm]\n"
        f"model = \"{'[' * 300}\\\" {'{' * 300}\"\n"
        f"base_url = '{'[' * 300}'\n"
        f"api_key_name = '''\n{'[' * 300}\n'''\n"
        f"training_cutoff = \"\"\"\"\"\"\n"
    ))
    settings = load_settings(path)
    assert settings.llm.model.startswith("[[[") and settings.llm.base_url.endswith("[[[")


def test_the_line_is_counted_across_multi_line_strings(tmp_path):
    path = write(tmp_path, (
        "[llm]\n"
        'model = """first\nsecond \\\n third"""\n'
        "api_key_name = '''a\nb'''\n"
        f"[market]\ndata_files = {DEEP}\n"
    ))
    with pytest.raises(OperationalError, match=r": line 8: "):
        load_settings(path)


def test_kestrel_refuses_a_too_deep_settings_file_with_exit_2_and_one_line(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    path = write(workspace, f"[market]\ndata_files = {DEEP}\n")
    done = run_cli("run", "--workspace", workspace, "--for", "1h")
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"kestrel: {path}: line 2: arrays or inline tables nest more than {MAX_NESTING} levels "
        "deep, which no setting does; remove the extra brackets or braces there."
    ]
