"""The replay controls and the banner: speed (1x/10x/60x/600x), pause, step, and what the person
is looking at (offline replay on the rule engine, or a real LLM, named by provider and model), with
how to connect real ones, and, for a language model replaying a market from before its training
cutoff, the warning that it may remember what came next.

Simulated time is driven by the venue's ``Driver``; this toolbar only changes its speed and pause
flag and asks for one step, so the same driver serves the GUI, the CLI and the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QLabel, QPushButton, QToolBar, QWidget

from app.runtime.venue import Driver

SPEEDS = (1.0, 10.0, 60.0, 600.0)


class ReplayBar(QToolBar):
    """Speed, pause/play and step for the replay clock."""

    stepped = Signal(int)  # fills produced by a manual step
    speed_chosen = Signal(float)  # the person picked a speed (the window keeps it)

    def __init__(self, driver: Driver, step_ms: int, parent: QWidget | None = None) -> None:
        super().__init__("Replay", parent)
        self.setObjectName("replay_bar")
        self.driver = driver
        self.step_ms = step_ms
        self.addWidget(QLabel(" Replay speed "))
        self.speed = QComboBox()
        self.speed.setObjectName("replay_speed")
        for value in SPEEDS:
            self.speed.addItem(f"{value:g}x", value)
        self.speed.setCurrentIndex(self._nearest(driver.speed))
        self.speed.currentIndexChanged.connect(self._speed_changed)
        self.addWidget(self.speed)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("replay_pause")
        self.pause_button.setShortcut("Ctrl+Space")
        self.pause_button.setToolTip("Pause or resume the replay clock (Ctrl+Space)")
        self.pause_button.clicked.connect(self.toggle_pause)
        self.addWidget(self.pause_button)
        self.step_button = QPushButton("Step 1 bar")
        self.step_button.setObjectName("replay_step")
        self.step_button.setToolTip("Advance one bar while paused")
        self.step_button.clicked.connect(self.step)
        self.step_button.setEnabled(driver.paused)
        self.addWidget(self.step_button)
        self._sync()

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
        self.driver.paused = not self.driver.paused
        self._sync()

    def step(self) -> None:
        if self.driver.paused:
            self.stepped.emit(self.driver.step_once(self.step_ms))

    def _sync(self) -> None:
        self.pause_button.setText("Play" if self.driver.paused else "Pause")
        self.step_button.setEnabled(self.driver.paused)


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
