"""E-mail settings are strict: unknown keys, bad addresses, impossible ports are refused by name."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.config.email import EmailSettings
from app.domain.agents import Channel, Notification, Urgency
from app.orchestration.email_channel import EmailNotifier

GOOD: dict[str, Any] = {
    "host": "smtp.example.com", "sender": "bot@example.com", "recipients": ["me@example.com"],
}


def test_defaults_are_starttls_on_587() -> None:
    cfg = EmailSettings(**GOOD)
    assert (cfg.port, cfg.security, cfg.username, cfg.timeout_s) == (587, "starttls", "", 10.0)
    assert cfg.recipients == ("me@example.com",)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"password": "x"}, "password", "Extra inputs are not permitted"),
        ({"port": 0}, "port", "greater than or equal to 1"),
        ({"port": 70000}, "port", "less than or equal to 65535"),
        ({"security": "tls"}, "security", "'none', 'starttls' or 'ssl'"),
        ({"sender": "not an address"}, "sender", "not an e-mail address"),
        ({"recipients": []}, "recipients", "at least 1 item"),
        ({"recipients": ["me@example.com", "@bad"]}, "recipients", "not an e-mail address"),
        ({"host": ""}, "host", "at least 1 character"),
        ({"timeout_s": 0}, "timeout_s", "greater than 0"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_field(change: dict, field: str, words: str) -> None:
    with pytest.raises(ValidationError) as caught:
        EmailSettings(**{**GOOD, **change})
    text = str(caught.value)
    assert field in text and words in text


def test_settings_cannot_be_changed_after_loading() -> None:
    cfg = EmailSettings(**GOOD)
    with pytest.raises(ValidationError, match="frozen"):
        cfg.port = 25  # type: ignore[misc]


def test_the_message_carries_subject_urgency_and_agent() -> None:
    notifier = EmailNotifier(EmailSettings(**GOOD), lambda: None)
    note = Notification(
        "n-9", "analyst-2", (Channel.EMAIL,), "line one\nline two", "Daily\nreport",
        Urgency.LOW, 1_704_164_400_000,
    )
    message = notifier.build_message(note)
    assert message["Subject"] == "[Kestrel LOW] Daily report"
    assert message["To"] == "me@example.com"
    assert message["Date"] is not None
    assert "market time 2024-01-02T03:00:00Z" in message.get_content()
    assert message["Message-ID"].endswith("@example.com>")
    assert message["X-Priority"] is None
    assert "line two" in message.get_content() and "notification n-9" in message.get_content()


def test_a_disconnect_without_a_message_still_says_why() -> None:
    import smtplib

    notifier = EmailNotifier(EmailSettings(**GOOD), lambda: None)
    said = notifier._describe(smtplib.SMTPServerDisconnected())
    assert said.endswith("closed the connection: no reason given"), said
