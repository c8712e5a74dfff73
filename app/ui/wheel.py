"""Spin boxes and combo boxes take the mouse wheel only once they have the keyboard focus.

Qt lets a wheel turn over any spin box or combo box change its value, focused or not. In a form
that scrolls (the Backtest view's, the settings pages) a person scrolling down the form changes
whatever field passes under the pointer: a strategy's fast SMA went from 10 to 13 unnoticed. So
one event filter, installed on the application once, refuses the wheel to such a widget until it
is focused (clicked or tabbed into) and lets the event go on to the form around it, which
scrolls; and it stops the wheel from giving them focus in passing.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractSpinBox, QApplication, QComboBox

GUARDED = (QAbstractSpinBox, QComboBox)  # date and time edits are spin boxes too
_INSTALLED = "kestrelWheelGuard"


class WheelGuard(QObject):
    """The application-wide filter; ``install_wheel_guard`` puts one on the application."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        kind = event.type()
        if kind == QEvent.Type.Wheel and isinstance(watched, GUARDED):
            if not watched.hasFocus():
                # not handled here: Qt offers the wheel to the parents (the scrolling form)
                event.ignore()
                return True
            return False
        if kind == QEvent.Type.Polish and isinstance(watched, GUARDED):
            # a wheel over the widget would otherwise focus it first, and then turn it
            if watched.focusPolicy() == Qt.FocusPolicy.WheelFocus:
                watched.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        return False


def install_wheel_guard(app: QApplication) -> WheelGuard:
    """Install the guard on ``app`` once (a second call returns the one installed)."""
    found = app.findChild(WheelGuard, _INSTALLED)
    if isinstance(found, WheelGuard):
        return found
    guard = WheelGuard(app)
    guard.setObjectName(_INSTALLED)
    app.installEventFilter(guard)
    return guard
