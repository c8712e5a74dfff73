"""Read raw "<", ">" and "&" inside free-text parameter values as the characters meant.

Models write an analyst's note as ``RSI < 30 & rising`` inside ``<content>``, not as
``RSI &lt; 30 &amp; rising``: strict XML refuses it, and the model loses a step learning to escape.
Which parameters hold free text is data on the ``ParamSpec`` (``free_text=True``: memory and journal
content, notes, messages, questions, reasons), passed to the parser as a ``FreeText``; nothing here
knows a tool.

The rule (also stated in the parser's docstring). A free-text value starts right after its
parameter's opening tag ``<p>`` and ends at the first '<' that can start markup: '<' followed by
an ASCII letter, '_', ':', a non-ASCII character, '/', '!' or '?'. Inside the value:

- an '&' that does not start ``&amp; &lt; &gt; &quot; &apos; &#n; &#xh;`` is the character '&';
- a '<' followed by anything else (a space, a digit, '=', '<', '-', the end) is the character '<';
- CDATA sections and comments are passed over whole (they are XML's own ways to carry text);
- ``]]>``, the one text XML refuses, is refused by name (write ``]]&gt;``).

The markup that ends the value must be the value's own closing tag ``</p>``. Anything else there
(``<create_order>``, ``<b>``, ``<btc``) is ambiguous, since it reads as a tag nested in the value,
and is refused with a message naming the parameter, the place and the two fixes (``&lt;`` or a
CDATA section). So a value can never open a second call, and a value holding its own closing tag
(``... write </content> ...``) ends there and leaves text after it that the XML reader refuses:
never a silently shortened value.

Only characters that make the XML ill-formed are touched, so a response that was already
well-formed is read exactly as before, and the repair never adds or removes an element.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType

from app.domain.errors import ParseError

# a '<' that can start markup (a tag, a closing tag, a comment, CDATA, a declaration, a PI)
MARKUP = re.compile(r"<(?:[A-Za-z_:/!?]|[^\x00-\x7f])")
_REFERENCE = r"(?:amp|lt|gt|quot|apos|#[0-9]{1,7}|#x[0-9A-Fa-f]{1,6});"
_BAD_AMP = re.compile(rf"&(?!{_REFERENCE})")
_NUMERIC_REF = re.compile(r"&#([0-9]{1,7}|x[0-9A-Fa-f]{1,6});")
_ANY_OPENING = r"[A-Za-z_][\w.\-]*"
_BARE_LT = re.compile(r"<(?![A-Za-z_:/!?]|[^\x00-\x7f])")
_TAG_SNIPPET = re.compile(r"<!?/?[^\s<>/!]*(?:/?>)?")
_MAX_NUMERIC_REFS = 1_000
_MAX_VALUES = 5_000  # past the call's element limit the call is refused anyway; stop repairing


@dataclass(frozen=True, slots=True)
class FreeText:
    """Which parameters of which tool may hold raw '<', '>' and '&' (see the module docstring).

    Attributes:
        by_tool: tool name -> its free-text parameter names (from the ToolSpecs).
        everywhere: every parameter of every tool. Only for readers that show a call the executor
            already judged (the chat, Telegram): they must read what the executor read, without
            the specs at hand. Such readers never refuse a nested tag (lists have them).
    """

    by_tool: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    everywhere: bool = False

    def of(self, tool: str) -> Collection[str] | None:
        """The free-text parameter names of ``tool``; ``None`` means every parameter."""
        if self.everywhere:
            return None
        return self.by_tool.get(tool, frozenset())


STRICT = FreeText()
DISPLAY = FreeText(everywhere=True)


@dataclass(frozen=True, slots=True)
class Repaired:
    """The call with its free-text values escaped, and which parameters needed it."""

    text: str
    escaped: tuple[str, ...] = ()  # "'&' in <content>", in order of first appearance


def _decode_references(text: str) -> str:
    """``text`` with its valid references decoded, by plain replacements (fast on megabytes).

    ``&amp;`` goes last, so the '&' it yields never starts another reference; the four other
    named ones yield no '&'. A reference to a character XML cannot carry (``&#0;``) is decoded
    too, and the XML reader refuses that character as it refuses the reference itself.
    """
    for name, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'")):
        if name in text:
            text = text.replace(name, char)
    if "&#" in text:
        text = _NUMERIC_REF.sub(_numeric, text)
    return text.replace("&amp;", "&") if "&amp;" in text else text


def _numeric(found: re.Match[str]) -> str:
    digits = found.group(1)
    code = int(digits[1:], 16) if digits[0] in "xX" else int(digits)
    return chr(code) if code <= 0x10FFFF else found.group(0)


def _escape(segment: str) -> tuple[str, list[str]]:
    """A stretch of value text that holds no markup, made well-formed; and what needed it.

    Its valid references are decoded and the text is written again as one CDATA section (what
    lxml reads fastest), by plain string operations. A stretch with more than
    ``_MAX_NUMERIC_REFS`` numeric references is left as it is (decoding each costs a Python
    call; no note has that many), and so is ``]]>`` (``repair`` refuses it by name).
    """
    found = []
    if "&" in segment and _BAD_AMP.search(segment) is not None:
        found.append("'&'")
    if "<" in segment:
        found.append("'<'")
    if not found or "]]>" in segment or segment.count("&#") > _MAX_NUMERIC_REFS:
        return segment, []
    text = _decode_references(segment) if "&" in segment and ";" in segment else segment
    return f"<![CDATA[{text}]]>", found


def _where(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {col}"


def nested_tag_error(param: str, text: str, at: int) -> ParseError:
    found = _TAG_SNIPPET.match(text, at)
    snippet = found.group(0)[:60] if found is not None else text[at:at + 2]
    return ParseError(
        f"The value of <{param}> contains {snippet!r} at {_where(text, at)}, which XML reads as "
        f"a tag inside the value. In <{param}>, write that '<' as &lt; (a '<' before a space or "
        "a digit needs nothing), or wrap the whole value in <![CDATA[ ... ]]>.",
        details={"parameter": param, "found": snippet},
    )


@lru_cache(maxsize=256)
def _closing(param: str) -> re.Pattern[str]:
    return re.compile(rf"</{re.escape(param)}\s*>")


def closing_tag_error(call: str, params: Collection[str] | None) -> ParseError | None:
    """The refusal of a free-text value that holds its own closing tag, for a call the XML reader
    refused: ``<content>write </content> to end it</content>`` ends the value at the first
    ``</content>``, and the reader then trips over the second one."""
    for param in sorted(params or ()):
        closings = [m.start() for m in _closing(param).finditer(call)]
        openings = len(re.findall(rf"<{re.escape(param)}\s*>", call))
        if len(closings) > openings:
            at = closings[openings]
            return ParseError(
                f"The value of <{param}> seems to contain its own closing tag </{param}> (the one "
                f"at {_where(call, at)} has no opening tag). Write it inside the value as "
                f"&lt;/{param}&gt;, or wrap the whole value in <![CDATA[ ... ]]>.",
                details={"parameter": param},
            )
    return None


def repair(call: str, params: Collection[str] | None) -> Repaired:
    """Escape the unambiguous raw characters of the free-text values of ``call``.

    Args:
        call: the call's text, from its opening tag to its closing tag.
        params: the tool's free-text parameter names; ``None``: every element (display readers).

    Raises:
        ParseError: markup other than the value's closing tag inside a free-text value (only
            when ``params`` names the parameters; display readers leave that to the XML reader).

    Time is linear in ``call``: the text between markup is escaped by the regex engine, and
    Python looks only at the openings of free-text parameters and the markup inside them.
    """
    if params is not None and not params:
        return Repaired(call)
    if params is None and _BAD_AMP.search(call) is None and _BARE_LT.search(call) is None:
        return Repaired(call)  # a display reader, and nothing to repair: skip the walk
    names = _ANY_OPENING if params is None else "|".join(re.escape(p) for p in sorted(params))
    opening = re.compile(rf"<({names})\s*>")
    out: list[str] = []
    escaped: list[str] = []
    pos = 0
    values = 0
    while values < _MAX_VALUES:
        found = opening.search(call, pos)
        if found is None:
            break
        values += 1
        param = found.group(1)
        out.append(call[pos:found.end()])
        pos = found.end()
        while True:  # one value: text, CDATA and comments up to the markup that ends it
            markup = MARKUP.search(call, pos)
            end = markup.start() if markup is not None else len(call)
            if params is not None and "]]>" in call[pos:end]:
                raise ParseError(
                    f"The value of <{param}> contains ']]>' at "
                    f"{_where(call, call.index(']]>', pos))}, which XML does not allow in text. "
                    "Write it as ]]&gt;.",
                    details={"parameter": param, "found": "]]>"},
                )
            segment, found_here = _escape(call[pos:end])
            for what in found_here:
                note = f"{what} in <{param}>"
                if note not in escaped:
                    escaped.append(note)
            out.append(segment)
            pos = end
            if markup is None:
                break
            if call.startswith("<![CDATA[", end) or call.startswith("<!--", end):
                closer = "]]>" if call[end + 2] == "[" else "-->"
                stop = call.find(closer, end + 4)
                if stop < 0:
                    break  # unterminated: the XML reader names it
                out.append(call[end:stop + len(closer)])
                pos = stop + len(closer)
                continue
            if params is not None and not _closing(param).match(call, end):
                raise nested_tag_error(param, call, end)
            break
    out.append(call[pos:])
    return Repaired("".join(out), tuple(escaped))
