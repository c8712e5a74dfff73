"""A real ``keyring`` backend that keeps its entries in one JSON file, for tests and their children.

Why a file: a test plants keys in the keyring and then runs ``kestrel`` as subprocesses, which must
read the same keyring through the same ``keyring`` API as on a desktop. ``keyring`` loads the
backend named by ``PYTHON_KEYRING_BACKEND`` in every process and sets the backend's properties from
``KEYRING_PROPERTY_<NAME>`` variables, so a child started with ::

    PYTHON_KEYRING_BACKEND=tests.helpers.file_keyring.FileKeyring
    KEYRING_PROPERTY_FILE_PATH=/tmp/.../keyring.json

reads what the test stored (``environment(path)`` builds those two variables). The backend is
viable only where that path is given, so keyring's own detection never picks it by accident.
Values are in plain text: it is a test fixture, never a place for a real key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import keyring.backend
import keyring.errors
from jaraco.classes import properties

PATH_VARIABLE = "KEYRING_PROPERTY_FILE_PATH"
BACKEND = "tests.helpers.file_keyring.FileKeyring"


class FileKeyring(keyring.backend.KeyringBackend):
    """Entries ``{service: {name: value}}`` in the JSON file ``file_path``."""

    file_path = ""  # set from KEYRING_PROPERTY_FILE_PATH, or by the test

    @properties.classproperty
    def priority(cls) -> float:  # noqa: N805 - keyring's classproperty
        if not os.environ.get(PATH_VARIABLE):
            raise RuntimeError(f"the file keyring needs {PATH_VARIABLE}")
        return 0.5

    def _load(self) -> dict[str, dict[str, str]]:
        if not self.file_path:
            raise keyring.errors.InitError(f"the file keyring has no file ({PATH_VARIABLE})")
        try:
            return json.loads(Path(self.file_path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}

    def _save(self, entries: dict[str, dict[str, str]]) -> None:
        path = Path(self.file_path)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
        temporary.replace(path)

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(service, {}).get(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        entries = self._load()
        entries.setdefault(service, {})[username] = password
        self._save(entries)

    def delete_password(self, service: str, username: str) -> None:
        entries = self._load()
        if entries.get(service, {}).pop(username, None) is None:
            raise keyring.errors.PasswordDeleteError(f"no entry {username!r} in {service!r}")
        self._save(entries)


def at(path: Path) -> FileKeyring:
    """The backend on ``path``, for the test's own process."""
    backend = FileKeyring()
    backend.file_path = str(path)
    return backend


def environment(path: Path) -> dict[str, str]:
    """The variables that make a child process's ``keyring`` use this file."""
    return {"PYTHON_KEYRING_BACKEND": BACKEND, PATH_VARIABLE: str(path)}
