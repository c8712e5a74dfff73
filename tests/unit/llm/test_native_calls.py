"""Native tool calls are the same toolset: a JSON call becomes the ToolCall the XML parser gives
for the same call, is stored as that XML, runs through the executor, and goes back to the model as
its own earlier call with the result answering it; what cannot be read is refused in words."""

from __future__ import annotations

import pytest

from app.agents.llm.port import LLMResponse, LLMUsage, NativeCall
from app.agents.native_calls import (
    NATIVE_CALL,
    ToolTransport,
    chat_messages,
    read_native,
    tool_schemas,
    with_words,
)
from app.domain.errors import ErrorCode
from app.tools.schema import call_arguments, call_xml, to_call
from app.tools.spec import ALL_PERMISSIONS
from tests.unit.protocol.sample_tools import OPERATOR, make_executor, run

EXECUTOR, RECORDER, _WORLD = make_executor()
REGISTRY = EXECUTOR.registry


@pytest.mark.parametrize(("name", "arguments"), [
    ("get_current_ticker_info", {"symbols": ["BTC/USDT", "ETH/USDT"]}),
    ("create_order", {"quantity": "0.25", "symbol": "BTC/USDT", "side": "BUY",
                      "order_type": "LIMIT", "price": 25000.5, "reduce_only": False}),
    ("get_historical_klines", {"symbol": "BTC/USDT", "interval": "1h", "limit": 50}),
    ("write_note", {"key": "plan", "content": "buy < 25000 & sell > 30000\n\tthen wait"}),
    ("update_agent_settings", {"agent_id": "a-1", "settings": {"rsi": 14, "mode": "fast"}}),
    ("create_new_agent_instance", {"template_id": "t", "config": {"symbols": ["BTC/USDT"]}}),
])
def test_a_native_call_is_stored_as_the_xml_the_parser_reads_back_to_the_same_call(
    name: str, arguments: dict[str, object]
) -> None:
    reading = read_native([NativeCall("call_1", name, arguments)], REGISTRY)
    assert reading.error is None
    spec = REGISTRY.get(name)
    parsed = EXECUTOR.parse(reading.content)
    assert parsed.call == to_call(spec, arguments)
    back = call_arguments(spec, parsed.call)
    assert to_call(spec, back) == parsed.call  # and back to JSON, to send it to the model again


def test_the_same_call_is_the_same_xml_whatever_order_its_json_keys_came_in() -> None:
    spec = REGISTRY.get("create_order")
    one = {"symbol": "BTC/USDT", "side": "BUY", "order_type": "MARKET", "quantity": "1"}
    other = dict(reversed(list(one.items())))
    assert call_xml(to_call(spec, one)) == call_xml(to_call(spec, other))


def test_a_native_call_runs_through_the_executor_like_its_xml() -> None:
    reading = read_native([NativeCall("c", "get_current_ticker_info",
                                      {"symbols": ["BTC/USDT"]})], REGISTRY)
    result = run(EXECUTOR.execute_parsed(OPERATOR, EXECUTOR.parse(reading.content)))
    assert result.status == "success"
    assert RECORDER.entries[-1].tool_name == "get_current_ticker_info"
    assert RECORDER.entries[-1].params == {"symbols": ["BTC/USDT"]}


@pytest.mark.parametrize(("calls", "code", "words"), [
    ([NativeCall("c", "get_current_ticker_info", '{"symbols": ["BTC')], ErrorCode.PARSE_ERROR,
     "are not a JSON object"),
    ([NativeCall("a", "get_current_ticker_info", {}), NativeCall("b", "create_order", {})],
     ErrorCode.MULTIPLE_TOOL_CALLS, "holds 2 tool calls (get_current_ticker_info, create_order)"),
    ([NativeCall("c", "functions.run tool", {})], ErrorCode.UNKNOWN_TOOL,
     "There is no tool named 'functions.run tool'"),
    ([NativeCall("c", "write_note", {"the key": "x"})], ErrorCode.INVALID_PARAMETER,
     "Its parameters are: content, key"),
])
def test_a_native_answer_that_cannot_be_one_call_is_refused_with_what_to_fix(
    calls: list[NativeCall], code: ErrorCode, words: str
) -> None:
    reading = read_native(calls, REGISTRY)
    assert reading.error is not None and reading.error.code is code
    assert words in reading.error.message
    assert EXECUTOR.parse(reading.content).call is None  # stored as words, never run


def test_an_unknown_tool_called_natively_gets_the_executors_unknown_tool_answer() -> None:
    reading = read_native([NativeCall("c", "get_price", {"symbol": "BTC/USDT"})], REGISTRY)
    assert reading.error is None
    result = run(EXECUTOR.execute_parsed(OPERATOR, EXECUTOR.parse(reading.content)))
    assert result.error_code is ErrorCode.UNKNOWN_TOOL


def test_the_words_beside_a_native_call_are_kept_with_it_when_they_read_back_the_same() -> None:
    reading = read_native([NativeCall("c", "get_current_ticker_info",
                                      {"symbols": ["BTC/USDT"]})], REGISTRY)
    kept = with_words(reading, "<thinking>check the price</thinking>", EXECUTOR.parse)
    assert kept.startswith("<thinking>check the price</thinking>\n<get_current_ticker_info>")
    assert EXECUTOR.parse(kept).call == EXECUTOR.parse(reading.content).call
    # words that would change how the answer reads are not kept with the call
    assert with_words(reading, "<create_order>", EXECUTOR.parse) == reading.content


def _stored(*rows: tuple[str, str, str, int]) -> list[tuple[str, str, str, int]]:
    return list(rows)


TICKER = "<get_current_ticker_info><symbols><symbol>BTC/USDT</symbol></symbols>" \
         "</get_current_ticker_info>"


def test_a_native_call_and_the_message_answering_it_are_sent_with_the_same_id() -> None:
    sent = chat_messages(_stored(
        ("user", "task", "price?", 0),
        ("assistant", NATIVE_CALL, f"<thinking>look</thinking>\n{TICKER}", 1),
        ("user", "tool_result", "<tool_result/>", 1),
        ("assistant", "assistant", TICKER, 2),
        ("user", "tool_result", "<tool_result/>", 2),
    ), EXECUTOR.parse, REGISTRY)
    call, result, xml_call, xml_result = sent[1:]
    assert call.call == NativeCall("call_1", "get_current_ticker_info",
                                   {"symbols": ["BTC/USDT"]})
    assert call.said == "<thinking>look</thinking>" and call.content.endswith(TICKER)
    assert result.call_id == "call_1" and result.content == "<tool_result/>"
    assert xml_call.call is None and xml_result.call_id == ""  # an XML call stays text


def test_a_native_call_not_followed_by_its_answer_is_sent_as_text() -> None:
    sent = chat_messages(_stored(("user", "task", "go", 0),
                                 ("assistant", NATIVE_CALL, TICKER, 1)),
                         EXECUTOR.parse, REGISTRY)
    assert sent[1].call is None and sent[1].content == TICKER


def test_the_tools_are_offered_with_their_specs_schemas() -> None:
    schemas = {s.name: s for s in tool_schemas(REGISTRY, ALL_PERMISSIONS)}
    order = schemas["create_order"].parameters
    assert order["required"] == ["symbol", "side", "quantity"]
    assert order["properties"]["side"]["enum"] == ["BUY", "SELL"]
    assert order["additionalProperties"] is False


def _answer(native: bool, cut: bool = False) -> LLMResponse:
    calls = (NativeCall("c", "get_current_ticker_info", {}),) if native else ()
    return LLMResponse("" if native else TICKER, LLMUsage(1, 1), "m", "p", 1.0,
                       finish_reason="length" if cut else "stop", tool_calls=calls)


def test_auto_offers_tools_until_the_first_answer_shows_how_the_model_calls() -> None:
    native, xml = ToolTransport("auto"), ToolTransport("auto")
    assert native.offers() and xml.offers()
    native.answered(_answer(native=False, cut=True))  # a cut answer decides nothing
    assert native.offers()
    native.answered(_answer(native=True))
    xml.answered(_answer(native=False))
    native.answered(_answer(native=False))  # decided once: a later XML answer changes nothing
    assert native.offers() and not xml.offers()


def test_auto_falls_back_to_xml_and_the_fixed_modes_stay() -> None:
    auto, fixed = ToolTransport("auto"), ToolTransport("native")
    assert auto.fall_back() and not auto.offers()
    assert not fixed.fall_back() and fixed.offers()
    assert not ToolTransport("xml").offers()
