"""The one place every text the bot sends (or logs about an update) passes through.

The workspace's redactor masks every secret read through ``SecretStore`` (the bot token
included) and key-shaped strings. When ``app.secrets`` gains its own redactor, apply it here and
nothing else in the bot changes.
"""

from __future__ import annotations

from app.workspace import REDACTOR


def redact(text: str) -> str:
    return REDACTOR.redact(text)
