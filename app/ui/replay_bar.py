"""The replay controls and the banner: speed (1x/10x/60x/600x), pause, step, and what the person
is looking at (offline replay on the rule engine, or a real LLM, named by provider and model), with
how to connect real ones, and, for a language model replaying a market from before its training
cutoff, the warning that it may remember what came next.

Simulated time is driven by the venue's ``Driver``; this toolbar only changes its speed and pause
flag and asks for one step, so the same driver serves the GUI, the CLI and the tests.

Pause and step are ``QAction``s (Ctrl+Space pauses and resumes; the window holds both actions, so
the key works while the toolbar is hidden too). A button given a shortcut of its own loses it the
first time its text changes ("Pause" to "Play"): the action keeps it, whatever its text says.

A paused replay stands on a bar's close: pausing moves the clock on to the close of the bar
forming (at most one bar of simulated time, a few seconds of the replay's own pace), and each
step moves it to the next close. An order placed while paused is then stamped at the close, so
the paper broker's fill at the next bar's open shows after one step, as it would in a backtest.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QComboBox, QLabel, QToolBar, QToolButton, QWidget

from app.domain.clock import Clock
from app.runtime.venue import Driver

SPEEDS = (1.0, 10.0, 60.0, 600.0)
PAUSE_SHORTCUT = "Ctrl+Space"


def bar_close_at_or_after(now_ms: int, bar_ms: int) -> int:
    """The close of the bar forming at ``now_ms`` (``now_ms`` itself when it is a close)."""
    return -(-now_ms // bar_ms) * bar_ms


class ReplayBar(QToolBar):
    """Speed, pause/play and step for the replay clock.

    Attributes:
        pause_action: pauses or resumes (Ctrl+Space); its text says what a press does now.
        step_action: one bar forward, while paused.
    """

    stepped = Signal(int)  # fills produced by a manual step
    speed_chosen = Signal(float)  # the person picked a speed (the window keeps it)
    pause_chosen = Signal(bool)  # the person paused (True) or resumed (the window keeps it)

    def __init__(
        self, driver: Driver, clock: Clock, step_ms: int, parent: QWidget | None = None
    ) -> None:
        super().__init__("Replay", parent)
        self.setObjectName("replay_bar")
        self.driver = driver
        self.clock = clock
        self.step_ms = step_ms
        self.addWidget(QLabel(" Replay speed "))
        self.speed = QComboBox()
        self.speed.setObjectName("replay_speed")
        for value in SPEEDS:
            self.speed.addItem(f"{value:g}x", value)
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
                self.speed.insertItem(index, f"{speed:g}x", speed)
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
