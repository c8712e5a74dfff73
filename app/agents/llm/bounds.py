"""How much of one model answer Kestrel reads: its text, and the bytes on the wire.

Why: a server that ignores ``max_output_tokens`` (a local model looping without end, a proxy that
never closes its stream) would otherwise be read for as long as the answer's time limit allows.
Measured before these bounds (``tests/benchmarks/bench_answer_bounds.py``): one such stream was
read for the whole 120 s of an attempt, 100 million characters and 311 MB from the wire, and
again on each of three retries. Every answer now has three bounds, and passing any of them ends
the answer at once, closes its connection, and says which bound it was and its value:

- time: ``timeout_s`` for the whole answer (the adapters' ``asyncio.timeout``; the SDKs' own
  timeout only bounds each read, which a trickling stream never passes);
- text: ``ANSWER_CHARS_PER_TOKEN`` characters for each requested output token (at least
  ``MIN_ANSWER_CHARS``), counted as the pieces arrive (``AnswerText``);
- wire: ``RAW_BYTES_PER_TOKEN`` bytes for each requested output token (between
  ``MIN_RAW_BYTES`` and ``MAX_RAW_BYTES``), counted on the HTTP response body of every call, as
  it is read (``bounded_http_client``). This catches what the text bound cannot see: events that
  carry no text (keep-alive comments, pings, padding), and a body that is not streamed.

A model that passed a size bound ignored its token limit; asking it again would do the same, so
``AnswerTooLargeError`` is a ``PermanentLLMError`` and is not retried.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import httpx2

from app.agents.llm.port import PermanentLLMError

ANSWER_CHARS_PER_TOKEN = 100
"""Typical text is 3 to 5 characters a token; the longest tokens of common vocabularies (runs of
spaces, ``=`` or ``-``) are a few dozen. No answer that keeps to its token limit comes near 100
characters a token: 2,048 tokens allow 204,800 characters."""
MIN_ANSWER_CHARS = 4_096  # so a tiny token limit (the settings' "Reply with OK." test) has room

RAW_BYTES_PER_TOKEN = 8_192
"""Each token may arrive as its own event in an envelope of a few hundred bytes (ids, model,
index, usage; up to ~1 KB with padding), and a reasoning model streams its thinking too (DeepSeek's
reasoner thinks up to 32K tokens for an answer of 8K): 8 KiB a token covers both with room.
2,048 tokens allow 16 MiB. Nothing is kept of a streamed answer but its text, so this bound is
about time and bandwidth; a body that is not streamed is held whole, hence ``MAX_RAW_BYTES``."""
MIN_RAW_BYTES = 1024 * 1024
MAX_RAW_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AnswerBounds:
    """The size bounds of one answer, from the token limit it was asked with.

    Attributes:
        output_tokens: the request's ``max_output_tokens``.
        chars: the most characters of text the answer may hold.
        raw_bytes: the most bytes its HTTP response body may hold.
    """

    output_tokens: int
    chars: int
    raw_bytes: int

    @classmethod
    def for_tokens(cls, output_tokens: int) -> AnswerBounds:
        tokens = max(1, output_tokens)
        return cls(
            output_tokens=output_tokens,
            chars=max(MIN_ANSWER_CHARS, ANSWER_CHARS_PER_TOKEN * tokens),
            raw_bytes=min(MAX_RAW_BYTES, max(MIN_RAW_BYTES, RAW_BYTES_PER_TOKEN * tokens)),
        )

    def text_passed(self, provider: str, *, streamed: bool) -> AnswerTooLargeError:
        """The error of an answer whose text passed ``chars``."""
        ending = "the stream was closed" if streamed else "the answer was dropped"
        return AnswerTooLargeError(
            provider, f"the model's answer passed {self.chars:,} characters (the limit for "
            f"{self.output_tokens:,} output tokens); {ending}",
            limit=self.chars, unit="characters")

    def raw_passed(self, provider: str, where: str) -> AnswerTooLargeError:
        """The error of an answer whose HTTP body passed ``raw_bytes``."""
        return AnswerTooLargeError(
            provider, f"{where} sent more than {self.raw_bytes:,} bytes for one answer (the "
            f"limit for {self.output_tokens:,} output tokens); the connection was closed",
            limit=self.raw_bytes, unit="bytes")


class AnswerTooLargeError(PermanentLLMError):
    """An answer passed one of its size bounds; ``limit`` and ``unit`` say which."""

    def __init__(self, provider: str, message: str, *, limit: int, unit: str) -> None:
        super().__init__(provider, message)
        self.limit = limit
        self.unit = unit


class AnswerText:
    """The text of a streamed answer, gathered piece by piece within ``bounds.chars``."""

    def __init__(self, bounds: AnswerBounds, provider: str) -> None:
        self.bounds = bounds
        self.provider = provider
        self.pieces: list[str] = []
        self.size = 0

    def add(self, piece: str) -> None:
        """Keep ``piece``.

        Raises:
            AnswerTooLargeError: the text passed its bound (the piece is not kept).
        """
        self.size += len(piece)
        if self.size > self.bounds.chars:
            raise self.bounds.text_passed(self.provider, streamed=True)
        self.pieces.append(piece)

    def text(self) -> str:
        return "".join(self.pieces)


# -- the wire ----------------------------------------------------------------------------------


class RawLimitPassed(Exception):  # noqa: N818 - a signal inside httpx's read, never shown as is
    """Raised inside the HTTP client's read of a body that passed its limit; the adapter turns
    it into the answer's ``AnswerTooLargeError`` (the SDKs may wrap it as a connection error)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the response body passed {limit:,} bytes")
        self.limit = limit


_RAW_LIMIT: ContextVar[int] = ContextVar("kestrel_llm_raw_limit", default=MAX_RAW_BYTES)


@contextmanager
def raw_limit(limit: int) -> Iterator[None]:
    """Bound the bodies of the HTTP responses read in this context (the current task's calls)."""
    token = _RAW_LIMIT.set(limit)
    try:
        yield
    finally:
        _RAW_LIMIT.reset(token)


class _LimitedStream(httpx2.AsyncByteStream):
    """A response body that raises ``RawLimitPassed`` once more than ``limit`` bytes came."""

    def __init__(self, stream: httpx2.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._read += len(chunk)
            if self._read > self._limit:
                raise RawLimitPassed(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


async def _bound_body(response: httpx2.Response) -> None:
    """Response hook: refuse a declared length over the limit, count the rest as it is read.

    Replacing ``response.stream`` is how httpx itself wraps a body (``BoundAsyncStream``); the
    hook runs before anything reads it, for every response, whatever transport or proxy sent it.
    """
    limit = _RAW_LIMIT.get()
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RawLimitPassed(limit)
    assert isinstance(response.stream, httpx2.AsyncByteStream)
    response.stream = _LimitedStream(response.stream, limit)


def bounded_http_client(
    client_class: Callable[..., httpx2.AsyncClient], timeout_s: float
) -> httpx2.AsyncClient:
    """An SDK's own HTTP client (``DefaultAsyncHttpxClient``: its timeouts, pool and redirects)
    whose every response body is bounded by the limit of the answer being read."""
    return client_class(timeout=timeout_s, event_hooks={"response": [_bound_body]})


def raw_limit_passed(exc: BaseException) -> RawLimitPassed | None:
    """The ``RawLimitPassed`` that ``exc`` is or wraps (the SDKs raise their connection error
    ``from`` it when it ends a body they read whole), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, RawLimitPassed):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
