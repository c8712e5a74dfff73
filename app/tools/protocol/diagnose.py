"""Explain why a response is not a usable call, in words a model can act on.

The parser decides *that* something is wrong; this module says *what* and *how to fix it*: where an
unescaped ``&`` or ``<`` sits, which tag is never closed, that the call looks cut off, that a known
tool was called JSON-style or buried in prose. Every scan here is linear in the response, so a
hostile 2 MB answer is diagnosed as quickly as a short one.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from lxml import etree

from app.tools.protocol.limits import too_deep

WRAPPER = "kestrel_response_root"
NAMESPACE_HINT = (
    "XML namespaces are not used: write the call as <tool_name> with plain child elements, without "
    "a 'prefix:' or an xmlns attribute."
)
ESCAPING = "Inside values write &amp; for &, &lt; for < and &gt; for >."

_BAD_AMP = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#[0-9]{1,7}|#x[0-9A-Fa-f]{1,6});)")
_BAD_LT = re.compile(r"<(?![A-Za-z_/!?])")
_TAG_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_QUOTED_NAME = re.compile(r'"(\w+)"')
_FUNCTION_CALL = re.compile(r"(\w{1,64})\s*\(")
_MISMATCH = re.compile(r"tag mismatch: (\S+) line (\d+) and ([^\s,]+)")
_LXML_WHERE = re.compile(r", line \d+, column \d+\s*$")
_LOOKAHEAD = 2_000  # how far past "<name" a self-closing "/>" is looked for
_JSON_NAMED = re.compile(r'\{\s*"(?:name|tool_name|function)"\s*:\s*"([\w.\-]{1,64})"')
_PYTHON_TAG = "<|python_tag|>"
_FUNCTION_TAG = re.compile(r"<function=([\w.\-]{1,64})>")
_SPACED_TAG = re.compile(r"<\s+([A-Za-z_][\w.\-]{0,63})\s*>")


def line_col(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {col}"


def bad_ampersand(body: str) -> int:
    """Index of the first ``&`` outside a comment or CDATA section that is not a predefined or
    numeric reference.

    lxml would reject it too, but reports undefined entities late when fed in chunks, and a
    response with a million of them costs it seconds of error collection; this scan is one pass.
    """
    pos = 0
    while True:
        match = _BAD_AMP.search(body, pos)
        if match is None:
            return -1
        at = match.start()
        section = _open_section(body, pos, at)
        if section is None:
            return at
        closed = body.find(section, at)
        if closed < 0:
            return -1  # an unclosed comment or CDATA section: lxml names that problem better
        pos = closed + len(section)


def _open_section(body: str, start: int, at: int) -> str | None:
    """The closer of the comment or CDATA section still open at ``at`` (opened after
    ``start``), or None."""
    comment = body.rfind("<!--", start, at)
    cdata = body.rfind("<![CDATA[", start, at)
    opener, closer = (comment, "-->") if comment > cdata else (cdata, "]]>")
    if opener < 0 or body.find(closer, opener + len(closer) + 1, at) >= 0:
        return None
    return closer


def ampersand_message(body: str, at: int) -> str:
    return (
        f"An unescaped '&' at {line_col(body, at)}. {ESCAPING} Named entities other than these "
        "are not defined."
    )


def cut_off(body: str) -> str:
    """The unfinished tag a truncated response ends in, or ''."""
    last_open = body.rfind("<")
    if last_open > body.rfind(">"):
        return body[last_open:last_open + 40]
    return ""


def _position(exc: etree.XMLSyntaxError) -> str:
    """Where lxml stopped, in the model's own text (the wrapper shifts line 1 by its tag)."""
    line, col = exc.position if exc.position else (1, 0)
    if line == 1:
        col = max(1, col - len(WRAPPER) - 2)
    return f"line {line}, column {col}"


def explain_syntax_error(body: str, exc: etree.XMLSyntaxError) -> str:
    """Turn lxml's first well-formedness error into an instruction."""
    lxml_message = _LXML_WHERE.sub("", str(exc.msg or exc))
    where = _position(exc)
    if "ntity" in lxml_message:  # EntityRef: no name / Entity 'x' not defined
        at = bad_ampersand(body)
        return ampersand_message(body, at) if at >= 0 else f"A bad '&' at {where}. {ESCAPING}"
    if "invalid element name" in lxml_message:
        lt = _BAD_LT.search(body)
        if lt is not None:
            where = line_col(body, lt.start())
        return f"An unescaped '<' at {where} does not start a tag. {ESCAPING}"
    if "Namespace prefix" in lxml_message:
        return f"{NAMESPACE_HINT} (at {where})"
    if "invalid char" in lxml_message.lower() or "invalid xmlchar" in lxml_message.lower():
        return (
            f"A character XML cannot carry at {where} (a control character or a reference to "
            "one). Remove it; binary content goes in base64 parameters."
        )
    if "depth" in lxml_message.lower():  # lxml's own limit (256 levels), far past the call's
        return too_deep().message
    mismatch = _MISMATCH.search(lxml_message)
    if mismatch is not None:
        opened, line, closed = mismatch.groups()
        return _explain_mismatch(opened, line, closed, where)
    unfinished = cut_off(body)
    if unfinished:
        return (
            f"The response ends inside an unfinished tag ({unfinished!r}); it looks cut off. "
            "Send the complete call with every tag closed."
        )
    cleaned = lxml_message.replace(WRAPPER, "end of response")
    return (
        f"The XML is not well-formed ({cleaned}; at {where}). Write "
        "<tool_name><param>value</param></tool_name>, closing every tag, with no attributes, and "
        "escaping & as &amp; and < as &lt; inside values."
    )


def _explain_mismatch(opened: str, line: str, closed: str, where: str) -> str:
    if closed == WRAPPER:
        return (
            f"The tag <{opened}> opened on line {line} is never closed. Add </{opened}>; every "
            "<tag> needs its matching </tag>."
        )
    if opened == WRAPPER:
        return (
            f"The closing tag </{closed}> at {where} has no matching opening tag. Remove it or "
            f"add <{closed}> before it."
        )
    return (
        f"The tag <{opened}> opened on line {line} is closed by </{closed}> at {where}. "
        f"Close it with </{opened}>; tags must match exactly and nest properly."
    )


def non_xml_call(body: str, known_tools: Collection[str]) -> str:
    """A known tool called JSON-style or function-style (a habit from other APIs), else ''.

    Besides JSON that opens the answer, a JSON object naming a known tool as its ``name`` (or
    ``tool_name``, ``function``) anywhere near the start: after a sentence, inside Hermes-style
    ``<tool_call>`` tags (Qwen) or a fence."""
    if body[:1] in ("{", "["):
        for name in _QUOTED_NAME.findall(body, 0, _LOOKAHEAD):
            if name in known_tools:
                return str(name)  # findall is typed Any; with one group, its items are that group
    for found in _JSON_NAMED.finditer(body, 0, _LOOKAHEAD):
        if found.group(1) in known_tools:
            return found.group(1)
    match = _FUNCTION_CALL.match(body)
    if match is not None and match.group(1) in known_tools:
        return match.group(1)
    return ""


def native_call(body: str, known_tools: Collection[str]) -> str:
    """A known tool called in a model's own tool syntax instead of the XML, else '': Llama 3.1's
    ``<|python_tag|>{"name": ...}`` and ``<function=name>{...}</function>``, or a tag written with
    spaces inside (``< get_order_book >``)."""
    if body.startswith(_PYTHON_TAG):
        return non_xml_call(body[len(_PYTHON_TAG):].lstrip(), known_tools)
    function = _FUNCTION_TAG.match(body)
    if function is not None and (function.group(1) in known_tools or not known_tools):
        return function.group(1)
    spaced = _SPACED_TAG.search(body, 0, _LOOKAHEAD)
    if spaced is not None and spaced.group(1) in known_tools:
        return spaced.group(1)
    return ""


def misplaced_call(body: str, known_tools: Collection[str]) -> str:
    """The known tool whose call (closed, or self-closing) sits inside prose, else ''.

    Merely mentioning ``<get_order_book>`` in an answer is not a call; an opening tag with its
    closing tag after it, or ``<get_order_book .../>``, is.
    """
    present: list[tuple[int, str]] = []
    for name in known_tools:
        if f"<{name}" not in body:  # a plain substring scan first: cheap for dozens of tools
            continue
        match = re.search(f"<{re.escape(name)}(?=[\\s>/])", body)
        if match is not None:
            present.append((match.start(), name))
    for start, name in sorted(present):
        if body.rfind(f"</{name}", start) > start:
            return name
        self_closing = re.compile(f"<{re.escape(name)}(?=[\\s/])[^<>]{{0,{_LOOKAHEAD}}}/>")
        if self_closing.search(body, start) is not None:
            return name
    return ""


def tag_name_at_start(text: str) -> str:
    match = _TAG_NAME.match(text, 1) if text.startswith("<") else None
    return match.group(0) if match else ""
