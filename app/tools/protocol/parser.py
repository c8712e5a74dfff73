"""Parse an LLM response into an optional thinking block plus one tool call, or a text answer.

LLM output is sloppy and sometimes hostile. Every way it can go wrong ends in a ``ParsedResponse``
carrying a ``ToolError`` whose message tells the model how to fix its call; nothing here raises or
hangs. The XML is read by lxml with entity resolution, DTD loading, network access and huge trees
all off, inside a wrapper element of our own: a DOCTYPE can therefore never take effect (it is not
allowed inside an element), so no entity is ever declared, let alone expanded. DTDs and entity
declarations are also refused by name first, so the model is told exactly what to change.

What real models write around a good call is accepted when it is unambiguous (issue 17), and each
repair is named in ``ParsedResponse.notes`` so the transcript records what was normalised:

- ``<think>...</think>`` (DeepSeek-R1, Qwen3 and other reasoning models) is read as
  ``<thinking>``, and so is reasoning that ends in a lone ``</think>`` (R1's chat template opens
  the block inside the prompt, so the answer carries only its end). Up to three leading blocks.
- A markdown code fence around the call (```xml ... ```), alone or inside prose, closed or not.
- Prose before and/or after exactly one call: kept as ``commentary`` (shown in the chat as the
  agent's words). It must be prose: markup in it (a tag, a thinking block) makes it not
  commentary and the strict diagnostics answer, and another call in it is MULTIPLE_TOOL_CALLS.
  The call is the first tool tag in the prose that is closed later (or self-closing); it runs
  from the last opening of that tool before its first closing tag to its last closing tag.
- CDATA sections inside values.
- Raw '<', '>' and '&' inside free-text parameters (``ParamSpec.free_text``: memory and journal
  content, notes, messages, questions, reasons), by this rule (``free_text.py``): a free-text
  value runs from its opening tag ``<p>`` to the first '<' that can start markup ('<' before an
  ASCII letter, '_', ':', a non-ASCII character, '/', '!' or '?'); inside it an '&' that starts
  no ``&amp; &lt; &gt; &quot; &apos; &#n; &#xh;`` is the character '&', any other '<' is the
  character '<'; CDATA and comments pass whole; ``]]>`` is refused by name. The markup ending
  the value must be its own ``</p>``: any other tag there (``<create_order>``, ``<b>``) is
  refused naming the parameter and the fix (&lt; or CDATA), and a value holding its own
  ``</p>`` ends there and the text left after it is refused. So a value never opens a second
  call and is never silently cut short. Outside free-text values nothing is repaired (a raw '&'
  in <quantity> is refused). ``>`` is legal XML text anyway.
- A self-closing tag for an empty optional parameter is plain XML; ``validate`` gives it the
  parameter's default.

Refused as before, with their exact codes: two calls (MULTIPLE_TOOL_CALLS), DOCTYPE and ENTITY
(PARSE_ERROR), a call only inside the thinking block (PARSE_ERROR), JSON or function-call syntax
(PARSE_ERROR); unknown tools and missing parameters are the executor's (UNKNOWN_TOOL,
MISSING_PARAMETER).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from itertools import islice

from lxml import etree

from app.domain.errors import ErrorCode, ParseError, ToolError
from app.tools.protocol.around import (
    FENCE_OPENER,
    THINKING_ANY,
    Refusal,
    call_end,
    call_in_prose,
    commentary,
    leading_thinking,
    unfence,
)
from app.tools.protocol.call import ToolCall, call_from_element, fast_call, read_xml
from app.tools.protocol.diagnose import (
    NAMESPACE_HINT,
    ampersand_message,
    bad_ampersand,
    explain_syntax_error,
    line_col,
    misplaced_call,
    native_call,
    non_xml_call,
    tag_name_at_start,
)
from app.tools.protocol.free_text import STRICT, FreeText, closing_tag_error, repair
from app.tools.protocol.limits import (
    MAX_CALL_ELEMENTS,
    MAX_RESPONSE_CHARS,
    MAX_TAGS,
    attribute_flood,
)

_NAME_START = re.compile(r"<[A-Za-z_]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_FENCE = re.compile(r"```[A-Za-z]*\s*(<[A-Za-z_][\s\S]*?)```")
_XML_DECL = re.compile(r"^<\?xml[^>]*\?>\s*")
_NATIVE_STARTS = ("<|", "<function=")  # Llama 3.1's own tool-call syntaxes
_NAMED_CALLS = 20  # calls named in a MULTIPLE_TOOL_CALLS refusal
_FENCES_TRIED = 20


# Slotted, not frozen, like the call types: see ``call.py``.
@dataclass(slots=True)
class ParsedResponse:
    """Exactly one of ``call``, ``text`` or ``error`` is set; ``thinking`` may accompany any.

    ``commentary`` is the prose a model wrote before or after its one call; ``notes`` name what
    was normalised to read the response ("code fence removed"), for the transcript.
    """

    thinking: str | None = None
    call: ToolCall | None = None
    text: str | None = None
    error: ToolError | None = None
    tool_name: str = ""
    commentary: str | None = None
    notes: tuple[str, ...] = ()

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


def _too_large(size: int) -> ParsedResponse:
    return _error(
        f"The response is {size:,} characters long; the limit is {MAX_RESPONSE_CHARS:,}. Send one "
        "short tool call; write large content to memory in several appends.",
        size=size,
        limit=MAX_RESPONSE_CHARS,
    )


def _decode(raw: str | bytes) -> str | ParsedResponse:
    if isinstance(raw, bytes):
        if len(raw) > MAX_RESPONSE_CHARS * 4:
            return _too_large(len(raw))
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _error(
                f"The response is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
                f"{exc.start}). Send plain UTF-8 text.",
                offset=exc.start,
            )
    if len(raw) > MAX_RESPONSE_CHARS:
        return _too_large(len(raw))
    if raw.isascii():  # cannot hold a lone surrogate
        return raw
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as exc:
        return _error(
            f"The response contains a character that is not valid UTF-8 (a lone surrogate at "
            f"position {exc.start}). Send plain UTF-8 text.",
            offset=exc.start,
        )
    return raw


def parse_response(
    raw: str | bytes, known_tools: Collection[str] = (), free_text: FreeText = STRICT
) -> ParsedResponse:
    """Split an LLM response into thinking plus one tool call, a text answer, or an error.

    Args:
        raw: the model's whole answer, as text or bytes.
        known_tools: tool names: a known tool's call inside prose is the call (with the prose as
            commentary). Without names (readers of stored answers), any closed tag is.
        free_text: which parameters may hold raw '<', '>' and '&' (the module docstring's rule).
    """
    text = _decode(raw)
    if isinstance(text, ParsedResponse):
        return text
    notes: list[str] = []
    parsed = _parse(_declaration_off(text.lstrip("\ufeff").strip()), known_tools, free_text,
                    notes)
    if notes:
        parsed.notes = tuple(dict.fromkeys([*notes, *parsed.notes]))
    return parsed


def _declaration_off(body: str) -> str:
    return _XML_DECL.sub("", body, count=1) if body.startswith("<?") else body


def _parse(
    body: str, known_tools: Collection[str], free_text: FreeText, notes: list[str]
) -> ParsedResponse:
    body = unfence(body, notes)
    thinking, body, refused = leading_thinking(body, notes)
    if refused is not None:
        return _refuse(refused, None)
    body = unfence(_declaration_off(body), notes)
    if thinking is not None and known_tools and not _NAME_START.match(body):
        inside = call_in_prose(thinking, known_tools)
        if inside is not None and call_in_prose(body, known_tools) is None:
            return _error(
                f"The <{inside[1]}> call is inside the thinking block, where calls are not run. "
                "Close the thinking first, then write the call after </thinking>.",
                tool_name=inside[1],
                thinking=thinking,
            )
    if not body:
        if thinking is not None:
            return _error(
                "The response has a <thinking> block but no tool call or answer after it. Follow "
                "the thinking with exactly one tool call or a plain text answer.",
                thinking=thinking,
            )
        return _error("The response is empty. Reply with one tool call or a plain text answer.")
    if body.startswith("<!") and not body.startswith("<!--"):
        return _error(
            "DOCTYPE and ENTITY constructs are not accepted and entities are never expanded. "
            "Write the call as plain elements with the values written out and escaped "
            "(&amp; for &, &lt; for <).",
            thinking=thinking,
        )
    native = native_call(body, known_tools) if body.startswith(_NATIVE_STARTS) or (
        body[:1] == "<" and body[1:2].isspace()
    ) else ""
    if native:
        return _error(
            f"Tool calls are written in XML, not in another tool-call syntax: "
            f"<{native}><parameter>value</parameter></{native}>, one element per parameter, with "
            "no spaces inside the tags.",
            tool_name=native,
            thinking=thinking,
        )
    if _NAME_START.match(body) or body.startswith(("<!--", "</")):
        fast = fast_call(body)  # the usual answer: one plain call, nothing around it
        if fast is not None:
            return ParsedResponse(thinking, fast, None, None, fast.name)
        start, name = 0, tag_name_at_start(body)
    else:
        located = call_in_prose(body, known_tools)
        if located is None:
            return _classify_prose(body, thinking, known_tools)
        start, name = located
    end = call_end(body, start, name) if name else len(body)
    prose: str | None = None
    if body[:start].strip() or body[end:].strip():
        outcome = commentary(body[:start], body[end:], known_tools, name, notes)
        if isinstance(outcome, Refusal):
            return _refuse(outcome, thinking)
        if outcome is None:  # not plain prose: the strict reading explains what is wrong
            if start > 0:
                return _classify_prose(body, thinking, known_tools)
            return _parse_call(body, thinking, known_tools, free_text, notes)
        prose = outcome or None
        body = body[start:end]
    parsed = _parse_call(body, thinking, known_tools, free_text, notes)
    parsed.commentary = prose
    return parsed


def _refuse(refusal: Refusal, thinking: str | None) -> ParsedResponse:
    return _error(refusal.message, refusal.tool_name, refusal.code, thinking, **refusal.details)


def _find_fence(body: str) -> re.Match[str] | None:
    """The first fenced block that starts with a tag, among the first few fences only."""
    pos = body.find("```")
    for _ in range(_FENCES_TRIED):
        if pos < 0:
            return None
        match = _FENCE.match(body, pos)
        if match is not None:
            return match
        pos = body.find("```", pos + 3)
    return None


def _classify_prose(
    body: str, thinking: str | None, known_tools: Collection[str]
) -> ParsedResponse:
    fenced = _find_fence(body)
    if fenced is not None and tag_name_at_start(fenced.group(1)) in known_tools:
        return _error(
            "The tool call is wrapped in markdown code fences and surrounded by prose that is "
            "not plain text. Send the call alone (optionally after a <thinking> block).",
            tool_name=tag_name_at_start(fenced.group(1)),
            thinking=thinking,
        )
    name = non_xml_call(_unfenced_text(body), known_tools)
    if name:
        return _error(
            f"Tool calls are written in XML, not as JSON or a function call: "
            f"<{name}><parameter>value</parameter></{name}>, one element per parameter.",
            tool_name=name,
            thinking=thinking,
        )
    name = misplaced_call(body, known_tools)
    if name:
        return _error(
            f"Text comes before the <{name}> call. Put reasoning inside "
            "<thinking>...</thinking> first, then the tool call alone, with no other text.",
            tool_name=name,
            thinking=thinking,
        )
    if stray := THINKING_ANY.search(body):
        return _error(
            "A <thinking> block must come first in the response, before anything else "
            f"(found {stray.group(0)} later).",
            thinking=thinking,
        )
    return ParsedResponse(thinking=thinking, text=body)


def _unfenced_text(body: str) -> str:
    """A JSON call as models fence it (```json {...} ```), without the fence."""
    opener = FENCE_OPENER.match(body) if body.startswith("```") else None
    return body[opener.end():].lstrip() if opener is not None else body


def _parse_call(
    body: str, thinking: str | None, known_tools: Collection[str], free_text: FreeText,
    notes: list[str],
) -> ParsedResponse:
    fast = fast_call(body)
    if fast is not None:
        return ParsedResponse(thinking, fast, None, None, fast.name)
    tool_name = tag_name_at_start(body)
    if "<!DOCTYPE" in body or "<!ENTITY" in body:
        return _error(
            "DOCTYPE and ENTITY declarations are not accepted and entities are never expanded. "
            "Write the values out in full.",
            tool_name=tool_name,
            thinking=thinking,
        )
    control = _CONTROL.search(body)
    if control is not None:
        return _error(
            f"The call contains a control character (U+{ord(control.group()):04X}) at "
            f"{line_col(body, control.start())}. Remove it; binary content goes in base64 "
            "parameters.",
            tool_name=tool_name,
            thinking=thinking,
        )
    if body.count("<") > MAX_TAGS:  # lxml would spend ~0.1 µs on each before we could refuse
        return _error(
            f"The response holds more than {MAX_CALL_ELEMENTS:,} elements. Make one call with "
            "fewer items; ask for less at a time.",
            tool_name=tool_name,
            thinking=thinking,
            limit=MAX_CALL_ELEMENTS,
        )
    flood = attribute_flood(body)
    if flood is not None:
        return _error(flood.message, tool_name=tool_name, thinking=thinking, **flood.details)
    free = free_text.of(tool_name)
    try:
        repaired = repair(body, free)
    except ParseError as exc:
        return ParsedResponse(thinking=thinking, error=exc, tool_name=tool_name)
    if "<![CDATA[" in body:
        notes.append("CDATA read as text")
    notes.extend(f"raw {what} read as text" for what in repaired.escaped)
    body = repaired.text
    amp = bad_ampersand(body)
    try:
        if amp >= 0:
            return _text_after_call(body, tool_name, known_tools, thinking) or _error(
                ampersand_message(body, amp), tool_name=tool_name, thinking=thinking
            )
        root = read_xml(body)
    except etree.XMLSyntaxError as exc:
        after = _text_after_call(body, tool_name, known_tools, thinking)
        if after is not None:
            return after
        own_closing = closing_tag_error(body, free) if free is not None else None
        if own_closing is not None:
            return ParsedResponse(thinking=thinking, error=own_closing, tool_name=tool_name)
        return _error(explain_syntax_error(body, exc), tool_name=tool_name, thinking=thinking)
    except (ValueError, RecursionError) as exc:
        return _error(f"The XML could not be read ({exc}).", tool_name=tool_name, thinking=thinking)
    return _single_call(root, thinking, known_tools)


def _text_after_call(body: str, tool_name: str, known_tools: Collection[str],
                     thinking: str | None) -> ParsedResponse | None:
    """A well-formed call followed by text that broke the parse: name the real problem."""
    end = body.find(f"</{tool_name}>") if tool_name else -1
    if end < 0:
        return None
    end += len(tool_name) + 3
    rest = body[end:].strip()
    if not rest or bad_ampersand(body[:end]) >= 0:
        return None
    try:
        read_xml(body[:end])
    except (etree.XMLSyntaxError, ValueError):
        return None
    second = tag_name_at_start(rest)
    if second and (second in known_tools or not known_tools):
        return _error(
            f"The response holds more than one tool call (<{tool_name}> then <{second}>). Make "
            "exactly one call per response and wait for its result before the next.",
            tool_name=tool_name,
            code=ErrorCode.MULTIPLE_TOOL_CALLS,
            thinking=thinking,
            calls=[tool_name, second],
        )
    return _error(
        f"Text follows the </{tool_name}> closing tag. Send the tool call alone; reasoning goes "
        "in a <thinking> block before it.",
        tool_name=tool_name,
        thinking=thinking,
    )


def _single_call(
    root: etree._Element, thinking: str | None, known_tools: Collection[str] = ()
) -> ParsedResponse:
    # the parser drops comments and processing instructions, so every child is an element;
    # only the first few are looked at (fifty thousand calls cost no more than two)
    count = len(root)
    elements = [child for child in islice(root, _NAMED_CALLS) if isinstance(child.tag, str)]
    if not elements:
        return _error(
            "No tool call found. Reply with one tool call such as <tool_name><param>value</param>"
            "</tool_name>, or with plain text.",
            thinking=thinking,
        )
    first = elements[0]
    name = str(first.tag)
    names = [str(e.tag) for e in elements]
    if "thinking" in names or "think" in names:
        return _error(
            "The <thinking> block must be the very first thing in the response, before the call.",
            tool_name="" if name == "thinking" else name,
            thinking=thinking,
        )
    if count > 1:
        return _error(
            f"The response holds {count} tool calls ({', '.join(names[:5])}). Make exactly "
            "one call per response and wait for its result before the next.",
            tool_name=name,
            code=ErrorCode.MULTIPLE_TOOL_CALLS,
            thinking=thinking,
            calls=names[:20],
        )
    if (root.text or "").strip():
        return _error(
            f"Text comes before the <{name}> call. Put reasoning inside "
            "<thinking>...</thinking> first, then the tool call alone, with no other text.",
            tool_name=name,
            thinking=thinking,
        )
    if (first.tail or "").strip():
        return _error(
            f"Text follows the </{name}> closing tag. Send the tool call alone; reasoning goes in "
            "a <thinking> block before it.",
            tool_name=name,
            thinking=thinking,
        )
    if name.startswith("{"):
        return _error(NAMESPACE_HINT, thinking=thinking)
    if known_tools and name not in known_tools and len(first) == 0:
        wrapped = non_xml_call((first.text or "").strip(), known_tools)
        if wrapped:  # <tool_call>{"name": ..., "arguments": ...}</tool_call>, Hermes style
            return _error(
                f"Tool calls are written in XML, not as JSON inside <{name}>: "
                f"<{wrapped}><parameter>value</parameter></{wrapped}>, one element per parameter.",
                tool_name=wrapped,
                thinking=thinking,
            )
    if name == "tool_result":
        return _error(
            "<tool_result> is what the system sends back after a call; never write one yourself. "
            "Reply with one tool call from Available Tools, or with a plain text answer.",
            tool_name=name,
            code=ErrorCode.UNKNOWN_TOOL,
            thinking=thinking,
        )
    try:
        call = call_from_element(first, name)
    except ParseError as exc:
        return ParsedResponse(thinking=thinking, error=exc, tool_name=name)
    return ParsedResponse(thinking=thinking, call=call, tool_name=name)
