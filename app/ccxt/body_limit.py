"""A bound on the size of one answer from an exchange, which ccxt reads whole.

Why: ccxt's ``fetch`` reads every response body whole (``response.text()``) before it looks at it,
and its only bound is the request's timeout. A proxy or mirror in the exchange's settings that
answers with an endless or huge body would be read for as long as the timeout lasts, into memory,
as fast as the network carries it. The longest answers an exchange sends are its market and
currency lists (a few MB for Binance's exchangeInfo), so ``ExchangeSettings.max_response_mib``
(32 MiB by default) leaves them ample room.

How: every aiohttp session ccxt opens for the exchange (its own, and one per SOCKS proxy) makes
its responses of ``LimitedResponse``'s class, whose ``read`` takes the body in chunks and stops
as soon as it passes the limit (or at once, when its Content-Length says it would). The
connection is then closed, and ccxt's own ``BadResponse`` is raised, naming the bound and its
value; it passes through ccxt's ``fetch`` unchanged (it is no aiohttp error) and is retried and
reported like any unreadable answer. The time bound is ccxt's: ``timeout_s`` for the whole
request, its body included (``aiohttp.ClientTimeout(total=...)``).

aiohttp is imported when an exchange is built, not with this module (ccxt imports it then).
"""

from __future__ import annotations

import functools
from typing import Any

READ_CHUNK_BYTES = 65536


def install(exchange: Any, limit_bytes: int, bad_response: type[Exception]) -> None:
    """Bound every answer ``exchange`` reads to ``limit_bytes``; passing it raises
    ``bad_response`` (ccxt's ``BadResponse``).

    ccxt creates its session lazily, in ``open`` (called by every ``fetch``), and a SOCKS proxy's
    in ``get_socks_proxy_session``: both are wrapped, so no session escapes the bound.
    """
    # a class is hashable; mypy's Hashable check trips on the instance __hash__ of Exception
    response_class = _limited_response_class(
        limit_bytes, bad_response, str(exchange.id))  # type: ignore[arg-type]
    plain_open = exchange.open

    def open(*args: Any, **kwargs: Any) -> Any:  # noqa: A001 - ccxt's own name for it
        result = plain_open(*args, **kwargs)
        _bound(exchange.session, response_class)
        return result

    exchange.open = open
    plain_socks = getattr(exchange, "get_socks_proxy_session", None)
    if plain_socks is not None:

        def get_socks_proxy_session(*args: Any, **kwargs: Any) -> Any:
            session = plain_socks(*args, **kwargs)
            _bound(session, response_class)
            return session

        exchange.get_socks_proxy_session = get_socks_proxy_session


def _bound(session: Any, response_class: type) -> None:
    """Make ``session``'s responses of ``response_class`` (the class aiohttp builds each response
    from, its constructor's ``response_class``, which ccxt does not let us pass)."""
    if session is not None and session._response_class is not response_class:
        session._response_class = response_class


@functools.cache
def _limited_response_class(limit: int, bad_response: type[Exception], exchange_id: str) -> type:
    import aiohttp

    class LimitedResponse(aiohttp.ClientResponse):
        """A response whose body is read no further than ``limit`` bytes."""

        async def read(self) -> bytes:
            # aiohttp keeps a body read in ``_body``, which ``text()`` and ``json()`` decode
            if self._body is None:
                try:
                    self._body = await self._read_within_limit()
                except BaseException:
                    self.close()  # the rest is never read: the connection goes
                    raise
            return await super().read()

        async def _read_within_limit(self) -> bytes:
            declared = self.content_length
            if declared is not None and declared > limit:
                raise self._too_large()
            pieces: list[bytes] = []
            size = 0
            async for chunk in self.content.iter_chunked(READ_CHUNK_BYTES):
                size += len(chunk)
                if size > limit:
                    raise self._too_large()
                pieces.append(chunk)
            return b"".join(pieces)

        def _too_large(self) -> Exception:
            where = self.url.with_query(None)  # a signed request's query is no one's business
            return bad_response(
                f"{exchange_id} {self.method} {where} answered with more than {limit:,} bytes "
                f"(the limit of one answer: max_response_mib = {limit // (1024 * 1024)} in the "
                "exchange's settings); the connection was closed"
            )

    return LimitedResponse
