"""The bounds a model's response is held to, so reading any response costs time linear in its size.

The agent loop parses on the event loop: one answer that took seconds to read would freeze the
window. Every bound here refuses with a ``ParseError`` that names the limit and how to stay within
it, so a model that hits one can correct its next answer.

- ``MAX_RESPONSE_CHARS``: the whole answer; checked before anything else reads it.
- ``MAX_TAGS``: '<' characters in a call; above it, the answer is refused before lxml reads it.
- ``MAX_CALL_ELEMENTS``: elements inside the call, counted while its nodes are built.
- ``MAX_CALL_DEPTH``: call > parameter > item, and one level of slack. lxml itself stops at 256
  levels (its own guard against deep documents); that refusal is reported with this limit too.
- ``MAX_ATTRIBUTES``: attributes on one tag. A call needs at most one (``<setting name="...">``),
  and lxml reads attribute values in time quadratic in their number (60,000 of them took 10 s,
  a 2 MB answer over 3 minutes). Floods are found by one linear scan before lxml reads anything
  (even lxml's linear parse of 2 MB of attributes costs 35-160 ms), and the count of every
  element is checked again (``len``, linear) before its values are read.
- ``MAX_CALL_ATTRIBUTES``: attributes in the whole response, so many tags each within the limit
  cannot add up to a hundred thousand values either.
"""

from __future__ import annotations

import re

from app.domain.errors import ParseError

MAX_RESPONSE_CHARS = 2_000_000
MAX_CALL_DEPTH = 4
MAX_CALL_ELEMENTS = 5_000
MAX_TAGS = 20 * MAX_CALL_ELEMENTS
MAX_ATTRIBUTES = 32
MAX_CALL_ATTRIBUTES = 1_000

# An attribute as XML writes it (name, '=', a quoted value). The value excludes '<', as XML does,
# and each part stops at a character the next part needs, so a failed match gives back no more
# than it read: the scans stay linear in the response.
_ATTRIBUTE = r"""\s+[^\s=<>/"']+\s*=\s*(?:"[^"<]*"|'[^'<]*')"""
_ONE_ATTRIBUTE = re.compile(_ATTRIBUTE)
# A start tag with its first attributes, one more than a tag may have at most (so a flooded tag is
# never read to its end).
_TAG_WITH_ATTRIBUTES = re.compile(
    rf"<([A-Za-z_][\w.\-]*)((?:{_ATTRIBUTE}){{1,{MAX_ATTRIBUTES + 1}}})"
)

CALL_SHAPE = "A call is <tool><parameter>value</parameter></tool>; lists add one level."


def too_deep() -> ParseError:
    return ParseError(
        f"The call is nested more than {MAX_CALL_DEPTH} levels deep. {CALL_SHAPE}",
        details={"limit": MAX_CALL_DEPTH},
    )


def too_many_elements() -> ParseError:
    return ParseError(
        f"The call holds more than {MAX_CALL_ELEMENTS:,} elements. Make one call with fewer "
        "items; ask for less at a time.",
        details={"limit": MAX_CALL_ELEMENTS},
    )


def too_many_attributes(tag: str) -> ParseError:
    return ParseError(
        f"<{tag[:64]}> has more than {MAX_ATTRIBUTES} attributes. Write each value between tags, "
        "<parameter>value</parameter>; attributes are only for map entries such as "
        '<setting name="...">.',
        details={"tag": tag[:64], "limit": MAX_ATTRIBUTES},
    )


def too_many_call_attributes() -> ParseError:
    return ParseError(
        f"The response carries more than {MAX_CALL_ATTRIBUTES:,} attributes. Write values between "
        "tags; attributes are only for map entries such as <setting name=\"...\">.",
        details={"limit": MAX_CALL_ATTRIBUTES},
    )


def attribute_flood(body: str) -> ParseError | None:
    """The refusal of a tag with more than ``MAX_ATTRIBUTES`` attributes, or of more than
    ``MAX_CALL_ATTRIBUTES`` in all, found before lxml reads ``body``; else ``None``.

    The scan stops at the first tag over its limit or once the total is passed, so it reads at
    most a thousand tags in Python; the regular expression skips everything else.
    """
    if body.count("=") <= MAX_ATTRIBUTES:  # no tag can hold more, nor all of them together
        return None
    total = 0
    for found in _TAG_WITH_ATTRIBUTES.finditer(body):
        count = len(_ONE_ATTRIBUTE.findall(found.group(2)))
        if count > MAX_ATTRIBUTES:
            return too_many_attributes(found.group(1))
        total += count
        if total > MAX_CALL_ATTRIBUTES:
            return too_many_call_attributes()
    return None
