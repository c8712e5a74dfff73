"""The text-level sandbox: every hostile spelling of a memory path is refused with its own code."""

import pytest

from app.domain.errors import AccessDeniedError, ErrorCode, InvalidParameterError, ToolError
from app.memory.paths import check_agent_id, note_path, split_memory_path

AD = ErrorCode.ACCESS_DENIED
IP = ErrorCode.INVALID_PARAMETER

HOSTILE = [
    # traversal in every form
    ("../secret.md", AD, "traversal"),
    ("notes/../../other-agent/x.md", AD, "traversal"),
    ("..", AD, "traversal"),
    ("notes/..", AD, "traversal"),
    ("...", AD, "traversal"),
    (". ./x.md", AD, "traversal"),
    # absolute, home, drive and UNC forms
    ("/etc/passwd", AD, "absolute"),
    ("//server/share/x.md", AD, "absolute"),
    ("~/x.md", AD, "home_folder"),
    ("C:/Windows/win.ini", AD, "drive_letter"),
    ("c:x.md", AD, "drive_letter"),
    ("C:\\Windows\\win.ini", AD, "backslash"),
    ("\\\\server\\share\\x.md", AD, "backslash"),
    # backslashes
    ("notes\\..\\..\\x.md", AD, "backslash"),
    ("a\\b.md", AD, "backslash"),
    # percent-encoded and overlong UTF-8 traversal
    ("%2e%2e/x.md", AD, "percent_encoding"),
    ("%2e%2e%2fx.md", AD, "percent_encoding"),
    ("..%2fx.md", AD, "percent_encoding"),
    ("%252e%252e/x.md", AD, "percent_encoding"),
    ("%c0%ae%c0%ae/x.md", AD, "percent_encoding"),
    ("notes%5c..%5cx.md", AD, "percent_encoding"),
    (b"\xc0\xae\xc0\xae/x.md".decode("utf-8", "surrogateescape"), AD, "malformed_utf8"),
    (b"\xc0\xae\xc0\xae/x.md".decode("utf-8", "replace"), AD, "malformed_utf8"),
    # Unicode look-alike dots and slashes, invisible characters
    ("\u2024\u2024/x.md", AD, "unicode_lookalike"),
    ("\uff0e\uff0e/x.md", AD, "unicode_lookalike"),
    ("\ufe52\ufe52/x.md", AD, "unicode_lookalike"),
    ("\u2025/x.md", AD, "unicode_lookalike"),
    ("notes\u2215..\u2215x.md", AD, "unicode_lookalike"),
    ("notes\uff0fx.md", AD, "unicode_lookalike"),
    ("notes\u2044x.md", AD, "unicode_lookalike"),
    ("notes\uff3cx.md", AD, "unicode_lookalike"),
    ("x\u202e.md", AD, "unicode_lookalike"),
    ("x\u200b.md", AD, "unicode_lookalike"),
    ("\uff41\uff42\uff43.md", IP, "not_normalised"),
    # NUL and control characters
    ("a\x00b.md", IP, "control_character"),
    ("a\nb.md", IP, "control_character"),
    ("a\x1bb.md", IP, "control_character"),
    ("a\x7f.md", IP, "control_character"),
    ("a\u0085.md", IP, "control_character"),
    # Windows device names, with extensions and in folders
    ("CON", IP, "device_name"),
    ("con.md", IP, "device_name"),
    ("notes/NUL.txt", IP, "device_name"),
    ("COM1.yaml", IP, "device_name"),
    ("LPT9", IP, "device_name"),
    ("aux.tar.gz", IP, "device_name"),
    ("CONIN$", IP, "device_name"),
    # trailing dots and spaces, reserved characters
    ("notes.", IP, "trailing_dot_or_space"),
    ("notes /x.md", IP, "trailing_dot_or_space"),
    (" x.md", IP, "trailing_dot_or_space"),
    ("x.md:stream", IP, "reserved_character"),
    ("what?.md", IP, "reserved_character"),
    # sizes, depth and shape
    ("a" * 256 + ".md", IP, "name_too_long"),
    ("中" * 90 + ".md", IP, "name_too_long"),
    ("/".join(["d"] * 17) + "/x.md", IP, "too_deep"),
    ("x" * 5000, IP, "too_long"),
    ("", IP, "empty"),
    ("notes/", IP, "empty_segment"),
    ("a//b.md", IP, "empty_segment"),
    ("notes/./x.md", IP, "dot_segment"),
    (".hidden.md", IP, "hidden_name"),
    (".kestrel-tmp-0123", IP, "hidden_name"),
]


def test_the_hostile_corpus_has_at_least_forty_inputs() -> None:
    assert len(HOSTILE) >= 40


@pytest.mark.parametrize(
    ("path", "code", "reason"), HOSTILE, ids=[repr(h[0])[:40] for h in HOSTILE]
)
def test_hostile_memory_path_is_refused_with_its_code_and_reason(
    path: str, code: ErrorCode, reason: str
) -> None:
    with pytest.raises(ToolError) as caught:
        split_memory_path(path)
    assert caught.value.code is code
    assert caught.value.details["reason"] == reason
    assert caught.value.message  # a sentence the model can act on


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("notes/plan.md", ("notes", "plan.md")),
        (
            "trader_config/BTCUSDT_strategy_params.yaml",
            ("trader_config", "BTCUSDT_strategy_params.yaml"),
        ),
        ("笔记/市场.md", ("笔记", "市场.md")),
        ("a..b.md", ("a..b.md",)),
        ("v1.2.3/notes-final_2.txt", ("v1.2.3", "notes-final_2.txt")),
        ("/".join(["d"] * 15) + "/x.md", tuple(["d"] * 15) + ("x.md",)),
        ("a" * 252 + ".md", ("a" * 252 + ".md",)),
        ("console.md", ("console.md",)),
    ],
)
def test_ordinary_memory_paths_are_accepted(path: str, parts: tuple[str, ...]) -> None:
    assert split_memory_path(path) == parts


def test_a_folder_may_be_empty_or_end_with_a_slash() -> None:
    assert split_memory_path("", allow_empty=True) == ()
    assert split_memory_path("journal/", allow_empty=True) == ("journal",)


@pytest.mark.parametrize("agent_id", ["../x", ".index", "", "a/b", "CON", "x.", "a" * 65, "名字"])
def test_an_agent_id_that_cannot_name_a_folder_is_refused(agent_id: str) -> None:
    with pytest.raises(AccessDeniedError):
        check_agent_id(agent_id)


def test_ordinary_agent_ids_are_accepted() -> None:
    for agent_id in ("trader-1", "analyst_BTC", "soa", "a1b2.c3"):
        assert check_agent_id(agent_id) == agent_id


@pytest.mark.parametrize("key", ["../x", "a/b", "", "CON", ".hidden", "..", "has space", "a" * 121])
def test_a_bad_note_key_is_an_invalid_parameter(key: str) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        note_path(key)
    assert caught.value.details["parameter"] == "key"


def test_a_note_key_maps_to_the_notes_folder() -> None:
    assert note_path("position_AAPL") == "notes/position_AAPL.md"
    assert note_path("market-regime.v2") == "notes/market-regime.v2.md"
