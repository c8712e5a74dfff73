"""Build a ccxt async exchange by id, with Kestrel's defaults under the person's settings.

ccxt is imported here, on first use, never at module import: importing it costs about a second
and the offline app must start without it. Defaults: ccxt's rate limiter always on (it spaces
requests by the exchange's own ``rateLimit``), the timeout from the settings, and spot markets
only (Kestrel's accounts are spot), through the ``options.fetchMarkets.types`` option that ccxt's
exchanges share. The person's ``ccxt_config`` is deep-merged over those.

ccxt hands back the raw text when a 2xx body says JSON but does not parse (a truncated reply),
and its parsers then turn that into empty or ``None``-filled results without raising. The
exchange built here refuses such a reply with ccxt's own ``BadResponse`` instead
(``_refuse_malformed_json``), so it is retried and reported like any unreadable answer.

No answer is read past ``max_response_mib`` of the exchange's settings (``body_limit.py``): a
longer one is cut off with ccxt's ``BadResponse``, naming the bound.

Every exchange built here passes its requests through its exchange's gate (``gate.py``): after a
418 ban or a 429 rate limit, nothing more is sent to that exchange, from any of Kestrel's exchange
objects, until the pause the exchange stated is over.

The exchange's aiohttp session is created lazily, on the event loop of its first request, and must
be closed on that loop: ``await exchange.close()`` (``CcxtMarketData.close`` does it).
"""

from __future__ import annotations

import copy
import decimal
import difflib
import importlib
from collections.abc import Mapping
from typing import Any

from app.ccxt import body_limit, gate
from app.config.exchanges import ExchangeSettings
from app.domain.errors import OperationalError

DEFAULT_OPTIONS: Mapping[str, Any] = {"fetchMarkets": {"types": ["spot"]}}


def ccxt_module(streams: bool = False) -> Any:
    """``ccxt.async_support`` (or ``ccxt.pro`` for websocket streams), imported now.

    Raises:
        OperationalError: ccxt is not installed.
    """
    name = "ccxt.pro" if streams else "ccxt.async_support"
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        from app.resources import is_frozen

        fix = ("This Kestrel bundle was built without it: rebuild it with packaging/build.sh "
               "from an environment that has ccxt." if is_frozen() else
               "Install it into Kestrel's environment: pip install 'ccxt>=4.5'.")
        raise OperationalError(
            f"Live market data needs the ccxt package, which cannot be imported ({exc}). {fix}"
        ) from exc


def exchange_config(settings: ExchangeSettings) -> dict[str, Any]:
    """The constructor config: Kestrel's defaults with the person's ``ccxt_config`` over them."""
    user = settings.ccxt_config.to_ccxt()
    config: dict[str, Any] = {
        "enableRateLimit": True,
        "timeout": int(settings.timeout_s * 1000),
        "options": deep_merge(DEFAULT_OPTIONS, user.pop("options", {})),
    }
    config.update(user)
    return config


def build_exchange(
    exchange_id: str, settings: ExchangeSettings | None = None, *, streams: bool = False
) -> Any:
    """A ccxt async exchange for ``exchange_id`` (e.g. "binance"), not yet connected.

    Args:
        streams: build the ccxt.pro class (REST plus ``watch_*`` websockets) when the exchange
            has one; otherwise the plain async class.

    Raises:
        OperationalError: ccxt is missing, or ccxt has no exchange of that id (naming the
            closest ids).
    """
    module = ccxt_module(streams)
    known: list[str] = list(module.exchanges)
    if exchange_id not in known:
        close = difflib.get_close_matches(exchange_id.lower(), known, n=5, cutoff=0.6)
        hint = f" Closest: {', '.join(close)}." if close else ""
        raise OperationalError(
            f"ccxt has no exchange {exchange_id!r}.{hint} Use a ccxt exchange id in lower case "
            f"(ccxt knows {len(known)}, e.g. binance, okx, kraken, bybit, coinbase)."
        )
    klass = getattr(module, exchange_id)
    settings = settings or ExchangeSettings()
    exchange = klass(exchange_config(settings))
    body_limit.install(exchange, settings.max_response_bytes, module.BadResponse)
    _refuse_malformed_json(exchange, module.BadResponse)
    _keep_decimal_context(exchange)
    gate.install(exchange)  # outermost: a held request does not even reach the JSON check
    return exchange


def _keep_decimal_context(exchange: Any) -> None:
    """Round prices and amounts for ccxt in a context of their own.

    ccxt's ``decimal_to_precision`` sets the calling thread's decimal context to round half up
    (and to trap underflow) and leaves it so: after the first order or price ccxt formats, every
    ``Decimal`` Kestrel rounds on that thread without naming a rounding (P&L, averages, an
    agent's summary) would round otherwise than before. ccxt calls it through the instance's
    attribute, so wrapping that keeps the thread's context as it was.
    """
    plain = exchange.decimal_to_precision

    def decimal_to_precision(*args: Any, **kwargs: Any) -> Any:
        with decimal.localcontext():
            return plain(*args, **kwargs)

    exchange.decimal_to_precision = decimal_to_precision


def _refuse_malformed_json(exchange: Any, bad_response: type[Exception]) -> None:
    """Make ``exchange.fetch`` raise ``bad_response`` for a JSON-looking body that did not parse.

    ccxt's ``fetch`` returns the decoded JSON, or the text itself when the body is not JSON; a
    text that starts like JSON can only be a broken JSON body. Wrapping the instance's method (ccxt
    calls ``self.fetch`` for every request) keeps the check to one ``isinstance`` per request.
    """
    plain_fetch = exchange.fetch

    async def fetch(url: str, method: str = "GET", headers: Any = None, body: Any = None) -> Any:
        result = await plain_fetch(url, method, headers, body)
        if isinstance(result, str) and result.lstrip()[:1] in ("{", "["):
            raise bad_response(
                f"{exchange.id} {method} {url} answered with malformed JSON: {result[:120]!r}"
            )
        return result

    exchange.fetch = fetch


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` merged in, recursing into mappings present in both; copies both."""
    out: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
