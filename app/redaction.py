"""Keep the secrets Kestrel holds out of every text it stores, prints, sends or shows.

Why one redactor for the whole process: a key reaches text by paths nobody plans for (a proxy
that echoes the Authorization header into its error, OpenAI's "Incorrect API key provided:
sk-ab12****wxyz", an exchange error quoting a signed URL), and from there a fault reason, a task
result, a report or a log line. So the redactor knows every secret the app has read or could read
(``SecretStore`` registers each value it returns and every ``KESTREL_*`` variable), and it is
applied where foreign text enters (provider and tool errors) and again at every sink: the logging
handlers, the stores that keep free text, report files and the CLI's stdout and stderr.

It recognises a secret whole, any piece of it of ``FRAGMENT`` characters or more (a prefix, a
suffix or the middle), and masked forms: a start of the key or its end around a run of ``*``,
``•``, ``…`` or ``...``, in any letter case: foreign code re-cases the text it quotes (the
Telegram library capitalises an API error, which lower-cases the rest, token included), and a
key lower-cased has lost little of its secrecy. Text without any secret in it is returned
unchanged, and a process that holds no secret pays one empty-tuple check per text.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

MARKER = "[redacted]"
MIN_SECRET = 6  # shorter values would match ordinary words
FRAGMENT = 8  # a piece of a secret this long or longer is a leak
_MIN_PREFIX = 3  # "sk-…": the start shown before a mask
_MIN_SUFFIX = 4  # "…wxyz": the end shown after a mask
_MASK = r"(?:\*{3,}|•{2,}|…+|\.{3,})"
_MASK_CHARS = ("***", "••", "…", "...")
# key-shaped strings nobody registered, replaced in logs and terminal output only (where no data
# is at stake): an OpenAI/Anthropic-style key, and long hex strings such as exchange secrets
_SK_SHAPED = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")
_HEX_SHAPED = re.compile(r"\b[A-Fa-f0-9]{40,}\b")
ENV_PREFIX = "KESTREL_"
# a key's first piece in lower-case letters and dashes is its vendor's prefix ("sk-proj-"), the
# same for everyone: saying it leaks nothing, and docs and help texts say it
_VENDOR_PREFIX = re.compile(r"[a-z_\-]+")


@dataclass(frozen=True, slots=True)
class _Secret:
    value: str  # lower-cased, like everything below: matched against lower-cased text
    grams: tuple[str, ...]  # every distinct FRAGMENT-long piece
    blocks: tuple[str, ...]  # cheap first test: any such piece contains one of these
    masked: re.Pattern[str]

    def spans(self, folded: str) -> Iterator[tuple[int, int]]:
        """Where the secret, a piece of it or a masked form of it stands in ``folded`` (the
        text lower-cased, each character in its place: see ``_fold``)."""
        value = self.value
        if any(block in folded for block in self.blocks):
            yield from _found(folded, value)
            for gram in self.grams:
                yield from _found(folded, gram)
        if any(mask in folded for mask in _MASK_CHARS) and (
            value[:_MIN_PREFIX] in folded or value[-_MIN_SUFFIX:] in folded
        ):
            for match in self.masked.finditer(folded):
                yield match.span()


def _secret(value: str) -> _Secret:
    # the vendor prefix is read before folding: "sk-proj-" is one, "SK-PROJ-" is not
    vendor_first = _VENDOR_PREFIX.fullmatch(value[:FRAGMENT]) is not None
    value = _fold(value)
    n = len(value)
    grams = tuple(dict.fromkeys(
        value[i:i + FRAGMENT] for i in range(n - FRAGMENT + 1) if i > 0 or not vendor_first
    ))
    # any piece of FRAGMENT (=2*4) characters holds one of the 4-character blocks at offsets
    # 0, 4, 8...; a masked form holds the key's first or last characters
    step = FRAGMENT // 2
    blocks = [value[i:i + step] for i in range(0, n - step + 1, step)]
    half = max(_MIN_PREFIX, n // 2)
    prefixes = "|".join(re.escape(value[:k]) for k in range(min(half, n - 1), _MIN_PREFIX - 1, -1))
    suffixes = "|".join(re.escape(value[-k:]) for k in range(min(half, n - 1), _MIN_SUFFIX - 1, -1))
    masked = re.compile(f"(?:{prefixes}){_MASK}(?:{suffixes})?|{_MASK}(?:{suffixes})")
    return _Secret(value, grams, tuple(dict.fromkeys(blocks)), masked)


def _fold(text: str) -> str:
    """``text`` lower-cased with every character kept in its place, so a span found in the
    result is the same span of ``text`` (a few characters lower-case to two, e.g. "İ"; those
    are left as they are)."""
    folded = text.lower()
    if len(folded) == len(text):
        return folded
    return "".join(c if len(low := c.lower()) != 1 else low for c in text)


class Redactor(logging.Filter):
    """Replaces every registered secret (whole, in pieces or masked) with ``[redacted]``.

    Also a ``logging.Filter``: on a handler it redacts the message, the arguments and the
    formatted traceback of every record before the handler writes it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._secrets: tuple[_Secret, ...] = ()
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return bool(self._secrets)

    def add_secret(self, value: str | None) -> None:
        """Remember a secret; values shorter than ``MIN_SECRET`` are too short to match safely."""
        if value is None:
            return
        value = value.strip()
        if len(value) < MIN_SECRET:
            return
        with self._lock:
            if any(s.value == _fold(value) for s in self._secrets):
                return
            # longer secrets first, so one containing another is replaced whole
            self._secrets = tuple(sorted((*self._secrets, _secret(value)),
                                         key=lambda s: -len(s.value)))

    def add_environment(self, environ: Mapping[str, str]) -> None:
        """Every ``KESTREL_<NAME>`` variable is a secret's fallback (see ``app.secrets``)."""
        for name, value in environ.items():
            if name.startswith(ENV_PREFIX):
                self.add_secret(value)

    def forget_all(self) -> None:
        """Tests only: start again with no secret."""
        with self._lock:
            self._secrets = ()

    def known(self) -> tuple[object, ...]:
        """Tests only: what is known now, for ``restore`` (the process-wide redactor would
        otherwise carry one test's typed keys into the next test's expectations)."""
        return self._secrets

    def restore(self, known: tuple[object, ...]) -> None:
        """Tests only: forget every secret learnt since ``known`` was taken."""
        with self._lock:
            self._secrets = known  # type: ignore[assignment]

    def redact(self, text: str, *, display: bool = False) -> str:
        """``text`` with every secret replaced by ``[redacted]``.

        Args:
            display: also replace key-shaped strings nobody registered ("sk-…", long hex): text
                for a log or a terminal, where a hash lost to the marker harms nothing. Stored
                data keeps them.
        """
        secrets = self._secrets
        if not text or not (secrets or display):
            return text
        spans: list[tuple[int, int]] = []
        if secrets:
            folded = _fold(text)
            for secret in secrets:
                spans.extend(secret.spans(folded))
        if spans:
            text = _replace(text, spans)
        if display:
            text = _HEX_SHAPED.sub(MARKER, _SK_SHAPED.sub(MARKER, text))
        return text

    def redact_data(self, value: Any) -> Any:
        """Strings inside dicts, lists and tuples redacted; anything else as it is."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.redact_data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.redact_data(v) for v in value)
        return value

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redact(record.getMessage(), display=True)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text, display=True)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info, display=True)
        return True


def _found(text: str, piece: str) -> Iterator[tuple[int, int]]:
    start = text.find(piece)
    while start >= 0:
        yield start, start + len(piece)
        start = text.find(piece, start + 1)


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    """Replace the union of the spans, each run of overlapping or touching spans by one marker."""
    spans.sort()
    pieces: list[str] = []
    kept = 0
    run_start, run_end = spans[0]
    for start, end in spans[1:]:
        if start <= run_end:
            run_end = max(run_end, end)
            continue
        pieces += [text[kept:run_start], MARKER]
        kept, (run_start, run_end) = run_end, (start, end)
    pieces += [text[kept:run_start], MARKER, text[run_end:]]
    return "".join(pieces)


REDACTOR = Redactor()


def redact(text: str) -> str:
    """``REDACTOR.redact``: what the stores call on free text before writing it."""
    return REDACTOR.redact(text)


class RedactingStream:
    """A text stream that redacts what is written to it (the CLI's stdout and stderr)."""

    def __init__(self, stream: TextIO, redactor: Redactor = REDACTOR) -> None:
        self.wrapped = stream
        self._redactor = redactor

    def write(self, text: str) -> int:
        self.wrapped.write(self._redactor.redact(text, display=True))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


@contextmanager
def redacted_output(redactor: Redactor = REDACTOR) -> Iterator[None]:
    """Redact everything printed to stdout and stderr (tracebacks too) while inside."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout, redactor)  # type: ignore[assignment]
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr, redactor)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
