"""The Settings dialog: LLM provider, exchanges, Telegram, e-mail, risk, approval, appearance."""

from app.ui.settings.settings_dialog import SettingsDialog

__all__ = ["SettingsDialog"]
