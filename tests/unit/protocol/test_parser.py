"""What the parser accepts: thinking plus one call, a text answer, and the nodes a call carries."""

from __future__ import annotations

import pytest

from app.domain.errors import ErrorCode
from app.tools.protocol.call import ParamNode
from app.tools.protocol.limits import MAX_ATTRIBUTES, MAX_CALL_ATTRIBUTES, MAX_CALL_DEPTH
from app.tools.protocol.parser import parse_response

KNOWN = ("get_order_book", "get_current_ticker_info", "create_order")


def test_thinking_then_call_gives_both() -> None:
    parsed = parse_response(
        "<thinking>\nSpread looks wide; check depth.\n</thinking>\n\n"
        "<get_order_book>\n    <symbol>BTC/USDT</symbol>\n    <limit>20</limit>\n"
        "</get_order_book>\n",
        KNOWN,
    )
    assert parsed.thinking == "Spread looks wide; check depth."
    assert parsed.call is not None and parsed.is_call and not parsed.is_text
    assert parsed.call.name == "get_order_book"
    assert parsed.call.params == (ParamNode("symbol", "BTC/USDT"), ParamNode("limit", "20"))
    assert parsed.call.stray_text == ""
    assert parsed.error is None and parsed.tool_name == "get_order_book"


def test_list_items_become_child_nodes() -> None:
    parsed = parse_response(
        "<get_current_ticker_info><symbols><symbol>BTC/USDT</symbol><symbol>ETH/USDT</symbol>"
        "</symbols></get_current_ticker_info>",
        KNOWN,
    )
    assert parsed.call is not None
    (symbols,) = parsed.call.params
    assert [(child.tag, child.text) for child in symbols.children] == [
        ("symbol", "BTC/USDT"),
        ("symbol", "ETH/USDT"),
    ]


def test_escaped_values_are_unescaped_once() -> None:
    parsed = parse_response(
        "<create_order><symbol>A&amp;B &lt;1&gt; &#x41;&#66; &quot;q&apos;</symbol></create_order>",
        KNOWN,
    )
    assert parsed.call is not None
    assert parsed.call.params[0].text == "A&B <1> AB \"q'"


def test_plain_prose_is_a_text_answer_even_with_angle_brackets_and_ampersands() -> None:
    answer = "BTC is at 25,000 & RSI < 30, so the dip rule -> fired. I used <get_order_book>."
    parsed = parse_response(f"<thinking>summarise</thinking>{answer}", KNOWN)
    assert (parsed.text, parsed.thinking, parsed.call, parsed.error) == (
        answer,
        "summarise",
        None,
        None,
    )


def test_an_unknown_call_is_still_a_call_so_the_executor_can_name_the_closest_tool() -> None:
    parsed = parse_response("<get_orderbook><symbol>BTC/USDT</symbol></get_orderbook>", KNOWN)
    assert parsed.call is not None and parsed.call.name == "get_orderbook"


def test_attributes_and_loose_text_are_kept_for_the_executor_to_explain() -> None:
    parsed = parse_response('<create_order side="BUY">oops<symbol>X</symbol> tail</create_order>')
    assert parsed.call is not None
    assert parsed.call.attrs == {"side": "BUY"}
    assert parsed.call.stray_text == "oopstail"


def test_the_error_names_the_tool_it_was_meant_for() -> None:
    parsed = parse_response("<get_order_book><symbol>A & B</symbol></get_order_book>", KNOWN)
    assert parsed.error is not None and parsed.tool_name == "get_order_book"
    assert parsed.error.code is ErrorCode.PARSE_ERROR
    assert "line 1, column 27" in parsed.error.message


def test_a_cut_off_response_is_called_cut_off() -> None:
    parsed = parse_response("<get_order_book><symbol>BTC/USDT</symbol></get_ord", KNOWN)
    assert parsed.error is not None
    assert "looks cut off" in parsed.error.message


def test_an_ampersand_inside_a_comment_is_fine() -> None:
    parsed = parse_response(
        "<get_order_book><!-- bids & asks --><symbol>BTC/USDT</symbol></get_order_book>", KNOWN
    )
    assert parsed.call is not None and parsed.call.params == (ParamNode("symbol", "BTC/USDT"),)


def test_the_mismatch_message_points_at_the_tags_line() -> None:
    parsed = parse_response(
        "<create_order>\n  <symbol>BTC/USDT\n  <side>BUY</side>\n</create_order>"
    )
    assert parsed.error is not None
    assert "<symbol> opened on line 2 is closed by </create_order>" in parsed.error.message


TWO_MB = 1_990_000


def _attributes(size: int, value: str = "1") -> str:
    """Distinct attributes (a0="1" a1="1" ...) filling about ``size`` characters."""
    out, used, i = [], 0, 0
    while used < size:
        piece = f' a{i}="{value}"'
        out.append(piece)
        used += len(piece)
        i += 1
    return "".join(out)


WORST_CASES = {
    "thousands of unescaped ampersands": "<create_order><symbol>"
    + "&" * TWO_MB
    + "</symbol></create_order>",
    "a million unterminated tags": "<a " * (TWO_MB // 3),
    "a quarter million empty elements": "<create_order>"
    + "<a/>" * (TWO_MB // 4 - 10)
    + "</create_order>",
    "known tags throughout prose": "x " + "<get_order_book " * (TWO_MB // 17),
    "fences without a call": "```" * (TWO_MB // 3),
    "function-call lookalike": "get_order_book" * (TWO_MB // 14),
    "a tag with a hundred thousand attributes": "<create_order "
    + 'a="1" ' * (TWO_MB // 6 - 10)
    + "/>",
    "an endless xml declaration": "<?xml" + "?" * (TWO_MB - 10),
    "an endless thinking block": "<thinking>" * (TWO_MB // 10),
    "unclosed comments": "<create_order>" + "<!--&" * (TWO_MB // 5 - 10),
    # issue 14: lxml reads attribute values in time quadratic in their number (200 s at 2 MB)
    "distinct attributes on the call": "<create_order" + _attributes(TWO_MB - 60)
    + "><symbol>x</symbol></create_order>",
    "distinct attributes on a parameter": "<create_order><symbol" + _attributes(TWO_MB - 60)
    + ">x</symbol></create_order>",
    "distinct attributes on a list item": "<get_current_ticker_info><symbols><symbol"
    + _attributes(TWO_MB - 100) + ">x</symbol></symbols></get_current_ticker_info>",
    "entity references in attribute values": "<create_order"
    + _attributes(TWO_MB - 60, "&amp;&lt;") + "/>",
    "half text, half attributes": "<create_order><reason>" + "y" * (TWO_MB // 2)
    + "</reason><symbol" + _attributes(TWO_MB // 2 - 80) + ">x</symbol></create_order>",
    "32 attributes (the tag limit) on each of thousands of elements":
    "<update_agent_settings><settings>"
    + "".join("<setting" + "".join(f' k{j}="{i}"' for j in range(32)) + ">v</setting>"
              for i in range(5_000))
    + "</settings></update_agent_settings>",
    "nesting flood, well-formed": "<create_order>" + "<a>" * (TWO_MB // 7)
    + "</a>" * (TWO_MB // 7) + "</create_order>",
    "nesting at the parser's depth limit around a long text": "<create_order>" + "<a>" * 250
    + "x" * (TWO_MB - 2_100) + "</a>" * 250 + "</create_order>",
}


@pytest.mark.parametrize("text", WORST_CASES.values(), ids=WORST_CASES.keys())
def test_two_megabytes_of_hostile_input_is_answered_without_a_call(text: str) -> None:
    """How fast each shape is answered: tests/benchmarks/bench_parser_limits.py."""
    assert parse_response(text, KNOWN).call is None


def test_more_attributes_on_a_tag_than_the_limit_is_refused_naming_the_limit() -> None:
    limit = MAX_ATTRIBUTES
    few = "<create_order" + _attributes(20) + "><symbol>x</symbol></create_order>"
    assert parse_response(few, KNOWN).call is not None  # read; the executor explains them
    flooded = {
        "create_order": "<create_order" + _attributes(limit * 12) + "><symbol>x</symbol>"
        "</create_order>",
        "symbol": "<create_order><symbol" + _attributes(limit * 12) + ">x</symbol></create_order>",
    }
    for tag, call in flooded.items():
        parsed = parse_response(call, KNOWN)
        assert parsed.error is not None and parsed.error.code is ErrorCode.PARSE_ERROR
        assert f"<{tag}> has more than {limit} attributes" in parsed.error.message
        assert parsed.error.details["limit"] == limit
        assert parsed.tool_name == "create_order"


def test_a_map_entry_keeps_its_one_attribute() -> None:
    parsed = parse_response(
        '<update_agent_settings><settings><setting name="risk">high</setting></settings>'
        "</update_agent_settings>"
    )
    assert parsed.call is not None
    assert dict(parsed.call.params[0].children[0].attrs) == {"name": "risk"}


def test_nesting_past_the_xml_readers_own_limit_names_the_call_depth_limit() -> None:
    parsed = parse_response("<create_order>" + "<a>" * 5_000 + "x" + "</a>" * 5_000
                            + "</create_order>", KNOWN)
    assert parsed.error is not None and parsed.error.code is ErrorCode.PARSE_ERROR
    assert f"nested more than {MAX_CALL_DEPTH} levels deep" in parsed.error.message
    shallow = parse_response("<create_order><a><b><c><d>x</d></c></b></a></create_order>", KNOWN)
    assert shallow.error is not None
    assert f"nested more than {MAX_CALL_DEPTH} levels deep" in shallow.error.message


def test_many_tags_within_the_tag_limit_still_meet_the_calls_attribute_limit() -> None:
    entries = "".join(f'<setting name="k{i}" n2="x">v</setting>' for i in range(600))
    parsed = parse_response(f"<update_agent_settings><settings>{entries}</settings>"
                            "</update_agent_settings>")
    assert parsed.error is not None and parsed.error.code is ErrorCode.PARSE_ERROR
    assert f"more than {MAX_CALL_ATTRIBUTES:,} attributes" in parsed.error.message
    assert parsed.error.details["limit"] == MAX_CALL_ATTRIBUTES
