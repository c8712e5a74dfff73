"""What a sweep runs: its ``--grid`` axes, resolved against the strategy or the agent templates,
and the cells they make (every combination, or a seeded random sample of them).

An axis is named as a person types it, and the table's column keeps that name:

- a strategy's parameter (``fast``, ``slow`` for ``sma_cross``), read from the strategy's own
  ``parameters()``, so a new strategy's parameters are sweepable without a list kept here;
- an agent template's setting (``rsi_period``: every chosen template that has it;
  ``AnalystAgent_Trend_v1.rsi_period``: that one), checked against the template's own field;
- ``agents`` (template sets, ``A+B``), ``provider``, ``model``, ``base_url`` (agents only);
- ``data`` (files, ``a.csv+b.csv`` for one account over several symbols), ``symbol`` (the
  ``--data`` file(s) of that symbol) and ``window`` (``START..END``, ISO 8601 or Unix ms).

Numbers take ranges too: ``fast=5:30:5`` is 5, 10, ..., 30 (both ends included). Everything is
checked here, before any cell runs, so a typo is one clear line, not a sweep of failures; a
combination the strategy or a template refuses (``fast`` not below ``slow``) is skipped with the
reason rather than run to fail. Each cell carries its data as bytes (``CellTask.files`` names
them by their SHA-256): a worker needs no file system shared with this machine.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.backtest.sma_cross import SmaCross
from app.domain.clock import ms_to_iso, parse_time
from app.domain.errors import DataFileError, KestrelError
from app.domain.numbers import NumberSyntaxError, parse_decimal, parse_integer, plain
from app.sweep.cells import CellTask

# the strategies a sweep can run, by the name ``kestrel backtest --strategy`` takes
STRATEGY_TYPES: dict[str, Callable[..., Any]] = {"sma_cross": SmaCross}
# settings the backtest itself gives each agent (the data's symbols and interval, the trader)
RUN_SETTINGS = frozenset({"symbols", "interval", "trader_agent_id"})
DATA_AXES = ("data", "symbol", "window")
LLM_AXES = ("provider", "model", "base_url")
AGENT_AXES = ("agents", *LLM_AXES)
PROVIDERS = ("rule-engine", "openai-compatible", "anthropic")
MAX_CELLS = 100_000  # a grid larger than this is a typo or wants --sample
MAX_RANGE_VALUES = 10_000
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")


class SweepInputError(KestrelError, ValueError):
    """A sweep's definition cannot be run; the message says why and what to write instead."""


@dataclass(frozen=True)
class GridSpec:
    """One ``--grid NAME=V1,V2`` (or ``--set NAME=V``) as typed: the name and the raw values."""

    name: str
    raw: tuple[str, ...]
    option: str = "--grid"

    @property
    def text(self) -> str:
        return f"{self.option} {self.name}={','.join(self.raw)}"


def parse_spec(text: str, option: str = "--grid") -> GridSpec:
    """``fast=5,10,20`` -> ``GridSpec("fast", ("5", "10", "20"))``.

    Raises:
        SweepInputError: no ``=``, a bad name, an empty value or a value given twice.
    """
    name, equals, values = text.partition("=")
    name = name.strip()
    example = "e.g. fast=5,10,20" if option == "--grid" else "e.g. slow=50"
    if not equals or not name:
        raise SweepInputError(f"{option} {text!r}: write NAME=VALUE[,VALUE…] ({example})")
    if not _NAME.fullmatch(name):
        raise SweepInputError(
            f"{option} {text!r}: {name!r} is not a parameter name (letters, digits and _, or "
            "TEMPLATE.setting)")
    raw = tuple(v.strip() for v in values.split(","))
    if any(not v for v in raw):
        raise SweepInputError(
            f"{option} {text!r}: an empty value (a stray or doubled comma?); {example}")
    doubled = sorted({v for v in raw if raw.count(v) > 1})
    if doubled:
        raise SweepInputError(f"{option} {text!r}: {', '.join(doubled)} is given twice")
    if option == "--set" and len(raw) != 1:
        raise SweepInputError(f"--set {text!r} fixes one value; sweep several with --grid")
    return GridSpec(name, raw, option)


@dataclass(frozen=True)
class Axis:
    """One swept (or fixed) dimension.

    Attributes:
        kind: "strategy", "setting", "agents", "data", "symbol", "window", "provider",
            "model" or "base_url".
        labels: each value as the table shows it (as typed; a range expanded; a data file by
            name).
        values: each value as a cell uses it.
        targets: a setting's templates.
        shown: a ``--grid`` axis (a table column), not a ``--set`` one.
    """

    name: str
    kind: str
    labels: tuple[str, ...]
    values: tuple[Any, ...]
    targets: tuple[str, ...] = ()
    shown: bool = True
    numeric: bool = False


@dataclass(frozen=True)
class DataFile:
    """A data file read once: its name (symbol and interval come from it), bytes and digest."""

    name: str
    symbol: str
    interval: str
    content: bytes
    digest: str


@dataclass(frozen=True)
class Cell:
    """One backtest of the sweep: what it runs (``task``) and its parameters as the table shows
    them (``labels``: text as typed; ``values``: numbers as numbers, for sorting and the
    heatmap)."""

    task: CellTask
    labels: dict[str, str]
    values: dict[str, Any]


@dataclass(frozen=True)
class Skipped:
    labels: dict[str, str]
    reason: str


@dataclass
class SweepRequest:
    """Everything ``kestrel sweep`` was told (money as ``Decimal``)."""

    data: Sequence[Path] = ()
    grid: Sequence[str] = ()
    fixed: Sequence[str] = ()
    strategy: str = "sma_cross"
    agents: Sequence[str] = ()
    sample: int | None = None
    seed: int = 0
    cash: Decimal = Decimal(10_000)
    fee: Decimal = Decimal("0.001")
    slippage_bps: Decimal = Decimal(2)
    risk: dict[str, Any] | None = None
    allow_gaps: bool = False
    warmup: int = 60
    bars: int | None = None
    llm: dict[str, str] = field(default_factory=dict)  # provider, model, base_url, api_key_name
    blind: bool = False
    templates: Mapping[str, Any] | None = None  # default: the bundled templates


@dataclass
class SweepPlan:
    """A sweep ready to run: its cells, their data (by digest) and its identity.

    ``definition`` is what the manifest keeps and a resumed sweep must match; ``identity`` is a
    digest of it and of every cell's task, so the same grid over changed data is a new sweep.
    """

    definition: dict[str, Any]
    axes: tuple[Axis, ...]
    cells: tuple[Cell, ...]
    skipped: tuple[Skipped, ...]
    blobs: dict[str, bytes]
    identity: str
    grid_size: int

    @property
    def columns(self) -> list[str]:
        return [a.name for a in self.axes if a.shown]


def digest_of(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def canonical(value: Any) -> str:
    """One spelling of a JSON value, whatever the order its mappings were built in."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# -- reading the data ---------------------------------------------------------------------------
def read_data_file(path: Path, *, allow_gaps: bool) -> DataFile:
    """Check a data file as a backtest would, and read its bytes once.

    Raises:
        DataFileError: the loader's own message (file, row, field, or the gap).
    """
    from app.market.csv_loader import load_csv

    path = Path(path)
    loaded = load_csv(path, allow_gaps=True)
    if loaded.gaps and not allow_gaps:
        load_csv(path, allow_gaps=False)  # raises, naming the gap
    content = path.read_bytes()
    return DataFile(path.name, loaded.series.symbol, loaded.series.interval, content,
                    digest_of(content))


def trim(data: DataFile, start_ms: int, end_ms: int, warmup_rows: int) -> DataFile:
    """The candles of ``[start_ms, end_ms]`` (and ``warmup_rows`` before it), byte for byte,
    under the same file name (its symbol and interval come from the name).

    Raises:
        SweepInputError: no candle of the file lies in the window.
    """
    lines = data.content.decode("utf-8").splitlines(keepends=True)
    header, rows = lines[0], [r for r in lines[1:] if r.strip()]
    stamps = [int(r.split(",", 1)[0]) for r in rows]
    first = next((i for i, t in enumerate(stamps) if t >= start_ms), len(stamps))
    last = max((i for i, t in enumerate(stamps) if t <= end_ms), default=-1)
    if last < first:
        raise SweepInputError(
            f"{data.name} has no candle between {ms_to_iso(start_ms)} and {ms_to_iso(end_ms)} "
            f"(it runs from {ms_to_iso(stamps[0])} to {ms_to_iso(stamps[-1])})")
    content = (header + "".join(rows[max(0, first - warmup_rows):last + 1])).encode("utf-8")
    return DataFile(data.name, data.symbol, data.interval, content, digest_of(content))


# -- axes ---------------------------------------------------------------------------------------
def _expand(spec: GridSpec, token: str, kind: type) -> list[Any]:
    """A number, or a ``START:STOP[:STEP]`` range of them (both ends included)."""
    parse = parse_integer if kind is int else parse_decimal
    parts = token.split(":")
    try:
        if len(parts) == 1:
            return [parse(token)]
        if len(parts) not in (2, 3):
            raise NumberSyntaxError(token)
        start, stop = parse(parts[0]), parse(parts[1])
        step = parse(parts[2]) if len(parts) == 3 else (1 if kind is int else Decimal(1))
    except NumberSyntaxError:
        what = "whole numbers" if kind is int else "numbers"
        raise SweepInputError(
            f"{spec.text}: {token!r} is not a number; {spec.name} takes {what} or ranges "
            "START:STOP[:STEP], e.g. 5:30:5") from None
    if step <= 0 or stop < start:
        raise SweepInputError(
            f"{spec.text}: the range {token!r} is empty; write START:STOP:STEP with START <= "
            "STOP and a positive STEP")
    count = int((stop - start) / step) + 1
    if count > MAX_RANGE_VALUES:
        raise SweepInputError(f"{spec.text}: the range {token!r} holds {count:,} values; at "
                              f"most {MAX_RANGE_VALUES:,}")
    return [start + step * i for i in range(count)]


def _numbers(spec: GridSpec, kind: type) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    values: list[Any] = []
    for token in spec.raw:
        values.extend(_expand(spec, token, kind))
    seen: set[Any] = set()
    doubled = [v for v in values if v in seen or seen.add(v)]  # type: ignore[func-returns-value]
    if doubled:
        raise SweepInputError(f"{spec.text}: {doubled[0]} is given twice (ranges overlap?)")
    labels = tuple(plain(v) if isinstance(v, Decimal) else str(v) for v in values)
    return labels, tuple(values)


def _strategy_axis(spec: GridSpec, strategy: str, defaults: Mapping[str, Any]) -> Axis:
    default = defaults[spec.name]
    if isinstance(default, bool) or not isinstance(default, int | float | Decimal):
        raise SweepInputError(f"{spec.text}: {strategy}'s {spec.name} is not a number; only "
                              "numeric strategy parameters are swept")
    kind = int if isinstance(default, int) else Decimal
    labels, values = _numbers(spec, kind)
    if isinstance(default, float):
        values = tuple(float(v) for v in values)
    return Axis(spec.name, "strategy", labels, values, shown=spec.option == "--grid",
                numeric=True)


def _setting_axis(spec: GridSpec, templates: Mapping[str, Any], chosen: Sequence[str]) -> Axis:
    """A template setting: its targets, and each value checked against each target's field."""
    from app.agents.templates import coerce_value, to_json_safe

    owner, _, setting = spec.name.rpartition(".")
    if owner:
        if owner not in chosen:
            raise SweepInputError(
                f"{spec.text}: {owner} is not among the sweep's agent templates "
                f"({', '.join(chosen)})")
        if setting not in templates[owner].config or setting in RUN_SETTINGS:
            raise SweepInputError(_unknown_setting(spec, [owner], templates))
        targets = [owner]
    else:
        targets = [t for t in chosen
                   if setting in templates[t].config and setting not in RUN_SETTINGS]
        if not targets:
            raise SweepInputError(_unknown_setting(spec, chosen, templates))
    first = templates[targets[0]].config[setting]
    tokens: list[Any]
    if first.type == "integer":
        _labels, tokens = _numbers(spec, int)
    elif first.type == "decimal":
        _labels, tokens = _numbers(spec, Decimal)
    else:
        tokens = list(spec.raw)
    values: list[dict[str, Any]] = []
    labels: list[str] = []
    for token in tokens:
        per_template: dict[str, Any] = {}
        for target in targets:
            try:
                coerced = coerce_value(templates[target].config[setting], token)
            except ValueError as exc:
                raise SweepInputError(f"{spec.text}: {target}'s {setting} {exc}") from None
            per_template[target] = to_json_safe({setting: coerced})[setting]
        values.append(per_template)
        shown = per_template[targets[0]]
        labels.append(str(shown).lower() if isinstance(shown, bool) else str(shown))
    numeric = first.type in ("integer", "decimal")
    return Axis(spec.name, "setting", tuple(labels), tuple(values), tuple(targets),
                shown=spec.option == "--grid", numeric=numeric)


def _unknown_setting(spec: GridSpec, chosen: Sequence[str], templates: Mapping[str, Any]) -> str:
    settings = sorted({name for t in chosen for name in templates[t].config
                       if name not in RUN_SETTINGS})
    setting = spec.name.rpartition(".")[2]
    return (f"{spec.text}: no agent template of the sweep ({', '.join(chosen)}) has a setting "
            f"{setting!r}{_did_you_mean(setting, [*settings, *AGENT_AXES, *DATA_AXES])}; "
            f"their settings: {', '.join(settings)}; a sweep "
            f"also takes {', '.join((*AGENT_AXES, *DATA_AXES))}")


def _did_you_mean(name: str, known: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _window(spec: GridSpec, token: str) -> tuple[int, int]:
    start, dots, end = token.partition("..")
    if not dots:
        raise SweepInputError(f"{spec.text}: {token!r} is not a window; write START..END, e.g. "
                              "2019-10-01..2019-10-15")
    try:
        start_ms, end_ms = parse_time(start), parse_time(end)
    except ValueError as exc:
        raise SweepInputError(f"{spec.text}: {exc}") from None
    if end_ms <= start_ms:
        raise SweepInputError(f"{spec.text}: the window {token!r} ends before it starts")
    return start_ms, end_ms


# -- planning -----------------------------------------------------------------------------------
class _Planner:
    def __init__(self, request: SweepRequest) -> None:
        self.r = request
        self.specs = [parse_spec(text) for text in request.grid]
        self.specs += [parse_spec(text, "--set") for text in request.fixed]
        names = [s.name for s in self.specs]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise SweepInputError(f"{doubled[0]} is given twice (in --grid or --set); give all "
                                  "its values in one --grid NAME=V1,V2")
        if not request.grid:
            raise SweepInputError("a sweep needs at least one --grid NAME=V1,V2,… (e.g. "
                                  "--grid fast=5,10,20)")
        by_name = {s.name: s for s in self.specs}
        self.agents_spec = by_name.get("agents")
        self.agent_mode = bool(request.agents) or self.agents_spec is not None
        if request.agents and self.agents_spec is not None:
            raise SweepInputError("give the agent templates either with --agents or with "
                                  "--grid agents=A+B,C+D, not both")
        if not self.agent_mode:
            if request.strategy not in STRATEGY_TYPES:
                raise SweepInputError(
                    f"unknown strategy {request.strategy!r}; known: "
                    f"{', '.join(sorted(STRATEGY_TYPES))} (or --agents TEMPLATE…)")
            misplaced = [n for n in names if n in AGENT_AXES]
            if misplaced:
                raise SweepInputError(f"{misplaced[0]} is swept only with --agents")
        if "data" in by_name and request.data:
            raise SweepInputError("give the data either with --data or with --grid data=…, "
                                  "not both")
        if "data" not in by_name and not request.data:
            raise SweepInputError("a sweep needs --data FILE (or --grid data=A.csv,B.csv)")
        if "symbol" in by_name and "data" in by_name:
            raise SweepInputError("--grid symbol=… picks among the --data files; with "
                                  "--grid data=… name the files themselves")
        self.templates: Mapping[str, Any] = {}
        if self.agent_mode:
            self.templates = request.templates if request.templates is not None else \
                _bundled_templates()

    # each kind of axis
    def template_sets(self) -> list[tuple[str, ...]]:
        if self.agents_spec is None:
            return [tuple(self.r.agents)]
        return [tuple(t.strip() for t in raw.split("+")) for raw in self.agents_spec.raw]

    def check_templates(self, sets: Sequence[tuple[str, ...]]) -> None:
        from app.domain.agents import AgentRole

        known = self.templates
        for templates in sets:
            unknown = [t for t in templates if t not in known]
            if unknown:
                raise SweepInputError(
                    f"unknown agent template(s) {', '.join(unknown)}; known: "
                    f"{', '.join(sorted(known))}")
            if len(set(templates)) != len(templates):
                raise SweepInputError(f"{'+'.join(templates)} names a template twice")
            if not any(known[t].role is AgentRole.ANALYST for t in templates):
                raise SweepInputError(
                    f"{'+'.join(templates)}: a backtest needs at least one analyst template to "
                    "produce signals")

    def axis(self, spec: GridSpec, files: Sequence[DataFile]) -> Axis:
        shown = spec.option == "--grid"
        name = spec.name
        if name == "agents":
            sets = self.template_sets()
            return Axis(name, "agents", tuple("+".join(s) for s in sets), tuple(sets),
                        shown=shown)
        if name == "data":
            values = []
            for raw in spec.raw:
                group = tuple(self.read(Path(p.strip())) for p in raw.split("+"))
                _check_names(group)
                values.append(group)
            return Axis(name, "data", tuple("+".join(f.name for f in g) for g in values),
                        tuple(values), shown=shown)
        if name == "symbol":
            symbols = sorted({f.symbol for f in files})
            for raw in spec.raw:
                if raw not in symbols:
                    raise SweepInputError(
                        f"{spec.text}: no --data file holds {raw}; the files hold "
                        f"{', '.join(symbols)}")
            return Axis(name, "symbol", spec.raw, spec.raw, shown=shown)
        if name == "window":
            return Axis(name, "window", spec.raw, tuple(_window(spec, t) for t in spec.raw),
                        shown=shown)
        if name in LLM_AXES:
            if name == "provider":
                bad = [v for v in spec.raw if v not in PROVIDERS]
                if bad:
                    raise SweepInputError(f"{spec.text}: unknown provider {bad[0]!r}; known: "
                                          f"{', '.join(PROVIDERS)}")
            return Axis(name, name, spec.raw, spec.raw, shown=shown)
        if not self.agent_mode:
            strategy = self.r.strategy
            defaults = STRATEGY_TYPES[strategy]().parameters()
            if name not in defaults:
                raise SweepInputError(
                    f"{spec.text}: {strategy} has no parameter {name!r}"
                    f"{_did_you_mean(name, [*defaults, *DATA_AXES])}; its parameters: "
                    f"{', '.join(defaults)}; a sweep also takes {', '.join(DATA_AXES)} (and, "
                    f"with --agents, the templates' settings and {', '.join(AGENT_AXES)})")
            return _strategy_axis(spec, strategy, defaults)
        chosen = sorted({t for s in self.template_sets() for t in s})
        return _setting_axis(spec, self.templates, chosen)

    def read(self, path: Path) -> DataFile:
        try:
            return read_data_file(path, allow_gaps=self.r.allow_gaps)
        except DataFileError as exc:
            raise SweepInputError(f"bad data file: {exc}") from None

    def plan(self) -> SweepPlan:
        if self.agent_mode:
            self.check_templates(self.template_sets())
        files = [self.read(Path(p)) for p in self.r.data]
        _check_names(files)
        ordered = sorted(self.specs, key=lambda s: s.option != "--grid")  # grid first
        axes = tuple(self.axis(spec, files) for spec in ordered)
        if self.agent_mode:
            self._check_llm(axes)
            self._check_setting_targets(axes)
        size = math.prod(len(a.values) for a in axes)
        if self.r.sample is None and size > MAX_CELLS:
            raise SweepInputError(
                f"the grid makes {size:,} cells; at most {MAX_CELLS:,} run as a grid: sample "
                "some with --sample N --seed S")
        blobs: dict[str, bytes] = {}
        cells: list[Cell] = []
        skipped: list[Skipped] = []
        windows_cache: dict[tuple[str, int, int], DataFile] = {}
        width = max(4, len(str(size if self.r.sample is None else self.r.sample)))
        for combo in self._combos(axes, size):
            labels = {a.name: a.labels[i] for a, i in zip(axes, combo, strict=True) if a.shown}
            chosen = {a.name: a.values[i] for a, i in zip(axes, combo, strict=True)}
            settings = {a.name: a for a in axes}
            try:
                task = self._task(f"c{len(cells) + 1:0{width}d}", chosen, settings, files,
                                  blobs, windows_cache)
            except _Refused as exc:
                skipped.append(Skipped(labels, str(exc)))
                continue
            values = {a.name: _typed(a, a.labels[i]) for a, i in zip(axes, combo, strict=True)
                      if a.shown}
            cells.append(Cell(task, labels, values))
            if self.r.sample is not None and len(cells) >= self.r.sample:
                break
        if not cells:
            reason = skipped[0].reason if skipped else "the grid is empty"
            raise SweepInputError(f"no combination of the grid can run: {reason}")
        definition = self._definition(axes, files, blobs)
        identity = digest_of(canonical(
            {"definition": definition, "cells": [c.task.as_json() for c in cells]}).encode())
        return SweepPlan(definition, axes, tuple(cells), tuple(skipped), blobs, identity, size)

    def _combos(self, axes: Sequence[Axis], size: int) -> Iterator[tuple[int, ...]]:
        """Every combination in grid order, or a seeded random order of them (a sample takes
        the first N that run; the cells are then in grid order, so a table reads the same)."""
        radices = [len(a.values) for a in axes]
        if self.r.sample is None:
            yield from itertools.product(*(range(n) for n in radices))
            return
        rng = random.Random(self.r.seed)  # noqa: S311 - a reproducible draw, not a secret
        if size <= MAX_CELLS:
            order = list(range(size))
            rng.shuffle(order)
        else:  # too many to shuffle: distinct random draws, as many as could be needed
            drawn: set[int] = set()
            while len(drawn) < min(size, self.r.sample * 20):
                drawn.add(rng.randrange(size))
            order = list(drawn)
            rng.shuffle(order)
        picked: list[int] = []
        for index in order:
            combo = _decode(index, radices)
            if self._runs(axes, combo):
                picked.append(index)
            if len(picked) >= self.r.sample:
                break
        for index in sorted(picked):
            yield _decode(index, radices)

    def _runs(self, axes: Sequence[Axis], combo: tuple[int, ...]) -> bool:
        """Whether a combination would make a cell (without reading data for it)."""
        chosen = {a.name: a.values[i] for a, i in zip(axes, combo, strict=True)}
        try:
            self._check_combination(chosen, {a.name: a for a in axes})
        except _Refused:
            return False
        return True

    def _check_combination(self, chosen: Mapping[str, Any], axes: Mapping[str, Axis]
                           ) -> tuple[dict[str, Any], tuple[str, ...], dict[str, dict[str, Any]]]:
        """The strategy's parameters, the templates and their settings of one combination.

        Raises:
            _Refused: the strategy or a template refuses the combination (the reason).
        """
        if not self.agent_mode:
            strategy = self.r.strategy
            params = {n: v for n, v in chosen.items() if axes[n].kind == "strategy"}
            try:
                built = STRATEGY_TYPES[strategy](**params)
            except (ValueError, TypeError) as exc:
                raise _Refused(str(exc)) from None
            return dict(built.parameters()), (), {}
        from app.agents.templates import validate_config
        from app.domain.errors import InvalidParameterError

        templates = tuple(chosen["agents"]) if "agents" in chosen else tuple(self.r.agents)
        settings: dict[str, dict[str, Any]] = {}
        for name, per_template in chosen.items():
            axis = axes[name]
            if axis.kind != "setting":
                continue
            setting = name.rpartition(".")[2]
            for template, value in per_template.items():
                if template in templates:
                    settings.setdefault(template, {})[setting] = value
        for template in templates:
            try:
                validate_config(self.templates[template], settings.get(template, {}))
            except InvalidParameterError as exc:
                message = str(exc).replace("initial_config_json field", "setting")
                raise _Refused(f"{template}: {message}") from None
        return {}, templates, settings

    def _task(self, cell_id: str, chosen: Mapping[str, Any], axes: Mapping[str, Axis],
              files: Sequence[DataFile], blobs: dict[str, bytes],
              windows: dict[tuple[str, int, int], DataFile]) -> CellTask:
        params, templates, settings = self._check_combination(chosen, axes)
        group: Sequence[DataFile] = chosen.get("data", files)
        if "symbol" in chosen:
            group = [f for f in group if f.symbol == chosen["symbol"]]
        if "window" in chosen:
            start_ms, end_ms = chosen["window"]
            warmup = self.r.warmup if self.agent_mode else 0
            trimmed = []
            for data in group:
                key = (data.digest, start_ms, end_ms)
                if key not in windows:
                    windows[key] = trim(data, start_ms, end_ms, warmup)
                trimmed.append(windows[key])
            group = trimmed
        for data in group:
            blobs.setdefault(data.digest, data.content)
        common: dict[str, Any] = {
            "cell_id": cell_id, "files": tuple((f.name, f.digest) for f in group),
            "cash": plain(self.r.cash), "fee": plain(self.r.fee),
            "slippage_bps": plain(self.r.slippage_bps), "allow_gaps": self.r.allow_gaps,
        }
        if not self.agent_mode:
            return CellTask(kind="strategy", strategy=self.r.strategy, parameters=params,
                            risk=self.r.risk, **common)
        llm = {k: v for k, v in self.r.llm.items() if v}
        for name in LLM_AXES:
            if name in chosen:
                llm[name] = chosen[name]
        return CellTask(kind="agents", templates=templates, settings=settings,
                        warmup=self.r.warmup, bars=self.r.bars, llm=llm, blind=self.r.blind,
                        **common)

    def _check_llm(self, axes: Sequence[Axis]) -> None:
        names = {a.name for a in axes}
        provider = self.r.llm.get("provider") or ""
        if names & {"model", "base_url"} and "provider" not in names and not provider:
            raise SweepInputError("sweeping model or base_url needs a provider: add --provider "
                                  "openai-compatible (or anthropic), or --grid provider=…")

    def _check_setting_targets(self, axes: Sequence[Axis]) -> None:
        for axis in axes:
            if axis.kind != "setting":
                continue
            for templates in self.template_sets():
                if not set(axis.targets) & set(templates):
                    raise SweepInputError(
                        f"--grid {axis.name}: none of {'+'.join(templates)} has that setting; "
                        f"sweep it with the templates that do ({', '.join(axis.targets)})")

    def _definition(self, axes: Sequence[Axis], files: Sequence[DataFile],
                    blobs: Mapping[str, bytes]) -> dict[str, Any]:
        r = self.r
        definition: dict[str, Any] = {
            "version": 1,
            "kind": "agents" if self.agent_mode else "strategy",
            "grid": [{"name": a.name, "values": list(a.labels)} for a in axes if a.shown],
            "fixed": {a.name: a.labels[0] for a in axes if not a.shown},
            "sample": r.sample, "seed": r.seed if r.sample is not None else None,
            "data": {f.name: f.digest for f in files},
            "cash": plain(r.cash), "fee": plain(r.fee), "slippage_bps": plain(r.slippage_bps),
            "allow_gaps": r.allow_gaps,
        }
        if self.agent_mode:
            definition.update({
                "templates": list(r.agents), "warmup": r.warmup, "bars": r.bars,
                "llm": {k: v for k, v in r.llm.items() if v}, "blind": r.blind,
            })
        else:
            definition.update({"strategy": r.strategy, "risk": r.risk})
        return definition


class _Refused(Exception):  # noqa: N818 - a combination the strategy or a template refuses
    pass


def _bundled_templates() -> Mapping[str, Any]:
    from app.agents.template_files import load_templates

    return load_templates()


def _check_names(files: Sequence[DataFile]) -> None:
    names = [f.name for f in files]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise SweepInputError(f"two data files of one backtest are named {doubled[0]}; the "
                              "name says the symbol and interval, so give each its own")


def _decode(index: int, radices: Sequence[int]) -> tuple[int, ...]:
    """The combination at ``index`` of the product, the first axis the most significant."""
    digits = []
    for radix in reversed(radices):
        index, digit = divmod(index, radix)
        digits.append(digit)
    return tuple(reversed(digits))


def _typed(axis: Axis, label: str) -> Any:
    """A label as a number when the axis is numeric (sorting, heatmap), else the label."""
    if not axis.numeric:
        return label
    number = Decimal(label)
    return int(number) if number == number.to_integral_value() and "." not in label \
        else float(number)


def plan_sweep(request: SweepRequest) -> SweepPlan:
    """Check a sweep's definition and make its cells.

    Raises:
        SweepInputError: one line saying what is wrong (bad ``--grid`` syntax, an unknown
            parameter, strategy or template, a value out of a setting's range, unusable data).
    """
    return _Planner(request).plan()
