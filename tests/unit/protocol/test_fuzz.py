"""Property tests: whatever a model sends, the protocol answers with a well-formed envelope.

Hypothesis feeds arbitrary unicode (lone surrogates included), arbitrary bytes, soups of XML-ish
tokens and valid calls with random damage. The parser must never raise, and whatever it returns
must render to an envelope lxml accepts (how fast it answers the worst shapes is measured by
tests/benchmarks/bench_parser_limits.py). Rendering is fuzzed too:
any text or attribute value round-trips exactly, except characters XML cannot carry at all, which
become U+FFFD.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from app.domain.errors import ErrorCode
from app.tools.protocol.parser import ParsedResponse, parse_response
from app.tools.protocol.render import (
    Element,
    clean_text,
    el,
    escape_text,
    format_value,
    render_error,
    render_rejected,
    render_success,
)
from tests.unit.protocol.envelope import parse_envelope
from tests.unit.protocol.sample_tools import OPERATOR, make_executor, run

KNOWN = ("get_order_book", "get_current_ticker_info", "create_order", "write_agent_memory_file")
_UNREPRESENTABLE = re.compile("[\ud800-\udfff\ufffe\uffff]")
FUZZ = settings(
    max_examples=300,
    deadline=None,  # speed is the benchmarks' to measure, on a quiet machine
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Every code point, surrogates and controls included.
ANY_CHAR = st.characters(codec=None, exclude_categories=[])
NASTY_CHARS = st.sampled_from(
    [
        "\x00",
        "\x01",
        "\x0b",
        "\x1f",
        "\ud800",
        "\udfff",
        "\ufffe",
        "\uffff",
        "\r",
        "\t",
        "\u2028",
        "\U0001f600",
        "\ufeff",
        "&",
        "<",
        ">",
        '"',
        "'",
        "]]>",
    ]
)
ANY_TEXT = st.text(alphabet=ANY_CHAR) | st.lists(NASTY_CHARS | ANY_CHAR, max_size=30).map("".join)
XML_TOKENS = st.sampled_from(
    [
        "<get_order_book>",
        "</get_order_book>",
        "<symbol>",
        "</symbol>",
        "BTC/USDT",
        "<limit>",
        "</limit>",
        "5",
        "<thinking>",
        "</thinking>",
        "<!--",
        "-->",
        "<![CDATA[",
        "]]>",
        "<!DOCTYPE x [",
        '<!ENTITY a "b">',
        "]>",
        "&a;",
        "&amp;",
        "&",
        "<",
        ">",
        "/>",
        "<?xml ?>",
        "```xml",
        "```",
        "\n",
        " ",
        '="',
        "<k:x>",
        'xmlns="u"',
        "<symbols>",
        "<symbol/>",
        "</symbols>",
        "<tool_result>",
        "&#0;",
        "&#x41;",
        "\x00",
        "\ud800",
        "<create_order>",
        "</create_order>",
        "<a>",
        "</a>",
        "{",
        '"get_order_book"',
        "get_order_book(",
    ]
)
XML_SOUP = st.lists(XML_TOKENS | st.text(max_size=5), max_size=40).map("".join)


def _parse(raw: str | bytes) -> ParsedResponse:
    return parse_response(raw, KNOWN)


def _check_rendered(parsed: ParsedResponse) -> None:
    """Exactly one outcome, and every outcome renders to a well-formed envelope."""
    outcomes = [parsed.call is not None, parsed.text is not None, parsed.error is not None]
    assert outcomes.count(True) == 1
    if parsed.error is not None:
        result = render_error(
            parsed.tool_name or "unknown",
            parsed.error.code,
            parsed.error.message,
            parsed.error.details,
        )
        root = parse_envelope(result.xml)
        assert root.get("tool_name") == clean_text(parsed.tool_name or "unknown")
        assert root.findtext("error_details/error_code") == parsed.error.code.value
    elif parsed.text is not None:
        root = parse_envelope(render_success("answer", el("text", parsed.text)).xml)
        assert (root.findtext("data/text") or "") == clean_text(parsed.text)
    else:
        assert parsed.call is not None
        echo = [el("param", node.text, name=node.tag) for node in parsed.call.params]
        root = parse_envelope(render_success(parsed.call.name, el("echo", None, *echo)).xml)
        assert root.get("tool_name") == parsed.call.name
    if parsed.thinking is not None:
        root = parse_envelope(render_success("x", el("thinking", parsed.thinking)).xml)
        assert (root.findtext("data/thinking") or "") == clean_text(parsed.thinking)


@FUZZ
@given(ANY_TEXT)
def test_any_text_parses_fast_and_renders_a_well_formed_envelope(text: str) -> None:
    _check_rendered(_parse(text))


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_parse_fast_and_render_a_well_formed_envelope(raw: bytes) -> None:
    _check_rendered(_parse(raw))


@FUZZ
@given(XML_SOUP)
def test_xml_like_soup_parses_fast_and_renders_a_well_formed_envelope(text: str) -> None:
    _check_rendered(_parse(text))


VALID_CALLS = [
    "<get_order_book><symbol>BTC/USDT</symbol><limit>5</limit></get_order_book>",
    "<thinking>check depth &amp; spread</thinking>\n<get_order_book>\n    <symbol>ETH/USDT</symbol>"
    "\n</get_order_book>",
    "<get_current_ticker_info><symbols><symbol>BTC/USDT</symbol><symbol>SOL/USDT</symbol>"
    "</symbols></get_current_ticker_info>",
    "<create_order><symbol>BTC/USDT</symbol><side>BUY</side><order_type>LIMIT</order_type>"
    "<quantity>0.01</quantity><price>24000</price><reduce_only>false</reduce_only></create_order>",
    "<write_agent_memory_file><file_path>notes/a.md</file_path><content_base64>aGVsbG8gJiA8d29ybGQ+"
    "</content_base64></write_agent_memory_file>",
    "<create_new_agent_instance><agent_name_label>A &lt;1&gt;</agent_name_label>"
    "<initial_config_json>"
    '{"symbols": ["BTC/USDT"], "risk": 0.5}</initial_config_json></create_new_agent_instance>',
    '<update_agent_settings><settings><setting name="risk">high</setting></settings>'
    "</update_agent_settings>",
]


@st.composite
def damaged_calls(draw: st.DrawFn) -> str:
    """A valid call with one to four random edits: deletions, insertions, swaps, duplications."""
    text = draw(st.sampled_from(VALID_CALLS))
    for _ in range(draw(st.integers(1, 4))):
        if not text:
            break
        at = draw(st.integers(0, len(text) - 1))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "duplicate", "truncate"]))
        if kind == "delete":
            end = draw(st.integers(at, min(len(text), at + 8)))
            text = text[:at] + text[end:]
        elif kind == "insert":
            text = text[:at] + draw(XML_TOKENS | st.text(max_size=3)) + text[at:]
        elif kind == "replace":
            text = text[:at] + draw(NASTY_CHARS | ANY_CHAR) + text[at + 1 :]
        elif kind == "duplicate":
            end = draw(st.integers(at, min(len(text), at + 30)))
            text = text[:end] + text[at:end] + text[end:]
        else:
            text = text[:at]
    return text


@FUZZ
@given(damaged_calls())
def test_damaged_calls_parse_fast_and_render_a_well_formed_envelope(text: str) -> None:
    _check_rendered(_parse(text))


@settings(FUZZ, max_examples=200)
@given(damaged_calls())
def test_damaged_calls_through_the_executor_always_end_in_a_readable_result(text: str) -> None:
    executor, recorder, _ = make_executor()
    result = run(executor.execute_text(OPERATOR, text))
    if result is None:  # read as a plain text answer: nothing ran, nothing recorded
        assert len(recorder.entries) == 0
        return
    root = parse_envelope(result.xml)
    assert root.findtext("status") == result.status
    assert result.error_code is None or result.error_code in ErrorCode
    assert len(recorder.entries) == 1
    assert recorder.entries[0].status == result.status


@FUZZ
@given(ANY_TEXT, ANY_TEXT)
def test_any_value_written_escaped_parses_back_exactly(symbol: str, thinking: str) -> None:
    """The other direction: what a careful model escapes, the parser reads back unchanged."""
    call = (
        f"<thinking>{escape_text(thinking)}</thinking>\n"
        f"<create_order><symbol>{escape_text(symbol)}</symbol><side>BUY</side></create_order>"
    )
    parsed = _parse(call)
    if "</thinking" in thinking:  # the thinking block ends at the first closing tag, by design
        return
    assert parsed.call is not None, parsed.error
    assert parsed.call.params[0].text == clean_text(symbol)
    assert parsed.thinking == escape_text(thinking).strip()


ATTRIBUTE_VALUES = st.sampled_from(["1", "", "&amp;<", "x" * 40, "BTC/USDT"]) | st.text(max_size=8)


@st.composite
def attribute_floods(draw: st.DrawFn) -> str:
    """Thousands of attributes on the call, a parameter or a list item (issue 14: lxml reads their
    values in time quadratic in their number), distinct or repeated, with any values."""
    count = draw(st.integers(1, 40_000))
    distinct = draw(st.booleans())
    value = escape_text(draw(ATTRIBUTE_VALUES)).replace('"', "&quot;")
    attrs = "".join(f' a{i if distinct else i % 7}="{value}"' for i in range(count))
    where = draw(st.sampled_from(["call", "parameter", "item", "self-closing", "unclosed"]))
    if where == "call":
        return f"<create_order{attrs}><symbol>BTC/USDT</symbol></create_order>"
    if where == "parameter":
        return f"<create_order><symbol{attrs}>BTC/USDT</symbol></create_order>"
    if where == "item":
        return (f"<get_current_ticker_info><symbols><symbol{attrs}>BTC/USDT</symbol></symbols>"
                "</get_current_ticker_info>")
    if where == "self-closing":
        return f"<get_order_book{attrs}/>"
    return f"<create_order{attrs}"


@st.composite
def nesting_floods(draw: st.DrawFn) -> str:
    """Elements nested thousands deep: closed or not, around text, under a call or bare."""
    depth = draw(st.integers(1, 60_000))
    tag = draw(st.sampled_from(["a", "symbol", "create_order", "x.y-z"]))
    inner = escape_text(draw(st.text(max_size=20)))
    closed = draw(st.booleans())
    body = f"<{tag}>" * depth + inner + (f"</{tag}>" * depth if closed else "")
    return draw(st.sampled_from([f"<create_order>{body}</create_order>", body]))


@FUZZ
@given(attribute_floods())
def test_attribute_floods_parse_fast_and_render_a_well_formed_envelope(text: str) -> None:
    _check_rendered(_parse(text))


@FUZZ
@given(nesting_floods())
def test_nesting_floods_parse_fast_and_render_a_well_formed_envelope(text: str) -> None:
    _check_rendered(_parse(text))


TAGS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,12}", fullmatch=True)


@st.composite
def element_trees(draw: st.DrawFn, depth: int = 0) -> Element:
    attrs = draw(st.dictionaries(TAGS, ANY_TEXT, max_size=3))
    children = draw(st.lists(element_trees(depth + 1), max_size=3)) if depth < 2 else []
    text = draw(st.none() | ANY_TEXT)
    return el(draw(TAGS), text, *children, **attrs)


def _assert_round_trip(built: Element, parsed: etree._Element) -> None:
    assert parsed.tag == built.tag
    for key, value in built.attrs:
        assert parsed.get(key) == clean_text(value)
    assert len(parsed) == len(built.children)
    if built.children:
        # Text beside children is laid out on its own indented line; only its content counts.
        assert (parsed.text or "").strip() == clean_text(built.text or "").strip()
    else:
        assert (parsed.text or "") == clean_text(built.text or "")
    for child, parsed_child in zip(built.children, parsed, strict=True):
        _assert_round_trip(child, parsed_child)


@settings(FUZZ, max_examples=120)  # each example is a whole tree: the slowest property here
@given(st.lists(element_trees(), min_size=0, max_size=3), ANY_TEXT)
def test_any_payload_renders_well_formed_and_round_trips(payload: list[Element], name: str) -> None:
    result = render_success(name, payload)
    root = parse_envelope(result.xml)
    assert root.get("tool_name") == clean_text(name)
    data = root.find("data")
    assert len(data) == len(payload)
    for built, parsed in zip(payload, data, strict=True):
        _assert_round_trip(built, parsed)


@FUZZ
@given(ANY_TEXT, st.sampled_from(list(ErrorCode)), ANY_TEXT, ANY_TEXT)
def test_any_error_renders_well_formed_and_round_trips(
    name: str, code: ErrorCode, message: str, detail: str
) -> None:
    details = {"parameter": detail, "got": [detail, 1, 2.5, Decimal("0.1")], 7: None}
    root = parse_envelope(render_error(name, code, message, details).xml)
    assert root.findtext("error_details/message") == clean_text(message)
    decoded = json.loads(root.findtext("error_details/details_json"))
    # JSON escapes control characters itself; only what neither JSON nor XML can carry is replaced.
    expected = _UNREPRESENTABLE.sub("\ufffd", detail)
    assert decoded == {"7": None, "got": [expected, 1, 2.5, "0.1"], "parameter": expected}


@FUZZ
@given(ANY_TEXT, ANY_TEXT)
def test_any_rejection_renders_well_formed_and_round_trips(rule: str, reason: str) -> None:
    root = parse_envelope(render_rejected("create_order", rule, reason).xml)
    assert (root.findtext("rule") or "") == clean_text(rule)
    assert (root.findtext("reason") or "") == clean_text(reason)


@FUZZ
@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_decimals_render_without_exponent_and_keep_their_value(value: Decimal) -> None:
    text = format_value(value)
    assert "E" not in text and "e" not in text
    assert Decimal(text) == value
    assert text == "0" or not text.endswith(".") and ("." not in text or not text.endswith("0"))
