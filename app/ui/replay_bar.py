"""The replay controls and the banner: speed (1x up to 14,400x, four hours a second), pause, step
(a button and Ctrl+.), jump ahead to a date, and what the person is looking at (offline replay
on the rule engine, or a real LLM, named by provider and model), with how to connect real ones,
and, for a language model replaying a market from before its training cutoff, the warning that it
may remember what came next.

Simulated time is driven by the venue's ``Driver``; this toolbar only changes its speed and pause
flag, asks for one step, or moves it to a later moment, so the same driver serves the GUI, the CLI
and the tests. Time only moves forward: the paper account has settled every bar up to now, and a
history it traded through cannot change. A replay that starts earlier is another workspace opened
with its start date (``kestrel gui --workspace NEW --at DATE``); a jump to a date before now says
so.

Pause and step are ``QAction``s (Ctrl+Space pauses and resumes; the window holds both actions, so
the key works while the toolbar is hidden too). A button given a shortcut of its own loses it the
first time its text changes ("Pause" to "Play"): the action keeps it, whatever its text says.

A paused replay stands on a bar's close: pausing moves the clock on to the close of the bar
forming (at most one bar of simulated time, a few seconds of the replay's own pace), and each
step moves it to the next close. An order placed while paused is then stamped at the close, so
the paper broker's fill at the next bar's open shows after one step, as it would in a backtest.

Why speeds past 600x: a month of hourly bars at 600x takes twenty minutes; at 14,400x it takes a
minute. The window's pacer moves at most one bar a tick, so no candle close, fill or scheduled job
is skipped at any of these speeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from PySide6.QtCore import QDateTime, Qt, QTimeZone, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDateTimeEdit,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.domain.clock import Clock, ms_to_iso
from app.runtime.venue import Driver

SPEEDS = (1.0, 10.0, 60.0, 600.0, 3600.0, 14400.0)
PAUSE_SHORTCUT = "Ctrl+Space"
STEP_KEYS = "Ctrl+."  # not Ctrl+Right: text fields take that to move by words


def bar_close_at_or_after(now_ms: int, bar_ms: int) -> int:
    """The close of the bar forming at ``now_ms`` (``now_ms`` itself when it is a close)."""
    return -(-now_ms // bar_ms) * bar_ms


def speed_text(speed: float) -> str:
    """A speed as the list shows it, with what it means past 600x (an hour a second)."""
    if speed >= 3600 and speed % 3600 == 0:
        hours = int(speed // 3600)
        return f"{speed:,.0f}x ({hours} h/s)"
    return f"{speed:g}x"


def _utc(ms: int) -> QDateTime:
    return QDateTime.fromMSecsSinceEpoch(ms, QTimeZone.utc())


class JumpDialog(QDialog):
    """Pick the moment to jump to (UTC), between now and the end of the data."""

    def __init__(self, now_ms: int, end_ms: int, step_ms: int,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("replayJump")
        self.setWindowTitle("Jump to a date")
        layout = QVBoxLayout(self)
        about = QLabel(
            f"The replay is at {ms_to_iso(now_ms)} and its data ends at {ms_to_iso(end_ms)}. "
            "Jumping ahead settles every open order on the bars in between, as the replay "
            "would; the agents' scheduled runs in between are skipped, and they run from the "
            "new date on. Time cannot go back: to replay from an earlier date, open another "
            "workspace with that start date (kestrel gui --workspace NEW --at DATE).")
        about.setWordWrap(True)
        layout.addWidget(about)
        self.when = QDateTimeEdit(_utc(min(now_ms + 24 * step_ms, end_ms)))
        self.when.setObjectName("replayJumpWhen")
        self.when.setTimeZone(QTimeZone.utc())
        self.when.setDisplayFormat("yyyy-MM-dd HH:mm 'UTC'")
        self.when.setCalendarPopup(True)
        self.when.setMinimumDateTime(_utc(now_ms))
        self.when.setMaximumDateTime(_utc(end_ms))
        layout.addWidget(self.when)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Jump")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def chosen_ms(self) -> int:
        return int(self.when.dateTime().toMSecsSinceEpoch())


class ReplayBar(QToolBar):
    """Speed, pause/play, step and jump for the replay clock.

    Attributes:
        pause_action: pauses or resumes (Ctrl+Space); its text says what a press does now.
        step_action: one bar forward, while paused.
        step_key_action: the step key (Ctrl+.): pauses a playing replay, then steps.

    Args:
        clock, end_ms: the replay's clock and where its data ends (the jump's range); without
            them there is no jump.
    """

    stepped = Signal(int)  # fills produced by a manual step or a jump
    speed_chosen = Signal(float)  # the person picked a speed (the window keeps it)
    pause_chosen = Signal(bool)  # the person paused (True) or resumed (the window keeps it)
    jumped = Signal(str)  # what a jump did (or why it did not), for the status bar

    def __init__(
        self, driver: Driver, clock: Clock, step_ms: int, parent: QWidget | None = None, *,
        end_ms: int | None = None,
    ) -> None:
        super().__init__("Replay", parent)
        self.setObjectName("replay_bar")
        self.driver = driver
        self.clock = clock
        self.step_ms = step_ms
        self._clock = clock
        self._end_ms = end_ms
        self.jump_dialog: JumpDialog | None = None
        self.addWidget(QLabel(" Replay speed "))
        self.speed = QComboBox()
        self.speed.setObjectName("replay_speed")
        self.speed.setToolTip("Simulated time per second: 3,600x is an hour a second, 14,400x "
                              "four hours (a month of hourly bars in a minute)")
        for value in SPEEDS:
            self.speed.addItem(speed_text(value), value)
        self.speed.setCurrentIndex(self._nearest(driver.speed))
        self.speed.currentIndexChanged.connect(self._speed_changed)
        self.addWidget(self.speed)
        self.pause_action = QAction("Pause", self)
        self.pause_action.setShortcut(QKeySequence(PAUSE_SHORTCUT))
        self.pause_action.triggered.connect(self.toggle_pause)
        self.pause_button = self._button(self.pause_action, "replay_pause")
        self.step_action = QAction("Step 1 bar", self)
        self.step_action.setToolTip("Advance to the next bar's close while paused")
        self.step_action.triggered.connect(self.step)
        self.step_button = self._button(self.step_action, "replay_step")
        # an action, not a button's shortcut: the key steps while playing too (pausing first),
        # and from a floating dock (a window of its own) as from the main window
        self.step_key_action = QAction("Pause and step one bar", self)
        self.step_key_action.setShortcut(QKeySequence(STEP_KEYS))
        self.step_key_action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        self.step_key_action.triggered.connect(self.pause_and_step)
        self.jump_action = QAction("Jump to…", self)
        self.jump_action.setToolTip("Jump ahead to a date (Ctrl+J)")
        self.jump_action.setShortcut(QKeySequence("Ctrl+J"))
        self.jump_action.triggered.connect(self.open_jump)
        self.jump_action.setVisible(end_ms is not None)
        self.jump_button = QToolButton()
        self.jump_button.setObjectName("replay_jump")
        self.jump_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.jump_button.setDefaultAction(self.jump_action)
        # shown or hidden through the tool bar's action: the button itself, shown before it has
        # a parent, would open as a window of its own
        self.addWidget(self.jump_button).setVisible(end_ms is not None)
        self._sync()

    def _button(self, action: QAction, name: str) -> QToolButton:
        button = QToolButton()
        button.setObjectName(name)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        button.setDefaultAction(action)
        self.addWidget(button)
        return button

    def _nearest(self, speed: float) -> int:
        return min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - speed))

    def show_speed(self, speed: float) -> None:
        """Show the driver's speed when it was set elsewhere (saved in Settings), without setting
        it again; a speed not in the list joins it, in order."""
        blocked = self.speed.blockSignals(True)  # inserting moves the current index too
        try:
            index = self.speed.findData(speed)
            if index < 0:
                index = sum(1 for i in range(self.speed.count()) if self.speed.itemData(i) < speed)
                self.speed.insertItem(index, speed_text(speed), speed)
            self.speed.setCurrentIndex(index)
        finally:
            self.speed.blockSignals(blocked)

    def _speed_changed(self, index: int) -> None:
        speed = float(self.speed.itemData(index))
        self.driver.set_speed(speed)
        self.speed_chosen.emit(speed)

    def toggle_pause(self) -> None:
        """Pause (on the forming bar's close) or resume; the window keeps the choice."""
        self.set_paused(not self.driver.paused)
        self.pause_chosen.emit(self.driver.paused)

    def set_paused(self, paused: bool) -> None:
        """Pause on the close of the bar forming now, or let time flow again."""
        self.driver.paused = paused
        if paused:
            self._advance(bar_close_at_or_after(self.clock.now_ms(), self.step_ms))
        self._sync()

    def step(self) -> None:
        """One bar forward while paused: to the next bar's close."""
        if self.driver.paused:
            now = self.clock.now_ms()
            self.stepped.emit(self._advance(bar_close_at_or_after(now + 1, self.step_ms)))

    def _advance(self, to_ms: int) -> int:
        end = getattr(self.driver, "end_ms", None)  # a replay's driver knows where data ends
        return self.driver.advance_to(to_ms if end is None else min(to_ms, end))

    def pause_and_step(self) -> None:
        """The step key: a playing replay is paused first, so the bar stepped to stays."""
        if not self.driver.paused:
            self.toggle_pause()
        self.step()

    def open_jump(self) -> JumpDialog | None:
        """The dialog that picks a date to jump to; accepted, the replay moves there."""
        if self._clock is None or self._end_ms is None:
            return None
        dialog = JumpDialog(self._clock.now_ms(), self._end_ms, self.step_ms, self)
        dialog.accepted.connect(lambda: self.jump_to(dialog.chosen_ms()))
        self.jump_dialog = dialog
        dialog.open()
        return dialog

    def jump_to(self, when_ms: int) -> str:
        """Move the replay to ``when_ms`` (on a bar's boundary); a moment before now or past
        the data's end is refused with the reason. Returns what was done, also as ``jumped``."""
        assert self._clock is not None and self._end_ms is not None
        now = self._clock.now_ms()
        target = when_ms - when_ms % self.step_ms
        if target <= now:
            text = (f"The replay is at {ms_to_iso(now)}; it cannot go back to "
                    f"{ms_to_iso(when_ms)}: the paper account has traded through it. To replay "
                    "from that date, open another workspace with it as the start date "
                    "(kestrel gui --workspace NEW --at DATE).")
        elif target > self._end_ms:
            text = (f"The data ends at {ms_to_iso(self._end_ms)}: there is nothing to replay "
                    f"at {ms_to_iso(when_ms)}.")
        else:
            fills = self.driver.advance_to(target)
            self.stepped.emit(fills)
            filled = f"; {fills} fill{'s' if fills != 1 else ''} on the way" if fills else ""
            text = f"Jumped to {ms_to_iso(target)} from {ms_to_iso(now)}{filled}."
        self.jumped.emit(text)
        return text

    def _sync(self) -> None:
        paused = self.driver.paused
        self.pause_action.setText("Play" if paused else "Pause")
        self.pause_action.setToolTip(
            f"{'Resume' if paused else 'Pause'} the replay clock ({PAUSE_SHORTCUT})")
        self.step_action.setEnabled(paused)


def banner_text(
    offline: bool, engines: str = "", label: str = "", warnings: Sequence[str] = (),
    *, uses_llm: bool = False,
) -> str:
    """What the banner says about where the data and the decisions come from.

    Args:
        engines: what the agents run on, as markup (``Engines.words``): each language model by
            provider and model, the rule engine as not being one.
        warnings: the training-cutoff warnings of the replayed period (plain text), each on a
            line of its own: a model trading a market it was trained on may remember it.
        uses_llm: a language model decides: the advice is where to change it, not to connect one.
    """
    parts = []
    if offline:
        parts.append("<b>Offline replay</b> of bundled real market data with a simulated "
                     "(paper) exchange")
    elif label.startswith("Paper"):
        parts.append(f"<b>{escape(label, quote=False)}</b>: the exchange's real prices and order "
                     "book, orders filled by a simulated (paper) account, no keys, no real money")
    if engines:
        parts.append(engines)
    if not parts:
        return ""
    llm = ("Change the model in <i>Settings → LLM</i>" if uses_llm else
           "To connect a real LLM (OpenAI-compatible, Ollama, LM Studio, Anthropic) open "
           "<i>Settings → LLM</i>")
    text = "; ".join(parts) + f". {llm}; exchanges are under <i>Settings → Exchanges</i>."
    return text + "".join(f"<br><b>Training cutoff:</b> {escape(w, quote=False)}"
                          for w in warnings)


class Banner(QLabel):
    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setObjectName("banner")
        self.setWordWrap(True)  # its colours are the sheet's (``QLabel#banner``)
