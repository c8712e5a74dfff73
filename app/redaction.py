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

It also recognises the spellings foreign code turns a key into before quoting it (``encodings``):
base64 (an HTTP Basic credential, an SMTP login, a server that echoes what it decoded), in the
standard and the URL-safe alphabet, alone or inside a longer base64 text (a key standing at any of
the three byte offsets encodes to a different text; each is known, and only the characters that
encode bytes of the key alone, so what surrounds it does not matter, padded or not); hex;
reversed; URL-encoded. Each is a secret of its own, whole and in pieces, though not masked.
"""

from __future__ import annotations

import base64
import logging
import re
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import quote, quote_plus

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


SEED = FRAGMENT // 2  # a piece of FRAGMENT characters holds a run of SEED starting at a multiple
# of SEED in the text, wherever the piece starts: the text is looked up at those places only


@dataclass(frozen=True, slots=True)
class _Secret:
    value: str  # lower-cased, like everything below: matched against lower-cased text
    vendor_first: bool  # its first FRAGMENT characters are a vendor's prefix: alone, no leak
    masked: re.Pattern[str] | None  # None: an encoding of a secret, which nobody masks

    def masked_spans(self, folded: str) -> Iterator[tuple[int, int]]:
        """Where a masked form of the secret stands in ``folded``."""
        value = self.value
        if self.masked is not None and any(mask in folded for mask in _MASK_CHARS) and (
            value[:_MIN_PREFIX] in folded or value[-_MIN_SUFFIX:] in folded
        ):
            for match in self.masked.finditer(folded):
                yield match.span()


@dataclass(frozen=True, slots=True)
class _Known:
    """Every secret and encoding known, indexed for one pass over a text: each SEED-long run of
    each secret, with where it stands in it (``_pieces``)."""

    secrets: tuple[_Secret, ...] = ()
    seeds: Mapping[str, tuple[tuple[_Secret, int], ...]] = field(default_factory=dict)
    short: tuple[_Secret, ...] = ()  # shorter than FRAGMENT: only found whole
    masking: tuple[_Secret, ...] = ()  # the secrets themselves, whose masked forms are known

    @classmethod
    def of(cls, secrets: tuple[_Secret, ...]) -> _Known:
        seeds: dict[str, list[tuple[_Secret, int]]] = {}
        for secret in secrets:
            value = secret.value
            if len(value) >= FRAGMENT:
                for at in range(len(value) - SEED + 1):
                    seeds.setdefault(value[at:at + SEED], []).append((secret, at))
        return cls(secrets, {run: tuple(where) for run, where in seeds.items()},
                   tuple(s for s in secrets if len(s.value) < FRAGMENT),
                   tuple(s for s in secrets if s.masked is not None))

    def spans(self, folded: str) -> Iterator[tuple[int, int]]:
        """Where a secret, a piece of one or a masked form stands in ``folded`` (the text
        lower-cased, each character in its place: see ``_fold``)."""
        yield from _pieces(folded, self.seeds)
        for secret in self.short:
            yield from _found(folded, secret.value)
        if any(mask in folded for mask in _MASK_CHARS):
            for secret in self.masking:
                yield from secret.masked_spans(folded)


def _pieces(folded: str, seeds: Mapping[str, tuple[tuple[_Secret, int], ...]],
            ) -> Iterator[tuple[int, int]]:
    """Each run of the text at a multiple of SEED that some secret holds is grown both ways for
    as long as text and secret agree; FRAGMENT characters or more (or the whole secret) is a
    leak. One pass, however many secrets are known."""
    n = len(folded)
    for q in range(0, n - SEED + 1, SEED):
        where = seeds.get(folded[q:q + SEED])
        if where is None:
            continue
        for secret, at in where:
            value = secret.value
            start, first = q, at
            while start > 0 and first > 0 and folded[start - 1] == value[first - 1]:
                start -= 1
                first -= 1
            stop, last = q + SEED, at + SEED
            while stop < n and last < len(value) and folded[stop] == value[last]:
                stop += 1
                last += 1
            whole = first == 0 and last == len(value)
            vendor_only = secret.vendor_first and first == 0 and stop - start == FRAGMENT
            if whole or (stop - start >= FRAGMENT and not vendor_only):
                yield start, stop


def encodings(value: str) -> list[str]:
    """The spellings of a secret foreign code may quote instead of it (module docstring), each
    at least ``MIN_SECRET`` long and none the secret itself."""
    raw = value.encode("utf-8")
    standard = base64.b64encode(raw).decode("ascii")
    in_base64 = [standard, standard.rstrip("=")]
    for offset in range(3):
        # after `offset` bytes of something else, characters [first, last) encode the key alone
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        first = -(-offset * 8 // 6)
        last = (offset + len(raw)) * 8 // 6
        in_base64.append(encoded[first:last])
    url_safe = [form.translate(_URL_SAFE) for form in in_base64]
    forms = [*in_base64, *url_safe, value[::-1], raw.hex(), quote(value, safe=""),
             quote_plus(value, safe="")]
    folded = _fold(value)
    return [form for form in dict.fromkeys(forms)
            if len(form) >= MIN_SECRET and _fold(form) != folded]


_URL_SAFE = str.maketrans("+/", "-_")


def _secret(value: str, *, encoded: bool = False) -> _Secret:
    # the vendor prefix is read before folding: "sk-proj-" is one, "SK-PROJ-" is not
    vendor_first = not encoded and _VENDOR_PREFIX.fullmatch(value[:FRAGMENT]) is not None
    value = _fold(value)
    if encoded:
        return _Secret(value, vendor_first, None)
    # a masked form holds the key's first or last characters around the mask
    n = len(value)
    half = max(_MIN_PREFIX, n // 2)
    prefixes = "|".join(re.escape(value[:k]) for k in range(min(half, n - 1), _MIN_PREFIX - 1, -1))
    suffixes = "|".join(re.escape(value[-k:]) for k in range(min(half, n - 1), _MIN_SUFFIX - 1, -1))
    masked = re.compile(f"(?:{prefixes}){_MASK}(?:{suffixes})?|{_MASK}(?:{suffixes})")
    return _Secret(value, vendor_first, masked)


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
        self._known = _Known()
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return bool(self._known.secrets)

    def add_secret(self, value: str | None) -> None:
        """Remember a secret and its ``encodings``; values shorter than ``MIN_SECRET`` are too
        short to match safely."""
        if value is None:
            return
        value = value.strip()
        if len(value) < MIN_SECRET:
            return
        with self._lock:
            secrets = self._known.secrets
            if any(s.value == _fold(value) and s.masked is not None for s in secrets):
                return
            added = _secret(value)
            known = {s.value for s in secrets}
            kept = [s for s in secrets if s.value != added.value]  # was known as an encoding
            kept += [added, *(_secret(form, encoded=True) for form in encodings(value)
                              if _fold(form) not in known)]
            self._known = _Known.of(tuple(kept))

    def add_environment(self, environ: Mapping[str, str]) -> None:
        """Every ``KESTREL_<NAME>`` variable is a secret's fallback (see ``app.secrets``)."""
        for name, value in environ.items():
            if name.startswith(ENV_PREFIX):
                self.add_secret(value)

    def forget_all(self) -> None:
        """Tests only: start again with no secret."""
        with self._lock:
            self._known = _Known()

    def known(self) -> object:
        """Tests only: what is known now, for ``restore`` (the process-wide redactor would
        otherwise carry one test's typed keys into the next test's expectations)."""
        return self._known

    def restore(self, known: object) -> None:
        """Tests only: forget every secret learnt since ``known`` was taken."""
        assert isinstance(known, _Known)
        with self._lock:
            self._known = known

    def redact(self, text: str, *, display: bool = False) -> str:
        """``text`` with every secret replaced by ``[redacted]``.

        Args:
            display: also replace key-shaped strings nobody registered ("sk-…", long hex): text
                for a log or a terminal, where a hash lost to the marker harms nothing. Stored
                data keeps them.
        """
        known = self._known
        if not text or not (known.secrets or display):
            return text
        spans: list[tuple[int, int]] = []
        if known.secrets:
            spans.extend(known.spans(_fold(text)))
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
        sys.stdout = RedactingStream(sys.stdout, redactor)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr, redactor)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
