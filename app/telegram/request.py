"""Every HTTP request the bot makes, bounded by size and by time.

Why: python-telegram-bot reads each answer whole (httpx's ``response.content``) and its timeouts
bound each stage of a request (connecting, each read), not the answer: a Bot API server or proxy
(``telegram.api_base_url``) that trickles a byte every few seconds holds a request forever, and
one that sends an endless body is read into memory until that fails. ``BoundedRequest`` is the
library's own ``HTTPXRequest`` with two more bounds:

- size: an answer longer than ``max_answer_bytes`` (16 MiB by default) is not read further. A full
  batch of 100 updates (Telegram's most) of messages at Telegram's 4,096-character limit, each with
  the message it replies to, weighs a few MB at worst.
- time: an answer must be complete within the sum of its stages' timeouts (connect, write, pool,
  and the read timeout of the request, which for a long poll includes the poll's own wait).

Passing either closes the connection, logs a warning naming the bound and its value, and raises a
``TelegramError``: ``TimedOut`` for time (retried by the outbox and by polling, as any timeout),
``AnswerTooLarge`` for size (polling tries again after its growing pause; the outbox gives up on
that message). The URL, which holds the bot token, is never named: only the method.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from telegram.error import TelegramError, TimedOut
from telegram.request import HTTPXRequest, RequestData

logger = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RequestBounds:
    """The bounds of each request: python-telegram-bot's stage timeouts (its defaults) and the
    largest answer read."""

    max_answer_bytes: int = MAX_ANSWER_BYTES
    connect_timeout_s: float = 5.0
    write_timeout_s: float = 5.0
    pool_timeout_s: float = 1.0
    read_timeout_s: float = 5.0

    def total_s(self, read_timeout_s: float) -> float:
        """The longest a whole request may take, given its own read timeout."""
        return self.connect_timeout_s + self.write_timeout_s + self.pool_timeout_s + read_timeout_s


class AnswerTooLarge(TelegramError):  # noqa: N818 - python-telegram-bot's naming (TimedOut...)
    """An answer of the Bot API passed ``RequestBounds.max_answer_bytes``."""


class _AnswerPassed(Exception):  # noqa: N818 - a signal inside httpx's read, never shown as is
    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer passed {limit:,} bytes")
        self.limit = limit


class _LimitedStream(httpx.AsyncByteStream):
    """A response body that raises ``_AnswerPassed`` once more than ``limit`` bytes came."""

    def __init__(self, stream: httpx.AsyncByteStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._read += len(chunk)
            if self._read > self._limit:
                raise _AnswerPassed(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class BoundedRequest(HTTPXRequest):
    """``HTTPXRequest`` whose every answer is bounded (module docstring).

    Args:
        bounds: the stage timeouts and the largest answer.
        connection_pool_size: as python-telegram-bot's (1 for polling, 256 for the rest).
    """

    __slots__ = ("bounds",)

    def __init__(self, bounds: RequestBounds, *, connection_pool_size: int = 256) -> None:
        async def bound_body(response: httpx.Response) -> None:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > bounds.max_answer_bytes:
                raise _AnswerPassed(bounds.max_answer_bytes)
            assert isinstance(response.stream, httpx.AsyncByteStream)
            # how httpx itself wraps a body (BoundAsyncStream): counted as it is read
            response.stream = _LimitedStream(response.stream, bounds.max_answer_bytes)

        super().__init__(
            connection_pool_size=connection_pool_size,
            read_timeout=bounds.read_timeout_s, write_timeout=bounds.write_timeout_s,
            connect_timeout=bounds.connect_timeout_s, pool_timeout=bounds.pool_timeout_s,
            httpx_kwargs={"event_hooks": {"response": [bound_body]}},
        )
        self.bounds = bounds

    async def do_request(
        self, url: str, method: str, request_data: RequestData | None = None,
        read_timeout: Any = HTTPXRequest.DEFAULT_NONE,
        write_timeout: Any = HTTPXRequest.DEFAULT_NONE,
        connect_timeout: Any = HTTPXRequest.DEFAULT_NONE,
        pool_timeout: Any = HTTPXRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        """The library's request, bounded in time and in size (module docstring)."""
        read_s = read_timeout if isinstance(read_timeout, int | float) else self.read_timeout
        total_s = self.bounds.total_s(read_s or self.bounds.read_timeout_s)
        api_method = url.rsplit("/", 1)[-1]  # never the URL: it holds the token
        try:
            async with asyncio.timeout(total_s):
                return await super().do_request(
                    url, method, request_data, read_timeout=read_timeout,
                    write_timeout=write_timeout, connect_timeout=connect_timeout,
                    pool_timeout=pool_timeout)
        except TimeoutError:
            message = (f"Telegram's answer to {api_method} was not complete within {total_s:g} s "
                       "(the time limit of one request); the connection was closed")
            logger.warning("Telegram: %s", message)
            raise TimedOut(message) from None
        except _AnswerPassed as exc:
            message = (f"Telegram's answer to {api_method} passed {exc.limit:,} bytes (the "
                       "largest answer Kestrel reads); the connection was closed")
            logger.warning("Telegram: %s", message)
            raise AnswerTooLarge(message) from None
