"""A real SMTP server on 127.0.0.1 (aiosmtpd) that can refuse a login by quoting it back.

Why quoting: some mail servers and relays answer a failed AUTH with what they received ("535
bad credentials for kestrel:hunter2", or the base64 blob of AUTH PLAIN). ``EmailNotifier`` reports
the server's own words, so those words must be proven never to reach an output.

API::

    with QuotingSmtp(refusing=True) as server:   # start()/close() also work
        server.port
        server.logins          # [(mechanism, login, password)]: every AUTH attempt, decoded
        server.messages        # [bytes]: the content of every message accepted
        server.refusing = False                  # from now on, any login is accepted
"""

from __future__ import annotations

import base64
import socket
from typing import Any, Self

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class QuotingSmtp:
    """Keeps every message it accepts; refuses every login while ``refusing``, quoting it."""

    def __init__(self, *, refusing: bool = True) -> None:
        self.refusing = refusing
        self.logins: list[tuple[str, str, str]] = []
        self.messages: list[bytes] = []
        self.port = _free_port()
        self._controller = Controller(
            self, hostname="127.0.0.1", port=self.port, authenticator=self._authenticate,
            auth_require_tls=False,
        )

    def start(self) -> Self:
        self._controller.start()
        return self

    def close(self) -> None:
        self._controller.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login, password = data.login.decode(), data.password.decode()
        self.logins.append((mechanism, login, password))
        if not self.refusing:
            return AuthResult(success=True, auth_data=data)
        # what the client sent for the password: AUTH PLAIN's "\0login\0password" blob, or
        # AUTH LOGIN's answer to "Password:", each in base64
        raw = b"\0" + data.login + b"\0" + data.password if mechanism == "PLAIN" else data.password
        sent = base64.b64encode(raw).decode()
        return AuthResult(success=False, handled=False, message=(
            f"535 5.7.8 Authentication failed for {login}:{password} (AUTH {mechanism} {sent})"))

    async def handle_DATA(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        content = envelope.content
        self.messages.append(content if isinstance(content, bytes) else str(content).encode())
        return "250 Message accepted for delivery"
