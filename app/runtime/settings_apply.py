"""Settings saved while the app runs, applied to the running world where they can be.

``apply_settings(world, new)`` compares the new settings with the world's, section by section,
and hands each changed one to the part that reads it:

- ``[risk]``: the Risk Guard judges the next order by the new limits (its rules are swapped in one
  step) and the kill switch watches the new halts;
- ``[paper]`` fee and slippage: the venue's broker charges them from the next order and fill (the
  venue says what it can change; a new ``initial_cash`` only opens a new account);
- ``[llm]``: each agent's next task is run by a provider built from the new settings (server,
  key entry, timeout, retries, streaming); an agent keeps the provider and model it was created
  with, and a new provider or model applies to agents created from now on;
- ``[approval]``, ``[agents]`` (budget, replay speed), ``[tools]`` timeout, ``[email]`` and
  ``[logging]``: from the next order, step, call, e-mail or log line.

What the running world cannot take (``[market]``, ``[telegram]``, ``[mcp]`` servers,
``[exchanges]``, a new paper account's cash) is named in the outcome, so the Settings dialog can
say plainly that it applies at the next start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.config import Settings
from app.config.email import PASSWORD_KEY as EMAIL_PASSWORD_KEY
from app.domain.agents import Channel
from app.orchestration.email_channel import EmailNotifier
from app.orchestration.notify import UnconfiguredNotifier
from app.risk.config import build_rules
from app.workspace import setup_logging

if TYPE_CHECKING:
    from app.runtime.world import World  # the world hands itself in; it imports this module

SECTION_NAMES = {
    "risk": "risk limits", "paper": "paper account", "llm": "LLM provider",
    "approval": "approval", "trading": "position protection", "agents":
    "replay speed and run budget", "tools": "tool timeout",
    "email": "e-mail",
    "logging": "logging", "market": "market data", "telegram": "Telegram",
    "mcp": "MCP servers", "exchanges": "exchanges", "venue": "market venue",
}
RESTART_SECTIONS = ("market", "telegram", "mcp", "exchanges", "venue")


@dataclass(frozen=True, slots=True)
class SettingsOutcome:
    """What a save changed in the running world, in a person's words."""

    applied: tuple[str, ...] = ()
    needs_restart: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = []
        if self.applied:
            parts.append(f"Applied now: {', '.join(self.applied)}.")
        if self.needs_restart:
            parts.append(f"Applies at the next start: {', '.join(self.needs_restart)}.")
        return " ".join(parts)


def apply_settings(world: World, new: Settings) -> SettingsOutcome:
    """Apply ``new`` to the running ``world``; say what took effect and what waits for a restart.

    The world's ``settings`` are ``new`` afterwards, so the next save compares with them.
    """
    old = world.settings
    changed = [name for name in SECTION_NAMES if getattr(old, name) != getattr(new, name)]
    applied: list[str] = []
    restart: list[str] = []
    for name in changed:
        if name in RESTART_SECTIONS:
            restart.append(SECTION_NAMES[name])
        elif name == "paper":
            # the venue's adapters say what they take while running (a paper broker its costs)
            reconfigure = world.venue.reconfigure
            waits = reconfigure(old, new) if reconfigure is not None else [SECTION_NAMES[name]]
            if reconfigure is not None and (old.paper.fee_rate, old.paper.slippage_bps) != (
                    new.paper.fee_rate, new.paper.slippage_bps):
                applied.append("paper fees and slippage")
            restart.extend(waits)
        else:
            _apply(world, name, new)
            applied.append(SECTION_NAMES[name])
    world.settings = new
    return SettingsOutcome(tuple(applied), tuple(restart))


def _apply(world: World, name: str, new: Settings) -> None:
    """Hand one changed section to what reads it."""
    team = world.agents
    if name == "risk":
        world.guard.replace_rules(build_rules(new.risk))
        if team is not None:
            team.kill_switch.risk, team.kill_switch.config = new.risk, new.risk.kill_switch
        return
    if name == "tools":
        world.executor.set_default_timeout(new.tools.default_timeout_s)
        return
    if name == "approval":
        world.orders.approval = new.approval
        return
    if name == "trading":
        world.orders.kestrel_stops = new.trading.kestrel_stops
        return
    if name == "logging":
        if world.workspace is not None:
            setup_logging(world.workspace, new.logging)
        return
    if name == "agents" and world.venue.offline:  # a live market runs in real time
        world.venue.driver.set_speed(new.agents.replay_speed)
    if team is None:
        return
    if name == "llm":
        team.providers.use(new.llm)
        team.manager.refresh_profiles()  # each agent's next task builds its provider anew
    elif name == "agents":
        team.services.run_budget_usd = new.agents.run_budget_usd
    elif name == "email":
        secrets = team.providers.secrets
        team.notifications.use(
            EmailNotifier(new.email, lambda: secrets.get(EMAIL_PASSWORD_KEY),
                          secrets.how_to_set(EMAIL_PASSWORD_KEY, "Settings > E-mail"))
            if new.email is not None else
            UnconfiguredNotifier(Channel.EMAIL, "e-mail is not configured: add the SMTP "
                                 "server in Settings > E-mail")
        )
