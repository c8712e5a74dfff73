"""The seven memory tools through the real parser, registry and executor: exact payloads, errors."""

import base64

import pytest

from app.domain.errors import ErrorCode
from app.memory.bank import MemoryBank, MemoryLimits
from app.tools.memory_tools import MemoryTools
from app.tools.registry import ToolRegistry
from app.tools.spec import Permission
from tests.unit.memory.support import ToolRunner, call


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode()


def payload(result) -> str:  # the <data> body, dedented, as the model sees it
    lines = result.xml.split("\n")
    inner = lines[lines.index("    <data>") + 1 : lines.index("    </data>")]
    return "\n".join(line[8:] if line.startswith(" " * 8) else line for line in inner)


def test_every_memory_tool_is_in_the_agent_memory_group_with_memory_permission(
    bank: MemoryBank,
) -> None:
    specs = MemoryTools(bank).specs()
    assert {s.name for s in specs} == {
        "read_agent_memory_file",
        "write_agent_memory_file",
        "append_to_agent_memory_file",
        "log_journal_entry",
        "write_note",
        "recall_memory",
        "list_agent_memory_files",
    }
    assert {s.group for s in specs} == {"Agent Memory Tools"}
    assert {s.permission for s in specs} == {Permission.MEMORY}
    section = ToolRegistry(specs).available_tools_section(frozenset({Permission.MEMORY}))
    assert "<content_to_append_base64>" in section and "file_path_read" in section


def test_written_file_reads_back_with_the_seed_payload(run_tool: ToolRunner) -> None:
    written = run_tool(
        call("write_agent_memory_file", file_path="notes/plan.md", content_base64=b64("# Plan\n"))
    )
    assert payload(written) == (
        '<memory_file_written file_path_written="notes/plan.md" '
        'status_message="File saved successfully." />'
    )
    read = run_tool(call("read_agent_memory_file", file_path="notes/plan.md"))
    assert payload(read) == (
        '<memory_file_content file_path_read="notes/plan.md">\n'
        f"    <content_base64>{b64('# Plan' + chr(10))}</content_base64>\n"
        "    <file_exists>true</file_exists>\n"
        "    <file_type_hint>MARKDOWN</file_type_hint>\n"
        "</memory_file_content>"
    )


def test_reading_a_missing_file_succeeds_with_empty_content_and_file_exists_false(
    run_tool: ToolRunner,
) -> None:
    result = run_tool(call("read_agent_memory_file", file_path="trader_config/BTCUSDT.yaml"))
    assert result.status == "success"
    assert payload(result) == (
        '<memory_file_content file_path_read="trader_config/BTCUSDT.yaml">\n'
        "    <content_base64></content_base64>\n"
        "    <file_exists>false</file_exists>\n"
        "    <file_type_hint>YAML</file_type_hint>\n"
        "</memory_file_content>"
    )


def test_append_creates_then_appends_whole_lines_with_the_seed_payload(
    run_tool: ToolRunner, bank: MemoryBank
) -> None:
    first = run_tool(
        call("append_to_agent_memory_file", file_path="log.md", content_to_append_base64=b64("a"))
    )
    assert payload(first) == (
        '<memory_file_appended file_path_appended="log.md" '
        'status_message="Content appended successfully." />'
    )
    run_tool(
        call("append_to_agent_memory_file", file_path="log.md", content_to_append_base64=b64("b"))
    )
    assert bank.read_file("trader-1", "log.md").data == b"a\nb\n"


def test_ensure_newline_false_continues_a_line_a_person_left_open(
    run_tool: ToolRunner, bank: MemoryBank
) -> None:
    folder = bank.agent_folder("trader-1")
    folder.mkdir(parents=True)
    (folder / "draft.txt").write_bytes(b"open line")
    run_tool(
        call(
            "append_to_agent_memory_file",
            file_path="draft.txt",
            content_to_append_base64=b64(" continued"),
            ensure_newline_before_append="false",
        )
    )
    run_tool(
        call(
            "append_to_agent_memory_file",
            file_path="draft.txt",
            content_to_append_base64=b64("next"),
        )
    )
    assert (folder / "draft.txt").read_bytes() == b"open line continued\nnext\n"


PLAN = "# Plan\n\nBuy if RSI < 30 & MACD turns up.\n\n"


def test_plain_text_content_is_written_exactly_and_read_back_as_text(
    run_tool: ToolRunner, bank: MemoryBank
) -> None:
    written = run_tool(
        call("write_agent_memory_file", file_path="notes/plan.md",
             content=f"<![CDATA[\n{PLAN}]]>")
    )
    assert written.status == "success"
    assert bank.read_file("trader-1", "notes/plan.md").data == PLAN.encode()
    run_tool(call("append_to_agent_memory_file", file_path="notes/plan.md",
                  content="Sold at 2 &lt; 3 &amp; kept notes"))
    expected = PLAN + "Sold at 2 < 3 & kept notes\n"
    assert bank.read_file("trader-1", "notes/plan.md").data == expected.encode()
    as_text = run_tool(call("read_agent_memory_file", file_path="notes/plan.md",
                            content_format="TEXT"))
    assert as_text.data[0].children[0].tag == "content"
    assert as_text.data[0].children[0].text == expected
    seed = run_tool(call("read_agent_memory_file", file_path="notes/plan.md"))
    assert f"<content_base64>{b64(expected)}</content_base64>" in seed.xml


@pytest.mark.parametrize("tool, encoded", [
    ("write_agent_memory_file", "content_base64"),
    ("append_to_agent_memory_file", "content_to_append_base64"),
])
def test_content_given_both_ways_or_not_at_all_is_refused_and_nothing_is_written(
    run_tool: ToolRunner, bank: MemoryBank, tool: str, encoded: str
) -> None:
    both = run_tool(call(tool, file_path="x.md", content="x", **{encoded: b64("x")}))
    assert both.error_code is ErrorCode.INVALID_PARAMETER
    assert "not both" in both.message and encoded in both.message
    neither = run_tool(call(tool, file_path="x.md"))
    assert neither.error_code is ErrorCode.MISSING_PARAMETER
    assert "<content>" in neither.message and encoded in neither.message
    assert bank.list_files("trader-1") == []


def test_a_yaml_hint_checks_plain_text_content_too(run_tool: ToolRunner, bank: MemoryBank) -> None:
    result = run_tool(call("write_agent_memory_file", file_path="a.yaml",
                           content="ok: 1\nbad: [unclosed\n", file_type_hint="YAML"))
    assert result.error_code is ErrorCode.INVALID_PARAMETER
    assert "not valid YAML at line" in result.message
    assert result.details["parameter"] == "content"
    assert not bank.read_file("trader-1", "a.yaml").exists


def test_a_file_xml_cannot_carry_as_text_is_read_back_as_base64(
    run_tool: ToolRunner, bank: MemoryBank
) -> None:
    for name, data in (("blob.bin", b"\x00\x01\xff"), ("bell.txt", b"ring \x07")):
        run_tool(call("write_agent_memory_file", file_path=name, content_base64=b64(data)))
        read = run_tool(call("read_agent_memory_file", file_path=name, content_format="TEXT"))
        assert f"<content_base64>{b64(data)}</content_base64>" in read.xml, name


def test_type_hint_is_sniffed_from_content_when_the_extension_says_nothing(
    run_tool: ToolRunner,
) -> None:
    cases = {
        "beliefs": ("symbol: BTC/USDT\nbias: long\n", "YAML"),
        "summary": ("# Week 7\n\n- bought twice\n", "MARKDOWN"),
        "plain": ("just a sentence\n", "TEXT"),
        "blob": (b"\x00\x01\x02\xff", "UNKNOWN"),
    }
    for name, (content, hint) in cases.items():
        run_tool(call("write_agent_memory_file", file_path=name, content_base64=b64(content)))
        result = run_tool(call("read_agent_memory_file", file_path=name))
        assert f"<file_type_hint>{hint}</file_type_hint>" in result.xml, name


def test_invalid_base64_is_an_invalid_parameter_and_writes_nothing(
    run_tool: ToolRunner, bank: MemoryBank
) -> None:
    result = run_tool(
        call("write_agent_memory_file", file_path="x.md", content_base64="@@not base64@@")
    )
    assert result.error_code is ErrorCode.INVALID_PARAMETER
    assert "base64" in result.message
    assert bank.list_files("trader-1") == []


def test_a_yaml_hint_with_broken_yaml_is_refused_naming_the_line(
    run_tool: ToolRunner, bank: MemoryBank
) -> None:
    result = run_tool(
        call(
            "write_agent_memory_file",
            file_path="a.yaml",
            content_base64=b64("ok: 1\nbad: [unclosed\n"),
            file_type_hint="YAML",
        )
    )
    assert result.error_code is ErrorCode.INVALID_PARAMETER
    assert "line" in result.message and "Nothing was written" in result.message
    assert not bank.read_file("trader-1", "a.yaml").exists


def test_a_write_over_the_size_limit_is_refused_and_the_old_content_stays(root, clock, bus) -> None:
    bank = MemoryBank(root, clock, bus, limits=MemoryLimits(max_file_bytes=100))
    run = ToolRunner(bank)
    run(call("write_agent_memory_file", file_path="x.txt", content_base64=b64("old")))
    result = run(call("write_agent_memory_file", file_path="x.txt", content_base64=b64("y" * 101)))
    assert result.error_code is ErrorCode.INVALID_PARAMETER
    assert "101 bytes" in result.message and "100" in result.message
    assert bank.read_file("trader-1", "x.txt").data == b"old"


def test_writes_past_the_agents_quota_are_refused_but_shrinking_is_allowed(
    root, clock, bus
) -> None:
    bank = MemoryBank(root, clock, bus, limits=MemoryLimits(max_file_bytes=100, quota_bytes=250))
    run = ToolRunner(bank)
    for name in ("a", "b"):
        assert run(
            call("write_agent_memory_file", file_path=name, content_base64=b64("x" * 100))
        ).ok
    over = run(call("write_agent_memory_file", file_path="c", content_base64=b64("x" * 60)))
    assert over.error_code is ErrorCode.ACCESS_DENIED
    assert "quota" in over.message
    appended = run(
        call("append_to_agent_memory_file", file_path="a", content_to_append_base64=b64("z" * 60))
    )
    assert appended.error_code in (ErrorCode.ACCESS_DENIED, ErrorCode.INVALID_PARAMETER)
    assert run(call("write_agent_memory_file", file_path="a", content_base64=b64("x"))).ok
    assert run(call("write_agent_memory_file", file_path="c", content_base64=b64("x" * 60))).ok
    other = ToolRunner(bank, "analyst-1")
    assert other(call("write_agent_memory_file", file_path="a", content_base64=b64("x" * 100))).ok


def test_journal_entry_goes_to_the_market_date_file_with_a_timestamp(
    run_tool: ToolRunner, bank: MemoryBank, clock
) -> None:
    result = run_tool(call("log_journal_entry", content="Bought BTC/USDT at 43000"))
    assert payload(result) == (
        '<journal_entry_logged file_path="journal/2024-02-20.md" line="3" '
        'time_ms="1708437600000" time_iso="2024-02-20T14:00:00Z" '
        'status_message="Journal entry logged." />'
    )
    clock.advance_to(clock.now_ms() + 11 * 3_600_000)  # past midnight: a new day's file
    run_tool(call("log_journal_entry", content="Closed at 43500"))
    assert bank.read_file("trader-1", "journal/2024-02-20.md").data.decode() == (
        "# Journal 2024-02-20\n\n## 2024-02-20T14:00:00Z\nBought BTC/USDT at 43000\n"
    )
    assert (
        bank.read_file("trader-1", "journal/2024-02-21.md")
        .data.decode()
        .endswith("## 2024-02-21T01:00:00Z\nClosed at 43500\n")
    )


def test_write_note_stores_notes_key_md_and_overwrites(
    run_tool: ToolRunner, bank: MemoryBank
) -> None:
    first = run_tool(call("write_note", key="position_AAPL", content="持仓 100 股 @172.5"))
    assert payload(first) == (
        '<note_written key="position_AAPL" file_path="notes/position_AAPL.md" '
        'status_message="Note saved successfully." />'
    )
    run_tool(call("write_note", key="position_AAPL", content="已平仓"))
    assert bank.read_file("trader-1", "notes/position_AAPL.md").data.decode() == "已平仓\n"
    bad = run_tool(call("write_note", key="../escape", content="x"))
    assert bad.error_code is ErrorCode.INVALID_PARAMETER


def test_recall_payload_has_source_line_and_score(run_tool: ToolRunner) -> None:
    run_tool(call("log_journal_entry", content="RSI 25 on BTC/USDT, bought the dip"))
    result = run_tool(call("recall_memory", query="BTC/USDT dip"))
    lines = payload(result).split("\n")
    assert lines[0] == "<memories>"
    assert lines[1].startswith('    <memory source="journal/2024-02-20.md" line="4" score="')
    assert "RSI 25 on BTC/USDT, bought the dip</memory>" in payload(result)
    empty = run_tool(call("recall_memory", query="nothing like this"))
    assert payload(empty) == "<memories />"


def test_list_shows_path_size_and_modified_time_and_filters_by_folder(
    run_tool: ToolRunner,
) -> None:
    run_tool(call("write_note", key="a", content="x"))
    run_tool(call("log_journal_entry", content="y"))
    everything = payload(run_tool(call("list_agent_memory_files")))
    assert everything.startswith('<memory_files>\n    <file path="journal/2024-02-20.md" size="')
    assert 'path="notes/a.md" size="2" modified_iso="' in everything
    notes = payload(run_tool(call("list_agent_memory_files", folder="notes")))
    assert "journal" not in notes and 'path="notes/a.md"' in notes
    missing = run_tool(call("list_agent_memory_files", folder="nope"))
    assert missing.error_code is ErrorCode.NOT_FOUND


@pytest.mark.parametrize(
    "xml",
    [
        call("read_agent_memory_file", file_path="../analyst-1/notes/a.md"),
        call("write_agent_memory_file", file_path="/tmp/x", content_base64=b64("x")),
        call("append_to_agent_memory_file", file_path="..\\x", content_to_append_base64=b64("x")),
        call("list_agent_memory_files", folder=".."),
    ],
)
def test_no_tool_reaches_outside_the_agents_folder(run_tool: ToolRunner, xml: str) -> None:
    assert run_tool(xml).error_code is ErrorCode.ACCESS_DENIED


def test_one_agent_never_sees_another_agents_memory(run_tool: ToolRunner) -> None:
    run_tool(
        call("write_note", key="secret", content="analyst edge: BTC/USDT"), agent_id="analyst-1"
    )
    assert "false" in run_tool(call("read_agent_memory_file", file_path="notes/secret.md")).xml
    assert payload(run_tool(call("recall_memory", query="edge"))) == "<memories />"
    assert payload(run_tool(call("list_agent_memory_files"))) == "<memory_files />"


def test_an_agent_id_that_cannot_name_a_folder_gets_access_denied(run_tool: ToolRunner) -> None:
    result = run_tool(call("write_note", key="a", content="x"), agent_id="../evil")
    assert result.error_code is ErrorCode.ACCESS_DENIED
