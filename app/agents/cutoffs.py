"""Known training cutoffs of language models, and the warning for a run over a period before one.

Why: a model asked to trade a market it was trained on may remember what came next; its backtest
then measures memory, not judgement. The bundled table (``resources/model_cutoffs.yaml``) maps
model-name patterns to the last day the vendor says the training data covers, with the source;
the ``[llm] training_cutoff`` setting overrides it for the model the person runs.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from app import yamltext
from app.domain.clock import ms_to_iso
from app.domain.errors import OperationalError
from app.resources import resource_path

SETTINGS_SOURCE = "your settings ([llm] training_cutoff)"
BLIND_RUN = "blind: the model saw neither the symbol, nor the dates, nor the price level"


@dataclass(frozen=True, slots=True)
class CutoffRule:
    pattern: str
    cutoff: date
    source: str


@dataclass(frozen=True, slots=True)
class TrainingCutoff:
    """What is known of one model's training data: the last day it covers, and who says so."""

    model: str
    cutoff: date
    source: str

    @property
    def end_ms(self) -> int:
        """The first millisecond after the cutoff day (UTC)."""
        day = datetime(self.cutoff.year, self.cutoff.month, self.cutoff.day, tzinfo=UTC)
        return int(day.timestamp() * 1000) + 86_400_000


def _date(text: str, where: str) -> date:
    try:
        return date.fromisoformat(str(text))
    except ValueError:
        raise OperationalError(f"{where}: {text!r} is not a date (YYYY-MM-DD)") from None


def load_cutoffs(path: Path | None = None) -> list[CutoffRule]:
    """The table, in its order (the first matching pattern wins).

    Raises:
        OperationalError: the file is unreadable or an entry lacks a pattern, date or source.
    """
    path = path or resource_path("model_cutoffs.yaml")
    try:
        raw = yamltext.load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yamltext.YAMLError) as exc:
        raise OperationalError(f"cannot read the training cutoffs {path}: {exc}") from exc
    rules: list[CutoffRule] = []
    for number, entry in enumerate(raw.get("cutoffs") or [], start=1):
        if not isinstance(entry, dict) or not {"pattern", "cutoff", "source"} <= set(entry):
            raise OperationalError(f"{path} entry {number} needs pattern, cutoff and source")
        rules.append(CutoffRule(str(entry["pattern"]).lower(),
                                _date(entry["cutoff"], f"{path} entry {number}"),
                                str(entry["source"])))
    return rules


def cutoff_for(
    model: str, rules: list[CutoffRule] | None = None, override: str = ""
) -> TrainingCutoff | None:
    """The cutoff of ``model``: the setting's when given, else the first matching pattern's;
    None for a model the table does not know (nothing can be said)."""
    if override:
        return TrainingCutoff(model, _date(override, "[llm] training_cutoff"), SETTINGS_SOURCE)
    name = model.strip().lower()
    tail = name.rsplit("/", 1)[-1]
    for rule in load_cutoffs() if rules is None else rules:
        if fnmatch.fnmatchcase(name, rule.pattern) or fnmatch.fnmatchcase(tail, rule.pattern):
            return TrainingCutoff(model, rule.cutoff, rule.source)
    return None


def memory_warning(
    cutoff: TrainingCutoff | None, start_ms: int, *, blind: bool = False
) -> str | None:
    """The flag for a run that starts at ``start_ms``, or None when it starts after the cutoff
    (or nothing is known of the model). A blind run is still flagged, saying it was blind: the
    disguise hides names, dates and price levels, not the shape of the market."""
    if cutoff is None or start_ms >= cutoff.end_ms:
        return None
    text = (f"This period starts {ms_to_iso(start_ms)[:10]}, before {cutoff.model}'s training "
            f"cutoff ({cutoff.cutoff.isoformat()}, per {cutoff.source}): the model may remember "
            "what this market did next.")
    if blind:
        return f"{text} The run was {BLIND_RUN}."
    return text + " Run it blind (--blind) or over a later period to measure judgement."


def unknown_cutoff_note(model: str, start_ms: int, *, blind: bool = False) -> str:
    """The note for a model whose cutoff nobody told Kestrel: saying nothing would read as
    "no risk", when a model trained past ``start_ms`` may remember the period all the same."""
    text = (f"Kestrel does not know {model}'s training cutoff: if its training data reaches past "
            f"{ms_to_iso(start_ms)[:10]}, it may remember what this market did next. Set [llm] "
            "training_cutoff = \"YYYY-MM-DD\" in settings.toml from the model's card")
    if blind:
        return f"{text}; the run was {BLIND_RUN}."
    return text + ", or run it blind (--blind)."


def period_warning(
    model: str, start_ms: int, override: str = "", *, blind: bool = False
) -> tuple[str, bool] | None:
    """What a run of ``model`` from ``start_ms`` warns, for the backtest and the eval reports:
    the flag when the period starts before its known cutoff (True), the note when its cutoff
    is unknown (False), None when it starts after a known cutoff."""
    cutoff = cutoff_for(model, override=override)
    if cutoff is None:
        return unknown_cutoff_note(model, start_ms, blind=blind), False
    flag = memory_warning(cutoff, start_ms, blind=blind)
    return None if flag is None else (flag, True)
