"""What the person set up on the chart, kept per workspace: symbol, interval, log scale, the
indicators with their parameters, and each symbol's drawings.

Why QSettings (the window's preferences, beside its layout) and not ``settings.toml``: these
describe this person's screen, not how the agents trade, the headless commands never read them,
and ``settings.toml`` refuses keys it does not know. Why per workspace: a workspace is one market
set-up (its symbols, its replay); its chart belongs with it. The key is the workspace's id (its
``workspace.id``), else its folder, so a moved workspace keeps its chart.

The state is one JSON value, read forgivingly: whatever cannot be read (an older or damaged
value) is left out and logged, and the chart opens with the rest.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QSettings

from app.ui.charts.drawings import Drawing, read_drawings

logger = logging.getLogger(__name__)

VERSION = 1


@dataclass
class ChartState:
    """The chart's set-up.

    Attributes:
        studies: (indicator name, parameters) in the order they were added.
        drawings: per symbol, its drawings.
    """

    symbol: str = ""
    interval: str = ""
    log_scale: bool = False
    studies: list[tuple[str, dict[str, int | float]]] = field(default_factory=list)
    drawings: dict[str, list[Drawing]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({
            "version": VERSION, "symbol": self.symbol, "interval": self.interval,
            "log_scale": self.log_scale,
            "studies": [{"name": name, "params": dict(params)} for name, params in self.studies],
            "drawings": {symbol: [d.to_json() for d in drawings]
                         for symbol, drawings in self.drawings.items() if drawings},
        }, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ChartState:
        """The state kept as ``text``; what cannot be read is left out (logged)."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            logger.warning("the kept chart set-up could not be read (%s); starting afresh", exc)
            return cls()
        if not isinstance(data, Mapping):
            return cls()
        state = cls(
            symbol=_text(data.get("symbol")), interval=_text(data.get("interval")),
            log_scale=data.get("log_scale") is True,
        )
        for study in data.get("studies") or []:
            params = study.get("params") if isinstance(study, Mapping) else None
            name = study.get("name") if isinstance(study, Mapping) else None
            if isinstance(name, str) and isinstance(params, Mapping) and all(
                isinstance(v, int | float) and not isinstance(v, bool) for v in params.values()
            ):
                state.studies.append((name, {str(k): v for k, v in params.items()}))
            else:
                logger.warning("a kept chart indicator was left out: %r", study)
        drawings = data.get("drawings")
        if isinstance(drawings, Mapping):
            for symbol, kept in drawings.items():
                read = read_drawings(kept)
                if read:
                    state.drawings[str(symbol)] = read
        return state


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class ChartMemory:
    """Where one workspace's chart set-up is kept: a key of the window's QSettings."""

    def __init__(self, store: QSettings, workspace_key: str) -> None:
        self._store = store
        self._key = f"chart/{_safe(workspace_key)}"

    def load(self) -> ChartState:
        value = self._store.value(self._key)
        return ChartState.from_json(value) if isinstance(value, str) else ChartState()

    def save(self, state: ChartState) -> None:
        self._store.setValue(self._key, state.to_json())
        self._store.sync()


def _safe(key: str) -> str:
    """A QSettings key part: its separators (``/``, ``\\``) would make groups of a path."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)[:200] or "default"
