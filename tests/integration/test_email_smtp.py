"""The EMAIL channel against a real SMTP server on loopback (aiosmtpd): delivery, login, TLS, and
every failure reported as a FAILED status with the server's reason, never an exception."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP as SMTPServer
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session

from app.config.email import EmailSettings
from app.domain.agents import Channel, DeliveryStatus, Notification, Urgency
from app.domain.clock import parse_time
from app.orchestration.email_channel import EmailNotifier

USER, PASSWORD = "kestrel", "s3cret"


@dataclass
class Mailbox:
    """The server side: keeps every accepted message; refuses recipients at refused.example."""

    received: list[Envelope] = field(default_factory=list)

    async def handle_RCPT(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTPServer, session: Session, envelope: Envelope, address: str,
        rcpt_options: list[str],
    ) -> str:
        if address.endswith("@refused.example"):
            return "550 5.1.1 no such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTPServer, session: Session, envelope: Envelope
    ) -> str:
        self.received.append(envelope)
        return "250 Message accepted for delivery"


def authenticator(
    server: SMTPServer, session: Session, envelope: Envelope, mechanism: str, data: Any
) -> AuthResult:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
        USER.encode(), PASSWORD.encode(),
    )
    return AuthResult(success=ok, handled=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def mailbox() -> Mailbox:
    return Mailbox()


def start(mailbox: Mailbox, **kwargs: Any) -> Controller:
    controller = Controller(
        mailbox, hostname="127.0.0.1", port=free_port(), authenticator=authenticator,
        auth_require_tls=False, **kwargs,
    )
    controller.start()
    return controller


@pytest.fixture
def server(mailbox: Mailbox) -> Iterator[Controller]:
    controller = start(mailbox)
    yield controller
    controller.stop()


def settings(port: int, **overrides: Any) -> EmailSettings:
    values: dict[str, Any] = {
        "host": "127.0.0.1", "port": port, "security": "none", "username": USER,
        "sender": "Kestrel <kestrel@example.com>",
        "recipients": ("me@example.com", "desk@example.com"), "timeout_s": 5,
    }
    values.update(overrides)
    return EmailSettings(**values)


NOTE = Notification(
    notification_id="n-1", agent_id="trader-1", channels=(Channel.EMAIL,),
    message="Stop-loss hit on BTC/USDT at 41250.5\nPosition closed.", subject="",
    urgency=Urgency.HIGH, created_ms=parse_time("2024-01-02T03:00:00Z"),
)


def send(cfg: EmailSettings, password: str | None = PASSWORD):
    return asyncio.run(EmailNotifier(cfg, lambda: password).send(NOTE))


def test_an_email_is_delivered_with_login(server: Controller, mailbox: Mailbox) -> None:
    status = send(settings(server.port))
    assert status.channel is Channel.EMAIL
    assert status.delivery_status is DeliveryStatus.SUCCESS, status.message_id_or_error
    (envelope,) = mailbox.received
    assert envelope.mail_from == "kestrel@example.com"
    assert envelope.rcpt_tos == ["me@example.com", "desk@example.com"]
    message = message_from_bytes(envelope.original_content or b"")
    assert message["Message-ID"] == status.message_id_or_error
    assert message["Subject"] == "[Kestrel HIGH] Stop-loss hit on BTC/USDT at 41250.5"
    assert message["X-Priority"] == "1"
    body = message.get_payload(decode=True).decode()
    assert "Position closed." in body and "agent trader-1" in body


def test_a_wrong_password_fails_with_the_servers_reason(server: Controller) -> None:
    status = send(settings(server.port), password="wrong")
    assert status.delivery_status is DeliveryStatus.FAILED
    assert status.message_id_or_error.startswith(
        f"the SMTP server 127.0.0.1:{server.port} refused the login of kestrel: 535"
    )
    assert "Authentication credentials invalid" in status.message_id_or_error


def test_a_missing_password_says_where_to_enter_it(server: Controller, mailbox: Mailbox) -> None:
    status = send(settings(server.port), password=None)
    assert status.delivery_status is DeliveryStatus.FAILED
    assert status.message_id_or_error == (
        "no SMTP password is stored for kestrel; set it in Settings > Notifications > E-mail"
    )
    assert mailbox.received == []


def test_a_server_without_login_needs_no_password(server: Controller, mailbox: Mailbox) -> None:
    status = send(settings(server.port, username=""), password=None)
    assert status.delivery_status is DeliveryStatus.SUCCESS
    assert len(mailbox.received) == 1


def test_connection_refused_is_a_failed_status(mailbox: Mailbox) -> None:
    port = free_port()  # nothing listens there
    status = send(settings(port))
    assert status.delivery_status is DeliveryStatus.FAILED
    assert status.message_id_or_error == f"cannot connect to 127.0.0.1:{port}: Connection refused"


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as silent:  # accepts the connection, never says hello
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        status = send(settings(port, timeout_s=0.3))
    assert status.delivery_status is DeliveryStatus.FAILED
    assert status.message_id_or_error == f"no answer from 127.0.0.1:{port} within 0.3 s"


def test_every_recipient_refused_fails_with_the_reason(server: Controller) -> None:
    status = send(settings(server.port, recipients=("x@refused.example",)))
    assert status.delivery_status is DeliveryStatus.FAILED
    assert status.message_id_or_error == (
        "every recipient was refused: x@refused.example: 550 5.1.1 no such mailbox here"
    )


def test_one_refused_recipient_does_not_stop_the_others(
    server: Controller, mailbox: Mailbox
) -> None:
    status = send(settings(server.port, recipients=("me@example.com", "y@refused.example")))
    assert status.delivery_status is DeliveryStatus.SUCCESS
    assert "(refused: y@refused.example: 550 5.1.1 no such mailbox here)" in (
        status.message_id_or_error
    )
    assert mailbox.received[0].rcpt_tos == ["me@example.com"]


def test_starttls_against_a_server_without_it_fails_clearly(server: Controller) -> None:
    status = send(settings(server.port, security="starttls"))
    assert status.delivery_status is DeliveryStatus.FAILED
    assert "does not support it: STARTTLS extension not supported by server" in (
        status.message_id_or_error
    )


def test_ssl_against_a_plain_server_fails_clearly(server: Controller) -> None:
    status = send(settings(server.port, security="ssl"))
    assert status.delivery_status is DeliveryStatus.FAILED
    assert status.message_id_or_error.startswith(f"TLS with 127.0.0.1:{server.port} failed (ssl)")


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with ``cryptography``."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ssl.SSLContext:
    """The server's TLS context; the client trusts its certificate through SSL_CERT_FILE, so
    certificate and host name checks stay fully on."""
    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return context


def test_starttls_upgrades_and_delivers(tls_context: ssl.SSLContext, mailbox: Mailbox) -> None:
    controller = start(mailbox, tls_context=tls_context, require_starttls=True)
    try:
        status = send(settings(controller.port, security="starttls"))
    finally:
        controller.stop()
    assert status.delivery_status is DeliveryStatus.SUCCESS, status.message_id_or_error
    assert len(mailbox.received) == 1


def test_implicit_tls_delivers(tls_context: ssl.SSLContext, mailbox: Mailbox) -> None:
    controller = start(mailbox, ssl_context=tls_context)
    try:
        status = send(settings(controller.port, security="ssl"))
    finally:
        controller.stop()
    assert status.delivery_status is DeliveryStatus.SUCCESS, status.message_id_or_error
    assert len(mailbox.received) == 1


def test_an_untrusted_certificate_is_refused(tmp_path: Path, mailbox: Mailbox) -> None:
    cert, key = _self_signed(tmp_path)  # the client is not told to trust it
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    controller = start(mailbox, tls_context=context)
    try:
        status = send(settings(controller.port, security="starttls"))
    finally:
        controller.stop()
    assert status.delivery_status is DeliveryStatus.FAILED
    assert "CERTIFICATE_VERIFY_FAILED" in status.message_id_or_error
    assert mailbox.received == []
