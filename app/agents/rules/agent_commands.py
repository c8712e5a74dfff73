"""The rule-engine Orchestrator's agent commands: ``status``, ``pause|resume|stop …`` and
``add a trader``.

Each lists the agents first (``roster.py``) and acts with ``dispatch_task_to_agent`` or
``create_new_agent_instance``. ``add a trader`` links a new Trader to the analysts without one;
when every analyst has one it asks which analyst (or symbol) the person means, and with no analyst
at all it creates nothing and says how to set one up: a Trader no analyst sends signals to would
only wait. What is said to the person names agents; their ids appear only in the tool calls.
"""

from __future__ import annotations

import re

from app.agents.rules.calls import Answer, call, final
from app.agents.rules.commands import Command, Schedule, is_cancel, parse_fragment
from app.agents.rules.roster import (
    MAX_ASKS,
    TRADER_TEMPLATE,
    Listed,
    agents_of,
    announce,
    symbols_label,
)
from app.agents.rules.transcript import Transcript
from app.domain.words import iso_in_words

CONTROL_TASKS = {"pause": "PAUSE_AGENT", "resume": "RESUME_AGENT", "stop": "STOP_AGENT"}
_CAN = {
    "pause": {"running", "waiting_for_user"},
    "resume": {"paused", "stopped", "faulted", "created"},
    "stop": {"created", "running", "paused", "waiting_for_user", "faulted"},
}
_WHICH_TAG = re.compile(r"^\[which analyst (\d+)\]")


def status(t: Transcript) -> Answer:
    """Each agent (the Orchestrator aside) with its state, fault, last action and jobs."""
    agents = agents_of(t, "The person asked for the status of the agents.")
    if isinstance(agents, Answer):
        return agents
    agents = [a for a in agents if a.role != "orchestrator"]
    if not agents:
        return final("No agents yet besides me. Try: watch BTC/USDT on 1h every 1h with a "
                     "trend analyst and a trader.")
    lines = [f"{len(agents)} agent(s):"]
    for a in agents:
        state = a.state.replace("_", " ")
        if a.fault_reason:
            state += f" ({a.fault_reason})"
        line = f"- {a.name} [{a.role}]: {state}"
        if a.last_action:
            line += f"; last: {a.last_action} at {iso_in_words(a.last_action_time)}"
        for job in a.jobs:
            next_run = job.get("next_run_time_utc_iso")
            line += (f"; job {job.get('job_name')} "
                     f"{Schedule.listed_words(job.get('schedule', ''))}, next "
                     f"{iso_in_words(next_run) if next_run else 'none (disabled)'}")
        lines.append(line)
    return final("\n".join(lines))


def _targets(agents: list[Listed], target: str, own_id: str) -> list[Listed]:
    others = [a for a in agents if a.role != "orchestrator" and a.agent_id != own_id]
    wanted = target.lower().removeprefix("the ").strip()
    if wanted in ("", "all", "everything", "all agents", "agents", "everyone"):
        return others
    for role in ("analyst", "trader"):
        if wanted in (role, f"{role}s", f"all {role}s", f"the {role}s"):
            return [a for a in others if a.role == role]
    exact = [a for a in others if wanted in (a.agent_id.lower(), a.name.lower())]
    return exact or [a for a in others if wanted in a.name.lower()]


def control(t: Transcript, c: Command, own_id: str) -> Answer:
    """Pause, resume or stop the agents the person named (never the Orchestrator itself)."""
    agents = agents_of(t, f"To {c.action} agents I need their ids and states.")
    if isinstance(agents, Answer):
        return agents
    targets = _targets(agents, c.target, own_id)
    if not targets:
        names = ", ".join(a.name for a in agents if a.role != "orchestrator") or "none"
        return final(f"No agent matches {c.target or 'that'!r}. Agents: {names}.")
    done, skipped = [], []
    for agent in targets:
        if agent.state not in _CAN[c.action]:
            skipped.append(f"{agent.name} is {agent.state.replace('_', ' ')}")
            continue
        step = t.tagged(f"control {agent.agent_id}")
        if step is None:
            return call(
                "dispatch_task_to_agent", f"control {agent.agent_id}",
                f"{c.action.capitalize()} {agent.name}.", target_agent_id=agent.agent_id,
                task_type=CONTROL_TASKS[c.action], task_payload_json={}, reply_expected=False,
            )
        if step.result is not None and step.result.ok:
            done.append(agent.name)
        else:
            skipped.append(f"{agent.name}: {step.result.problem() if step.result else '?'}")
    verb = {"pause": "Paused", "resume": "Resumed", "stop": "Stopped"}[c.action]
    text = f"{verb}: {', '.join(done)}." if done else f"Nothing to {c.action}."
    if skipped:
        text += f" Not changed: {'; '.join(skipped)}."
    return final(text)


def add_trader(t: Transcript, c: Command, quote: str) -> Answer:
    """A Trader for the analysts the person means: those without one (of the named symbols),
    or, when every analyst has one, the analyst the person names when asked. A Trader no
    analyst sends signals to would only wait, so none is made without one."""
    agents = agents_of(t, "Which analysts have no Trader yet?")
    if isinstance(agents, Answer):
        return agents
    analysts = [a for a in agents if a.role == "analyst" and a.state != "stopped"]
    if c.symbols:
        analysts = [a for a in analysts
                    if set(c.symbols) & {str(s) for s in a.config.get("symbols") or []}]
    if not analysts:
        where = f" watches {', '.join(c.symbols)}" if c.symbols else " is running"
        example = c.symbols[0] if c.symbols else f"BTC/{quote}"
        return final(
            f"No analyst{where}, and a Trader only acts on an analyst's signals, so I created "
            f"none. Set up a watch with a trader instead, e.g. 'watch {example} on 1h every "
            "1h with a trend analyst and a trader'.")
    targets = [a for a in analysts if not a.config.get("trader_agent_id")]
    if not targets:
        chosen = _which_analyst(t, analysts, agents, quote)
        if isinstance(chosen, Answer):
            return chosen
        targets = chosen
    symbols = list(c.symbols) or sorted(
        {str(s) for a in targets for s in a.config.get("symbols") or []})
    label = symbols_label(symbols)
    created = t.tagged("create trader")
    if created is None:
        return call(
            "create_new_agent_instance", "create trader",
            f"Creating a Trader for {', '.join(a.name for a in targets)}.",
            agent_type_template=TRADER_TEMPLATE, agent_name_label=f"{label} Trader",
            initial_config_json={"symbols": symbols}, start_immediately=True,
        )
    if created.result is None or not created.result.ok:
        problem = created.result.problem() if created.result else "no result"
        return final(f"Could not create the Trader: {problem}")
    trader_id = created.result.attr("agent_id") or ""
    trader_name = created.result.attr("agent_name_label") or f"{label} Trader"
    linked, failed = [], []
    for analyst in targets:
        step = t.tagged(f"link {analyst.agent_id}")
        if step is None:
            return call(
                "dispatch_task_to_agent", f"link {analyst.agent_id}",
                f"Sending the signals of {analyst.name} to {trader_name}.",
                target_agent_id=analyst.agent_id, task_type="UPDATE_AGENT_CONFIG",
                task_payload_json={"trader_agent_id": trader_id}, reply_expected=False,
            )
        if step.result is not None and step.result.ok:
            linked.append(analyst.name)
        else:
            failed.append(f"{analyst.name}: {step.result.problem() if step.result else '?'}")
    summary = f"Created the Trader {trader_name}."
    if linked:
        summary += f" The signals of {', '.join(linked)} now go to it."
    if failed:
        summary += (f" Could not link: {'; '.join(failed)}; it waits idle until an analyst "
                    "sends it signals.")
    if t.tagged("announce") is None:
        return announce(summary)
    return final(summary)


def _which_analyst(
    t: Transcript, analysts: list[Listed], agents: list[Listed], quote: str
) -> list[Listed] | Answer:
    """Every analyst has a Trader: ask which one the new Trader is for (its signals then go
    to the new Trader instead)."""
    names = {a.agent_id: a.name for a in agents}
    asked = [step for step in t.steps if _WHICH_TAG.match(step.thinking)]
    for step in asked:
        if step.result is not None and not step.result.ok:
            return final(f"I could not ask you: {step.result.problem()}")
    last = asked[-1] if asked else None
    if last is not None and last.reply is not None:
        if is_cancel(last.reply):
            return final("Cancelled: no Trader was created.")
        chosen = _named(analysts, last.reply, quote)
        if chosen:
            return chosen
        if len(asked) >= MAX_ASKS:
            return final("I still could not tell which analyst you meant, so no Trader was "
                         "created. Say e.g. 'add a trader for BTC/USDT'.")
    have = "; ".join(
        f"{a.name} (signals to {names.get(str(a.config.get('trader_agent_id')), 'a Trader')})"
        for a in analysts)
    question = (f"Every analyst already has a Trader: {have}. Which analyst (or symbol) "
                "should the new Trader take over?")
    if last is not None and last.reply is not None:
        question = f"I could not match that to an analyst. {question}"
    return call(
        "ask_user_clarification", f"which analyst {len(asked) + 1}",
        "Every analyst has a Trader; a new one only makes sense for an analyst the person "
        "names, so asking instead of guessing.",
        question_text=question,
        suggested_replies=("reply", [a.name for a in analysts][:4] + ["Cancel"]),
        expected_response_format_hint="TEXT",
    )


def _named(analysts: list[Listed], reply: str, quote: str) -> list[Listed]:
    """The analysts a reply names: by name or id (whole or in part), else by symbol."""
    wanted = reply.strip().lower().removeprefix("the ").strip(" .!")
    exact = [a for a in analysts if wanted in (a.name.lower(), a.agent_id.lower())]
    if exact:
        return exact
    partial = [a for a in analysts if wanted and wanted in a.name.lower()]
    if partial:
        return partial
    symbols = set(parse_fragment(reply, quote).symbols)
    return [a for a in analysts
            if symbols & {str(s) for s in a.config.get("symbols") or []}]
