"""Block YAML for plain data, written character for character as libyaml's emitter writes it.

The agents' memory documents are dumped every bar of a backtest (two a bar for an analyst), and
building PyYAML's node tree, resolving every scalar twice in Python and handing the tree to the
C emitter cost far more than writing the few dozen lines here. ``block_yaml`` covers what those
documents hold: mappings with string keys, sequences, and strings, ints, bools and None whose
text needs no escapes (no line breaks, no control characters). For anything else it answers
None, and the caller dumps through PyYAML as before; it never guesses.

The style of each string (plain or single-quoted) and where a long one is folded follow
libyaml's ``yaml_emitter_analyze_scalar``, ``select_scalar_style`` and its plain and
single-quoted writers; the tests compare the two on the agents' documents and on random ones
built from every character that changes a decision.
"""

from __future__ import annotations

import re
from typing import Any

from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

# characters libyaml writes as they are in a plain or single-quoted scalar (printable, not a
# line break, not a BOM, inside the Basic Multilingual Plane); anything else is escaped
_WRITTEN_AS_IS = re.compile(
    "[\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd]*"
)
# what keeps a string from being written plain in block context: an indicator first, a
# document marker, a space at either end, ": " or " #" inside, a colon last
_NOT_PLAIN = re.compile(
    r"[#,\[\]{}&*!|>'\"%@`]|[?:\-](?: |$)|---|\.\.\.| |.* $|.*?(?:: |:$| #)", re.DOTALL
)
_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = Resolver()
_RESOLVED_FIRST = frozenset(key for key in Resolver.yaml_implicit_resolvers if key)
_LONGEST_SIMPLE_KEY = 128  # libyaml writes a longer key as a complex one ("? key")
_DEFAULT_WIDTH = 80


class _Unsure(Exception):
    """Something libyaml would write in a way this module does not."""


def block_yaml(data: Any, width: int | None = None) -> str | None:  # noqa: ANN401 - plain data
    """``data`` as PyYAML's safe dumper writes it in block style with unicode allowed, key order
    kept and lines folded past ``width`` (80 when None); None when it holds anything this
    module does not write exactly as libyaml does."""
    if width is not None and width < 0:
        return None
    writer = _Writer(_DEFAULT_WIDTH if width is None or width <= 4 else width)
    try:
        if type(data) is dict and data:
            writer.mapping(data, 0, first_inline=False)
        elif type(data) is list and data:
            writer.sequence(data, 0, first_inline=False)
        else:
            return None
    except _Unsure:
        return None
    writer.out.append("\n")
    return "".join(writer.out)


class _Writer:
    """The lines of one document, as pieces of text."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.out: list[str] = []
        self._containers: set[int] = set()  # PyYAML writes one met twice as an anchor and alias

    def mapping(self, data: dict[Any, Any], indent: int, *, first_inline: bool) -> None:
        """A block mapping with its keys at column ``indent``; the first key continues the
        current line (a sequence's "- ") when ``first_inline``."""
        self._enter(data)
        out = self.out
        pad = " " * indent
        for n, (key, value) in enumerate(data.items()):
            if type(key) is not str:
                raise _Unsure
            shown = _key(key)
            if n or not first_inline:
                out.append("\n" + pad if out else pad)
            out.append(shown)
            out.append(":")
            self.value(value, indent, indent + len(shown) + 1, in_mapping=True)

    def sequence(self, data: list[Any], indent: int, *, first_inline: bool) -> None:
        """A block sequence with its dashes at column ``indent``."""
        self._enter(data)
        out = self.out
        pad = " " * indent
        for n, item in enumerate(data):
            if n or not first_inline:
                out.append("\n" + pad if out else pad)
            out.append("-")
            self.value(item, indent, indent + 1, in_mapping=False)

    def value(self, value: Any, indent: int, column: int, *, in_mapping: bool) -> None:  # noqa: ANN401
        """A mapping's value or a sequence's item, after its ":" or "-" ends at ``column``."""
        kind = type(value)
        if kind is str:
            self.out.append(" ")
            _string(self.out, value, indent + 2, column + 1, self.width)
        elif kind is dict or kind is list:
            if not value:
                self._enter(value)
                self.out.append(" {}" if kind is dict else " []")
            elif kind is dict:
                if in_mapping:
                    self.mapping(value, indent + 2, first_inline=False)
                else:
                    self.out.append(" ")
                    self.mapping(value, indent + 2, first_inline=True)
            elif in_mapping:  # a sequence in a mapping is written at its key's column
                self.sequence(value, indent, first_inline=False)
            else:
                self.out.append(" ")
                self.sequence(value, indent + 2, first_inline=True)
        elif kind is bool:
            self.out.append(" true" if value else " false")
        elif kind is int:
            self.out.append(f" {value}")
        elif value is None:
            self.out.append(" null")
        else:
            raise _Unsure

    def _enter(self, container: dict[Any, Any] | list[Any]) -> None:
        if id(container) in self._containers:
            raise _Unsure
        self._containers.add(id(container))


def _key(key: str) -> str:
    """A mapping key as written: plain when it can be, else single-quoted; never folded. The
    agents' documents repeat their keys from one dump to the next, so the answers are kept."""
    shown = _keys.get(key)
    if shown is None:
        shown = _keys[key] = _key_shown(key)
        if len(_keys) > _KEPT_KEYS:
            _keys.clear()
    return shown


_KEPT_KEYS = 4096
_keys: dict[str, str] = {}


def _key_shown(key: str) -> str:
    if len(key.encode("utf-8")) > _LONGEST_SIMPLE_KEY or not _WRITTEN_AS_IS.fullmatch(key):
        raise _Unsure
    if key and _plain(key):
        return key
    return "'" + key.replace("'", "''") + "'"


def _plain(text: str) -> bool:
    """Whether libyaml writes ``text`` (non-empty, written as is) plain in block context: no
    indicator keeps it from being so, and read back plain it is still a string."""
    if _NOT_PLAIN.match(text):
        return False
    if text[0] not in _RESOLVED_FIRST:
        return True
    return _RESOLVER.resolve(ScalarNode, text, (True, False)) == _STR_TAG


def _string(out: list[str], text: str, indent: int, column: int, width: int) -> None:
    """A string value starting at ``column``, its folded lines indented to ``indent``. How a
    short one is written is kept: an agent's documents repeat most of their values (signals,
    symbols, dates) from one dump to the next."""
    shown = _short.get(text)
    if shown is not None and column + len(shown) <= width:
        out.append(shown)
        return
    if not _WRITTEN_AS_IS.fullmatch(text):
        raise _Unsure
    if text and _plain(text):
        quote, written = "", text
    else:
        quote, written = "'", text.replace("'", "''")
        column += 1
    if column + len(written) <= width or " " not in written:  # nothing to fold
        shown = quote + written + quote
        if len(shown) <= _SHORT:
            if len(_short) >= _KEPT_SHORT:
                _short.clear()
            _short[text] = shown
        out.append(shown)
        return
    if indent >= width:
        raise _Unsure
    out.append(quote)
    out.append(_folded(written, column, indent, width, quoted=bool(quote)))
    out.append(quote)


_SHORT = 40
_KEPT_SHORT = 4096
_short: dict[str, str] = {}


def _folded(text: str, column: int, indent: int, width: int, *, quoted: bool) -> str:
    """``text`` broken at the first space met past ``width`` on each line, as libyaml folds:
    only at a single space (none before or after it) and, in a quoted string, never at its
    first or last character. ``text`` has its quotes doubled already, so each character is
    one column; ``column`` is where its first one is written."""
    pieces: list[str] = []
    last = len(text) - 1
    start = 0
    while True:
        space = text.find(" ", start + max(width - column + 1, 0))
        while space >= 0 and (
            (quoted and (space == 0 or space == last))
            or text[space - 1] == " " or text[space + 1:space + 2] == " "
        ):
            space = text.find(" ", space + 1)
        if space < 0:
            break
        pieces.append(text[start:space])
        pieces.append("\n" + " " * indent)
        start = space + 1
        column = indent
    pieces.append(text[start:])
    return "".join(pieces)
