"""The [telegram] section: refused by default, unknown keys and bad times are errors, and
notifications go to the allowed chats or else the allowed users' own chats."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import Settings, load_settings
from app.config.telegram import TelegramSettings
from app.domain.errors import OperationalError


def test_telegram_is_off_and_nobody_may_command_by_default() -> None:
    settings = Settings().telegram
    assert not settings.enabled and settings.allowed_user_ids == ()
    assert settings.notify_chats() == ()


def test_notifications_go_to_allowed_chats_else_to_the_users_private_chats() -> None:
    assert TelegramSettings(allowed_user_ids=(1, 2)).notify_chats() == (1, 2)
    assert TelegramSettings(allowed_user_ids=(1,), allowed_chat_ids=(-5,)).notify_chats() == (-5,)


@pytest.mark.parametrize("time", ["24:00", "7:00", "12:60", "noon"])
def test_a_summary_time_that_is_not_hh_mm_is_refused(time: str) -> None:
    with pytest.raises(ValidationError):
        TelegramSettings(daily_summary_time=time)


def test_the_section_reads_from_settings_toml_and_unknown_keys_are_named(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text('[telegram]\nenabled = true\nallowed_user_ids = [42]\n'
                    '[telegram.notify]\nfills = "silent"\n', encoding="utf-8")
    loaded = load_settings(path).telegram
    assert loaded.enabled and loaded.allowed_user_ids == (42,)
    assert loaded.notify.fills == "silent" and loaded.notify.approvals == "on"
    path.write_text('[telegram.notify]\nfils = "off"\n', encoding="utf-8")
    with pytest.raises(OperationalError, match="unknown key 'telegram.notify.fils'"):
        load_settings(path)
    path.write_text('[telegram.notify]\nfills = "loud"\n', encoding="utf-8")
    with pytest.raises(OperationalError, match="telegram.notify.fills"):
        load_settings(path)
