"""Preferences of this desktop (theme, close to tray): kept in QSettings, not in settings.toml.

Why apart from the workspace settings: they describe this person's screen, not how the agents
trade, and the headless CLI never reads them. The QSettings object is injected so tests (and a
portable install) can point it at an INI file of their own.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings

THEMES = ("dark", "light")
ORGANISATION = "Kestrel"
APPLICATION = "Kestrel"


class UiPrefs:
    def __init__(self, store: QSettings | None = None) -> None:
        self.store = store if store is not None else QSettings(ORGANISATION, APPLICATION)

    @property
    def theme(self) -> str:
        value = str(self.store.value("appearance/theme", "dark"))
        return value if value in THEMES else "dark"

    @theme.setter
    def theme(self, value: str) -> None:
        if value not in THEMES:
            raise ValueError(f"unknown theme {value!r}; known: {', '.join(THEMES)}")
        self.store.setValue("appearance/theme", value)

    @property
    def close_to_tray(self) -> bool:
        value = self.store.value("window/close_to_tray", False)
        return value in (True, "true", "1", 1)

    @close_to_tray.setter
    def close_to_tray(self, value: bool) -> None:
        self.store.setValue("window/close_to_tray", bool(value))

    def sync(self) -> None:
        self.store.sync()
