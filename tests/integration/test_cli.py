"""The headless CLI as a person or a script uses it: real subprocesses, real exit codes."""

import subprocess
import sys

from lxml import etree

from tests.helpers.paths import BTC_USD_1H, REPO


def kestrel(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        cwd=REPO,
    )


def test_help_lists_the_commands():
    done = kestrel("--help")
    assert done.returncode == 0
    out = done.stdout.decode()
    for command in ("tool", "tools", "indicators"):
        assert command in out


def test_tool_prints_the_envelope_for_a_call_given_as_an_argument():
    done = kestrel(
        "tool",
        "--data",
        str(BTC_USD_1H),
        "--at",
        "2019-01-01T00:00:00Z",
        "<get_historical_klines><symbol>BTC/USD</symbol><interval>1d</interval><limit>2</limit>"
        "</get_historical_klines>",
    )
    assert done.returncode == 0, done.stderr.decode()
    root = etree.fromstring(done.stdout)
    stamps = [int(k.get("timestamp_ms")) for k in root.iter("kline")]
    assert stamps == [1546128000000, 1546214400000]  # 2018-12-30 and 2018-12-31: nothing later


def test_tool_reads_the_call_from_stdin():
    done = kestrel(
        "tool",
        "-",
        stdin=b"<get_order_book><symbol>BTC/USDT</symbol><limit>3</limit></get_order_book>",
    )
    assert done.returncode == 0, done.stderr.decode()
    root = etree.fromstring(done.stdout)
    assert len(root.findall("./data/order_book_data/bids/level")) == 3


def test_a_failed_call_prints_the_error_envelope_and_exits_1():
    done = kestrel("tool", "-", stdin=b"<get_order_book><symbol>NOPE/USD</symbol></get_order_book>")
    assert done.returncode == 1
    root = etree.fromstring(done.stdout)
    assert root.findtext("./error_details/error_code") == "NOT_FOUND"


def test_hostile_bytes_on_stdin_give_a_parse_error_not_a_crash():
    done = kestrel("tool", "-", stdin=b"<get_order_book>\xff\xfe</get_order_book>")
    assert done.returncode == 1
    assert etree.fromstring(done.stdout).findtext("./error_details/error_code") == "PARSE_ERROR"


def test_prose_instead_of_a_call_is_a_usage_error():
    done = kestrel("tool", "what is the price?")
    assert done.returncode == 2
    assert b"not a tool call" in done.stderr


def test_a_bad_time_is_a_usage_error_naming_the_forms():
    done = kestrel("tool", "--at", "tomorrow", "<get_market_snapshot/>")
    assert done.returncode == 2
    assert b"ISO 8601" in done.stderr


def test_tools_prints_the_generated_available_tools_section():
    done = kestrel("tools")
    assert done.returncode == 0
    out = done.stdout.decode()
    assert "<get_historical_klines>" in out and "</get_order_book>" in out
