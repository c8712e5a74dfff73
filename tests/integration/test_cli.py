"""The headless CLI as a person or a script uses it: real subprocesses, real exit codes."""

import subprocess
import sys

import pytest
from lxml import etree

from tests.helpers.paths import BTC_USD_1H, REPO

WORKSPACE: list[str] = []


@pytest.fixture(autouse=True)
def _workspace(tmp_path):
    """Every command runs in a fresh workspace, never in the checkout's own."""
    WORKSPACE[:] = ["--workspace", str(tmp_path / "ws")]
    yield


def kestrel(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    extra = WORKSPACE if args and args[0] in {"tool", "tools", "demo"} else []
    return subprocess.run(
        [sys.executable, "-m", "app", *args[:1], *extra, *args[1:]],
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


def test_indicators_lists_the_whole_catalogue():
    done = kestrel("indicators")
    assert done.returncode == 0
    out = done.stdout.decode()
    assert "MACD" in out and "macd,signal,histogram" in out
    assert "76 indicators" in out


def test_memory_tools_run_as_the_named_agent_in_the_workspace(tmp_path):
    call = "<write_note><key>plan</key><content>buy dips</content></write_note>"
    assert kestrel("tool", "--agent", "analyst-7", call).returncode == 0
    note = tmp_path / "ws" / "memory" / "analyst-7" / "notes" / "plan.md"
    assert note.read_text(encoding="utf-8").strip() == "buy dips"
    done = kestrel(
        "tool", "--agent", "analyst-7", "<recall_memory><query>dips</query></recall_memory>"
    )
    assert done.returncode == 0
    assert etree.fromstring(done.stdout).find(".//memory").get("source") == "notes/plan.md"
    other = kestrel(
        "tool",
        "--agent",
        "trader-1",
        "<read_agent_memory_file><file_path>../analyst-7/notes/plan.md</file_path></read_agent_memory_file>",
    )
    assert other.returncode == 1
    assert etree.fromstring(other.stdout).findtext(".//error_code") == "ACCESS_DENIED"


def test_the_workspace_paper_account_fills_a_market_order_at_a_later_cursor():
    order = (
        "<create_order><symbol>BTC/USD</symbol><side>BUY</side><quote_amount>500</quote_amount>"
        "</create_order>"
    )
    placed = kestrel("tool", "--at", "2019-10-10T00:00:00Z", order)
    assert placed.returncode == 0, placed.stdout.decode()
    later = kestrel("tool", "--at", "2019-10-10T02:00:00Z", "<get_open_positions/>")
    position = etree.fromstring(later.stdout).find(".//position")
    assert position.get("symbol") == "BTC/USD"
    assert float(position.get("size")) > 0
    rewind = kestrel("tool", "--at", "2019-10-01T00:00:00Z", "<get_open_positions/>")
    assert rewind.returncode == 2
    assert b"cannot go back" in rewind.stderr


def test_demo_trades_the_bundled_data_and_writes_journal_and_report(tmp_path):
    done = kestrel("demo", "--days", "10", "--speed", "0")
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert "not an LLM" in out
    assert "FILL  BUY" in out and "buy & hold" in out
    ws = tmp_path / "ws"
    assert (ws / "demo" / "summary.json").is_file() and (ws / "demo" / "equity.png").is_file()
    journal = list((ws / "memory" / "demo-trader" / "journal").glob("2019-10-*.md"))
    assert journal, "the demo journals each fill on the simulated date"


def test_backtest_command_is_wired(tmp_path):
    done = kestrel(
        "backtest",
        "--data",
        str(BTC_USD_1H),
        "--fast",
        "10",
        "--slow",
        "30",
        "--cash",
        "10000",
        "--out",
        str(tmp_path / "bt"),
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "bt" / "summary.json").is_file()


def test_without_a_display_the_window_command_says_what_to_run_instead(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    done = subprocess.run(
        [sys.executable, "-m", "app", "--workspace", str(tmp_path / "ws")],
        capture_output=True, timeout=120, cwd=REPO, env=env,
    )
    assert done.returncode == 3
    message = done.stderr.decode()
    assert "no display" in message and "kestrel demo" in message and "kestrel chat" in message
    assert not (tmp_path / "ws").exists(), "nothing is created when no window can open"


def test_the_window_command_has_its_own_help():
    done = kestrel("gui", "--help")
    assert done.returncode == 0
    out = done.stdout.decode()
    assert "offline demo" in out and "--reset-layout" in out and "--speed" in out
