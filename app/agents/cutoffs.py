"""Known training cutoffs of language models, and the warning for a run over a period before one.

Why: a model asked to trade a market it was trained on may remember what came next; its backtest
then measures memory, not judgement, and its decisions on a replay of that market are no test of
it either. The bundled table (``resources/model_cutoffs.yaml``) maps model-name patterns to the
last day the vendor says the training data covers, with the source, or to ``unknown`` for a
family whose vendor publishes none (the warning then says so); the ``[llm] training_cutoff``
setting overrides it for the model the person runs.

One function words the warning for every place a person meets it (``period_warning``, and
``period_warnings`` for the names a server answered with): ``kestrel eval`` and ``kestrel
backtest --agents`` in their reports, the desk's banner, ``kestrel run`` and ``kestrel chat`` on
the offline replay. Only the closing advice differs: a backtest or an eval can run blind, the
replay of the desk and the terminal cannot.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache
from pathlib import Path

from app import yamltext
from app.domain.clock import ms_to_iso
from app.domain.errors import OperationalError
from app.resources import resource_path

SETTINGS_SOURCE = "your settings ([llm] training_cutoff)"
BLIND_RUN = "blind: the model saw neither the symbol, nor the dates, nor the price level"
UNKNOWN = "unknown"  # the table's word for a family whose vendor publishes no cutoff


@dataclass(frozen=True, slots=True)
class CutoffRule:
    """One entry of the table; ``cutoff`` None: the family is known, its cutoff is not."""

    pattern: str
    cutoff: date | None
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
        OperationalError: the file is unreadable or an entry lacks a pattern, a date (or
            ``unknown``) or a source.
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
        cutoff = str(entry["cutoff"])
        rules.append(CutoffRule(
            str(entry["pattern"]).lower(),
            None if cutoff == UNKNOWN else _date(cutoff, f"{path} entry {number}"),
            str(entry["source"])))
    return rules


@lru_cache(maxsize=1)
def _bundled() -> tuple[CutoffRule, ...]:
    """The bundled table, read once: the desk's banner asks whenever a new name answers."""
    return tuple(load_cutoffs())


def rule_for(model: str, rules: Iterable[CutoffRule] | None = None) -> CutoffRule | None:
    """The first entry whose pattern matches ``model`` (whole, or after its last "/"), if any."""
    name = model.strip().lower()
    tail = name.rsplit("/", 1)[-1]
    for rule in _bundled() if rules is None else rules:
        if fnmatch.fnmatchcase(name, rule.pattern) or fnmatch.fnmatchcase(tail, rule.pattern):
            return rule
    return None


def cutoff_for(
    model: str, rules: list[CutoffRule] | None = None, override: str = ""
) -> TrainingCutoff | None:
    """The cutoff of ``model``: the setting's when given, else the first matching pattern's;
    None for a model the table does not know, or knows to have no published cutoff (nothing
    can be said of its period; ``unknown_cutoff_note`` says so)."""
    if override:
        return TrainingCutoff(model, _date(override, "[llm] training_cutoff"), SETTINGS_SOURCE)
    rule = rule_for(model, rules)
    if rule is None or rule.cutoff is None:
        return None
    return TrainingCutoff(model, rule.cutoff, rule.source)


def memory_warning(
    cutoff: TrainingCutoff | None, start_ms: int, *, blind: bool = False,
    can_run_blind: bool = True,
) -> str | None:
    """The flag for a run that starts at ``start_ms``, or None when it starts after the cutoff
    (or nothing is known of the model). A blind run is still flagged, saying it was blind: the
    disguise hides names, dates and price levels, not the shape of the market.

    Args:
        can_run_blind: the run could be repeated blind (a backtest, an eval); the desk's and the
            terminal's replay cannot, so the advice is a later period alone.
    """
    if cutoff is None or start_ms >= cutoff.end_ms:
        return None
    text = (f"This period starts {ms_to_iso(start_ms)[:10]}, before {cutoff.model}'s training "
            f"cutoff ({cutoff.cutoff.isoformat()}, per {cutoff.source}): the model may remember "
            "what this market did next.")
    if blind:
        return f"{text} The run was {BLIND_RUN}."
    if not can_run_blind:
        return text + " Replay data from after that day to see its judgement, not its memory."
    return text + " Run it blind (--blind) or over a later period to measure judgement."


def unknown_cutoff_note(
    model: str, start_ms: int, *, blind: bool = False, why: str = "", can_run_blind: bool = True,
) -> str:
    """The note for a model whose cutoff nobody told Kestrel: saying nothing would read as
    "no risk", when a model trained past ``start_ms`` may remember the period all the same.
    ``why``: what the table knows of its family (that its vendor publishes no cutoff)."""
    text = (f"Kestrel does not know {model}'s training cutoff: if its training data reaches past "
            f"{ms_to_iso(start_ms)[:10]}, it may remember what this market did next.")
    if why:
        text += f" {why[0].upper()}{why[1:]}."
    text += " Set [llm] training_cutoff = \"YYYY-MM-DD\" in settings.toml from the model's card"
    if blind:
        return f"{text}; the run was {BLIND_RUN}."
    if not can_run_blind:
        return text + "."
    return text + ", or run it blind (--blind)."


def period_warning(
    model: str, start_ms: int, override: str = "", *, blind: bool = False,
    can_run_blind: bool = True,
) -> tuple[str, bool] | None:
    """What a run of ``model`` from ``start_ms`` warns, in the reports, the banner and the
    terminal alike: the flag when the period starts before its known cutoff (True), the note
    when its cutoff is unknown (False), None when it starts after a known cutoff."""
    cutoff = cutoff_for(model, override=override)
    if cutoff is None:
        rule = rule_for(model)
        why = rule.source if rule is not None else ""
        return unknown_cutoff_note(model, start_ms, blind=blind, why=why,
                                   can_run_blind=can_run_blind), False
    flag = memory_warning(cutoff, start_ms, blind=blind, can_run_blind=can_run_blind)
    return None if flag is None else (flag, True)


def checked_names(asked: str, answered: Iterable[str] = ()) -> list[str]:
    """The names a model's cutoff is looked up under: those the server answered with that the
    table knows (the server's word on which model ran: an alias such as "house-default" answers
    as "gpt-4o-mini-2024-07-18", the dated model behind it), else the name asked for (a server
    that answers "default" tells nothing of the model)."""
    known = sorted({name for name in answered if name and rule_for(name) is not None})
    return known or [asked]


def period_warnings(
    asked: str, answered: Iterable[str], start_ms: int, override: str = "", *,
    blind: bool = False, can_run_blind: bool = True,
) -> list[tuple[str, bool]]:
    """``period_warning`` for each name ``checked_names`` gives, the flags first."""
    warned = [w for name in checked_names(asked, answered)
              if (w := period_warning(name, start_ms, override, blind=blind,
                                      can_run_blind=can_run_blind)) is not None]
    return sorted(warned, key=lambda w: not w[1])
