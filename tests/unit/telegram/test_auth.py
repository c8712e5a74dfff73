"""Who may command the bot: allowed users in allowed chats only, refused by default, each
refusal logged (with secrets masked) and kept."""

from __future__ import annotations

import logging

import pytest

from app.telegram.auth import KEEP, Gatekeeper, Sender

OWNER, FRIEND, STRANGER, GROUP = 11, 22, 99, -100500


def test_nobody_may_command_when_no_user_is_configured() -> None:
    gate = Gatekeeper(())
    assert gate.reason_to_refuse(Sender(OWNER, OWNER)) == (
        "no Telegram user is allowed to command (telegram.allowed_user_ids is empty)")
    assert not gate.admit(Sender(OWNER, OWNER), 0.0)


def test_allowed_users_may_command_in_their_private_chats_by_default() -> None:
    gate = Gatekeeper((OWNER, FRIEND))
    assert gate.admit(Sender(OWNER, OWNER), 0.0)
    assert gate.admit(Sender(FRIEND, FRIEND), 0.0)
    assert gate.reason_to_refuse(Sender(OWNER, GROUP)) == f"chat {GROUP} is not an allowed chat"
    assert gate.refused_count == 0


def test_configured_chats_replace_the_private_ones() -> None:
    gate = Gatekeeper((OWNER,), (GROUP,))
    assert gate.admit(Sender(OWNER, GROUP), 0.0)
    assert not gate.admit(Sender(OWNER, OWNER), 0.0)
    assert not gate.admit(Sender(STRANGER, GROUP), 0.0), "a stranger in the allowed group"


@pytest.mark.parametrize("sender", [
    Sender(STRANGER, STRANGER), Sender(None, OWNER), Sender(OWNER, None), Sender(None, None),
])
def test_a_sender_telegram_does_not_name_fully_is_refused(sender: Sender) -> None:
    assert not Gatekeeper((OWNER,)).admit(sender, 0.0)


def test_each_refusal_is_logged_with_who_and_what_and_secrets_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = Gatekeeper((OWNER,), redact=lambda text: text.replace("hunter2-secret", "***"))
    with caplog.at_level(logging.WARNING, logger="app.telegram.auth"):
        gate.admit(Sender(STRANGER, STRANGER, "mallory", "/kill hunter2-secret"), 5.0)
        gate.admit(Sender(STRANGER, STRANGER, "", "x" * 500), 6.0)
    first, second = (r.getMessage() for r in caplog.records)
    assert first == ("Telegram: refused '/kill ***' from user 99 (@mallory) in chat 99: "
                     "user 99 is not in telegram.allowed_user_ids")
    assert "(@-)" in second and "x" * 80 + "…" in second and "x" * 81 not in second
    assert [(r.sender.user_id, r.at_s) for r in gate.refusals] == [(STRANGER, 5.0),
                                                                   (STRANGER, 6.0)]


def test_refusals_are_counted_all_and_the_latest_kept() -> None:
    gate = Gatekeeper((OWNER,))
    for n in range(KEEP + 5):
        gate.admit(Sender(STRANGER, STRANGER, what=str(n)), float(n))
    assert gate.refused_count == KEEP + 5
    assert len(gate.refusals) == KEEP and gate.refusals[0].sender.what == "5"
