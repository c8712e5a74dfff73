"""Parse an LLM response into an optional ``<thinking>`` block plus one tool call, or a text answer.

LLM output is sloppy and sometimes hostile. Every way it can go wrong ends in a ``ParsedResponse``
carrying a ``ToolError`` whose message tells the model how to fix its call; nothing here raises or
hangs. The XML itself is read by lxml with entity resolution, DTD loading, network access and huge
trees all off, after DTDs, entity declarations and CDATA have been refused outright.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from lxml import etree

from app.domain.errors import ErrorCode, ParseError, ToolError

MAX_RESPONSE_CHARS = 2_000_000
MAX_CALL_DEPTH = 4  # call > parameter > item; one level of slack

_WRAPPER = "kestrel_response_root"
_NAME_START = re.compile(r"<[A-Za-z_]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
_BAD_AMP = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#\d{1,7}|#x[0-9A-Fa-f]{1,6});)")
_BAD_LT = re.compile(r"<(?![A-Za-z_/!?])")
_FENCE = re.compile(r"```[A-Za-z]*\s*(<[A-Za-z_][\s\S]*?)```")
_XML_DECL = re.compile(r"^<\?xml[^>]*\?>\s*")

_PARSER = etree.XMLParser(
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


@dataclass(frozen=True, slots=True)
class ParamNode:
    """One element inside a call: its tag, attributes, direct text and child elements."""

    tag: str
    text: str = ""
    attrs: dict[str, str] = field(default_factory=dict)
    children: tuple[ParamNode, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A well-formed call: the tool's name and its parameter elements, in order."""

    name: str
    params: tuple[ParamNode, ...]
    attrs: dict[str, str] = field(default_factory=dict)
    stray_text: str = ""


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """Exactly one of ``call``, ``text`` or ``error`` is set; ``thinking`` may accompany any."""

    thinking: str | None = None
    call: ToolCall | None = None
    text: str | None = None
    error: ToolError | None = None
    tool_name: str = ""

    @property
    def is_call(self) -> bool:
        return self.call is not None

    @property
    def is_text(self) -> bool:
        return self.text is not None


def _error(message: str, tool_name: str = "", code: ErrorCode = ErrorCode.PARSE_ERROR,
           thinking: str | None = None, **details: object) -> ParsedResponse:
    return ParsedResponse(
        thinking=thinking,
        error=ToolError(message, code=code, details=dict(details)),
        tool_name=tool_name,
    )


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, col


def _decode(raw: str | bytes) -> tuple[str | None, ParsedResponse | None]:
    if isinstance(raw, bytes):
        if len(raw) > MAX_RESPONSE_CHARS * 4:
            return None, _too_large(len(raw))
        try:
            return raw.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            return None, _error(
                f"The response is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
                f"{exc.start}). Send plain UTF-8 text.",
                offset=exc.start,
            )
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as exc:
        return None, _error(
            f"The response contains a character that is not valid UTF-8 (a lone surrogate at "
            f"position {exc.start}). Send plain UTF-8 text.",
            offset=exc.start,
        )
    return raw, None


def _too_large(size: int) -> ParsedResponse:
    return _error(
        f"The response is {size:,} characters long; the limit is {MAX_RESPONSE_CHARS:,}. Send one "
        "short tool call; write large content to memory in several appends.",
        size=size,
        limit=MAX_RESPONSE_CHARS,
    )


def _tag_name_at_start(text: str) -> str:
    match = re.match(r"<([A-Za-z_][\w.\-]*)", text)
    return match.group(1) if match else ""


def parse_response(raw: str | bytes, known_tools: Collection[str] = ()) -> ParsedResponse:
    """Split an LLM response into thinking plus one tool call, a text answer, or an error.

    Args:
        raw: the model's whole answer, as text or bytes.
        known_tools: tool names; a known tool's tag inside prose marks a misplaced call.
    """
    text, failure = _decode(raw)
    if failure is not None or text is None:
        return failure or _error("The response could not be read.")
    if len(text) > MAX_RESPONSE_CHARS:
        return _too_large(len(text))
    body = text.strip()
    thinking: str | None = None
    if body.startswith("<thinking>"):
        end = body.find("</thinking>")
        if end < 0:
            return _error(
                "The <thinking> block is never closed. End it with </thinking> before the tool "
                "call or answer."
            )
        thinking = body[len("<thinking>"):end].strip()
        body = body[end + len("</thinking>"):].strip()
    if not body:
        if thinking is not None:
            return _error(
                "The response has a <thinking> block but no tool call or answer after it. Follow "
                "the thinking with exactly one tool call or a plain text answer.",
                thinking=thinking,
            )
        return _error("The response is empty. Reply with one tool call or a plain text answer.")
    body = _XML_DECL.sub("", body)
    if body.startswith("```"):
        fenced = _FENCE.match(body)
        if fenced is not None:
            return _error(
                "The tool call is wrapped in markdown code fences (```). Send the bare XML call "
                "with nothing around it.",
                tool_name=_tag_name_at_start(fenced.group(1)),
                thinking=thinking,
            )
    if body.startswith("<!") and not body.startswith("<!--"):
        return _error(
            "DOCTYPE, ENTITY and CDATA constructs are not accepted. Write the call as plain "
            "elements with escaped values (&amp; for &, &lt; for <).",
            thinking=thinking,
        )
    if _NAME_START.match(body) or body.startswith("<!--"):
        return _parse_call(body, thinking)
    return _classify_prose(body, thinking, known_tools)


def _classify_prose(body: str, thinking: str | None, known_tools: Collection[str]) -> ParsedResponse:
    fenced = _FENCE.search(body)
    if fenced is not None and _tag_name_at_start(fenced.group(1)) in known_tools:
        return _error(
            "The tool call is wrapped in markdown code fences and surrounded by prose. Send only "
            "the bare XML call (optionally after a <thinking> block).",
            tool_name=_tag_name_at_start(fenced.group(1)),
            thinking=thinking,
        )
    for match in re.finditer(r"<([A-Za-z_][\w]*)[\s>/]", body):
        if match.group(1) in known_tools:
            return _error(
                f"Text comes before the <{match.group(1)}> call. Put reasoning inside "
                "<thinking>...</thinking> first, then the tool call alone, with no other text.",
                tool_name=match.group(1),
                thinking=thinking,
            )
    if match_thinking := re.search(r"</?thinking>", body):
        return _error(
            "A <thinking> block must come first in the response, before anything else "
            f"(found {match_thinking.group(0)} later).",
            thinking=thinking,
        )
    return ParsedResponse(thinking=thinking, text=body)


def _diagnose(body: str, lxml_message: str) -> str:
    """Explain a well-formedness failure in words a model can act on."""
    amp = _BAD_AMP.search(body)
    if amp is not None:
        line, col = _line_col(body, amp.start())
        return (
            f"An unescaped '&' at line {line}, column {col}. Inside values write &amp; for &, "
            "&lt; for < and &gt; for >."
        )
    lt = _BAD_LT.search(body)
    if lt is not None:
        line, col = _line_col(body, lt.start())
        return (
            f"An unescaped '<' at line {line}, column {col} does not start a tag. Inside values "
            "write &lt; for <, &gt; for > and &amp; for &."
        )
    cleaned = lxml_message.replace(_WRAPPER, "end of response")
    if "Premature end" in cleaned or "mismatch" in cleaned or "end of response" in cleaned:
        return (
            f"The XML is not well-formed: a tag is not closed ({cleaned}). Close every "
            "<tag> with its matching </tag>, and make one call per response."
        )
    if "depth" in cleaned.lower():
        return "The XML is nested far too deeply. A call is <tool><parameter>value</parameter></tool>."
    return (
        f"The XML is not well-formed ({cleaned}). Write <tool_name><param>value</param></tool_name>, "
        "closing every tag and escaping & and < inside values."
    )


def _node(element: etree._Element, depth: int) -> ParamNode:
    if depth > MAX_CALL_DEPTH:
        raise ParseError(
            f"The call is nested more than {MAX_CALL_DEPTH} levels deep. A call is "
            "<tool><parameter>value</parameter></tool>; lists add one level."
        )
    children = tuple(_node(child, depth + 1) for child in element)
    return ParamNode(
        tag=str(element.tag),
        text=element.text or "",
        attrs={str(k): str(v) for k, v in element.attrib.items()},
        children=children,
    )


def _parse_call(body: str, thinking: str | None) -> ParsedResponse:
    tool_name = _tag_name_at_start(body)
    if "<![CDATA[" in body:
        return _error(
            "CDATA sections are not accepted. Put the value directly between the tags and escape "
            "& as &amp;, < as &lt; and > as &gt;.",
            tool_name=tool_name,
            thinking=thinking,
        )
    if "<!DOCTYPE" in body or "<!ENTITY" in body:
        return _error(
            "DOCTYPE and ENTITY declarations are not accepted and entities are never expanded. "
            "Write the values out in full.",
            tool_name=tool_name,
            thinking=thinking,
        )
    control = _CONTROL.search(body)
    if control is not None:
        line, col = _line_col(body, control.start())
        return _error(
            f"The call contains a control character (U+{ord(control.group()):04X}) at line {line}, "
            f"column {col}. Remove it; binary content goes in base64 parameters.",
            tool_name=tool_name,
            thinking=thinking,
        )
    try:
        root = etree.fromstring(f"<{_WRAPPER}>{body}</{_WRAPPER}>", _PARSER)
    except etree.XMLSyntaxError as exc:
        return _error(_diagnose(body, str(exc.msg or exc)), tool_name=tool_name, thinking=thinking)
    except (ValueError, RecursionError) as exc:
        return _error(f"The XML could not be read ({exc}).", tool_name=tool_name, thinking=thinking)
    elements = [child for child in root if isinstance(child.tag, str)]
    if not elements:
        return _error(
            "No tool call found. Reply with one tool call such as <tool_name><param>value</param>"
            "</tool_name>, or with plain text.",
            thinking=thinking,
        )
    first = elements[0]
    if first.tag == "thinking":
        return _error(
            "The <thinking> block must be the very first thing in the response.",
            thinking=thinking,
        )
    if len(elements) > 1:
        names = [str(e.tag) for e in elements]
        return _error(
            f"The response holds {len(elements)} tool calls ({', '.join(names[:5])}). Make exactly "
            "one call per response and wait for its result before the next.",
            tool_name=str(first.tag),
            code=ErrorCode.MULTIPLE_TOOL_CALLS,
            thinking=thinking,
            calls=names[:20],
        )
    if (first.tail or "").strip():
        return _error(
            f"Text follows the </{first.tag}> closing tag. Send the tool call alone; reasoning goes "
            "in a <thinking> block before it.",
            tool_name=str(first.tag),
            thinking=thinking,
        )
    try:
        params = tuple(_node(child, 2) for child in first)
    except ParseError as exc:
        return ParsedResponse(thinking=thinking, error=exc, tool_name=str(first.tag))
    call = ToolCall(
        name=str(first.tag),
        params=params,
        attrs={str(k): str(v) for k, v in first.attrib.items()},
        stray_text=(first.text or "").strip() + "".join((c.tail or "").strip() for c in first),
    )
    return ParsedResponse(thinking=thinking, call=call, tool_name=call.name)
