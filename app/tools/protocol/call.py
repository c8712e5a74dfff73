"""The call as read: ``ToolCall`` and ``ParamNode``, and the two ways a call's XML becomes them.

A plain call (parameters that are plain elements holding plain text) is read by one regular
expression (``fast_call``); anything else is parsed by a hardened lxml parser (``read_xml``) and
its call element turned into nodes under the element, attribute and depth budgets of
``limits.py`` (``call_from_element``). Deciding which text is the call, and every refusal of a
malformed response, stay in ``parser.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from lxml import etree

from app.domain.errors import ParseError
from app.tools.protocol.diagnose import NAMESPACE_HINT, WRAPPER
from app.tools.protocol.limits import (
    MAX_ATTRIBUTES,
    MAX_CALL_ATTRIBUTES,
    MAX_CALL_DEPTH,
    MAX_CALL_ELEMENTS,
    too_deep,
    too_many_attributes,
    too_many_call_attributes,
    too_many_elements,
)

_CHUNK = 64 * 1024
# The fast path: a call whose parameters are plain elements holding plain text (no attributes,
# nesting, comments, entities, '&', '<', '>', CR or control characters) is read by these two
# patterns; anything else, including every malformed call, goes to lxml and the diagnostics.
_F_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_F_TEXT = "[^<>&\r\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]*"
_F_SPACE = "[ \t\n\r]*"
_FAST_CALL = re.compile(  # group 3 is re-bound in each repetition, so \3 checks each closing tag
    rf"<({_F_NAME})>((?:{_F_SPACE}<({_F_NAME})>{_F_TEXT}</\3>)*){_F_SPACE}</\1>"
)
_FAST_MAX_PARAMS = 64
_FAST_MAX_CHARS = 1_000_000  # a bigger call takes the full path, whose costs are bounded first
_NOT_FAST = frozenset({"thinking", "tool_result"})  # their calls need parser._single_call's words
_NO_ATTRS: Mapping[str, str] = MappingProxyType({})  # shared, so read-only


# The result types (these two and parser.ParsedResponse) are slotted but not frozen:
# one of each is built per call on every agent's hot path, and a frozen dataclass's __init__
# costs four times as much. Nothing mutates them.
@dataclass(slots=True)
class ParamNode:
    """One element inside a call: its tag, attributes, direct text and child elements."""

    tag: str
    text: str = ""
    attrs: Mapping[str, str] = field(default_factory=dict)
    children: tuple[ParamNode, ...] = ()


@dataclass(slots=True)
class ToolCall:
    """A well-formed call: the tool's name and its parameter elements, in order."""

    name: str
    params: tuple[ParamNode, ...]
    attrs: Mapping[str, str] = field(default_factory=dict)
    stray_text: str = ""


def _parser() -> etree.XMLParser:
    """A fresh hardened parser: cheap (microseconds), never shared between threads or calls."""
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        recover=False,
        collect_ids=False,
    )


def read_xml(body: str) -> etree._Element:
    """Parse ``body`` inside the wrapper element, fed in chunks.

    Feeding stops at the chunk holding the first error, so a broken 2 MB response costs about a
    millisecond instead of libxml2 collecting errors to the end. Undefined entities, which the
    push parser reports late and garbled, are refused before (``bad_ampersand``).

    Raises:
        etree.XMLSyntaxError: the first well-formedness error.
    """
    parser = _parser()
    parser.feed(f"<{WRAPPER}>")
    for start in range(0, len(body), _CHUNK):
        parser.feed(body[start:start + _CHUNK])
    parser.feed(f"</{WRAPPER}>")
    return parser.close()


def fast_call(body: str) -> ToolCall | None:
    """Read a plain well-formed call without lxml, or return None to take the full path.

    What it accepts, lxml reads to exactly the same ``ToolCall``: the text excludes everything
    XML would transform (entities, CR) or refuse (control characters, '<', a stray ']]>'), the
    whitespace between elements is what lxml reports as ignorable tails, and each closing tag
    must repeat its opening tag.
    """
    if len(body) > _FAST_MAX_CHARS or body.count("<") > 2 * _FAST_MAX_PARAMS + 2:
        return None  # long lists and huge calls take the element-budgeted path
    match = _FAST_CALL.fullmatch(body)
    if match is None or match.group(1) in _NOT_FAST:
        return None
    # The match proved the inside is: space, then <tag>text</tag> + space, repeated, where neither
    # a tag nor a text holds '<' or '>'; so splitting at '<' gives "tag>text" at every odd index.
    pieces = match.group(2).split("<")
    if len(pieces) > 2 * _FAST_MAX_PARAMS + 1:
        return None  # long lists take the element-budgeted path
    params = []
    for i in range(1, len(pieces), 2):
        tag, _, text = pieces[i].partition(">")
        params.append(ParamNode(tag, text, _NO_ATTRS))
    return ToolCall(match.group(1), tuple(params), _NO_ATTRS)


def call_from_element(first: etree._Element, name: str) -> ToolCall:
    """The call element ``first`` (tag ``name``) as a ``ToolCall``, within the call's budgets.

    Raises:
        ParseError: too many elements or attributes, too deep, or a namespaced tag.
    """
    budget = [MAX_CALL_ELEMENTS, MAX_CALL_ATTRIBUTES]
    attrs = _attributes(first, name, budget)
    params = tuple(_node(child, 2, budget) for child in first)
    return ToolCall(
        name=name,
        params=params,
        attrs=attrs,
        stray_text=(first.text or "").strip() + "".join((c.tail or "").strip() for c in first),
    )


def _attributes(element: etree._Element, tag: str, budget: list[int]) -> Mapping[str, str]:
    """The element's attributes, after checking their number against the tag's and the call's
    limits: ``len`` is linear, while reading values costs lxml time quadratic in their number."""
    attrib = element.attrib
    count = len(attrib)
    if count == 0:
        return _NO_ATTRS
    if count > MAX_ATTRIBUTES:
        raise too_many_attributes(tag)
    budget[1] -= count
    if budget[1] < 0:
        raise too_many_call_attributes()
    return {str(k): str(v) for k, v in attrib.items()}


def _node(element: etree._Element, depth: int, budget: list[int]) -> ParamNode:
    """One element as a node; ``budget`` is [elements, attributes] left for the whole call."""
    if depth > MAX_CALL_DEPTH:
        raise too_deep()
    budget[0] -= 1
    if budget[0] < 0:
        raise too_many_elements()
    tag = str(element.tag)
    if tag.startswith("{"):
        raise ParseError(NAMESPACE_HINT)
    return ParamNode(
        tag=tag,
        text=element.text or "",
        attrs=_attributes(element, tag, budget),
        children=tuple(_node(child, depth + 1, budget) for child in element),
    )
