"""The parser's fast path reads exactly what lxml reads, and leaves everything else to lxml."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.tools.protocol.call import fast_call, read_xml
from app.tools.protocol.parser import _CONTROL, _single_call, parse_response

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,12}", fullmatch=True).filter(
    lambda n: n not in ("thinking", "tool_result")
)
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<>&\r"),
    max_size=30,
)
SPACE = st.text(alphabet=" \t\n", max_size=3)


def _slow(body: str):
    return _single_call(read_xml(body), None).call


@st.composite
def plain_calls(draw) -> str:
    name = draw(NAMES)
    params = draw(st.lists(st.tuples(SPACE, NAMES, TEXT), max_size=6))
    inner = "".join(f"{ws}<{tag}>{text}</{tag}>" for ws, tag, text in params)
    return f"<{name}>{inner}{draw(SPACE)}</{name}>"


@settings(max_examples=300, deadline=None)
@given(plain_calls())
def test_fast_path_call_equals_the_lxml_reading(body: str) -> None:
    fast = fast_call(body)
    if _CONTROL.search(body):
        assert fast is None  # control characters go to the path that explains them
        return
    assert fast is not None
    assert fast == _slow(body)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="<>/ab&;#x1 \n\r=\"'!-[]", max_size=40))
def test_whatever_the_fast_path_accepts_lxml_reads_the_same(body: str) -> None:
    fast = fast_call(body)
    if fast is not None:
        assert fast == _slow(body)


def test_typical_calls_take_the_fast_path_and_keep_their_text() -> None:
    body = "<create_order>\n  <symbol>BTC/USDT</symbol>\n  <reason> a b </reason>\n</create_order>"
    call = fast_call(body)
    assert call is not None and call == _slow(body)
    assert [(p.tag, p.text) for p in call.params] == [("symbol", "BTC/USDT"), ("reason", " a b ")]


def test_anything_unusual_is_left_to_lxml() -> None:
    for body in (
        "<t><p>a &amp; b</p></t>",  # an entity lxml expands
        "<t><p a='1'>x</p></t>",  # attributes
        "<t x='1'></t>",
        "<t><p><i>x</i></p></t>",  # nesting
        "<t><p>x</q></t>",  # mismatched tag
        "<t><p>x</p></u>",
        "<t><p>a\r\nb</p></t>",  # lxml normalises CR
        "<t><!-- c --><p>x</p></t>",
        "<t>stray<p>x</p></t>",
        "<t><p/></t>",
        "<ns:t><p>x</p></ns:t>",
        "<thinking><p>x</p></thinking>",
        "<tool_result><p>x</p></tool_result>",
    ):
        assert fast_call(body) is None, body


def test_errors_still_get_their_specific_messages() -> None:
    mismatched = parse_response("<get_ticker><symbol>BTC</sym></get_ticker>")
    assert mismatched.error is not None and "<symbol>" in mismatched.error.message
    result = parse_response("<tool_result><status>success</status></tool_result>")
    assert result.error is not None and "never write one yourself" in result.error.message
