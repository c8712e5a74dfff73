"""Build an agent's system prompt: Part D's template, the tools it may use, its role and context.

The prompt is the static prefix of every model call of an agent, so it is built only from what
does not change between those calls (template, role text, permitted tools, the agent's identity,
mode and configuration) and never from the clock: byte-identical prefixes are what make provider
prompt caches hit. Market time reaches the model through task messages and tool results instead.

Placeholders are ``{name}`` tokens in ``resources/prompts/*.md``. Each is filled once, and a
placeholder without a value is an error, so a literal ``{symbol}`` can never reach a model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from app.agents.template_files import load_templates
from app.agents.templates import AgentTemplate, ConfigField, permissions_of
from app.domain.agents import AgentRole
from app.domain.errors import OperationalError
from app.domain.numbers import plain
from app.domain.trading import Mode
from app.resources import resource_path
from app.tools.registry import ToolRegistry

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
SYSTEM_TEMPLATE = "system_template.md"
RUNTIME_CONTEXT = "runtime_context.md"
ROLE_FILES = {
    AgentRole.ORCHESTRATOR: "role_orchestrator.md",
    AgentRole.ANALYST: "role_analyst.md",
    AgentRole.TRADER: "role_trader.md",
}
ROLE_TITLES = {
    AgentRole.ORCHESTRATOR: "System Orchestrator",
    AgentRole.ANALYST: "Market Analyst",
    AgentRole.TRADER: "Trader",
}
MODE_NOTES = {
    Mode.BACKTEST: (
        "a backtest. History is replayed candle by candle on a simulated paper account; nothing "
        "real is at stake, but act exactly as you would with real money."
    ),
    Mode.PAPER: (
        "paper trading. Orders fill on a simulated paper account against market data; no real "
        "money is at stake, but act exactly as you would with real money."
    ),
    Mode.LIVE: "LIVE trading. Orders are sent to a real exchange and spend real money.",
}
ALL_SYMBOLS = "all configured symbols"
CLARIFY_TOOL = "ask_user_clarification"
MEMORY_TOOLS = ("read_agent_memory_file", "write_agent_memory_file", "append_to_agent_memory_file")

# Part D's directives told every agent to ask the person with ask_user_clarification, which only
# the Orchestrator has: an Analyst or a Trader that tries it gets UNKNOWN_TOOL or PERMISSION_DENIED
# and loses a step. Each such sentence is written for the tools the agent actually has.
WHEN_UNCLEAR = {
    True: "If a user's request is ambiguous or lacks necessary information to proceed, you "
          "**MUST** use the `ask_user_clarification` tool to get the required details.",
    False: "If a request is ambiguous or lacks necessary information to proceed, do not guess: "
           "say in your final answer exactly what is missing (you cannot ask the person "
           "questions in this role).",
}
ON_ERROR = {
    True: "You may then attempt a modified approach (e.g., different parameters, a different "
          "tool if logical), inform the user of the issue (if appropriate for your role), or use "
          "`ask_user_clarification` if user input can resolve it.",
    False: "You may then attempt a modified approach (e.g., different parameters, a different "
           "tool if logical), or report the issue in your final answer.",
}
ON_CONFLICT = {
    True: "If an action seems to conflict, seek clarification or report the constraint.",
    False: "If an action seems to conflict, do not take it: report the constraint in your final "
           "answer.",
}
AFTER_QUESTION = {
    True: "\n- After `ask_user_clarification`, the next message is the person's answer as plain "
          "text.",
    False: "",
}
MEMORY_DIRECTIVE = {
    True: "You have access to an agent-specific memory cache (via `read_agent_memory_file`, "
          "`write_agent_memory_file`, `append_to_agent_memory_file` tools). You should use this "
          "to store and retrieve relevant information, analysis, logs, configurations, or "
          "learned experiences to maintain context, improve decision-making over time, and "
          "fulfill your role-specific duties.",
    False: "This role has no memory tools: what must be kept goes into your final answer.",
}
# Part D's "MUST NOT provide ... investment recommendations" stood in the prompt of agents whose
# job is to recommend and to trade, and invites refusals; the Orchestrator, who speaks with the
# person, still gives them no personal advice of its own.
NO_ADVICE = {
    AgentRole.ORCHESTRATOR: (
        "You set up and report on agents that carry out the person's own strategies. You "
        "**MUST NOT** give the person financial advice or investment recommendations of your own "
        "(what they should buy, sell or hold), nor guarantees of profit."
    ),
    AgentRole.ANALYST: (
        "Turning the data into the BUY, SELL or HOLD signals of the strategy the person "
        "configured, with a confidence, is your job: do it plainly, without refusing or "
        "hedging. It is not personal financial advice to the person, and you never promise a "
        "profit."
    ),
    AgentRole.TRADER: (
        "Deciding on signals and placing the trades within the person's configuration and risk "
        "limits is your job: do it plainly, without refusing or hedging. It is not personal "
        "financial advice to the person, and you never promise a profit."
    ),
}


@cache
def _read(folder: Path, name: str) -> str:
    path = folder / name
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OperationalError(f"the prompt file {path} cannot be read: {exc}") from exc


def fill(text: str, values: Mapping[str, str], source: str) -> str:
    """Replace every ``{name}`` of ``text`` with its value, in one pass (values are not rescanned).

    Raises:
        OperationalError: a placeholder has no value; names the file and the placeholder.
    """
    missing = sorted({m for m in PLACEHOLDER.findall(text) if m not in values})
    if missing:
        raise OperationalError(
            f"the prompt file {source} uses {', '.join('{' + m + '}' for m in missing)}, which "
            f"this agent has no value for (known here: {', '.join(sorted(values))})"
        )
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], text).rstrip("\n")


def _symbols(config: Mapping[str, Any]) -> list[str]:
    return [str(s) for s in config.get("symbols") or []]


def role_values(template: AgentTemplate, config: Mapping[str, Any]) -> dict[str, str]:
    """The role augmentation's placeholders, filled from the template and the agent's config.

    Only values the config actually provides are present, so a role text asking for one the
    agent lacks (e.g. ``{timeframe}`` without an ``interval``) is refused by ``fill``.
    """
    symbols = _symbols(config)
    listed = ", ".join(symbols) if symbols else ALL_SYMBOLS
    values = {
        "target_market_or_symbols": listed,
        "configured_symbols_or_all": listed,
        "symbol": symbols[0] if symbols else "the signal's symbol",
        "strategy_instructions": template.instructions.strip() or "(no further rules given)",
    }
    if template.strategy_name:
        values["strategy_name"] = template.strategy_name
    if config.get("interval"):
        values["timeframe"] = str(config["interval"])
    return values


def _shown(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or f"(none: {ALL_SYMBOLS})"
    return plain(value) if hasattr(value, "as_tuple") else str(value)


def configuration_lines(template: AgentTemplate, config: Mapping[str, Any]) -> str:
    """One line per setting. Only values: the names are self-explanatory to a model and the
    role text explains the ones it acts on, so the people's descriptions stay out of the prefix."""
    lines = [f"  - {name}: {_shown(config.get(name))}" for name in template.config]
    return "\n".join(lines) or "  - (no settings)"


def _field_summary(name: str, field: ConfigField) -> str:
    """``rsi_period=14 (2..100)``: a field as the Orchestrator needs it to fill a config."""
    if field.type == "choice":
        allowed = "|".join(field.choices or ())
    elif field.type == "symbols":
        allowed = "symbol list"
    elif field.type == "boolean":
        allowed = "true|false"
    elif field.minimum is not None and field.maximum is not None and field.type != "string":
        allowed = f"{plain(field.minimum)}..{plain(field.maximum)}"
    else:
        allowed = field.type
    if field.default is None:
        return f"{name} ({allowed}, optional)"
    default = "[]" if field.default == [] else _shown(field.default)
    return f"{name}={default} ({allowed})"


def template_catalogue(templates: Mapping[str, AgentTemplate]) -> str:
    """One entry per creatable template (all but orchestrators): what it is and its fields."""
    entries = []
    for template_id in sorted(templates):
        template = templates[template_id]
        if template.role is AgentRole.ORCHESTRATOR:
            continue
        fields = "; ".join(_field_summary(n, f) for n, f in template.config.items())
        entries.append(
            f"    - `{template_id}` ({template.role}): {template.description.strip()}\n"
            f"      Fields: {fields or 'none'}."
        )
    return "\n".join(entries) or "    - (no templates installed)"


def directive_values(role: AgentRole, tools: set[str] | frozenset[str]) -> dict[str, str]:
    """The Core Directives' sentences that depend on the agent's role and on the tools it has."""
    asks = CLARIFY_TOOL in tools
    remembers = all(name in tools for name in MEMORY_TOOLS)
    return {
        "when_unclear": WHEN_UNCLEAR[asks], "on_error": ON_ERROR[asks],
        "on_conflict": ON_CONFLICT[asks], "after_question": AFTER_QUESTION[asks],
        "memory_directive": MEMORY_DIRECTIVE[remembers], "no_advice": NO_ADVICE[role],
    }


@cache
def _bundled_templates() -> Mapping[str, AgentTemplate]:
    return load_templates()


def build_system_prompt(
    template: AgentTemplate,
    config: Mapping[str, Any],
    *,
    agent_id: str,
    agent_name: str,
    mode: Mode | str,
    registry: ToolRegistry,
    quote_currency: str = "USDT",
    templates: Mapping[str, AgentTemplate] | None = None,
    prompts_dir: Path | None = None,
    permissions: frozenset[str] | None = None,
) -> str:
    """The agent's full system prompt: template, permitted tools, role augmentation, context.

    Args:
        config: the agent's validated configuration (``validate_config``).
        templates: the templates an Orchestrator may create (default: the bundled ones).
        prompts_dir: where the prompt files are (default: ``resources/prompts``).
        permissions: what the agent may call (default: its template's groups); the manager
            adds the MCP tools a person enabled for this agent or its template.

    Raises:
        OperationalError: a prompt file is missing, or a placeholder has no value.
    """
    folder = prompts_dir or resource_path("prompts")
    trading_mode = Mode(str(mode).upper())
    role_name = ROLE_FILES[template.role]
    values = role_values(template, config)
    if template.role is AgentRole.ORCHESTRATOR:
        values["agent_templates"] = template_catalogue(
            _bundled_templates() if templates is None else templates
        )
    role = fill(_read(folder, role_name), values, role_name)
    context = fill(
        _read(folder, RUNTIME_CONTEXT),
        {
            "agent_id": agent_id,
            "agent_name": agent_name,
            "role_title": ROLE_TITLES[template.role],
            "template_id": template.template_id,
            "mode": trading_mode.value,
            "mode_note": MODE_NOTES[trading_mode],
            "quote_currency": quote_currency,
            "configuration": configuration_lines(template, config),
        },
        RUNTIME_CONTEXT,
    )
    granted = permissions_of(template) if permissions is None else permissions
    tools = registry.available_tools_section(granted) or "(none)"
    prompt = fill(
        _read(folder, SYSTEM_TEMPLATE),
        {"available_tools": tools, "role_augmentation": role, "runtime_context": context,
         **directive_values(template.role, {spec.name for spec in registry.permitted(granted)})},
        SYSTEM_TEMPLATE,
    )
    leftover = sorted({m for m in PLACEHOLDER.findall(prompt) if m in _ALL_PLACEHOLDERS})
    if leftover:  # a value (a name, a config string) smuggled a placeholder back in
        raise OperationalError(
            f"the prompt of agent {agent_name} would hold an unfilled "
            f"{', '.join('{' + m + '}' for m in leftover)}; check the agent's name and settings"
        )
    return prompt + "\n"


_ALL_PLACEHOLDERS = frozenset({
    "available_tools", "role_augmentation", "runtime_context", "strategy_name",
    "when_unclear", "on_error", "on_conflict", "after_question", "memory_directive", "no_advice",
    "target_market_or_symbols", "timeframe", "configured_symbols_or_all", "symbol",
    "strategy_instructions", "agent_templates", "agent_id", "agent_name", "role_title",
    "template_id", "mode", "mode_note", "quote_currency", "configuration",
})


# -- token estimate ----------------------------------------------------------------------------

# cl100k's pre-tokenizer approximated with ``re``: contractions, a word with at most one leading
# non-letter (" word", "_word", "<word"), digit groups of up to 3, punctuation runs, whitespace
_PIECES = re.compile(
    r"'(?:[sStTmMdD]|[rR][eE]|[vV][eE]|[lL][lL])|(?:[^\r\n\w]|_)?[^\W\d_]+|\d{1,3}"
    r"| ?(?:[^\s\w]|_)+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LETTERS_PER_TOKEN = 8  # ASCII letters per token within one word
_PUNCT_PER_TOKEN = 2  # characters per token within a punctuation run
_NON_ASCII_WEIGHT = 1.25  # tokens per non-ASCII letter (CJK is mostly 1-2 tokens a character)


def estimate_tokens(text: str) -> int:
    """A conservative estimate of the tokens ``text`` costs, without a tokenizer.

    No tokenizer's vocabulary is available offline (tiktoken downloads its BPE files), so the
    text is split the way cl100k's pre-tokenizer splits it and each piece is costed: a word
    ``ceil(ascii_letters / 8)`` plus 1.25 per non-ASCII letter, plus 1 when it is glued to a
    non-space character (``_historical``, ``<symbol``); a digit group or a whitespace run 1; a
    punctuation run ``ceil(len / 2)``.

    Calibration (2026-11, against the real cl100k_base vocabulary, counted once with an offline
    BPE package outside the project): over 24 texts (these system prompts, the Available Tools
    section, the seed and design documents in English and Chinese, Python, YAML templates and
    short snippets) the estimate was never below the true count and at most 22% above it; on
    the four system prompts it is 11.5-12.7% above (e.g. 6,419 for the Analyst's 5,757). o200k
    counts of these prompts are within 0.5% of cl100k. Other vendors' tokenizers (Anthropic's)
    are not public and may count more.
    """
    tokens = 0
    for match in _PIECES.finditer(text):
        piece = match.group()
        if piece[-1].isalpha():
            lead = "" if piece[0].isalpha() else piece[0]
            core = piece[len(lead):]
            ascii_letters = sum(1 for ch in core if ch.isascii())
            tokens += math.ceil(ascii_letters / _LETTERS_PER_TOKEN)
            tokens += math.ceil((len(core) - ascii_letters) * _NON_ASCII_WEIGHT)
            tokens += 1 if lead and lead != " " else 0
        elif piece.isspace() or piece[0].isdigit():
            tokens += 1
        else:
            tokens += math.ceil((len(piece.strip()) or 1) / _PUNCT_PER_TOKEN)
    return tokens
