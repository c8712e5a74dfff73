"""A local fake of Telegram's Bot API that python-telegram-bot itself talks to over real HTTP.

Why: the bot must be proven against the library's own request building, long polling, retry
loop and update parsing, not against a mock of the library. The server is a ``LocalServer``
(aiohttp on a free 127.0.0.1 port, in a thread with its own event loop, so it answers whatever
the test's loop is doing, and a test can block its loop without stalling the "network"). Point
the bot at it with ``telegram.api_base_url = server.base_url``.

API::

    server = FakeTelegram().start()        # close() at the end; also a context manager
    server.base_url, server.token          # what the bot is configured with
    server.push_text(user, chat, "/status", reply_to=None, date_s=None)   # -> update id
    server.push_button(user, chat, message_id, "q|...|0")                 # a button press
    server.sent                            # [Sent]: every sendMessage, in order
    server.in_chat(chat)                   # the texts sent to a chat
    server.edits                           # [Sent]: every editMessageText
    server.button_answers                  # [(callback id, text)]: answerCallbackQuery
    server.calls                           # [(method, params)]: every request, in order
    server.pending()                       # updates not fetched (confirmed) yet
    server.failing = "error" | "drop" | None   # 502 to everything / connections cut / normal
    server.failed                          # requests refused while failing
    server.echo_token = True               # sendMessage refused with a 400 quoting the URL
    server.misbehave("getUpdates", "endless" | "trickle")   # the method's next answer (below)
    server.misbehaved                      # bytes written so far for each such answer

Methods: getMe, deleteWebhook (drop_pending_updates), getUpdates (offset, timeout: a real long
poll), sendMessage, editMessageText, answerCallbackQuery, setMyCommands, sendChatAction. Another
token gets 401 (python-telegram-bot's InvalidToken), an unknown method 404. ``echo_token`` plays a
self-hosted Bot API server or a proxy whose error quotes the request line, which holds the token.

``misbehave`` plays a broken server or proxy, once, for the next call of a method: "endless"
answers 200 with a JSON body that never ends (written until the client closes the connection,
or, as a safety for the test machine, until ``ENDLESS_CAP_BYTES``, after which it stalls);
"trickle" answers 200 with a body that never ends either, one byte every ``TRICKLE_S`` (each
read gets its byte well within any read timeout). Both end when the server closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.helpers.local_server import LocalServer

BOT_ID = 777000111
ENDLESS_CAP_BYTES = 16 * 1024 * 1024
TRICKLE_S = 0.2
TOKEN = f"{BOT_ID}:AAE-kestrel-fake-token-for-tests"  # noqa: S105 - not a real token


@dataclass
class Sent:
    chat_id: int
    message_id: int
    text: str
    buttons: list[list[tuple[str, str]]] = field(default_factory=list)
    silent: bool = False
    date: int = 0


class FakeTelegram(LocalServer):
    thread_name = "fake-telegram"
    shutdown_timeout = 0.1
    access_log = False

    def __init__(self, token: str = TOKEN, username: str = "kestrel_test_bot") -> None:
        super().__init__()
        self.token = token
        self.username = username
        self.sent: list[Sent] = []
        self.edits: list[Sent] = []
        self.button_answers: list[tuple[str, str]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.failing: str | None = None
        self.failed = 0
        self.echo_token = False
        self._messages: dict[tuple[int, int], Sent] = {}
        self._updates: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._message_ids = itertools.count(100)
        self._lock = threading.Lock()
        self._news: asyncio.Event | None = None
        self._closing: asyncio.Event | None = None
        self._misbehaviours: dict[str, str] = {}
        self.misbehaved: list[int] = []

    def make_app(self) -> web.Application:
        self._news = asyncio.Event()
        self._closing = asyncio.Event()
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._handle)
        app.router.add_get("/bot{token}/{method}", self._handle)
        return app

    async def before_stop(self) -> None:
        assert self._closing is not None
        self._closing.set()  # misbehaving answers end now

    # -- what the test does ------------------------------------------------------------------

    def misbehave(self, method: str, how: str) -> None:
        """The next call of ``method`` gets an answer that never ends (module docstring)."""
        if how not in ("endless", "trickle"):
            raise ValueError(f"misbehave how: 'endless' or 'trickle', not {how!r}")
        with self._lock:
            self._misbehaviours[method] = how

    def _push(self, update: dict[str, Any]) -> int:
        with self._lock:
            update_id = next(self._ids)
            update["update_id"] = update_id
            self._updates.append(update)
        self._wake()
        return update_id

    def _wake(self) -> None:
        if self._news is not None:
            self.call_soon(self._news.set)

    @staticmethod
    def _user(user_id: int, username: str) -> dict[str, Any]:
        return {"id": user_id, "is_bot": False, "first_name": username.title(),
                "username": username}

    @staticmethod
    def _chat(chat_id: int) -> dict[str, Any]:
        return {"id": chat_id, "type": "private" if chat_id > 0 else "group"}

    def push_text(
        self, user_id: int, chat_id: int, text: str, *, reply_to: int | None = None,
        date_s: float | None = None, username: str = "owner",
    ) -> int:
        """A person writes ``text`` (a command when it starts with /)."""
        message: dict[str, Any] = {
            "message_id": next(self._message_ids), "date": int(date_s or time.time()),
            "chat": self._chat(chat_id), "from": self._user(user_id, username), "text": text,
        }
        if text.startswith("/"):
            length = len(text.split()[0])
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": length}]
        if reply_to is not None:
            with self._lock:
                original = self._messages[(chat_id, reply_to)]
            message["reply_to_message"] = self._message_json(original)
        return self._push({"message": message})

    def push_button(
        self, user_id: int, chat_id: int, message_id: int, data: str, *, username: str = "owner",
    ) -> int:
        """A person presses a button of a message the bot sent."""
        with self._lock:
            original = self._messages[(chat_id, message_id)]
        query = {"id": str(next(self._ids) + 9000), "from": self._user(user_id, username),
                 "message": self._message_json(original), "chat_instance": str(chat_id),
                 "data": data}
        return self._push({"callback_query": query})

    def age_message(self, chat_id: int, message_id: int, seconds: float) -> None:
        """Make a sent message look ``seconds`` older (as if its buttons were pressed later)."""
        with self._lock:
            self._messages[(chat_id, message_id)].date -= int(seconds)

    def pending(self) -> int:
        with self._lock:
            return len(self._updates)

    def in_chat(self, chat_id: int) -> list[str]:
        with self._lock:
            return [s.text for s in self.sent if s.chat_id == chat_id]

    def message(self, chat_id: int, message_id: int) -> Sent:
        with self._lock:
            return self._messages[(chat_id, message_id)]

    def methods(self) -> list[str]:
        with self._lock:
            return [method for method, _ in self.calls]

    # -- the Bot API -------------------------------------------------------------------------

    def _message_json(self, sent: Sent) -> dict[str, Any]:
        data: dict[str, Any] = {
            "message_id": sent.message_id, "date": sent.date, "chat": self._chat(sent.chat_id),
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Kestrel",
                     "username": self.username},
            "text": sent.text,
        }
        if sent.buttons:
            data["reply_markup"] = {"inline_keyboard": [
                [{"text": label, "callback_data": value} for label, value in row]
                for row in sent.buttons]}
        return data

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(await request.post())
        if not params and request.can_read_body:
            params = dict(await request.json())
        with self._lock:
            self.calls.append((method, params))
            how = self._misbehaviours.pop(method, None)
        if how is not None:
            return await self._misbehave(request, how)
        if self.failing is not None:
            return self._fail(request)
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401,
                                      "description": "Unauthorized"}, status=401)
        if self.echo_token and method == "sendMessage":
            return web.json_response({"ok": False, "error_code": 400, "description": (
                f"Bad Request: chat not found (POST /bot{self.token}/{method})")}, status=400)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return web.json_response({"ok": False, "error_code": 404,
                                      "description": "Not Found: method not found"}, status=404)
        result = await handler(params)
        if self.failing is not None:  # the network went while a long poll waited
            return self._fail(request)
        return web.json_response({"ok": True, "result": result})

    async def _misbehave(self, request: web.Request, how: str) -> web.StreamResponse:
        """200, then a body that never ends: fast ("endless") or a byte at a time ("trickle")."""
        assert self._closing is not None
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(request)
        with self._lock:
            index = len(self.misbehaved)
            self.misbehaved.append(0)
        head = (b'{"ok": true, "result": [{"update_id": 1, "message": {"message_id": 1, '
                b'"date": 0, "chat": {"id": 1, "type": "private"}, "text": "')
        piece, pause = (b"x" * 65536, 0.0) if how == "endless" else (b"x", TRICKLE_S)
        try:
            await response.write(head)
            while self.misbehaved[index] < ENDLESS_CAP_BYTES and not self._closing.is_set():
                await response.write(piece)
                self.misbehaved[index] += len(piece)
                if pause:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(pause):
                            await self._closing.wait()
            await self._closing.wait()
        except ConnectionError:
            pass  # the client closed the connection: what a bounded client does
        if request.transport is not None:
            request.transport.abort()
        return response

    def _fail(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self.failed += 1
        if self.failing == "drop" and request.transport is not None:
            request.transport.abort()  # the connection is cut: no answer at all
        return web.Response(status=502, text="Bad Gateway")

    async def _api_getMe(self, _params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        return {"id": BOT_ID, "is_bot": True, "first_name": "Kestrel", "username": self.username,
                "can_join_groups": True, "can_read_all_group_messages": False,
                "supports_inline_queries": False}

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> bool:  # noqa: N802
        if str(params.get("drop_pending_updates", "")).lower() == "true":
            with self._lock:
                self._updates.clear()
        return True

    async def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:  # noqa: N802
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        deadline = time.monotonic() + timeout
        assert self._news is not None
        while True:
            with self._lock:
                if offset:
                    self._updates = [u for u in self._updates if u["update_id"] >= offset]
                ready = list(self._updates)
            if ready or time.monotonic() >= deadline or self.failing is not None:
                return ready
            self._news.clear()
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await self._news.wait()
            except TimeoutError:
                pass

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        sent = Sent(
            chat_id=int(params["chat_id"]), message_id=next(self._message_ids),
            text=str(params["text"]), buttons=_buttons(params.get("reply_markup")),
            silent=str(params.get("disable_notification", "")).lower() == "true",
            date=int(time.time()),
        )
        with self._lock:
            self.sent.append(sent)
            self._messages[(sent.chat_id, sent.message_id)] = sent
        return self._message_json(sent)

    async def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:  # noqa: N802
        key = (int(params["chat_id"]), int(params["message_id"]))
        with self._lock:
            sent = self._messages[key]
            sent.text = str(params["text"])
            sent.buttons = _buttons(params.get("reply_markup"))
            self.edits.append(Sent(sent.chat_id, sent.message_id, sent.text, sent.buttons))
        return self._message_json(sent)

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> bool:  # noqa: N802
        with self._lock:
            self.button_answers.append((str(params["callback_query_id"]),
                                        str(params.get("text", ""))))
        return True

    async def _api_setMyCommands(self, _params: dict[str, Any]) -> bool:  # noqa: N802
        return True

    async def _api_sendChatAction(self, _params: dict[str, Any]) -> bool:  # noqa: N802
        return True


def _buttons(markup: Any) -> list[list[tuple[str, str]]]:
    if not markup:
        return []
    data = json.loads(markup) if isinstance(markup, str) else markup
    return [[(b["text"], b.get("callback_data", "")) for b in row]
            for row in data.get("inline_keyboard", [])]
