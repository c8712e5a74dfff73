"""The two themes' colours (dark, the default, and light), as plain values.

Kept apart from ``app.ui.theme`` (which applies a theme to the running application) so the style
sheet (``app.ui.theme_sheet``) can be written from a ``Theme`` without importing the code that
installs it: the theme module uses the sheet, the sheet only reads these values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Theme:
    name: str
    background: str
    panel: str
    panel_alt: str
    raised: str
    border: str
    grid: str
    text: str
    muted: str
    accent: str
    up: str
    down: str
    warning: str
    live: str
    paper: str
    backtest: str
    error_bg: str
    warning_bg: str
    info_bg: str
    ok_bg: str
    selection: str
    axis: str
    crosshair: str
    person_bubble: str
    person_text: str
    rejected: str  # Risk Guard refusals: louder than a warning, distinct from an error's red
    rejected_bg: str
    rejected_border: str
    rejected_problem_bg: str
    volume_up: str
    volume_down: str

    def colors(self) -> dict[str, str]:
        """Every colour by name, with the chart's names for the position lines."""
        named = {k: v for k, v in asdict(self).items() if k != "name"}
        named.update(entry=self.accent, take_profit=self.up, stop_loss=self.down)
        return named


DARK = Theme(
    name="dark", background="#0f1116", panel="#161a22", panel_alt="#1b2029", raised="#1e2430",
    border="#262c38", grid="#232834", text="#d6dae3", muted="#8a93a6", accent="#4f8cff",
    up="#26a69a", down="#ef5350", warning="#f0b90b", live="#ff3d00", paper="#3b82f6",
    backtest="#8b5cf6", error_bg="#3a1518", warning_bg="#3a3012", info_bg="#14233d",
    ok_bg="#10302c", selection="#2a3a5c", axis="#8a93a6", crosshair="#6b7385",
    person_bubble="#1f3357", person_text="#e8ecf4", rejected="#ff9f43", rejected_bg="#2b1d0e",
    rejected_border="#6b4514", rejected_problem_bg="#3d2508", volume_up="#26a69a66",
    volume_down="#ef535066",
)
LIGHT = Theme(
    name="light", background="#f5f6f8", panel="#ffffff", panel_alt="#f0f2f5", raised="#e9ecf1",
    border="#cfd4dc", grid="#e6e9ef", text="#1c2230", muted="#5c6678", accent="#2563eb",
    up="#0f8a4f", down="#d93025", warning="#a86a12", live="#e03400", paper="#2563eb",
    backtest="#7c3aed", error_bg="#fde8e7", warning_bg="#fdf3dc", info_bg="#e6efff",
    ok_bg="#e3f5ec", selection="#cfe0ff", axis="#5c6678", crosshair="#9aa3b2",
    person_bubble="#dbe7ff", person_text="#1c2230", rejected="#c25e00", rejected_bg="#fff1e0",
    rejected_border="#f0b57a", rejected_problem_bg="#ffe2c2", volume_up="#0f8a4f55",
    volume_down="#d9302555",
)
THEMES = {"dark": DARK, "light": LIGHT}
