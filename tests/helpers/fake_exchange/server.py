"""A fake Binance + OKX public API on 127.0.0.1 that ccxt's own exchange classes talk to.

Why: the ccxt adapter must be proven against ccxt's real request building, throttling, status
handling and response parsing, not against a mock of ccxt. The server is a ``LocalServer``
(aiohttp on a free port, in its own thread with its own event loop, so a test's loop, and a fault
that hangs, never block it). Binance lives under ``/binance`` and OKX under ``/okx``;
``ccxt_config(venue)`` gives the ``urls`` override that points a ccxt exchange at it.

API::

    with FakeExchangeServer(now_ms) as server:     # start()/close() also work
        server.now                      # FakeNow: the fake time; also the adapter's Clock
        server.ccxt_config("binance")   # {"urls": {"api": {...}}} for ExchangeSettings.ccxt_config
        server.fail("binance", "klines", Fault.status(503), times=2)
        server.ban("binance", 120)      # every request answered 418 (see Bans below)
        server.requests                 # [Request(venue, endpoint, path, query, headers)]
        server.count("binance", "klines")
        server.streams                  # the Binance kline websocket (see ws.py)

Faults (per venue and endpoint, or endpoint "*"; each for ``times`` requests, None = until
``clear_faults``): ``Fault.latency(s)``, ``Fault.hang()`` (never answers; the client times out),
``Fault.status(code, retry_after=None)`` (429 and 418 in the venue's rate-limit shape, 5xx in its
server-error shape), ``Fault.malformed()`` (200 with a truncated JSON body), ``Fault.huge(bytes)``
(200 with a valid JSON body of that size, its Content-Length declared), ``Fault.endless()`` (200
with a JSON body that never ends: written until the client closes the connection, or, as a
safety for the test machine, until ``ENDLESS_CAP_BYTES``, after which it hangs; the bytes
written for each are appended to ``server.endless_written``), and ``Fault.drop_ws()`` for streams
(see ``ws.py``).

Binance's private spot endpoints (``account.py``: orders, trades, balances, a matching engine)
answer signed requests: any signature is taken, but the API-key header must be there. Their
endpoint names: ``order.create``, ``order.get``, ``order.cancel``, ``openOrders``, ``allOrders``,
``myTrades``, ``account``. Faults before the answer (the order is NOT booked) are the ones above
plus ``Fault.skew()`` (-1021, timestamp outside recvWindow); faults after it (the order IS
booked, its answer lost): ``Fault.lost("drop")`` (the connection closes), ``Fault.lost("status",
503)``, ``Fault.lost("garbage")`` (200 with an HTML page), ``Fault.lost("truncated")`` (200 with
cut JSON) and ``Fault.lost("hang")``. ``server.binance_account`` is the account.

``server.list_order_types(symbol, types, oco=...)`` lists a market with only some order types
(and without OCO lists), as Binance lists BTCUSDT with no STOP_LOSS; the account refuses the
others as Binance does.

Bans (``server.ban(venue, seconds)``, lifted by ``clear_faults``): as Binance bans an IP, every
REST request to the venue, public or private, is answered HTTP 418 with ``Retry-After`` (the whole
seconds left) and Binance's -1003 "banned until" body, for ``seconds`` of fake time. Like
Binance, whose bans "scale in duration for repeat offenders, from 2 minutes to 3 days", the fake
punishes a client that keeps asking: the first request during a ban is only told how long is
left; every later one doubles what is left of it (capped at 3 days). ``server.banned_until(venue)``
says when it ends now (None: not banned). Requests during a ban are recorded like any other; the
kline websocket is not banned.

``Fault.echo()`` refuses a signed request with a 401 that quotes its credentials back, as a
verbose gateway or a misconfigured proxy does: Binance's (endpoint as above) quotes the API-key
header and the signature; OKX's private endpoints (endpoint ``private``; they answer nothing else
here but an empty currency list) quote the API key, the passphrase and the signature headers.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.helpers.fake_exchange.account import FakeBinanceAccount, Refused
from tests.helpers.fake_exchange.oco import create_oco
from tests.helpers.fake_exchange.tape import FakeNow
from tests.helpers.fake_exchange.venues import Binance, MarketState, NotServed, Okx
from tests.helpers.fake_exchange.ws import BinanceKlineStreams
from tests.helpers.local_server import LocalServer

HANG_S = 60.0
ENDLESS_CAP_BYTES = 16 * 1024 * 1024
MAX_BAN_MS = 3 * 86_400_000  # Binance's longest IP ban


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    seconds: float = 0.0
    status_code: int = 0
    retry_after: str | None = None

    @classmethod
    def latency(cls, seconds: float) -> Fault:
        return cls("latency", seconds=seconds)

    @classmethod
    def hang(cls) -> Fault:
        return cls("hang")

    @classmethod
    def status(cls, code: int, retry_after: float | str | None = None) -> Fault:
        after = None if retry_after is None else str(retry_after)
        return cls("status", status_code=code, retry_after=after)

    @classmethod
    def malformed(cls) -> Fault:
        return cls("malformed")

    @classmethod
    def huge(cls, size: int) -> Fault:
        """A valid JSON answer of ``size`` bytes (padded), its length declared."""
        return cls("huge", status_code=size)

    @classmethod
    def endless(cls) -> Fault:
        """A JSON answer that never ends (see the module docstring)."""
        return cls("endless")

    @classmethod
    def drop_ws(cls) -> Fault:
        return cls("drop_ws")

    @classmethod
    def skew(cls) -> Fault:
        """Refuse a signed request as Binance does when its timestamp is off (-1021)."""
        return cls("skew")

    @classmethod
    def echo(cls) -> Fault:
        """Refuse a signed request quoting its API key, passphrase and signature back."""
        return cls("echo")

    @classmethod
    def lost(cls, how: str, code: int = 0) -> Fault:
        """Answer the request (book the order), then lose the answer: ``drop``, ``status``
        (with ``code``), ``garbage``, ``truncated`` or ``hang``."""
        return cls(f"lost:{how}", status_code=code)

    @property
    def after_answer(self) -> bool:
        return self.kind.startswith("lost:")


@dataclass(slots=True)
class _Ban:
    until_ms: int
    told: bool = False  # a request was already answered 418: the next ones lengthen it


@dataclass(slots=True)
class _Armed:
    fault: Fault
    times: int | None


@dataclass(frozen=True, slots=True)
class Request:
    """One request as received; ``headers`` are its credential headers (private endpoints)."""

    venue: str
    endpoint: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str] = field(default_factory=dict)


AUTH_HEADERS = ("X-MBX-APIKEY", "OK-ACCESS-KEY", "OK-ACCESS-PASSPHRASE", "OK-ACCESS-SIGN")


def _auth_headers(request: web.Request) -> dict[str, str]:
    return {name: request.headers[name] for name in AUTH_HEADERS if name in request.headers}


@dataclass
class FakeExchangeServer(LocalServer):
    """The fake venues; see the module docstring."""

    start_ms: int
    now: FakeNow = field(init=False)
    requests: list[Request] = field(default_factory=list)

    thread_name = "fake-exchange"

    def __post_init__(self) -> None:
        super().__init__()
        self.now = FakeNow(self.start_ms)
        self.state = MarketState(self.now)
        binance = Binance(self.state)
        self.venues = {"binance": binance, "okx": Okx(self.state)}
        self.binance_account = FakeBinanceAccount(
            self.state, binance.infos, binance.shape)
        self._listed = copy.deepcopy(binance.infos)  # what ``reset_markets`` lists again
        self._faults: dict[tuple[str, str], list[_Armed]] = {}
        self._bans: dict[str, _Ban] = {}
        self._lock = threading.Lock()
        self._release: asyncio.Event | None = None
        self.endless_written: list[int] = []
        self.ws_hooks: list[Any] = []  # extra route installers (the websocket fake)
        self.streams = BinanceKlineStreams(self)

    # -- serving (LocalServer) -----------------------------------------------------------------

    def make_app(self) -> web.Application:
        self._release = asyncio.Event()
        app = web.Application()
        for hook in self.ws_hooks:
            hook(app)
        app.router.add_route("*", "/{venue}/{tail:.*}", self._handle)
        return app

    async def before_stop(self) -> None:
        assert self._release is not None
        self._release.set()  # hanging answers end now

    # -- what tests use ------------------------------------------------------------------------

    def ccxt_config(self, venue: str) -> dict[str, Any]:
        """``ccxt_config`` that points ccxt's ``venue`` class at this server (every API URL)."""
        if venue == "okx":
            return {"urls": {"api": {"rest": f"{self.base_url}/okx",
                                     "ws": f"ws://127.0.0.1:{self.port}/okx/ws/v5"}}}
        import ccxt.pro as ccxt_pro  # the test rig may import ccxt; the app may not at start-up

        exchange = getattr(ccxt_pro, venue)()  # ccxt.pro's urls: REST's plus the websockets
        return {"urls": {"api": self._rewrite(exchange.urls["api"], venue)}}

    def _rewrite(self, urls: Any, venue: str) -> Any:
        if isinstance(urls, Mapping):
            return {k: self._rewrite(v, venue) for k, v in urls.items()}
        if isinstance(urls, str) and "://" in urls:
            scheme, rest = urls.split("://", 1)
            path = rest.split("/", 1)[1] if "/" in rest else ""
            local = "ws" if scheme.startswith("ws") else "http"
            return f"{local}://127.0.0.1:{self.port}/{venue}/{path}"
        return urls

    def list_order_types(
        self, symbol: str, order_types: tuple[str, ...], *, oco: bool | None = None
    ) -> None:
        """Serve ``symbol`` (e.g. "BTC/USDT") on Binance with only these ``orderTypes`` (and
        ``ocoAllowed`` when given) in exchangeInfo, as Binance lists a market's abilities, and
        refuse the rest as Binance does (-2010). A client reads it when it loads the markets."""
        binance = self.venues["binance"]
        assert isinstance(binance, Binance)
        info = binance.infos[symbol]
        info["orderTypes"] = list(order_types)
        if oco is not None:
            info["ocoAllowed"] = oco
        self.binance_account.relist(symbol, info)

    def reset_markets(self) -> None:
        """List every market with its recorded order types and OCO again."""
        binance = self.venues["binance"]
        assert isinstance(binance, Binance)
        for symbol, info in self._listed.items():
            binance.infos[symbol].clear()
            binance.infos[symbol].update(copy.deepcopy(info))
            self.binance_account.relist(symbol, binance.infos[symbol])

    def fail(self, venue: str, endpoint: str, fault: Fault, times: int | None = 1) -> None:
        """Arm ``fault`` for the next ``times`` requests to ``endpoint`` ("*": any endpoint)."""
        with self._lock:
            self._faults.setdefault((venue, endpoint), []).append(_Armed(fault, times))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._bans.clear()

    def ban(self, venue: str, seconds: float) -> None:
        """Ban every request to ``venue`` for ``seconds`` of fake time (see the module
        docstring: 418 with Retry-After, lengthened by requests that keep coming)."""
        with self._lock:
            self._bans[venue] = _Ban(self.now.now_ms() + int(seconds * 1000))

    def banned_until(self, venue: str) -> int | None:
        """When the ban of ``venue`` ends, in fake ms (None: not banned now)."""
        with self._lock:
            ban = self._bans.get(venue)
            return ban.until_ms if ban is not None and self.now.now_ms() < ban.until_ms else None

    def _banned(self, venue_name: str) -> web.Response | None:
        """The 418 answer to a request during a ban, the ban lengthened if it is not the first."""
        with self._lock:
            ban = self._bans.get(venue_name)
            now = self.now.now_ms()
            if ban is None or now >= ban.until_ms:
                return None
            if ban.told:
                ban.until_ms = now + min(2 * (ban.until_ms - now), MAX_BAN_MS)
            ban.told = True
            until = ban.until_ms
        venue = self.venues[venue_name]
        after = str(math.ceil((until - now) / 1000))
        return _json(418, venue.banned(until), {"Retry-After": after})

    def take_fault(self, venue: str, endpoint: str) -> Fault | None:
        with self._lock:
            for key in ((venue, endpoint), (venue, "*")):
                armed = self._faults.get(key)
                while armed:
                    head = armed[0]
                    if head.times is not None:
                        head.times -= 1
                        if head.times <= 0:
                            armed.pop(0)
                    return head.fault
        return None

    def count(self, venue: str, endpoint: str) -> int:
        return sum(1 for r in self.requests if r.venue == venue and r.endpoint == endpoint)

    # -- serving -----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        venue_name = request.match_info["venue"]
        venue = self.venues.get(venue_name)
        path = "/" + request.match_info["tail"]
        if venue_name == "binance" and (request.method, path) in PRIVATE:
            return await self._handle_private(request, PRIVATE[(request.method, path)], path)
        if venue_name == "okx" and request.headers.get("OK-ACCESS-KEY"):
            return await self._handle_okx_private(request, path)
        if venue is None or path not in venue.endpoints:
            return _json(404, {"code": -1, "msg": f"the fake exchange does not serve {path}"})
        endpoint = venue.endpoints[path]
        query = dict(request.query)
        self.requests.append(Request(venue_name, endpoint, path, query))
        banned = self._banned(venue_name)
        if banned is not None:
            return banned
        fault = self.take_fault(venue_name, endpoint)
        if fault is not None and fault.kind != "huge":
            early = await self._apply(fault, venue, request)
            if early is not None:
                return early
        try:
            status, body = venue.answer(endpoint, query)
        except NotServed as exc:
            status, body = venue.not_served(str(exc))
        if fault is not None and fault.kind == "huge":
            return _padded(status, body, fault.status_code)
        return _json(status, body)

    async def _handle_private(
        self, request: web.Request, endpoint: str, path: str
    ) -> web.StreamResponse:
        params = dict(request.query)
        if request.method == "POST":
            params.update({k: str(v) for k, v in (await request.post()).items()})
        self.requests.append(Request("binance", endpoint, path, params, _auth_headers(request)))
        banned = self._banned("binance")
        if banned is not None:
            return banned
        if not request.headers.get("X-MBX-APIKEY"):
            return _json(401, {"code": -2014, "msg": "API-key format invalid."})
        if "signature" not in params or "timestamp" not in params:
            return _json(400, {"code": -1102, "msg": "Mandatory parameter was not sent."})
        venue = self.venues["binance"]
        assert isinstance(venue, Binance)
        fault = self.take_fault("binance", endpoint)
        if fault is not None and fault.kind == "echo":
            return _json(401, {"code": -2015, "msg": (
                "Invalid API-key, IP, or permissions for action. Received key "
                f"{request.headers['X-MBX-APIKEY']} with signature {params['signature']}.")})
        if fault is not None and not fault.after_answer:
            if fault.kind == "skew":
                return _json(400, {"code": -1021, "msg": "Timestamp for this request is "
                                   "outside of the recvWindow."})
            early = await self._apply(fault, venue, request)
            if early is not None:
                return early
        status, body = await _private_answer(self.binance_account, endpoint, params)
        if fault is None or not fault.after_answer:
            return _json(status, body)
        return await self._lose(fault, request)

    async def _handle_okx_private(self, request: web.Request, path: str) -> web.StreamResponse:
        """OKX's signed endpoints: recorded, and refused (quoting the credentials under echo)."""
        params = dict(request.query)
        if request.can_read_body:
            params["body"] = await request.text()  # JSON: an object, or a list (batch orders)
        self.requests.append(Request("okx", "private", path, params, _auth_headers(request)))
        banned = self._banned("okx")
        if banned is not None:
            return banned
        fault = self.take_fault("okx", "private")
        headers = request.headers
        if fault is not None and fault.kind == "echo":
            return _json(401, {"code": "50113", "data": [], "msg": (
                f"Invalid Sign. OK-ACCESS-KEY {headers['OK-ACCESS-KEY']}, OK-ACCESS-PASSPHRASE "
                f"{headers.get('OK-ACCESS-PASSPHRASE')}, OK-ACCESS-SIGN "
                f"{headers.get('OK-ACCESS-SIGN')}")})
        if path == "/api/v5/asset/currencies":  # what ccxt's load_markets asks with keys set
            return _json(200, {"code": "0", "msg": "", "data": []})
        return _json(404, {"code": "50000", "data": [],
                           "msg": f"the fake exchange does not serve {path}"})

    async def _lose(self, fault: Fault, request: web.Request) -> web.StreamResponse:
        """The answer is computed (the order booked); the client never gets it."""
        assert self._release is not None
        how = fault.kind.removeprefix("lost:")
        if how == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=200)
        if how == "status":
            return _json(fault.status_code, {"code": -1001, "msg": "Internal error; unable to "
                                             "process your request. Please try again."})
        if how == "garbage":
            return web.Response(status=200, text="<html><body>502 Bad Gateway</body></html>",
                                content_type="text/html")
        if how == "truncated":
            return web.Response(status=200, text='{"symbol": "BTCUSDT", "orderId": 10',
                                content_type="application/json")
        if how == "hang":
            try:
                await asyncio.wait_for(self._release.wait(), HANG_S)
            except TimeoutError:
                pass
            return _json(504, {"msg": "hung"})
        raise AssertionError(f"unknown way to lose an answer: {how}")

    async def _apply(
        self, fault: Fault, venue: Binance | Okx, request: web.Request
    ) -> web.StreamResponse | None:
        assert self._release is not None
        if fault.kind == "latency":
            await asyncio.sleep(fault.seconds)
            return None
        if fault.kind == "hang":
            try:
                await asyncio.wait_for(self._release.wait(), HANG_S)
            except TimeoutError:
                pass
            return _json(504, {"msg": "hung"})
        if fault.kind == "status":
            code = fault.status_code
            status, body = (
                venue.rate_limited(fault.retry_after) if code in (418, 429)
                else venue.server_error(code)
            )
            status = code
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            return _json(status, body, headers)
        if fault.kind == "malformed":
            return web.Response(
                status=200, text='{"code": "0", "data": [["17705', content_type="application/json"
            )
        if fault.kind == "endless":
            return await self._endless(request)
        raise AssertionError(f"fault {fault.kind} does not apply to REST")


    async def _endless(self, request: web.Request) -> web.StreamResponse:
        """200 with a JSON body that never ends; see ``Fault.endless``."""
        assert self._release is not None
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(request)
        with self._lock:
            index = len(self.endless_written)
            self.endless_written.append(0)
        piece = b"9" * 65536
        try:
            await response.write(b'{"code": "0", "padding": "')
            while self.endless_written[index] < ENDLESS_CAP_BYTES:
                await response.write(piece)
                self.endless_written[index] += len(piece)
            await asyncio.wait_for(self._release.wait(), HANG_S)
        except (ConnectionError, TimeoutError):
            pass  # the client closed the connection (what a bounded client does), or a hang
        if request.transport is not None:
            request.transport.abort()
        return response


PRIVATE = {
    ("POST", "/api/v3/order"): "order.create",
    ("POST", "/api/v3/order/cancelReplace"): "order.cancelReplace",
    ("POST", "/api/v3/orderList/oco"): "orderList.oco",
    ("GET", "/api/v3/order"): "order.get",
    ("DELETE", "/api/v3/order"): "order.cancel",
    ("GET", "/api/v3/openOrders"): "openOrders",
    ("GET", "/api/v3/allOrders"): "allOrders",
    ("GET", "/api/v3/myTrades"): "myTrades",
    ("GET", "/api/v3/account"): "account",
}


async def _private_answer(
    account: FakeBinanceAccount, endpoint: str, params: Mapping[str, str]
) -> tuple[int, Any]:
    try:
        account.check_time(params)
        if endpoint == "order.create":
            return 200, account.create(params)
        if endpoint == "order.cancelReplace":
            return account.cancel_replace(params)
        if endpoint == "orderList.oco":
            return 200, create_oco(account, params)
        if endpoint == "order.get":
            return 200, account.get(params)
        if endpoint == "order.cancel":
            return 200, account.cancel(params)
        if endpoint == "openOrders":
            return 200, account.open_orders(params)
        if endpoint == "allOrders":
            return 200, account.all_orders(params)
        if endpoint == "myTrades":
            return 200, account.my_trades(params)
        return 200, account.account()
    except Refused as refused:
        return refused.status, {"code": refused.code, "msg": refused.msg}


def _padded(status: int, body: Any, size: int) -> web.Response:
    """The answer, padded to ``size`` bytes by an extra member its reader ignores."""
    assert isinstance(body, dict), "only an object answer can be padded"
    text = json.dumps({**body, "padding": ""})
    text = json.dumps({**body, "padding": "9" * (size - len(text))})
    assert len(text) == size
    return web.Response(status=status, text=text, content_type="application/json")


def _json(status: int, body: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(body), content_type="application/json",
        headers=dict(headers or {}),
    )
