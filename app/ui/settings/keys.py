"""One secret in the Settings dialog: a masked field that stores to the OS keyring, nothing else.

Why a widget of its own: every key (LLM, exchange, Telegram, SMTP) must behave the same way. What
is typed goes only to ``SecretStore.set`` (the OS keyring); what is shown of a stored key is its
mask ("sk-…a1b2") and where it comes from (keyring or a ``KESTREL_<NAME>`` variable). When this
machine has no keyring, the field is disabled and says so plainly, with the exact environment
variable to set instead, because a key typed into a box that cannot keep it would be lost or,
worse, tempt a fallback to a file. A typed value is a secret to the redactor at once.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from app.config.email import PASSWORD_KEY as EMAIL_PASSWORD_KEY
from app.domain.errors import OperationalError
from app.redaction import REDACTOR
from app.secrets import SecretStore, env_var_name, mask
from app.ui.theme import set_look

# Keyring entry names (the SMTP password's is the one the world reads it under).
EMAIL_PASSWORD = EMAIL_PASSWORD_KEY
TELEGRAM_BOT_TOKEN = "telegram.bot_token"  # noqa: S105 - a keyring entry name
TELEGRAM_CHAT_ID = "telegram.chat_id"
DEFAULT_LLM_KEY_NAME = "llm.api_key"


def no_keyring_text(secrets: SecretStore, name: str) -> str:
    """The plain explanation shown instead of an editable field on a machine without a keyring."""
    reason = secrets.available()[1]
    return (
        f"Cannot store this here: {reason}. Kestrel never writes keys to a file. Set the "
        f"environment variable {env_var_name(name)} before starting Kestrel instead."
    )


class SecretField(QWidget):
    """A masked line edit bound to one keyring entry name (which may change, e.g. the LLM's).

    Nothing is stored while typing: ``commit()`` (the dialog's Save) stores the typed value and
    clears the box. ``pending()`` is the typed, not yet stored value ("Test connection" uses it).
    """

    stored = Signal(str)  # the entry name, after a successful store or removal

    def __init__(self, secrets: SecretStore, name: str, label: str,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.secrets = secrets
        self.label = label
        self._name = name
        self.edit = QLineEdit()
        self.edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.edit.setObjectName("secret_edit")
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Delete the entry from the OS keyring")
        self.remove_button.clicked.connect(self.remove)
        self.status = QLabel()
        self.status.setObjectName("secret_status")
        self.status.setWordWrap(True)
        self.warning = QLabel()
        self.warning.setObjectName("secret_warning")
        self.warning.setWordWrap(True)
        set_look(self.warning, "warning")
        self.warning.hide()
        self.error = QLabel()
        self.error.setObjectName("secret_error")
        self.error.setWordWrap(True)
        set_look(self.error, "error")
        self.error.hide()
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.edit, 1)
        row.addWidget(self.remove_button)
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 4)
        column.setSpacing(2)
        column.addLayout(row)
        column.addWidget(self.status)
        column.addWidget(self.warning)
        column.addWidget(self.error)
        self.refresh()

    @property
    def name(self) -> str:
        return self._name

    def set_name(self, name: str) -> None:
        if name != self._name:
            self._name = name
            self.refresh()

    def pending(self) -> str:
        """The typed value; from now on a secret to the redactor, like a stored one (a
        connection test sends it, and a server may quote it back into the result shown)."""
        value = self.edit.text().strip()
        REDACTOR.add_secret(value)
        return value

    def current(self) -> str | None:
        """The value as the app will read it (environment first, then the keyring)."""
        if not self._name:
            return None
        try:
            return self.secrets.get(self._name)
        except OperationalError:
            return None

    def refresh(self) -> None:
        """Enable or disable the box and describe the stored value (masked) and its source."""
        available, _reason = self.secrets.available()
        if not self._name:
            self.edit.setEnabled(False)
            self.remove_button.setEnabled(False)
            self.status.setText("Give the key a name first (e.g. openai).")
            set_look(self.status, "muted")
            self.warning.hide()
            return
        try:
            where = self.secrets.where(self._name)
        except OperationalError as exc:
            where = None
            self.error.setText(str(exc))
            self.error.show()
        variable = env_var_name(self._name)
        if where == "environment":
            shown = f"Set by the environment variable {variable}: {mask(self.current())}"
        elif where == "keyring":
            shown = f"Stored in the OS keyring as {self._name!r}: {mask(self.current())}"
        else:
            shown = "Not set."
        set_look(self.status, "muted")
        if not available:
            self.edit.setEnabled(False)
            self.edit.setPlaceholderText("no OS keyring on this machine")
            self.remove_button.setEnabled(False)
            self.status.setText(shown)
            self.warning.setText(no_keyring_text(self.secrets, self._name))
            self.warning.show()
            return
        self.warning.hide()
        self.edit.setEnabled(True)
        self.edit.setPlaceholderText("type a new value to replace it" if where else
                                     f"paste the {self.label}")
        self.remove_button.setEnabled(where == "keyring")
        self.status.setText(f"{shown} (or set {variable})" if where != "environment" else shown)

    def commit(self) -> bool:
        """Store the typed value in the keyring; False (and the reason shown) when it failed.

        With nothing typed there is nothing to do (True). The box is cleared once stored, so the
        key is not kept in the widget longer than needed.
        """
        self.error.hide()
        value = self.pending()
        if not value:
            return True
        try:
            self.secrets.set(self._name, value)
        except OperationalError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return False
        self.edit.clear()
        self.refresh()
        self.stored.emit(self._name)
        return True

    def remove(self) -> None:
        try:
            self.secrets.delete(self._name)
        except OperationalError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return
        self.refresh()
        self.stored.emit(self._name)
