"""The EMAIL channel: a notification sent over SMTP (plain, STARTTLS or implicit TLS).

``smtplib`` blocks, so each message is sent in a worker thread. The password is never part of the
settings (which are saved to disk): it is looked up at send time through the injected callable,
which the app backs with the OS keyring. Every SMTP or network failure becomes a FAILED status
carrying the server's own reason, so the agent and the person see why, and nothing raises.

The server's reason is redacted here, where it enters: a server refusing a login may quote it,
and not only as typed: AUTH PLAIN sends base64 of "\0login\0password" and AUTH LOGIN base64 of
the password, so both encodings are secrets to the redactor as soon as the password is read.
"""

from __future__ import annotations

import asyncio
import base64
import smtplib
import ssl
from collections.abc import Callable
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr

from app.config.email import EmailSettings
from app.domain.agents import Channel, ChannelStatus, DeliveryStatus, Notification, Urgency
from app.domain.clock import ms_to_iso
from app.redaction import REDACTOR

# the name sent in EHLO; without it smtplib asks DNS for this machine's FQDN, which can hang
LOCAL_HOSTNAME = "localhost"
SETUP_HINT = "set it in Settings > Notifications > E-mail"


class EmailNotifier:
    """Sends notifications by e-mail; ``password_lookup`` returns the SMTP password or None.

    Args:
        password_help: what to do when no password is stored, in words (the app says where to
            store it on this machine, or which environment variable to set without a keyring).
    """

    channel = Channel.EMAIL

    def __init__(
        self, settings: EmailSettings, password_lookup: Callable[[], str | None],
        password_help: str = SETUP_HINT,
    ) -> None:
        self.settings = settings
        self._password_lookup = password_lookup
        self._password_help = password_help

    async def send(self, n: Notification) -> ChannelStatus:
        message = self.build_message(n)
        try:
            refused = await asyncio.to_thread(self._send_blocking, message)
        except (smtplib.SMTPException, OSError, _NoPassword) as exc:
            return ChannelStatus(self.channel, DeliveryStatus.FAILED,
                                 REDACTOR.redact(self._describe(exc)))
        message_id = str(message["Message-ID"])
        if refused:
            detail = "; ".join(f"{addr}: {_reply(code, text)}" for addr, (code, text)
                               in refused.items())
            message_id = REDACTOR.redact(f"{message_id} (refused: {detail})")
        return ChannelStatus(self.channel, DeliveryStatus.SUCCESS, message_id)

    def build_message(self, n: Notification) -> EmailMessage:
        """The e-mail for a notification: urgency in the subject, the agent in the footer."""
        s = self.settings
        first_line = n.message.strip().splitlines()[0] if n.message.strip() else "notification"
        subject = _one_line(n.subject) or _one_line(first_line)[:78]
        message = EmailMessage()
        message["Subject"] = f"[Kestrel {n.urgency.value}] {subject}"
        message["From"] = s.sender
        message["To"] = ", ".join(s.recipients)
        message["Date"] = formatdate(usegmt=True)  # sent now; the market time is in the body
        domain = parseaddr(s.sender)[1].rpartition("@")[2] or LOCAL_HOSTNAME
        message["Message-ID"] = make_msgid("kestrel", domain=domain)
        if n.urgency in (Urgency.HIGH, Urgency.CRITICAL):
            message["X-Priority"] = "1"
            message["Importance"] = "high"
        message.set_content(
            f"{n.message}\n\n-- \nSent by Kestrel agent {n.agent_id} at market time "
            f"{ms_to_iso(n.created_ms)} (notification {n.notification_id}).\n"
        )
        return message

    def _send_blocking(self, message: EmailMessage) -> dict[str, tuple[int, bytes]]:
        s = self.settings
        password = None
        if s.username:
            password = self._password_lookup()
            if not password:
                raise _NoPassword(s.username)
            _register(s.username, password)
        context = ssl.create_default_context()
        client: smtplib.SMTP
        if s.security == "ssl":
            client = smtplib.SMTP_SSL(
                s.host, s.port, local_hostname=LOCAL_HOSTNAME, timeout=s.timeout_s,
                context=context,
            )
        else:
            client = smtplib.SMTP(
                s.host, s.port, local_hostname=LOCAL_HOSTNAME, timeout=s.timeout_s
            )
        with client:
            client.ehlo()
            if s.security == "starttls":
                client.starttls(context=context)
                client.ehlo()
            if s.username and password is not None:
                client.login(s.username, password)
            return client.send_message(message)

    def _describe(self, exc: BaseException) -> str:
        """The failure in words, with the server's own code and reason when it gave one."""
        s = self.settings
        where = f"{s.host}:{s.port}"
        if isinstance(exc, _NoPassword):
            return f"no SMTP password is stored for {exc.username}; {self._password_help}"
        if isinstance(exc, smtplib.SMTPAuthenticationError):
            return (
                f"the SMTP server {where} refused the login of {s.username}: "
                f"{_reply(exc.smtp_code, exc.smtp_error)}"
            )
        if isinstance(exc, smtplib.SMTPRecipientsRefused):
            return "every recipient was refused: " + "; ".join(
                f"{addr}: {_reply(code, text)}" for addr, (code, text) in exc.recipients.items()
            )
        if isinstance(exc, smtplib.SMTPSenderRefused):
            return f"the sender {exc.sender} was refused: {_reply(exc.smtp_code, exc.smtp_error)}"
        if isinstance(exc, smtplib.SMTPResponseException):
            return f"the SMTP server {where} answered {_reply(exc.smtp_code, exc.smtp_error)}"
        if isinstance(exc, smtplib.SMTPNotSupportedError):
            return f"the SMTP server {where} does not support it: {exc}"
        if isinstance(exc, smtplib.SMTPServerDisconnected):
            if isinstance(exc.__context__, TimeoutError):  # smtplib hides the timeout in here
                return f"no answer from {where} within {s.timeout_s:g} s"
            return f"the SMTP server {where} closed the connection: {str(exc) or 'no reason given'}"
        if isinstance(exc, smtplib.SMTPException):
            return f"SMTP error with {where}: {exc}"
        if isinstance(exc, ssl.SSLError):
            return f"TLS with {where} failed ({s.security}): {exc.reason or exc}"
        if isinstance(exc, TimeoutError):
            return f"no answer from {where} within {s.timeout_s:g} s"
        if isinstance(exc, OSError):
            return f"cannot connect to {where}: {exc.strerror or exc}"
        return f"{type(exc).__name__}: {exc}"


class _NoPassword(Exception):  # noqa: N818 - internal signal, never leaves this module
    def __init__(self, username: str) -> None:
        super().__init__(username)
        self.username = username


def _register(username: str, password: str) -> None:
    """The password as typed and as the AUTH mechanisms put it on the wire, all secrets.

    Of AUTH PLAIN's blob only the part that encodes the password is: its first characters
    encode "\0login\0" alone (base64 turns each 3 bytes into 4 characters), and a login is no
    secret, so text that merely mentions the login in base64 is left alone.
    """
    REDACTOR.add_secret(password)
    REDACTOR.add_secret(base64.b64encode(password.encode("utf-8")).decode("ascii"))
    head = f"\0{username}\0".encode()
    blob = base64.b64encode(head + password.encode("utf-8")).decode("ascii")
    REDACTOR.add_secret(blob[len(head) // 3 * 4:])


def _reply(code: int, text: bytes | str) -> str:
    body = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    return f"{code} {' '.join(body.split())}"


def _one_line(text: str) -> str:
    return " ".join(text.split())
