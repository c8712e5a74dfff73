"""API keys and tokens: read from ``KESTREL_<NAME>`` environment variables or the OS keyring.

Why only these two places: a key written to the workspace, a settings file or a log ends up in
backups and bug reports. So ``SecretStore`` reads the environment first (headless servers, CI,
a machine without a keyring), then the OS keyring through ``keyring``; it writes only to the
keyring, and when this machine has none (a headless Linux has only keyring's ``fail`` backend)
``set`` refuses with the exact environment variable to use instead. ``how_to_set`` is the one
sentence every part of the app that misses a secret ends with: where to store it, or, on a machine
without a keyring, that there is none and which variable to set. ``mask`` is what a person sees of
a key. Every value a store can return (each ``KESTREL_*`` variable, each value read or stored) is
handed to the process's redactor, so it never reaches a log, a database or a report.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Protocol

import keyring
import keyring.backend
import keyring.errors
from keyring.backends import chainer, fail

from app.domain.errors import OperationalError
from app.redaction import REDACTOR

SERVICE = "kestrel"
ENV_PREFIX = "KESTREL_"


def env_var_name(name: str) -> str:
    """``KESTREL_`` + the name upper-cased, every character that is not a letter or digit -> _.

    >>> env_var_name("openai-api.key")
    'KESTREL_OPENAI_API_KEY'
    """
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def mask(value: str | None) -> str:
    """A key as shown to a person: its first three and last four characters ("sk-…a1b2").

    Short values show nothing of themselves, so a short password is not half revealed.
    """
    if not value:
        return "(not set)"
    if len(value) < 12:
        return "…" * 3
    return f"{value[:3]}…{value[-4:]}"


class SecretSource(Protocol):
    """What a part that starts something with a secret needs: the value, and what to tell a
    person when it is missing (``SecretStore`` is the app's one implementation)."""

    def get(self, name: str) -> str | None: ...

    def how_to_set(self, name: str, where: str) -> str: ...


class SecretStore:
    """Named secrets for one keyring service.

    Args:
        service: the keyring service name (entries are ``service``/``name``).
        backend: a ``keyring`` backend; ``None`` = the one keyring chose for this machine.
        environ: where ``KESTREL_<NAME>`` variables are read (``os.environ`` by default).
    """

    def __init__(
        self,
        service: str = SERVICE,
        backend: keyring.backend.KeyringBackend | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.service = service
        self._backend = backend
        self._environ = os.environ if environ is None else environ
        REDACTOR.add_environment(self._environ)

    @property
    def backend(self) -> keyring.backend.KeyringBackend:
        return self._backend if self._backend is not None else keyring.get_keyring()

    def available(self) -> tuple[bool, str]:
        """Whether secrets can be stored here, and why not (or which keyring) in words."""
        backend = self.backend
        if isinstance(backend, fail.Keyring):
            return False, "no OS keyring is available on this machine (keyring found no backend)"
        if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
            return False, "no OS keyring is available on this machine (no usable backend)"
        return True, f"OS keyring: {getattr(backend, 'name', type(backend).__name__)}"

    def get(self, name: str) -> str | None:
        """The secret: ``KESTREL_<NAME>`` if set, else the keyring entry, else ``None``.

        Raises:
            OperationalError: the keyring exists but refused (e.g. locked).
        """
        value = self._environ.get(env_var_name(name))
        if not value and self.available()[0]:
            try:
                value = self.backend.get_password(self.service, name)
            except keyring.errors.KeyringError as exc:
                raise OperationalError(
                    f"the OS keyring could not read {name!r}: {exc}. You can set the environment "
                    f"variable {env_var_name(name)} instead.") from exc
        if value:
            REDACTOR.add_secret(value)  # once read, a secret can never reach any output
        return value or None

    def how_to_set(self, name: str, where: str) -> str:
        """How a person gives Kestrel the secret ``name`` on this machine, in words.

        Args:
            where: the place in the window that stores it, e.g. "Settings > Telegram".
        """
        variable = env_var_name(name)
        ok, reason = self.available()
        if ok:
            return (f"store it in {where} (it is kept in the OS keyring as {name!r}), or set the "
                    f"environment variable {variable} before starting Kestrel")
        return (f"{reason[:1].upper()}{reason[1:]}, and Kestrel never writes keys to a file: set "
                f"the environment variable {variable} before starting Kestrel (or install an OS "
                f"keyring, e.g. GNOME Keyring or KWallet with a D-Bus session, and store it in "
                f"{where})")

    def where(self, name: str) -> str | None:
        """Where ``get`` finds the secret: "environment", "keyring" or ``None``."""
        if self._environ.get(env_var_name(name)):
            return "environment"
        return "keyring" if self.get(name) is not None else None

    def set(self, name: str, value: str) -> None:
        """Store the secret in the OS keyring (and nowhere else).

        Raises:
            OperationalError: no OS keyring here (says which environment variable to use), the
                keyring refused, or the value is empty.
        """
        if not value:
            raise OperationalError(f"refusing to store an empty value for {name!r}")
        ok, reason = self.available()
        if not ok:
            raise OperationalError(
                f"cannot store {name!r}: {reason}. Kestrel never writes keys to a file; set the "
                f"environment variable {env_var_name(name)} before starting Kestrel instead, or "
                "install an OS keyring (e.g. GNOME Keyring or KWallet with a D-Bus session).")
        REDACTOR.add_secret(value)
        try:
            self.backend.set_password(self.service, name, value)
        except keyring.errors.KeyringError as exc:
            raise OperationalError(
                f"the OS keyring refused to store {name!r}: {exc}. You can set the environment "
                f"variable {env_var_name(name)} before starting Kestrel instead.") from exc

    def delete(self, name: str) -> bool:
        """Remove the keyring entry; False when there was none (or no keyring).

        An environment variable is the person's own setting and is left alone.
        """
        if not self.available()[0]:
            return False
        try:
            self.backend.delete_password(self.service, name)
        except keyring.errors.PasswordDeleteError:
            return False
        except keyring.errors.KeyringError as exc:
            raise OperationalError(f"the OS keyring refused to delete {name!r}: {exc}") from exc
        return True
