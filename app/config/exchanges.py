"""Per-exchange settings: ccxt constructor options a person may set in ``settings.toml``.

As freqtrade's ``ccxt_config`` allows, a person can point Kestrel at a proxy, a mirror or a test
server without code. Only the options that change *where and how* ccxt connects are accepted,
under ccxt's own names; anything else is an error naming the key, and credentials are refused
outright, because secrets live in the OS keyring and never in a settings file.

Example::

    [exchanges.binance]
    timeout_s = 15
    max_response_mib = 32
    [exchanges.binance.ccxt_config]
    httpsProxy = "http://127.0.0.1:8080"
    [exchanges.binance.ccxt_config.urls.api]
    public = "http://127.0.0.1:9000/api/v3"
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.config.ranges import ranged

# ccxt constructor keys that carry credentials; a settings file must never hold them.
CREDENTIAL_KEYS = frozenset({
    "apiKey", "secret", "password", "uid", "login", "twofa", "privateKey", "walletAddress",
    "token", "accountId",
})


class CcxtConfig(BaseModel):
    """ccxt constructor options (ccxt's names), merged over Kestrel's defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    urls: dict[str, Any] = Field(
        default_factory=dict,
        description="Deep-merged over the exchange's own ``urls``, e.g. {api = {public = "
        "'http://127.0.0.1:9000/api/v3'}}: a test server or a mirror.",
    )
    hostname: str | None = Field(
        default=None, description="Replaces {hostname} in the exchange's URLs (okx, bybit...)."
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="ccxt's per-exchange ``options``, deep-merged."
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Extra HTTP headers sent with every request."
    )
    httpProxy: str | None = Field(default=None, description="HTTP proxy URL.")  # noqa: N815
    httpsProxy: str | None = Field(default=None, description="HTTPS proxy URL.")  # noqa: N815
    socksProxy: str | None = Field(  # noqa: N815
        default=None, description="SOCKS proxy URL (needs the aiohttp_socks package)."
    )
    wsProxy: str | None = Field(default=None, description="Proxy for ws:// streams.")  # noqa: N815
    wssProxy: str | None = Field(default=None, description="Proxy for wss:// streams.")  # noqa: N815
    proxyUrl: str | None = Field(  # noqa: N815
        default=None, description="A CORS-style proxy prefixed to every request URL."
    )
    rateLimit: int | None = Field(  # noqa: N815
        default=None, ge=1, le=60_000,
        description="Milliseconds between requests; default: the exchange's own limit.",
    )
    userAgent: str | None = Field(default=None, description="User-Agent header.")  # noqa: N815
    verify: bool | None = Field(
        default=None, description="Verify TLS certificates (leave on outside a test server)."
    )

    @model_validator(mode="before")
    @classmethod
    def _refuse_credentials(cls, data: Any) -> Any:
        if isinstance(data, dict):
            found = sorted(CREDENTIAL_KEYS.intersection(data))
            if found:
                raise ValueError(
                    f"{', '.join(found)} cannot be set here: API keys are never settings, they "
                    "live in the OS keyring (Settings > Exchanges)."
                )
        return data

    def to_ccxt(self) -> dict[str, Any]:
        """The options as ccxt's constructor takes them, without the unset ones."""
        return {k: v for k, v in self.model_dump().items() if v not in (None, {}, "")}


class ExchangeSettings(BaseModel):
    """How Kestrel connects to one exchange (settings.toml ``[exchanges.<ccxt id>]``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ccxt_config: CcxtConfig = Field(
        default_factory=CcxtConfig,
        description="ccxt options: URLs, proxies, options; see CcxtConfig.",
    )
    timeout_s: float = Field(
        default=10.0, gt=0, le=120, description="Longest one HTTP request may take."
    )
    max_response_mib: int = Field(
        default=32, ge=1, le=1024,
        description="Largest answer read from the exchange, in MiB; a longer one is cut off and "
        "reported. The longest real answers (market and currency lists) are a few MiB.",
    )
    stop_limit_band: Decimal = ranged(
        Decimal("0.005"), gt=0, lt=Decimal("0.2"),
        why_low="a stop-limit's limit must lie beyond its stop, or it could not fill once the "
        "price moves past it",
        why_high="a limit 20% beyond the stop would let a stop sell far below the price it "
        "protects",
        description="Where the exchange lists no stop-market order for a market (Binance spot), "
        "a stop is sent as a stop-limit whose limit lies this fraction beyond the stop (0.005: "
        "0.5% below a sell stop). Wider fills more surely in a fast fall; a stop-limit may still "
        "not fill if the price gaps past its limit.",
    )

    @property
    def max_response_bytes(self) -> int:
        return self.max_response_mib * 1024 * 1024
