"""The workspace: one folder holding the SQLite database, the agents' memory and the logs.

In a source checkout the default workspace is the repository itself (memory in its ``memory/``
folder); an installed or bundled app uses the platform's data folder.
"""

from __future__ import annotations

import logging
import logging.handlers
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from app.config import Settings, load_settings
from app.domain.errors import OperationalError
from app.redaction import REDACTOR
from app.resources import source_root
from app.store.backups import BACKUP_DIR_NAME
from app.store.lock import LOCK_FILE_NAME
from app.store.writer import WriterHold, hold_for_writing

APP_NAME = "Kestrel"


@dataclass(frozen=True, slots=True)
class Workspace:
    root: Path

    @property
    def db_path(self) -> Path:
        return self.root / "kestrel.db"

    @property
    def lock_path(self) -> Path:
        return self.root / LOCK_FILE_NAME

    @property
    def backup_dir(self) -> Path:
        return self.root / BACKUP_DIR_NAME

    @property
    def memory_root(self) -> Path:
        return self.root / "memory"

    @property
    def settings_path(self) -> Path:
        return self.root / "settings.toml"

    @property
    def log_dir(self) -> Path:
        return self.root / "logs"

    @classmethod
    def default(cls) -> Workspace:
        root = source_root()
        if root is not None:
            return cls(root)
        return cls(Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)))

    @classmethod
    def at(cls, path: Path) -> Workspace:
        return cls(Path(path).expanduser().resolve())

    def ensure(self) -> Workspace:
        """Create the folders; raises OperationalError naming the folder when that fails."""
        for folder in (self.root, self.memory_root, self.log_dir):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OperationalError(f"cannot create workspace folder {folder}: {exc}") from exc
        return self

    def hold_for_writing(self) -> WriterHold:
        """Make this process the workspace's one writer (see ``app.store.writer``).

        Raises:
            WorkspaceBusyError: another process writes it.
            DamagedDatabaseError: its database is damaged (left untouched).
        """
        self.ensure()
        return hold_for_writing(self.db_path, self.lock_path, self.backup_dir)

    def settings(self) -> Settings:
        return load_settings(self.settings_path)


_configured = False


def setup_logging(workspace: Workspace | None, level: str = "INFO", to_file: bool = True) -> None:
    """Configure logging once per process: warnings to stderr, everything to a rotating file."""
    global _configured
    if _configured:
        return
    _configured = True
    root = logging.getLogger()
    root.setLevel(level)
    console = logging.StreamHandler()
    console.setLevel(logging.WARNING)
    console.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    console.addFilter(REDACTOR)
    root.addHandler(console)
    if workspace is not None and to_file:
        try:
            workspace.log_dir.mkdir(parents=True, exist_ok=True)
            handler = logging.handlers.RotatingFileHandler(
                workspace.log_dir / "kestrel.log",
                maxBytes=5_000_000,
                backupCount=3,
                encoding="utf-8",
            )
        except OSError as exc:
            logging.getLogger(__name__).warning("file logging disabled: %s", exc)
            return
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(REDACTOR)
        root.addHandler(handler)
