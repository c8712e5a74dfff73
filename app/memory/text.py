"""Text handling for recall: entry headers, chunking, CJK grams, safe FTS5 queries, type sniffing.

Recall indexes *chunks*, not files: a journal is split at its ``## <ISO time>`` entry headers so
every entry carries its own market time (and a backtest can hide entries written after its cursor);
other files are split into paragraphs. The index uses SQLite's trigram tokenizer, which finds any
substring of three or more characters (``BTC/USDT``, ``RSI<30``, ``缩量下跌``) but nothing shorter.
Chinese and Japanese words are mostly one or two characters, so each chunk also carries its
``grams``: its CJK unigrams and bigrams and its short words, each written as exactly one trigram
(``|x|`` for one character, ``xy|`` for two), so a short term is found by one trigram's presence;
the index keeps them apart from the text, without positions (``app.memory.index``). User queries
are never passed to FTS5 as syntax: every term becomes a double-quoted string, so no input can
raise an FTS5 syntax error.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath

from app import yamltext
from app.domain.clock import ms_to_iso

ENTRY_HEADER = re.compile(r"^## (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z)(?:\s.*)?$")
MAX_CHUNK_LINES = 40
MAX_CHUNK_CHARS = 2000
MAX_QUERY_TERMS = 24
SNIPPET_CHARS = 480

_CJK = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ffff"
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(f"[^\\W_{_CJK}]+")
_SEGMENT = re.compile(f"([{_CJK}]+)|([^{_CJK}]+)")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ufffe\uffff\ud800-\udfff]")
_EDGE_PUNCT = "\"'`,;!?()[]{}<>.:，。！？；：、（）【】「」《》"
_STOPWORDS = frozenset(
    "a an and are as at be but by did do does for from had has have i if in is it its me my "
    "no not of on or our so that the their them then there these they this to was we were "
    "what when where which who why will with you your".split()
)


def entry_header(ms: int) -> str:
    """The header line that starts a timestamped entry, with milliseconds only when non-zero."""
    iso = ms_to_iso(ms)
    if ms % 1000:
        iso = f"{iso[:-1]}.{ms % 1000:03d}Z"
    return f"## {iso}"


def header_ms(line: str) -> int | None:
    """The market time of an entry header line, or ``None`` if the line is not one."""
    match = ENTRY_HEADER.match(line)
    if match is None:
        return None
    try:
        when = datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))
    except ValueError:
        return None
    return int(when.astimezone(UTC).timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One searchable piece of a file: its first line number (1-based), text and header time."""

    line: int
    text: str
    header_ms: int | None = None

    @property
    def digest(self) -> bytes:
        return hashlib.blake2b(self.text.encode("utf-8"), digest_size=12).digest()


def chunk_text(text: str, first_line: int = 1) -> list[Chunk]:
    """Split text into entries (at ``## <ISO time>`` headers) or, before any header, paragraphs."""
    chunks: list[Chunk] = []
    lines: list[str] = []
    start = first_line
    size = 0
    stamp: int | None = None
    in_entry = False

    def flush() -> None:
        nonlocal lines, size
        first = next((i for i, each in enumerate(lines) if each.strip()), None)
        if first is not None:
            chunks.append(Chunk(start + first, "\n".join(lines[first:]).rstrip(), stamp))
        lines, size = [], 0

    for number, line in enumerate(text.split("\n"), first_line):
        when = header_ms(line)
        if when is not None:
            flush()
            in_entry, stamp, start = True, when, number
        elif not in_entry and not line.strip():
            flush()
            continue
        elif len(lines) >= MAX_CHUNK_LINES or size + len(line) > MAX_CHUNK_CHARS:
            flush()
        if not lines:
            start = number
        lines.append(line)
        size += len(line) + 1
    flush()
    return chunks


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def gram(term: str) -> str:
    """A short term (one or two characters) as the one trigram that stands for it: ``|x|`` or
    ``xy|``. Nothing else makes these trigrams: in ``grams`` the tokens are apart by spaces and
    no term holds ``|``, so ``xy|`` ends only the token of ``xy``, and ``|x|`` is only ``x``'s."""
    return f"|{term}|" if len(term) == 1 else f"{term}|"


def grams(text: str) -> str:
    """The ``gram`` tokens of a chunk's CJK unigrams and bigrams and its one- or two-letter
    words, apart by spaces."""
    found: dict[str, None] = {}
    for run in _CJK_RUN.findall(text):
        for i, char in enumerate(run):
            found[gram(char)] = None
            if i + 1 < len(run):
                found[gram(run[i : i + 2])] = None
    for word in _WORD.findall(text):
        if len(word) <= 2:
            found[gram(word.lower())] = None
    return " ".join(found)


@dataclass(frozen=True, slots=True)
class Query:
    """A user query turned into safe FTS5 phrases, one per plain term it looks for: a term of
    three characters or more is looked up in the text (``body : "term"``), a shorter one among
    the grams (``"xy|"``, see ``gram``)."""

    phrases: tuple[str, ...]
    terms: tuple[str, ...]
    short: frozenset[str] = frozenset()  # terms looked up among the grams

    @property
    def body_expression(self) -> str:
        """The text's phrases joined by OR ('' when every term is short)."""
        return " OR ".join(p for t, p in zip(self.terms, self.phrases, strict=True)
                           if t not in self.short)

    @property
    def grams_expression(self) -> str:
        """The grams' phrases joined by OR ('' when no term is short)."""
        return " OR ".join(p for t, p in zip(self.terms, self.phrases, strict=True)
                           if t in self.short)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def build_query(text: str) -> Query | None:
    """Turn free text into an OR of quoted terms; ``None`` when nothing in it is searchable."""
    body: dict[str, None] = {}
    short: dict[str, None] = {}
    for token in _CONTROL.sub(" ", normalise(text)).split():
        for cjk, other in _SEGMENT.findall(token):
            if cjk:
                if len(cjk) <= 2:
                    short[cjk] = None
                else:
                    body[cjk.lower()] = None
                    for i in range(len(cjk) - 1):
                        short[cjk[i : i + 2]] = None
                continue
            word = other.strip(_EDGE_PUNCT).lower()
            if len(word) >= 3:
                body[word] = None
            elif word and _WORD.fullmatch(word):
                short[word] = None
    terms = list(body) + list(short)
    meaningful = [t for t in terms if t not in _STOPWORDS]
    if meaningful:
        terms = meaningful
    terms = terms[:MAX_QUERY_TERMS]
    if not terms:
        return None
    parts = [f"body : {_quote(t)}" if t in body else _quote(gram(t)) for t in terms]
    return Query(tuple(parts), tuple(terms), frozenset(t for t in terms if t not in body))


def locate(chunk_text_: str, terms: tuple[str, ...]) -> tuple[int, str]:
    """Return ``(line offset of the first matching line, snippet)`` for a found chunk."""
    lines = chunk_text_.split("\n")
    lowered = [normalise(line).lower() for line in lines]
    offset = next((i for i, line in enumerate(lowered) if any(t in line for t in terms)), 0)
    if len(chunk_text_) <= SNIPPET_CHARS:
        return offset, chunk_text_.strip()
    begin = max(0, offset - 1)
    picked: list[str] = []
    size = 0
    for line in lines[begin:]:
        if size + len(line) > SNIPPET_CHARS and picked:
            break
        picked.append(line[:SNIPPET_CHARS])
        size += len(line) + 1
    prefix = "… " if begin > 0 else ""
    suffix = " …" if begin + len(picked) < len(lines) else ""
    return offset, f"{prefix}{chr(10).join(picked).strip()}{suffix}"


_MARKDOWN = re.compile(r"^(#{1,6} |```|> |\* |\|.*\|$)|\*\*|\]\(", re.MULTILINE)
_EXTENSIONS = {
    ".yaml": "YAML",
    ".yml": "YAML",
    ".md": "MARKDOWN",
    ".markdown": "MARKDOWN",
    ".txt": "TEXT",
    ".log": "TEXT",
    ".text": "TEXT",
}


def sniff_type(path: str, data: bytes | None) -> str:
    """YAML, MARKDOWN, TEXT or UNKNOWN: from the extension, else from the content."""
    by_extension = _EXTENSIONS.get(PurePosixPath(path).suffix.lower())
    if by_extension is not None:
        return by_extension
    if not data or b"\0" in data[:8192]:
        return "UNKNOWN"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "UNKNOWN"
    if _MARKDOWN.search(text[:8192]):
        return "MARKDOWN"
    if len(text) <= 65536:
        try:
            loaded = yamltext.load(text)
        except yamltext.YAMLError:
            loaded = None
        if isinstance(loaded, dict | list):
            return "YAML"
    return "TEXT"
