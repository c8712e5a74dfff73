"""How a final answer's blocks are read: which text is the answer, which the blocks, what each
block writes, and the refusals a model can act on (nothing is written from a set it got wrong)."""

from __future__ import annotations

from app.agents.answer_blocks import split, writes
from app.agents.template_files import load_templates
from app.domain.agents import Task

TEMPLATES = load_templates()
ANALYST = TEMPLATES["AnalystAgent_Trend_v1"].answer_blocks
TRADER = TEMPLATES["TraderAgent_Default_v1"].answer_blocks
ENTRY = "\n## 2024-01-02T03:00:00Z · BTC/USDT 1h · HOLD (confidence 0.2)\n\n```yaml\nx: 1\n```\n"


def _task(payload: dict[str, object] | None = None) -> Task:
    return Task("t-1", "a-1", "RUN_ANALYSIS", payload or {"symbol": "BTC/USDT"}, "job:j", 0)


def _writes(text: str, spec=ANALYST, payload=None) -> list:  # noqa: ANN001
    found = split(text, spec)
    assert found is not None
    return writes(found, spec, _task(payload), {"symbols": []})


def test_the_answer_is_the_text_before_the_first_block_and_an_answer_without_blocks_has_none(
) -> None:
    text = f"BTC/USDT 1h: HOLD.\nRSI <b>mid</b>.\n<analysis_log>\n{ENTRY}</analysis_log>"
    found = split(text, ANALYST)
    assert found is not None and found.head == "BTC/USDT 1h: HOLD.\nRSI <b>mid</b>."
    assert found.blocks.startswith("<analysis_log>")
    assert split("BTC/USDT 1h: HOLD, nothing to dispatch.", ANALYST) is None
    assert split("A line naming <analysis_log> mid-sentence.", ANALYST) is None
    assert split("<journal>\nx\n</journal>", TRADER) is not None  # no text: refused by the loop
    assert split("Done.\n<journal>\nx\n</journal>", {}) is None  # an agent without blocks
    thought = "<thinking>Plan:\n<journal>\nlater\n</thinking>\nDone.\n<journal>\nx\n</journal>"
    found = split(thought, TRADER)  # a block named while thinking is not where blocks start
    assert found is not None and found.head.endswith("</thinking>\nDone.") and found.has_text


def test_each_block_becomes_its_memory_call_with_the_text_exactly_as_written() -> None:
    text = (f"HOLD.\n<analysis_log>\n{ENTRY}</analysis_log>\n"
            "<assessment><![CDATA[note: RSI < 30 & rising\n]]></assessment>")
    log, assessment = _writes(text)
    assert log.call.name == "append_to_agent_memory_file"
    params = {p.tag: p.text for p in log.call.params}
    # the tool drops the newline that opens the block: the file gets ENTRY exactly
    assert params == {"file_path": "analysis_log.md", "content": "\n" + ENTRY}
    params = {p.tag: p.text for p in assessment.call.params}
    assert params == {"file_path": "current_market_assessment.yaml",
                      "content": "note: RSI < 30 & rising\n", "file_type_hint": "YAML"}


def test_raw_angle_brackets_and_ampersands_are_text_as_in_free_text_parameters() -> None:
    (journal,) = _writes("Done.\n<journal>\nRSI < 30 & price > band\n</journal>", TRADER)
    assert journal.call.name == "log_journal_entry"
    assert [p.text for p in journal.call.params] == ["\nRSI < 30 & price > band\n"]


def test_the_trader_s_record_goes_to_the_folder_of_the_task_s_symbol() -> None:
    (trades,) = _writes("Placed.\n<trades>\nschema_version: 1\n</trades>", TRADER,
                        {"symbol": "eth/usdt"})
    assert trades.call.params[0].text == "symbols/ETHUSDT/trades.yaml"
    (nowhere,) = _writes("Placed.\n<trades>\nschema_version: 1\n</trades>", TRADER, {"x": 1})
    assert nowhere.call is None and nowhere.refusal is not None
    assert "names no single symbol" in nowhere.refusal.message


def test_a_set_of_blocks_a_model_got_wrong_is_refused_whole_saying_what_to_fix() -> None:
    cases = {
        "HOLD.\n<analysis_log>a</analysis_log>\n<analysis_log>b</analysis_log>": "appears twice",
        "HOLD.\n<analysis_log>a</analysis_log>\nand some words": "Text stands between",
        "HOLD.\n<analysis_log>a</analysis_log>\n<trades>b</trades>":
            "<trades> is not a block of yours; yours are <analysis_log>, <assessment>",
        "HOLD.\n<analysis_log>a <b>bold</b></analysis_log>": "<![CDATA[",
        "HOLD.\n<analysis_log>never closed": "could not be read",
    }
    for text, words in cases.items():
        (refused,) = _writes(text)
        assert refused.call is None and refused.refusal is not None, text
        assert words in refused.refusal.message, (text, refused.refusal.message)
        assert "Nothing was written" in refused.refusal.message
