"""Agent templates: the YAML files that say what kind of agent can be created and how it may act.

A template names the agent's role, the tool permission groups it is granted, its LLM provider and
model, its limits (steps per task, budget, output tokens) and the schema of its configuration.
The schema serves three readers at once: ``create_new_agent_instance`` validates an
``initial_config_json`` against it, the GUI generates its "create agent" form from it, and the
prompt shows it to the Orchestrator. The models here are strict (unknown keys refused) because a
typo in a template (``permisions:``) would otherwise silently grant or withhold tools; reading the
YAML files and reporting their problems is ``app.agents.template_files``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from app.domain.agents import AgentRole
from app.domain.errors import InvalidParameterError
from app.domain.numbers import NumberSyntaxError, plain, to_decimal
from app.tools.spec import Permission

FieldType = Literal["string", "integer", "decimal", "boolean", "symbols", "choice"]
ProviderKind = Literal["rule-engine", "openai-compatible", "anthropic", "replay"]

_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_SYMBOL = re.compile(r"[A-Z0-9][A-Z0-9._-]{0,19}(/[A-Z0-9][A-Z0-9._-]{0,19}(:[A-Z0-9]{1,20})?)?")
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
_CONSTRAINT = re.compile(r"\s*([a-z][a-z0-9_]*)\s*(<=|<)\s*([a-z][a-z0-9_]*)\s*")
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")  # the prompt's placeholder syntax: never in template text
_TRUE, _FALSE = {"true", "yes", "1"}, {"false", "no", "0"}
_NUMERIC = ("integer", "decimal")
SYMBOL_KEY = "{symbol_key}"  # in a task_data note path: the task's symbol as a folder name
DEFAULT_CONTEXT_TOKENS = 32_000

# the rules: an Analyst cannot create orders; only the Orchestrator creates agents
ROLE_FORBIDDEN: dict[AgentRole, frozenset[Permission]] = {
    AgentRole.ANALYST: frozenset({Permission.TRADE, Permission.AGENTS}),
    AgentRole.TRADER: frozenset({Permission.AGENTS}),
}
# config fields each role's prompt and rule engine rely on, with the types they must have
ROLE_FIELDS: dict[AgentRole, dict[str, tuple[str, ...]]] = {
    AgentRole.ANALYST: {
        "symbols": ("symbols",), "interval": ("choice", "string"), "trader_agent_id": ("string",),
    },
    AgentRole.TRADER: {"symbols": ("symbols",)},
}


def _decimal(value: Any) -> Decimal:
    """A finite Decimal from an int, a decimal string or a float (via its shortest repr)."""
    try:
        return to_decimal(value)
    except NumberSyntaxError as exc:
        raise ValueError(str(exc)) from None



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProviderChoice(_Strict):
    """Which provider answers for the agent. ``api_key_name`` is a keyring entry, never a key."""

    kind: ProviderKind
    model: StrictStr = Field(min_length=1, max_length=200)
    base_url: StrictStr | None = Field(default=None, pattern=r"^https?://\S+$", max_length=500)
    api_key_name: StrictStr | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_.:-]{1,100}$"
    )

    @field_validator("api_key_name")
    @classmethod
    def _not_a_key(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith(("sk-", "sk_")) or len(value) >= 40):
            raise ValueError(
                "this looks like an API key itself: keep the key in the system keyring and give "
                "the name of its entry here (e.g. openai.api_key)"
            )
        return value


class Limits(_Strict):
    """Per-agent limits: tool steps per task, lifetime budget in USD, tokens per answer, and the
    context budget: the tokens one request may hold (system prompt and conversation) before
    older tool results are summarised (``app.agents.context_budget``)."""

    max_steps: StrictInt = Field(ge=1, le=200)
    budget_usd: Decimal | None = None
    max_output_tokens: StrictInt = Field(default=2048, ge=64, le=200_000)
    context_tokens: StrictInt = Field(default=DEFAULT_CONTEXT_TOKENS, ge=4_000, le=2_000_000)

    @field_validator("budget_usd", mode="before")
    @classmethod
    def _money(cls, value: Any) -> Decimal | None:
        if value is None:
            return None
        if isinstance(value, float):
            raise ValueError(f'write money as a quoted decimal string, e.g. "{value}"')
        number = _decimal(value)
        if number < 0:
            raise ValueError(f"must not be negative, got {plain(number)}")
        return number


class ConfigField(_Strict):
    """One field of a template's configuration.

    ``minimum``/``maximum`` bound numbers; for ``string`` they bound its length and for ``symbols``
    the number of symbols. A field whose default is null is optional and may stay unset.
    """

    type: FieldType
    description: StrictStr = Field(min_length=1, max_length=500)
    default: Any = None
    label: StrictStr | None = Field(default=None, min_length=1, max_length=60)
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    choices: tuple[StrictStr, ...] | None = None

    @field_validator("minimum", "maximum", mode="before")
    @classmethod
    def _bound(cls, value: Any) -> Decimal | None:
        return None if value is None else _decimal(value)

    @model_validator(mode="after")
    def _consistent(self) -> ConfigField:
        if self.type == "choice":
            if not self.choices:
                raise ValueError("a choice field needs a non-empty 'choices' list")
            if len(set(self.choices)) != len(self.choices):
                raise ValueError("'choices' lists a value twice")
        elif self.choices is not None:
            raise ValueError(f"'choices' is only for choice fields, not {self.type}")
        if self.type in ("boolean", "choice") and (self.minimum, self.maximum) != (None, None):
            raise ValueError(f"a {self.type} field takes no minimum or maximum")
        for name, bound in (("minimum", self.minimum), ("maximum", self.maximum)):
            whole = bound is None or bound == bound.to_integral_value()
            if self.type in ("integer", "string", "symbols") and not whole:
                raise ValueError(f"'{name}' of a {self.type} field must be a whole number")
            if self.type in ("string", "symbols") and bound is not None and bound < 0:
                raise ValueError(f"'{name}' of a {self.type} field must not be negative")
        if None not in (self.minimum, self.maximum) and self.minimum > self.maximum:  # type: ignore[operator]
            raise ValueError(
                f"minimum {plain(self.minimum)} is above maximum {plain(self.maximum)}"  # type: ignore[arg-type]
            )
        try:
            coerce_value(self, self.default)
        except ValueError as exc:
            raise ValueError(f"the default {self.default!r} {exc}") from None
        return self


class IndicatorWanted(_Strict):
    """One indicator a task carries: its name and parameters, each a number or the name of a
    numeric config field (``length: rsi_period``), so it follows the agent's configuration."""

    name: StrictStr = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,31}$")
    params: dict[StrictStr, StrictStr | StrictInt | Decimal] = Field(default_factory=dict)


class TaskData(_Strict):
    """The data a task carries into the agent's first message, fetched for it with the same tools
    at the task's market time (``app.agents.task_data``), so a model can decide in a few calls
    instead of one call per datum.

    ``notes`` are memory files; ``{symbol_key}`` in a path stands for the task's symbol as its
    folder name (``symbols/{symbol_key}/trades.yaml``). Market data, indicators and positions are
    for the task's ``symbol`` (its payload's, or the agent's only configured symbol).
    ``notes_as`` is how the notes travel: TEXT (the files' text, which a model reads without
    decoding, at half the tokens of base64) or BASE64 (the seed's read, for comparison).
    """

    task_types: tuple[StrictStr, ...] = Field(min_length=1)
    snapshot: bool = False
    klines: StrictInt = Field(default=0, ge=0, le=1000)
    indicators: tuple[IndicatorWanted, ...] = ()
    indicator_values: StrictInt = Field(default=3, ge=1, le=50)
    notes: tuple[StrictStr, ...] = ()
    notes_as: Literal["TEXT", "BASE64"] = "TEXT"
    positions: bool = False
    account: bool = False
    agents: bool = False

    @field_validator("notes")
    @classmethod
    def _paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            left = path.replace(SYMBOL_KEY, "")
            if _PLACEHOLDER.search(left) or not left.strip() or len(path) > 300:
                raise ValueError(
                    f"{path!r} must be a memory file path; the only placeholder it may hold is "
                    f"{SYMBOL_KEY}"
                )
        return value

    def permissions_needed(self) -> dict[str, Permission]:
        """What each part of the block needs the agent to be granted, by part name."""
        parts = {
            "snapshot": (self.snapshot, Permission.MARKET),
            "klines": (self.klines > 0, Permission.MARKET),
            "indicators": (bool(self.indicators), Permission.INDICATOR),
            "notes": (bool(self.notes), Permission.MEMORY),
            "positions": (self.positions, Permission.ACCOUNT),
            "account": (self.account, Permission.ACCOUNT),
            "agents": (self.agents, Permission.AGENTS),
        }
        return {name: group for name, (wanted, group) in parts.items() if wanted}


_BLOCK_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


class AnswerBlock(_Strict):
    """One block a final answer may carry after its text (``app.agents.answer_blocks``): the
    memory write it stands for. ``file_path`` may hold ``{symbol_key}`` (the task's symbol)."""

    tool: Literal[
        "append_to_agent_memory_file", "write_agent_memory_file", "log_journal_entry"
    ]
    file_path: StrictStr | None = Field(default=None, min_length=1, max_length=300)
    file_type_hint: Literal["YAML", "MARKDOWN", "TEXT"] | None = None

    @model_validator(mode="after")
    def _path(self) -> AnswerBlock:
        journal = self.tool == "log_journal_entry"
        if journal and (self.file_path is not None or self.file_type_hint is not None):
            raise ValueError("a journal block writes today's journal: it takes no file_path")
        if not journal and self.file_path is None:
            raise ValueError(f"a {self.tool} block needs the file_path it writes")
        left = (self.file_path or "").replace(SYMBOL_KEY, "")
        if _PLACEHOLDER.search(left):
            raise ValueError(f"the only placeholder a file_path may hold is {SYMBOL_KEY}")
        return self


class AgentTemplate(_Strict):
    """One agent template as loaded from ``resources/agents/<template_id>.yaml``.

    Role rules are field validators reading the already validated ``role`` (fields validate in
    declaration order), so each error carries the path of the field that breaks the rule.
    """

    template_id: StrictStr = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
    role: AgentRole
    display_name: StrictStr = Field(min_length=1, max_length=80)
    description: StrictStr = Field(min_length=1, max_length=1000)
    strategy_name: StrictStr | None = Field(
        default=None, min_length=1, max_length=80, validate_default=True
    )
    instructions: StrictStr = Field(default="", max_length=4000)
    permissions: tuple[Permission, ...] = Field(min_length=1)
    provider: ProviderChoice
    limits: Limits
    config: dict[str, ConfigField] = Field(default_factory=dict, validate_default=True)
    # settings an earlier version of the template had: dropped from a stored configuration when
    # it is read, so agents created before keep working
    retired_config: tuple[StrictStr, ...] = ()
    constraints: tuple[StrictStr, ...] = ()
    task_data: TaskData | None = None
    answer_blocks: dict[StrictStr, AnswerBlock] = Field(default_factory=dict)

    @field_validator("display_name", "description", "instructions")
    @classmethod
    def _no_placeholder(cls, value: str) -> str:
        if _PLACEHOLDER.search(value):
            raise ValueError("must not contain a {placeholder}: prompts fill those")
        return value

    @field_validator("strategy_name")
    @classmethod
    def _strategy(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None and info.data.get("role") is AgentRole.ANALYST:
            raise ValueError("an analyst template needs a strategy_name")
        return cls._no_placeholder(value) if value is not None else None

    @field_validator("permissions")
    @classmethod
    def _permissions(
        cls, value: tuple[Permission, ...], info: ValidationInfo
    ) -> tuple[Permission, ...]:
        if len(set(value)) != len(value):
            raise ValueError("lists a permission group twice")
        role = info.data.get("role")
        if not role:
            return value
        forbidden = sorted(set(value) & ROLE_FORBIDDEN.get(role, frozenset()))
        if forbidden:
            raise ValueError(
                f"{_article(role)} may not be granted {', '.join(forbidden)} (only a trader "
                "places orders; only the orchestrator creates agents)"
            )
        return value

    @field_validator("config")
    @classmethod
    def _config(
        cls, value: dict[str, ConfigField], info: ValidationInfo
    ) -> dict[str, ConfigField]:
        for name in value:
            if not _FIELD_NAME.fullmatch(name):
                raise ValueError(
                    f"field name {name!r} must be lower_snake_case letters, digits and "
                    "underscores, starting with a letter"
                )
        role = info.data.get("role")
        if not role:
            return value
        for name, kinds in ROLE_FIELDS.get(role, {}).items():
            field = value.get(name)
            if field is None or field.type not in kinds:
                raise ValueError(
                    f"{_article(role)} template needs a config field '{name}' of type "
                    f"{' or '.join(kinds)}"
                )
        return value

    @field_validator("constraints")
    @classmethod
    def _constraints(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        config = info.data.get("config")
        if config is None:  # the config itself is invalid and reported on its own
            return value
        for text in value:
            low, _, high = constraint_parts(text, config)
            defaults = (coerce_value(config[low], config[low].default),
                        coerce_value(config[high], config[high].default))
            if not constraint_holds(text, *defaults):
                raise ValueError(f"the defaults break the constraint {text!r}")
        return value


    @field_validator("answer_blocks")
    @classmethod
    def _answer_blocks(
        cls, value: dict[str, AnswerBlock], info: ValidationInfo
    ) -> dict[str, AnswerBlock]:
        for name in value:
            if not _BLOCK_NAME.fullmatch(name):
                raise ValueError(
                    f"block name {name!r} must be lower_snake_case, at most 32 characters"
                )
        if value and Permission.MEMORY not in set(info.data.get("permissions") or ()):
            raise ValueError("answer blocks write memory: the template must grant memory")
        return value

    @field_validator("task_data")
    @classmethod
    def _task_data(cls, value: TaskData | None, info: ValidationInfo) -> TaskData | None:
        if value is None:
            return None
        granted = set(info.data.get("permissions") or ())
        for part, group in value.permissions_needed().items():
            if group not in granted:
                raise ValueError(
                    f"'{part}' needs the {group} permission, which this template does not grant"
                )
        config = info.data.get("config")
        for indicator in value.indicators:
            for key, param in indicator.params.items():
                if isinstance(param, str) and config is not None and (
                    param not in config or config[param].type not in _NUMERIC
                ):
                    raise ValueError(
                        f"indicator {indicator.name} parameter {key!r} names {param!r}, which is "
                        "not a numeric config field"
                    )
        return value


def _article(role: AgentRole) -> str:
    return f"{'an' if role[0] in 'aeiou' else 'a'} {role}"


def constraint_parts(text: str, config: Mapping[str, ConfigField]) -> tuple[str, str, str]:
    """Split ``"macd_fast < macd_slow"`` into its fields and operator, checking both exist."""
    match = _CONSTRAINT.fullmatch(text)
    if match is None:
        raise ValueError(
            f"constraint {text!r} must read 'field_a < field_b' or 'field_a <= field_b'"
        )
    low, op, high = match.groups()
    for name in (low, high):
        if name not in config or config[name].type not in _NUMERIC:
            raise ValueError(f"constraint {text!r} names {name!r}, which is not a numeric field")
    return low, op, high


def constraint_holds(text: str, low: Any, high: Any) -> bool:
    if low is None or high is None:
        return True
    return bool(low <= high if "<=" in text else low < high)


def coerce_value(field: ConfigField, value: Any) -> Any:
    """Coerce one config value to its field's type and check its bounds.

    Raises:
        ValueError: a reason that reads after the field's name ("must be at most 100, got 150").
    """
    if value is None:
        if field.default is None:
            return None
        raise ValueError("must be given a value (null is not allowed here)")
    kind = field.type
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(f"must be true or false, got {value!r}")
    if kind == "choice":
        return _choice(field.choices or (), value)
    if kind == "integer":
        number: Any = _integer(value)
    elif kind == "decimal":
        number = _decimal(value)
    elif kind == "string":
        if not isinstance(value, str):
            raise ValueError(f"must be text, got {type(value).__name__}")
        number = value.strip()
    else:
        number = _symbols(value)
    _check_bounds(field, number)
    return number


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"must be a whole number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value.strip())
    raise ValueError(f"must be a whole number, got {value!r}")


def _choice(choices: tuple[str, ...], value: Any) -> str:
    if isinstance(value, str):
        if value in choices:
            return value
        folded = [c for c in choices if c.casefold() == value.strip().casefold()]
        if len(folded) == 1:
            return folded[0]
    raise ValueError(f"must be one of {', '.join(choices)}; got {value!r}")


def _symbols(value: Any) -> list[str]:
    items = re.split(r"[,\s]+", value) if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError(f"must be a list of symbols such as [\"BTC/USDT\"], got {value!r}")
    symbols: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"must list symbols as text, got {item!r}")
        symbol = item.strip().upper()
        if not symbol:
            continue
        if not _SYMBOL.fullmatch(symbol):
            raise ValueError(f"holds {item[:40]!r}, which is not a symbol such as BTC/USDT")
        if symbol not in symbols:
            symbols.append(symbol)
    return symbols


def _check_bounds(field: ConfigField, value: Any) -> None:
    size = len(value) if field.type in ("string", "symbols") else value
    unit = {"string": " characters", "symbols": " symbols"}.get(field.type, "")
    low, high = field.minimum, field.maximum
    shown = f"{len(value)}{unit}" if unit else plain(Decimal(value))
    if low is not None and high is not None and not low <= size <= high:
        raise ValueError(f"must be between {plain(low)} and {plain(high)}{unit}, got {shown}")
    if low is not None and size < low:
        raise ValueError(f"must be at least {plain(low)}{unit}, got {shown}")
    if high is not None and size > high:
        raise ValueError(f"must be at most {plain(high)}{unit}, got {shown}")


def validate_config(template: AgentTemplate, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Fill defaults and coerce an agent's configuration (decimals as ``Decimal``).

    Accepts its own ``to_json_safe`` output, so a stored configuration validates again unchanged.

    Raises:
        InvalidParameterError: not an object, an unknown field, a wrong type, a value out of range
            or a broken constraint; the message and ``details["field"]`` name the field.
    """
    if not isinstance(raw, Mapping):
        raise InvalidParameterError(
            f"initial_config_json must be a JSON object, got {type(raw).__name__}.",
            details={"parameter": "initial_config_json"},
        )
    known = list(template.config)
    raw = {key: value for key, value in raw.items() if key not in template.retired_config}
    unknown = [str(key) for key in raw if key not in template.config]
    if unknown:
        raise InvalidParameterError(
            f"initial_config_json field {unknown[0]!r} is not a setting of "
            f"{template.template_id}; its fields are: {', '.join(known) or 'none'}.",
            details={"parameter": "initial_config_json", "field": unknown[0], "allowed": known},
        )
    values: dict[str, Any] = {}
    for name, field in template.config.items():
        try:
            values[name] = coerce_value(field, raw[name] if name in raw else field.default)
        except ValueError as exc:
            raise InvalidParameterError(
                f"initial_config_json field {name!r} {exc}.",
                details={"parameter": "initial_config_json", "field": name},
            ) from None
    for text in template.constraints:
        low, _, high = constraint_parts(text, template.config)
        if not constraint_holds(text, values[low], values[high]):
            raise InvalidParameterError(
                f"initial_config_json fields {low!r} and {high!r} must satisfy {text} "
                f"(got {to_json_safe(values)[low]} and {to_json_safe(values)[high]}).",
                details={"parameter": "initial_config_json", "field": low},
            )
    return values


def to_json_safe(values: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration as JSON/YAML can store it exactly: decimals become decimal strings."""
    return {key: _json_value(value) for key, value in values.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return plain(value)
    if isinstance(value, Mapping):
        return to_json_safe(value)
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    return value


def permissions_of(template: AgentTemplate) -> frozenset[str]:
    """The permission groups the template grants, as the registry and executor compare them."""
    return frozenset(permission.value for permission in template.permissions)

