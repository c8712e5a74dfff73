"""Typed, frozen settings with their defaults and descriptions in one place.

Settings come from ``settings.toml`` in the workspace (optional). Unknown keys are an error naming
the key, so a typo can never silently fall back to a default. Secrets are never settings: API keys
live in the OS keyring.

This package sits just above ``app.domain`` and imports nothing else of the app: the sections that
belong to one feature (risk limits, approval, e-mail, exchanges, MCP servers, Telegram) have their
models in its modules here, and the features import their settings from here, never the reverse.
"""

from __future__ import annotations

import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

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

from app.config.approval import ApprovalSettings
from app.config.email import EmailSettings
from app.config.exchanges import ExchangeSettings
from app.config.mcp import McpSettings
from app.config.risk import RiskConfig
from app.config.telegram import TelegramSettings
from app.config.trading import TradingSettings
from app.domain.errors import OperationalError
from app.domain.numbers import PlainDecimal


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
    initial_cash: PlainDecimal = Field(
        default=Decimal(10_000), gt=0, description="Quote currency a new paper account starts with."
    )
    fee_rate: PlainDecimal = Field(
        default=Decimal("0.001"), ge=0, lt=1, description="Maker and taker fee (0.001 = 0.1%)."
    )
    slippage_bps: PlainDecimal = Field(
        default=Decimal(2), ge=0, le=1000, description="Adverse slippage of market and stop fills."
    )


class LoggingSettings(_Section):
    level: str = Field(
        default="INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$",
        description="The least severe message the log file keeps.",
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
    run_budget_usd: PlainDecimal | None = Field(
        default=None, gt=0, description="Stop agents once a run has spent this much on LLMs."
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
        "paper trading on an exchange's live quotes (public data, no keys).",
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
        OperationalError: naming the source, the key path and what is wrong.
    """
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(top level)"
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown key '{where}'")
            else:
                problems.append(f"'{where}': {error['msg']}")
        raise OperationalError(f"{source}: " + "; ".join(problems)) from None


def load_settings(path: Path) -> Settings:
    """Read settings from a TOML file; a missing file means the defaults.

    Raises:
        OperationalError: when the file cannot be read, is not TOML, or has unknown keys.
    """
    if not path.exists():
        return Settings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise OperationalError(f"{path}: cannot read the settings file ({exc}).") from exc
    except tomllib.TOMLDecodeError as exc:
        raise OperationalError(f"{path}: not valid TOML ({exc}).") from exc
    return settings_from_mapping(data, str(path))
