"""The rule engine reads a conversation back into facts, and refuses one it did not write."""

from __future__ import annotations

import asyncio

import pytest

from app.agents.llm.port import ChatMessage, LLMRequest, PermanentLLMError
from app.agents.rules.engine import RuleEngineProvider
from app.agents.rules.transcript import parse_task, read_transcript
from app.domain.errors import ErrorCode
from app.tools.protocol.render import el, render_error, render_rejected, render_success
from app.tools.protocol.result import parse_result


def test_a_task_element_gives_its_type_payload_source_and_market_time() -> None:
    task = parse_task(
        '<task task_id="t1" task_type="RUN_ANALYSIS" source="job:j1" '
        'market_time="2019-10-10T08:00:00Z" reply_expected="true">'
        '{"symbol": "BTC/USDT", "note": "a &amp; b"}</task>'
    )
    assert (task.task_type, task.source, task.task_id) == ("RUN_ANALYSIS", "job:j1", "t1")
    assert task.payload == {"symbol": "BTC/USDT", "note": "a & b"}
    assert task.market_time_ms == 1_570_694_400_000 and task.reply_expected


def test_plain_text_is_the_persons_message() -> None:
    task = parse_task("watch BTC/USDT")
    assert task.is_user_message and task.text == "watch BTC/USDT"


def test_results_of_each_status_are_read() -> None:
    ok = parse_result(render_success("t", el("x", None, a="1")).xml)
    assert ok.ok and ok.attr("a") == "1"
    error = parse_result(render_error("t", ErrorCode.NOT_FOUND, "no such", {"k": 1}).xml)
    assert (error.status, error.error_code, error.details) == ("error", "NOT_FOUND", {"k": 1})
    assert error.problem() == "NOT_FOUND: no such"
    rejected = parse_result(render_rejected("create_order", "max_position_weight", "23% > 20%").xml)
    assert rejected.status == "rejected" and rejected.rule == "max_position_weight"
    assert "Risk Guard" in rejected.problem()


def test_an_unreadable_result_is_an_error_fact_not_an_exception() -> None:
    assert parse_result("<tool_result><status>").error_code == "PARSE_ERROR"


def test_each_call_is_paired_with_its_result_or_the_persons_reply() -> None:
    messages = [
        ChatMessage("user", "watch BTC/USDT"),
        ChatMessage("assistant", "<thinking>[ask interval 1] why</thinking>\n"
                                 "<ask_user_clarification><question_text>Which?</question_text>"
                                 "<suggested_replies><reply>1h</reply><reply>4h</reply>"
                                 "</suggested_replies></ask_user_clarification>"),
        ChatMessage("user", "4h"),
        ChatMessage("assistant", "<thinking>[markets] x</thinking><get_market_snapshot/>"),
    ]
    t = read_transcript(messages)
    ask, last = t.steps
    assert ask.params["suggested_replies"] == ["1h", "4h"] and ask.reply == "4h"
    assert t.tagged("ask interval 1") is ask and t.tagged("markets") is last
    assert last.result is None and last.reply is None


def test_a_conversation_another_model_wrote_is_refused_with_a_reason() -> None:
    request = LLMRequest(
        agent_id="a", task_id="t", model="rules-trader-v1", system="",
        messages=[ChatMessage("user", "hi"), ChatMessage("assistant", "Sure, I can help!")],
    )
    with pytest.raises(PermanentLLMError, match="only reads conversations it wrote"):
        asyncio.run(RuleEngineProvider().complete(request))


def test_an_unknown_policy_is_a_permanent_error_naming_the_policies() -> None:
    request = LLMRequest(agent_id="a", task_id="t", model="rules-oracle-v9", system="",
                         messages=[ChatMessage("user", "hi")])
    with pytest.raises(PermanentLLMError, match="rules-trader-v1"):
        asyncio.run(RuleEngineProvider().complete(request))


def test_the_engine_is_not_an_llm_uses_no_tokens_and_streams_its_answer() -> None:
    engine = RuleEngineProvider()
    pieces: list[str] = []
    request = LLMRequest(agent_id="o", task_id="t", model="rules-orchestrator-v1", system="",
                         messages=[ChatMessage("user", "help")])
    response = asyncio.run(engine.complete(request, pieces.append))
    assert engine.is_llm is False and engine.name == "rule-engine"
    assert response.usage.input_tokens == 0 == response.usage.output_tokens
    assert "not an LLM" in response.text and pieces == [response.text]
