"""Ask the person to confirm a destructive step without blocking the event loop.

``QMessageBox.exec()`` runs a nested Qt event loop inside a coroutine, which stalls every agent on
the one asyncio loop and re-enters it; the box is therefore opened window-modal with ``open()``
and its answer awaited as a future. ``shown`` is told about the open box (and about its closing,
with None), so its owner can expose it to the main window and to tests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QMessageBox, QWidget
from shiboken6 import isValid


async def ask_to_confirm(
    parent: QWidget,
    title: str,
    text: str,
    accept: str,
    shown: Callable[[QMessageBox | None], None] | None = None,
) -> bool:
    """True when the person clicks ``accept``; Cancel, Escape or closing the box answer no."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, parent=parent)
    yes = box.addButton(accept, QMessageBox.ButtonRole.DestructiveRole)
    no = box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(no)  # Enter must not destroy anything
    box.setEscapeButton(no)
    answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def finished(*_: Any) -> None:
        if not answer.done():
            answer.set_result(box.clickedButton() is yes)

    box.finished.connect(finished)
    if shown is not None:
        shown(box)
    box.open()
    try:
        return await answer
    finally:
        if shown is not None:
            shown(None)
        if isValid(box):  # not when the parent (and the box with it) was destroyed meanwhile
            box.deleteLater()
