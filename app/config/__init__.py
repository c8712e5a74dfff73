"""Typed, frozen settings with their defaults and descriptions in one place.

Settings come from ``settings.toml`` in the workspace (optional). Unknown keys are an error naming
the key, so a typo can never silently fall back to a default. Secrets are never settings: API keys
live in the OS keyring.

This package sits just above ``app.domain`` and imports nothing else of the app: the sections that
belong to one feature (risk limits, approval, e-mail, exchanges, MCP servers, Telegram) have their
models in its modules here, and the features import their settings from here, never the reverse.
"""

from __future__ import annotations

import re
import tomllib
from decimal import Decimal
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.fields import FieldInfo

from app.config.approval import ApprovalSettings
from app.config.email import EmailSettings
from app.config.exchanges import ExchangeSettings
from app.config.mcp import McpSettings
from app.config.ranges import WHY_HIGH, WHY_LOW, money, ranged
from app.config.risk import RiskConfig
from app.config.telegram import TelegramSettings
from app.config.trading import TradingSettings
from app.domain.errors import OperationalError
from app.domain.numbers import MONEY_PLACES, PlainDecimal


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MarketSettings(_Section):
    data_files: tuple[str, ...] = Field(
        default=(), description="Kline CSV files to replay; empty means the bundled sample data."
    )
    default_interval: str = Field(default="1h", description="Interval agents use unless told.")


class ToolSettings(_Section):
    default_timeout_s: float = Field(
        default=30.0, gt=0, le=600, description="Longest a tool call may run before TIMEOUT."
    )


class PaperSettings(_Section):
    initial_cash: PlainDecimal = money(
        Decimal(10_000), positive=True, description="Quote currency a new paper account starts "
        "with.", why_low="a paper account needs some cash to trade",
    )
    fee_rate: PlainDecimal = ranged(
        Decimal("0.001"), ge=0, le=Decimal("0.1"), description="Maker and taker fee (0.001 = "
        "0.1%).", why_low="a fee is paid by the account, never to it",
        why_high="it is the fraction of each fill paid as a fee (0.001 = 0.1%), and 0.1, 10% of "
        "every trade, is already far above any exchange's",
    )
    slippage_bps: PlainDecimal = ranged(
        Decimal(2), ge=0, le=1000, description="Adverse slippage of market and stop fills.",
        why_low="slippage makes a fill worse, never better",
        why_high="it is in basis points of the price, and 1000 (10% off every fill) is beyond "
        "any market's",
    )


class LoggingSettings(_Section):
    """``[logging]``: the workspace's log file (``logs/kestrel.log``, rotated, secrets
    redacted)."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="The least severe message the log file keeps.",
    )
    to_file: bool = Field(default=True, description="Also write logs/kestrel.log in the workspace.")
    max_bytes: int = Field(
        default=5_000_000, ge=10_000, le=1_000_000_000,
        description="When logs/kestrel.log reaches this size it is rotated.",
    )
    backups: int = Field(
        default=3, ge=0, le=100, description="How many rotated files (kestrel.log.1, ...) to keep."
    )


class LLMSettings(_Section):
    """Which model answers for the agents; keys are never here, only the keyring entry's name."""

    provider: Literal["template", "rule-engine", "openai-compatible", "anthropic"] = Field(
        default="template",
        description="'template': each agent template's own provider (the rule engine by "
        "default); otherwise every new agent uses this provider.",
    )
    model: str = Field(default="", description="Model name, e.g. gpt-4o-mini or llama3.1.")
    base_url: str = Field(
        default="", description="OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1."
    )
    api_key_name: str = Field(
        default="", description="Name of the keyring entry (or KESTREL_<NAME> variable)."
    )
    timeout_s: float = Field(default=120.0, gt=0, le=900)
    max_retries: int = Field(default=3, ge=0, le=10)
    stream: bool = Field(default=True, description="Show answers as they arrive.")
    training_cutoff: str = Field(
        default="", pattern=r"^(\d{4}-\d{2}-\d{2})?$",
        description="The model's training cutoff (YYYY-MM-DD); empty: the bundled table's. A "
        "backtest before it is flagged: the model may remember that market.",
    )
    context_tokens: int = Field(
        default=32_768, ge=2_048, le=2_000_000,
        description="The server's context in tokens, prompt and answer together (a local "
        "server's is often 4,096 or 8,192). Each request is fitted into it, or refused before "
        "it is sent.",
    )
    max_output_tokens: int = Field(
        default=2_048, ge=256, le=200_000,
        description="Tokens of the context kept for each answer (an agent template may ask "
        "for fewer). An answer cut at this limit is never acted on: the model is told.",
    )
    tool_transport: Literal["xml", "native", "auto"] = Field(
        default="auto",
        description="How agents call tools: 'xml' in their answers' text; 'native' through the "
        "API's own tool calls as well; 'auto' native when the model answers with native calls, "
        "XML otherwise (and when the server refuses tools).",
    )

    @field_validator("max_output_tokens")
    @classmethod
    def _room_for_the_prompt(cls, value: int, info: ValidationInfo) -> int:
        context = info.data.get("context_tokens")
        if context is not None and value > context - 1_024:
            raise ValueError(
                f"must leave at least 1,024 of the {context:,} context tokens for the prompt "
                f"(at most {context - 1_024:,})")
        return value


class AgentSettings(_Section):
    run_budget_usd: PlainDecimal | None = money(
        None, positive=True, description="Stop agents once a run has spent this much on LLMs.",
        why_low="a budget of nothing would refuse every model call; leave it empty for none",
    )
    replay_speed: float = Field(
        default=60.0, gt=0, le=100_000, description="Simulated seconds per wall second."
    )


ExchangeId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=40)]


class VenueSettings(_Section):
    """Which market the workspace's window and ``kestrel run``/``chat`` open by default."""

    kind: Literal["replay", "live-paper"] = Field(
        default="replay",
        description="'replay': the offline replay of kline files (no network); 'live-paper': "
        "paper trading on an exchange's live quotes (public data, no keys). A LIVE account is "
        "never a default: it opens only with --venue live, confirmed each time.",
    )
    exchange: ExchangeId = Field(
        default="binance", description="live-paper: the ccxt id of the exchange, e.g. binance."
    )
    symbols: tuple[str, ...] = Field(
        default=("BTC/USDT", "ETH/USDT"),
        description="live-paper: the markets to follow (BASE/QUOTE); empty: every spot market.",
    )


class ExchangesSettings(RootModel[dict[ExchangeId, ExchangeSettings]]):
    """``[exchanges.<ccxt id>]`` tables: how to connect to each exchange (ccxt options, timeout).

    A model (not a bare dict) so the settings file writer treats it as one section like the others.
    """

    model_config = ConfigDict(frozen=True)
    root: dict[ExchangeId, ExchangeSettings] = Field(default_factory=dict)

    def get(self, exchange_id: str) -> ExchangeSettings:
        """The settings of one exchange; the defaults when it has no table."""
        return self.root.get(exchange_id) or ExchangeSettings()


class Settings(_Section):
    """Every setting Kestrel reads; construct with no arguments for the defaults."""

    market: MarketSettings = MarketSettings()
    tools: ToolSettings = ToolSettings()
    paper: PaperSettings = PaperSettings()
    risk: RiskConfig = RiskConfig()
    logging: LoggingSettings = LoggingSettings()
    llm: LLMSettings = LLMSettings()
    agents: AgentSettings = AgentSettings()
    approval: ApprovalSettings = ApprovalSettings()
    trading: TradingSettings = TradingSettings()
    venue: VenueSettings = VenueSettings()
    email: EmailSettings | None = None
    exchanges: ExchangesSettings = Field(
        default_factory=ExchangesSettings,
        description="Per exchange (its ccxt id, e.g. binance): ccxt options and timeout.",
    )
    telegram: TelegramSettings = TelegramSettings()
    mcp: McpSettings = Field(
        default_factory=McpSettings,
        description="MCP servers whose tools agents may use once a person approves each tool.",
    )


def settings_from_mapping(data: dict[str, Any], source: str = "settings") -> Settings:
    """Validate a mapping into Settings.

    Raises:
        OperationalError: naming the source, the key path and what is wrong; a value out of
            its field's range also says why the range is what it is (``app.config.ranges``).
    """
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(top level)"
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown key '{where}'")
                continue
            why = _range_reason(error["loc"], error["type"])
            said = _DECIMAL_REPR.sub(r"\1", error["msg"])  # "Decimal('5')" reads as "5"
            problems.append(f"'{where}': {said}" + (f": {why}" if why else ""))
        raise OperationalError(f"{source}: " + "; ".join(problems)) from None


_DECIMAL_REPR = re.compile(r"Decimal\('([^']*)'\)")
_BELOW = frozenset({"greater_than", "greater_than_equal"})
_ABOVE = frozenset({"less_than", "less_than_equal", "decimal_max_digits", "decimal_whole_digits"})


def _range_reason(loc: tuple[int | str, ...], kind: str) -> str | None:
    """Why the field at ``loc`` refuses a value below (or above) its range, if it says."""
    if kind == "decimal_max_places":  # only money fields limit their decimals
        return f"money is kept to {MONEY_PLACES} decimal places"
    key = WHY_LOW if kind in _BELOW else WHY_HIGH if kind in _ABOVE else None
    info = _field_at(loc) if key is not None else None
    extra = info.json_schema_extra if info is not None else None
    reason = extra.get(key) if isinstance(extra, dict) and key is not None else None
    return reason if isinstance(reason, str) else None


def _field_at(loc: tuple[int | str, ...]) -> FieldInfo | None:
    """The settings field a validation error's location names (a mapping's values are its
    field's, as the allotments of ``[risk.agent_budget]``)."""
    annotation: Any = Settings
    info: FieldInfo | None = None
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, RootModel):
            annotation = _unwrap(annotation.model_fields["root"].annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(str(part))
            if info is None:
                return None
            annotation = info.annotation
        elif get_origin(annotation) is dict:
            annotation = get_args(annotation)[1]
        else:
            break
    return info


def _unwrap(annotation: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``."""
    if get_origin(annotation) is Annotated:
        return _unwrap(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        found = [arg for arg in get_args(annotation) if arg is not type(None)]
        return _unwrap(found[0]) if len(found) == 1 else annotation
    return annotation


# Arrays and inline tables nested deeper than this are refused before parsing: tomllib parses
# them recursively, and a few thousand levels exhaust Python's stack (RecursionError) in every
# command that reads the settings. No setting nests more than three levels.
MAX_NESTING = 100


def nesting_too_deep(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line on which arrays and inline tables first nest deeper than ``limit``, or None.

    Brackets and braces inside strings and comments are not nesting; what is not valid TOML
    otherwise is left to the parser to report.
    """
    depth, line, i, size = 0, 1, 0, len(text)
    while i < size:
        char = text[i]
        if char == "\n":
            line += 1
        elif char == "#":
            end = text.find("\n", i)
            i = size if end < 0 else end
            continue
        elif char in "\"'":
            i, line = _skip_string(text, i, line)
            continue
        elif char in "[{":
            depth += 1
            if depth > limit:
                return line
        elif char in "]}":
            depth = max(0, depth - 1)
        i += 1
    return None


def _skip_string(text: str, i: int, line: int) -> tuple[int, int]:
    """Past the string starting at ``i`` (basic or literal, one line or multi-line); returns
    the index after it and the line it ends on."""
    quote = text[i]
    close = quote * 3 if text.startswith(quote * 3, i) else quote
    i += len(close)
    while i < len(text):
        if quote == '"' and text[i] == "\\":  # an escape: the next character is taken as is
            line += text[i + 1: i + 2] == "\n"
            i += 2
            continue
        if text.startswith(close, i):
            return i + len(close), line
        if text[i] == "\n":
            if len(close) == 1:  # an unclosed one-line string: the parser says so
                return i, line
            line += 1
        i += 1
    return i, line


def load_settings(path: Path) -> Settings:
    """Read settings from a TOML file; a missing file means the defaults.

    Raises:
        OperationalError: when the file cannot be read, is not TOML, nests arrays or inline
            tables deeper than ``MAX_NESTING`` (naming the line), or has unknown keys.
    """
    if not path.exists():
        return Settings()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OperationalError(f"{path}: cannot read the settings file ({exc}).") from exc
    deep = nesting_too_deep(text)
    if deep is not None:
        raise OperationalError(_too_deep(path, f"line {deep}"))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise OperationalError(f"{path}: not valid TOML ({exc}).") from exc
    except RecursionError:  # the check above should have caught it; never a traceback
        raise OperationalError(_too_deep(path, "somewhere")) from None
    return settings_from_mapping(data, str(path))


def _too_deep(path: Path, where: str) -> str:
    return (
        f"{path}: {where}: arrays or inline tables nest more than {MAX_NESTING} levels deep, "
        "which no setting does; remove the extra brackets or braces there."
    )
