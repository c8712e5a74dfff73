"""What each bot command does, against the runtime's own services; no Telegram types here.

Every action goes through the path the window and ``kestrel chat`` use: the broker port for the
account, ``AgentManager.control`` for pause/resume/stop, ``AgentManager.answer`` for an answer
(stored in the question store first, so it survives a restart, then the parked agent resumes), and
``AgentManager.send_user_message`` to the Orchestrator for plain text. The data is gathered here
once and worded by ``app.telegram.format``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from app.domain.agents import AgentInfo, AgentState, Question, QuestionKind, Task
from app.domain.errors import KestrelError
from app.telegram import format as fmt
from app.tools.protocol.free_text import DISPLAY
from app.tools.protocol.parser import parse_response

if TYPE_CHECKING:
    from app.runtime.world import World

logger = logging.getLogger(__name__)

DAY_MS = 86_400_000
TRADES_SHOWN = 10
NO_KILL_SWITCH = "not available in this version"


class KillSwitch(Protocol):
    """The one switch that stops all trading (``app.orchestration.kill_switch.KillSwitch``); the
    bot only trips it (a reset is for the window).

    ``trip`` is awaited on the event loop and returns what it did, in a sentence for the person
    (or None); it may raise ``KestrelError`` with a message for the person.
    """

    def is_tripped(self) -> bool:
        ...

    async def trip(self, reason: str, by: str) -> str | None:
        ...


class CommandFailed(KestrelError):
    """A command could not be done; the message says why, for the person."""


class BotCommands:
    """The bot's commands over one runtime.

    Args:
        refused: how many senders the gatekeeper refused so far (shown by ``/status``).
    """

    def __init__(
        self,
        runtime: World,
        *,
        kill_switch: KillSwitch | None = None,
        refused: Callable[[], int] = lambda: 0,
    ) -> None:
        self.rt = runtime
        self.kill_switch = kill_switch
        self._refused = refused

    # -- reading ---------------------------------------------------------------------------------

    def name(self, agent_id: str) -> str:
        info = self.rt.agents.store.get(agent_id)
        return info.name if info is not None else agent_id[:8]

    def kill_state(self) -> str:
        if self.kill_switch is None:
            return NO_KILL_SWITCH
        return "TRIPPED" if self.kill_switch.is_tripped() else "armed"

    async def overview(self, *, with_fills: bool = False) -> fmt.Overview:
        account = await self.rt.venue.broker.account()
        pending = self.rt.agents.questions.pending()
        now = self.rt.venue.clock.now_ms()
        fills = ()
        if with_fills:
            recent = await self.rt.venue.broker.trades(None, 1000)
            fills = tuple(f for f in recent if f.time_ms > now - DAY_MS)
        return fmt.Overview(
            market_ms=now, account=account, agents=self.rt.agents.manager.list_agents(),
            approvals_waiting=sum(q.kind is QuestionKind.APPROVAL for q in pending),
            questions_waiting=sum(q.kind is QuestionKind.CLARIFICATION for q in pending),
            kill_switch=self.kill_state(), refused=self._refused(), fills_24h=fills,
        )

    async def status(self) -> str:
        return fmt.status_text(await self.overview())

    async def summary(self) -> str:
        return fmt.summary_text(await self.overview(with_fills=True))

    async def balance(self) -> str:
        return fmt.balance_text(await self.rt.venue.broker.account())

    async def positions(self) -> str:
        return fmt.positions_text(await self.rt.venue.broker.positions())

    async def orders(self) -> str:
        return fmt.orders_text(await self.rt.venue.broker.open_orders(), self.name)

    async def trades(self) -> str:
        return fmt.trades_text(await self.rt.venue.broker.trades(None, TRADES_SHOWN), self.name)

    def agents(self) -> str:
        return fmt.agents_text(self.rt.agents.manager.list_agents())

    # -- agents ----------------------------------------------------------------------------------

    def _agent(self, name: str) -> AgentInfo:
        info = self.rt.agents.store.find(name)
        if info is None:
            known = ", ".join(a.name for a in self.rt.agents.manager.list_agents()) or "none"
            raise CommandFailed(f"There is no agent named {name!r}. Agents: {known}.")
        return info

    async def _control(self, agents: list[AgentInfo], action: str) -> list[str]:
        done = []
        for info in agents:
            try:
                await self.rt.agents.manager.control(info.agent_id, action)
            except ValueError as exc:  # a refused state change, e.g. pausing a stopped agent
                raise CommandFailed(f"{info.name}: {exc}") from exc
            done.append(info.name)
        return done

    async def pause(self, name: str = "") -> str:
        if name:
            done = await self._control([self._agent(name)], "pause")
            return f"Paused {done[0]}."
        active = (AgentState.RUNNING, AgentState.WAITING_FOR_USER)
        done = await self._control(
            [a for a in self.rt.agents.manager.list_agents() if a.state in active], "pause")
        return f"Paused {len(done)} agent(s): {', '.join(done)}." if done else \
            "No agent was running."

    async def resume(self, name: str = "") -> str:
        if name:
            done = await self._control([self._agent(name)], "resume")
            return f"Resumed {done[0]}."
        done = await self._control(
            [a for a in self.rt.agents.manager.list_agents() if a.state is AgentState.PAUSED],
            "resume")
        return f"Resumed {len(done)} agent(s): {', '.join(done)}." if done else \
            "No agent was paused. To run a stopped agent again: /resume <name>."

    async def stop_all(self) -> str:
        done = await self._control(
            [a for a in self.rt.agents.manager.list_agents() if a.state is not AgentState.STOPPED],
            "stop")
        return (f"Stopped {len(done)} agent(s): {', '.join(done)}. /resume <name> runs one "
                "again.") if done else "Every agent was already stopped."

    # -- the kill switch -------------------------------------------------------------------------

    async def kill(self, by: str) -> str:
        if self.kill_switch is None:
            return f"The kill switch is {NO_KILL_SWITCH}. /stop_all stops every agent."
        if self.kill_switch.is_tripped():
            return "The kill switch is already tripped."
        done = await self.kill_switch.trip("tripped from Telegram", by)
        logger.warning("kill switch tripped from Telegram by %s", by)
        return "Kill switch tripped." + (f" {done}" if done else "")

    # -- questions and approvals -----------------------------------------------------------------

    def pending(self, kind: QuestionKind | None = None) -> list[Question]:
        return [q for q in self.rt.agents.questions.pending() if kind is None or q.kind is kind]

    def find(self, reference: str, kind: QuestionKind | None = None) -> Question:
        """The open question a short reference (``ref 1a2b3c4d``, or more of its id) names.

        Raises:
            CommandFailed: none or several match (the message lists the references).
        """
        wanted = reference.strip().lower().replace("-", "")
        if len(wanted) < 4:
            raise CommandFailed("Give at least 4 characters of the reference, e.g. "
                                "/approve 1a2b3c4d.")
        found = [q for q in self.pending(kind) if q.question_id.replace("-", "").startswith(
            wanted)]
        if len(found) == 1:
            return found[0]
        open_refs = ", ".join(fmt.ref(q.question_id) for q in self.pending(kind)) or "none"
        if not found:
            raise CommandFailed(f"No open question has the reference {reference!r}; open: "
                                f"{open_refs}.")
        raise CommandFailed(f"{reference!r} matches several questions; give more of it.")

    def answer(self, question: Question, reply: str) -> Question:
        """Answer once, durably; the parked agent resumes (an approval places the order)."""
        try:
            return self.rt.agents.manager.answer(question.question_id, reply)
        except KestrelError as exc:
            raise CommandFailed(str(exc)) from exc

    def message_for(self, question: Question, expiry_s: int) -> fmt.Outgoing:
        order = ""
        if question.kind is QuestionKind.APPROVAL:
            order = fmt.order_words(order_params(str(question.details.get("call_xml", ""))))
        venue = self.rt.venue
        return fmt.question_message(
            question, self.name(question.agent_id), order=order,
            expiry_s=expiry_s if question.kind is QuestionKind.APPROVAL else None,
            live=venue.label if venue.is_live_account else "")

    # -- the Orchestrator ------------------------------------------------------------------------

    async def chat(self, text: str) -> Task | Question:
        """The person's message to the Orchestrator: the chat panel's own path."""
        orchestrator = await self.rt.ensure_orchestrator()
        try:
            return self.rt.agents.manager.send_user_message(orchestrator.agent_id, text)
        except (KestrelError, ValueError) as exc:
            raise CommandFailed(f"Not sent: {exc}") from exc


def order_params(call_xml: str) -> dict[str, str]:
    """The plain parameters of a held order call (empty when it cannot be read)."""
    parsed = parse_response(call_xml, free_text=DISPLAY)
    if parsed.call is None:
        return {}
    return {node.tag: node.text for node in parsed.call.params if not node.children}
