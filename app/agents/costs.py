"""What language-model calls cost: the price table, the estimate before a backtest, budgets.

Why a table and not constants: vendors change prices, and a person must be able to correct or add
a model (``resources/prices.yaml``, overridden by the workspace's ``prices.yaml``). Money is
``Decimal`` throughout. An unknown model is *unpriced* (``None``), never silently free; only the
rule engine, replays and servers on this machine cost 0, by an explicit rule on the provider kind.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app import yamltext
from app.agents.llm.port import LLMUsage
from app.domain.errors import OperationalError
from app.domain.numbers import NumberSyntaxError, to_decimal
from app.resources import resource_path

PER_TOKENS = Decimal(1_000_000)
# Provider kinds that never cost money: the deterministic rule engine and a replayed recording.
FREE_PROVIDER_KINDS = frozenset({"rule-engine", "replay"})
_FIELDS = ("input", "cached_input", "output")
_SEPARATORS = ("-", ":", ".", "@")


class PriceFileError(OperationalError):
    """A prices.yaml is unusable; the message names the file, the model and the field."""


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per 1,000,000 tokens."""

    input: Decimal
    cached_input: Decimal
    output: Decimal

    def cost(self, usage: LLMUsage) -> Decimal:
        cached = min(max(usage.cached_input_tokens, 0), max(usage.input_tokens, 0))
        fresh = max(usage.input_tokens, 0) - cached
        total = (fresh * self.input + cached * self.cached_input
                 + max(usage.output_tokens, 0) * self.output)
        return total / PER_TOKENS


def is_local_url(base_url: str | None) -> bool:
    """True for a server on this machine or the private network (Ollama, LM Studio...)."""
    if not base_url:
        return False
    host = (urlsplit(base_url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def is_free(provider: str | None, base_url: str | None = None) -> bool:
    """The provider-kind rule: the rule engine, replays and local servers cost nothing."""
    if provider in FREE_PROVIDER_KINDS:
        return True
    return provider == "openai-compatible" and is_local_url(base_url)


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices per model; ``load`` reads the bundled table plus a workspace override."""

    models: Mapping[str, ModelPrice] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    @classmethod
    def load(cls, override: Path | None = None, *, bundled: Path | None = None) -> PriceTable:
        """The bundled ``resources/prices.yaml``, then ``override`` (if given and present).

        Raises:
            PriceFileError: a file is unreadable or invalid (names the file, model and field).
        """
        base_path = bundled or resource_path("prices.yaml")
        table = cls().merged(base_path, require_complete=True)
        if override is not None and override.is_file():
            table = table.merged(override, require_complete=False)
        return table

    def merged(self, path: Path, *, require_complete: bool) -> PriceTable:
        """This table with ``path``'s models edited in (new models need input and output)."""
        raw = _read_yaml(path)
        models = dict(self.models)
        for name, entry in raw.items():
            key = _normalise(name)
            models[key] = _parse_entry(path, name, entry, models.get(key), require_complete)
        return PriceTable(models, (*self.sources, str(path)))

    def lookup(self, model: str) -> tuple[str, ModelPrice] | None:
        """The table entry for ``model``: exact, else the longest name it starts with."""
        wanted = _normalise(model)
        candidates = [wanted]
        if "/" in wanted:
            candidates.append(wanted.rsplit("/", 1)[1])
        for name in candidates:
            if name in self.models:
                return name, self.models[name]
        best: str | None = None
        for name in candidates:
            for key in self.models:
                extends = name.startswith(key) and name[len(key):][:1] in _SEPARATORS
                if extends and (best is None or len(key) > len(best)):
                    best = key
        return (best, self.models[best]) if best is not None else None

    def price(
        self, model: str, usage: LLMUsage, *, provider: str | None = None,
        base_url: str | None = None,
    ) -> Decimal | None:
        """USD for one call; ``None`` when the model is not in the table (unpriced).

        ``provider``/``base_url`` apply the free rule first: the rule engine, replays and an
        OpenAI-compatible server on this machine or network cost ``Decimal(0)``.
        """
        if is_free(provider, base_url):
            return Decimal(0)
        found = self.lookup(model)
        return None if found is None else found[1].cost(usage)


def _normalise(name: str) -> str:
    return name.strip().lower()


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceFileError(f"{path}: cannot read the price file: {exc}") from exc
    try:
        data = yamltext.load(text) or {}
    except yamltext.YAMLError as exc:
        raise PriceFileError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise PriceFileError(f"{path}: expected a mapping with a 'models' section")
    unknown = set(data) - {"models", "as_of", "currency", "per_tokens"}
    if unknown:
        raise PriceFileError(f"{path}: unknown top-level key(s) {sorted(unknown)}; "
                             "allowed: models, as_of, currency, per_tokens")
    if data.get("currency", "USD") != "USD":
        raise PriceFileError(f"{path}: field 'currency' must be USD, got {data['currency']!r}")
    if int(data.get("per_tokens", 1_000_000)) != 1_000_000:
        raise PriceFileError(f"{path}: field 'per_tokens' must be 1000000 (prices per 1M tokens)")
    models = data.get("models") or {}
    if not isinstance(models, dict):
        raise PriceFileError(f"{path}: 'models' must map model names to prices")
    return models


def _parse_entry(
    path: Path, name: object, entry: object, current: ModelPrice | None, require_complete: bool
) -> ModelPrice:
    where = f"{path}: model {name!r}"
    if not isinstance(name, str) or not name.strip():
        raise PriceFileError(f"{path}: a model name must be a non-empty string, got {name!r}")
    if not isinstance(entry, dict):
        raise PriceFileError(f"{where}: expected a mapping of {', '.join(_FIELDS)}")
    unknown = set(entry) - set(_FIELDS)
    if unknown:
        raise PriceFileError(f"{where}: unknown field(s) {sorted(map(str, unknown))}; "
                             f"allowed: {', '.join(_FIELDS)}")
    values = {key: _decimal(where, key, entry[key]) for key in _FIELDS if key in entry}
    if current is not None and not require_complete:
        return replace(current, **values)
    for key in ("input", "output"):
        if key not in values:
            raise PriceFileError(f"{where}: field {key!r} is missing (USD per 1M tokens)")
    values.setdefault("cached_input", values["input"])
    return ModelPrice(**values)


def _decimal(where: str, key: str, value: object) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise PriceFileError(f"{where}: field {key!r} must be a number, got {value!r}")
    try:
        number = to_decimal(value)
    except NumberSyntaxError as exc:
        raise PriceFileError(f"{where}: field {key!r} must be a number: {exc}") from exc
    if number < 0:
        raise PriceFileError(f"{where}: field {key!r} must be zero or more, got {value!r}")
    return number


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """What a run will cost, before it starts: ``usd`` is ``None`` for an unpriced model."""

    calls: int
    input_tokens: int
    output_tokens: int
    usd: Decimal | None
    model: str
    provider: str | None = None

    def describe(self) -> str:
        tokens = (f"{self.calls:,} model calls, about {self.input_tokens:,} input and "
                  f"{self.output_tokens:,} output tokens with {self.model}")
        if self.usd is None:
            return f"{tokens}; cost unknown: {self.model!r} has no price in prices.yaml"
        return f"{tokens}; estimated cost ${self.usd.quantize(Decimal('0.01'))}"


def estimate_backtest(
    bars: int,
    calls_per_bar: float,
    input_tokens_per_call: int,
    output_tokens_per_call: int,
    model: str,
    prices: PriceTable,
    *,
    provider: str | None = None,
    base_url: str | None = None,
    cached_share: float = 0.0,
) -> CostEstimate:
    """Calls x bars x tokens, priced.

    Args:
        bars: bars the run will step through.
        calls_per_bar: model calls per bar summed over agents (0.25 = one call every 4 bars).
        cached_share: the part of input tokens expected from the prompt cache (0..1); the
            default 0 prices every prompt token in full, an upper bound.
    """
    if bars < 0 or calls_per_bar < 0 or input_tokens_per_call < 0 or output_tokens_per_call < 0:
        raise ValueError("bars, calls per bar and tokens per call must be zero or more")
    if not 0.0 <= cached_share <= 1.0:
        raise ValueError(f"cached_share must be between 0 and 1, got {cached_share}")
    calls = math.ceil(bars * calls_per_bar)
    input_tokens = calls * input_tokens_per_call
    output_tokens = calls * output_tokens_per_call
    usage = LLMUsage(input_tokens, output_tokens, int(input_tokens * cached_share))
    usd = prices.price(model, usage, provider=provider, base_url=base_url)
    return CostEstimate(calls, input_tokens, output_tokens, usd, model, provider)


class BudgetTracker:
    """Spend against an optional limit; the agent loop stops an agent once ``exhausted``."""

    def __init__(self, limit_usd: Decimal | None) -> None:
        if limit_usd is not None and limit_usd < 0:
            raise ValueError(f"a budget cannot be negative, got {limit_usd}")
        self.limit_usd = limit_usd
        self.spent = Decimal(0)

    def add(self, cost: Decimal) -> None:
        if cost < 0:
            raise ValueError(f"a cost cannot be negative, got {cost}")
        self.spent += cost

    @property
    def remaining(self) -> Decimal | None:
        """What is left (never below 0), or ``None`` without a limit."""
        if self.limit_usd is None:
            return None
        return max(self.limit_usd - self.spent, Decimal(0))

    @property
    def exhausted(self) -> bool:
        return self.limit_usd is not None and self.spent >= self.limit_usd

    def would_exceed(self, cost: Decimal) -> bool:
        """True when spending ``cost`` more would pass the limit (check before a known spend)."""
        return self.limit_usd is not None and self.spent + cost > self.limit_usd
