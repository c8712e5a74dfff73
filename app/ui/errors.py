"""The error dialog for the unexpected: what happened in words, the details copyable.

Known problems (a bad file, a refused key) are shown where they happen; this catches what escapes:
an exception in a Qt slot or in an asyncio task. It is logged in full and shown once per kind, so a
fault repeating every tick cannot bury the window under dialogs. The report is redacted before it
is kept, logged or shown: an exception's message and its traceback may quote a key (a server's
refusal, a URL with a token in it), and the dialog's details are meant to be pasted into a bug
report.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import traceback
from types import TracebackType
from typing import Any

from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from app.redaction import REDACTOR

logger = logging.getLogger(__name__)


class ErrorReporter:
    def __init__(self, parent: QWidget | None = None, *, interactive: bool = True) -> None:
        self.parent = parent
        self.interactive = interactive
        self.seen: dict[str, int] = {}
        self.reports: list[tuple[str, str]] = []

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        sys.excepthook = self.excepthook
        if loop is not None:
            loop.set_exception_handler(self.loop_handler)

    def excepthook(
        self, kind: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        details = "".join(traceback.format_exception(kind, exc, tb))
        self.report(f"{kind.__name__}: {exc}", details)

    def loop_handler(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if exc is not None:
            details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            summary = f"{type(exc).__name__}: {exc}"
        else:
            summary = str(context.get("message", "an asyncio error"))
            details = repr(context)
        self.report(summary, details)

    def report(self, summary: str, details: str) -> None:
        summary = REDACTOR.redact(summary, display=True)
        details = REDACTOR.redact(details, display=True)
        logger.error("unexpected error: %s\n%s", summary, details)
        self.reports.append((summary, details))
        count = self.seen.get(summary, 0)
        self.seen[summary] = count + 1
        if count or not self.interactive or QApplication.instance() is None:
            return
        box = QMessageBox(self.parent)
        box.setIcon(QMessageBox.Icon.Critical)
        box.setWindowTitle("Kestrel: unexpected error")
        box.setText(
            "Something went wrong that Kestrel did not expect. Your data is safe: orders, "
            "memory and conversations are stored as they happen.\n\n" + summary
        )
        box.setInformativeText("The details below can be copied into a bug report.")
        box.setDetailedText(details)
        box.setStandardButtons(QMessageBox.StandardButton.Ok)
        box.open()
