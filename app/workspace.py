"""The workspace: one folder holding the SQLite database, the agents' memory and the logs.

In a source checkout the default workspace is the repository itself (memory in its ``memory/``
folder); an installed or bundled app uses the platform's data folder.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from app.config import LoggingSettings, Settings, load_settings
from app.domain.errors import OperationalError
from app.redaction import REDACTOR
from app.resources import source_root
from app.store.backups import BACKUP_DIR_NAME
from app.store.disk_full import disk_full_reason
from app.store.identity import WORKSPACE_ID_FILE, ensure_id_file, record_id, workspace_id
from app.store.lock import LOCK_FILE_NAME
from app.store.writer import WriterHold, hold_for_writing

APP_NAME = "Kestrel"
LOG_FILE_NAME = "kestrel.log"


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
    def id_path(self) -> Path:
        return self.root / WORKSPACE_ID_FILE

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

    def hold_for_writing(self, *, backups: bool = True) -> WriterHold:
        """Make this process the workspace's one writer (see ``app.store.writer``; ``backups``
        False for a backtest's own workspace).

        The workspace's id (``app.store.identity``) is settled here: its file before the
        database is opened, so the first backup records it, and the database's copy once this
        process holds the workspace.

        Raises:
            WorkspaceBusyError: another process writes it.
            DamagedDatabaseError: its database is damaged (left untouched).
        """
        self.ensure()
        ensure_id_file(self.root, self.db_path)
        hold = hold_for_writing(self.db_path, self.lock_path, self.backup_dir, backups=backups)
        try:
            record_id(self.root, self.db_path)
        except BaseException:
            hold.release()
            raise
        return hold

    def identity(self) -> str | None:
        """This workspace's id (``app.store.identity``); None before it was first opened for
        writing by a Kestrel that gives workspaces one."""
        return workspace_id(self.root, self.db_path)

    def settings(self) -> Settings:
        return load_settings(self.settings_path)


_CONSOLE = "kestrel.console"
_FILE = "kestrel.file"


class WorkspaceLogFile(logging.handlers.RotatingFileHandler):
    """The workspace's ``logs/kestrel.log``. A line that cannot be written because the disk is
    full is counted (``lost``), not reported with a traceback on stderr as logging does for
    any other failure: the run stopping for the full disk names the lines it lost."""

    lost = 0

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        if disk_full_reason(sys.exc_info()[1]) is not None:
            self.lost += 1
            return
        super().handleError(record)


def lost_log_lines() -> tuple[int, Path | None]:
    """How many lines the workspace's log file lost to a full disk, and that file."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, WorkspaceLogFile):
            return handler.lost, Path(handler.baseFilename)
    return 0, None


def setup_logging(workspace: Workspace | None, settings: LoggingSettings | None = None) -> None:
    """Send warnings to stderr and, for a workspace, every message at ``settings.level`` or above
    to its rotating ``logs/kestrel.log``; every handler passes the secret redactor.

    Calling it again (another workspace, settings saved in the window) replaces the file handler:
    the process logs to one workspace, as it writes one.
    """
    settings = settings or LoggingSettings()
    root = logging.getLogger()
    handlers = {getattr(h, "name", None): h for h in root.handlers}
    if _CONSOLE not in handlers:
        console = logging.StreamHandler()
        console.set_name(_CONSOLE)
        console.setLevel(logging.WARNING)
        console.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        console.addFilter(REDACTOR)
        root.addHandler(console)
    old = handlers.get(_FILE)
    if old is not None:
        root.removeHandler(old)
        old.close()
    root.setLevel(settings.level if workspace is not None else logging.INFO)
    if workspace is None or not settings.to_file:
        return
    try:
        workspace.log_dir.mkdir(parents=True, exist_ok=True)
        handler = WorkspaceLogFile(
            workspace.log_dir / LOG_FILE_NAME, maxBytes=settings.max_bytes,
            backupCount=settings.backups, encoding="utf-8",
        )
    except OSError as exc:
        logging.getLogger(__name__).warning("file logging disabled: %s", exc)
        return
    handler.set_name(_FILE)
    handler.setLevel(settings.level)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(REDACTOR)
    root.addHandler(handler)
