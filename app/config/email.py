"""The ``[email]`` settings section: where and how notifications are sent by e-mail.

Only the model lives here; ``app.orchestration.email_channel`` sends with it. The SMTP password
is never a setting: it lives in the OS keyring, under ``PASSWORD_KEY``.
"""

from __future__ import annotations

from email.utils import parseaddr
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

PASSWORD_KEY = "email.password"  # noqa: S105 - the keyring entry's name, not a secret


def _address(value: str, field: str) -> str:
    value = value.strip()
    _name, address = parseaddr(value)
    if "@" not in address or address.startswith("@") or address.endswith("@"):
        raise ValueError(f"{field} {value!r} is not an e-mail address such as name@example.com")
    return value


class EmailSettings(BaseModel):
    """Where and how to send e-mail; the password lives in the keyring, not here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(min_length=1, description="SMTP server name, e.g. smtp.example.com")
    port: int = Field(587, ge=1, le=65535, description="587 for STARTTLS, 465 for SSL, 25 plain")
    security: Literal["none", "starttls", "ssl"] = Field(
        "starttls", description="none (plain, local relays only), starttls, or ssl (implicit TLS)"
    )
    username: str = Field("", description="login name; empty for a server without login")
    sender: str = Field(description="the From address")
    recipients: tuple[str, ...] = Field(min_length=1, description="who receives the e-mails")
    timeout_s: float = Field(10.0, gt=0, le=300, description="network timeout per operation")

    @field_validator("sender")
    @classmethod
    def _check_sender(cls, value: str) -> str:
        return _address(value, "sender")

    @field_validator("recipients")
    @classmethod
    def _check_recipients(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_address(v, "recipient") for v in value)
