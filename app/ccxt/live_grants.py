"""Which agents may trade live on an exchange: the person's grant, per agent, kept in the journal.

Live trading is opt-in twice: the workspace opens a live venue (a confirmation naming the exchange)
and each agent that places orders there is allowed to by the person. A grant is the person's act
(the Agents panel, ``kestrel run --allow-live``), never an agent's: it is not part of an agent's
configuration, which the Orchestrator fills in when it creates an agent. Grants live in the
order journal's per-venue settings (``journal_meta``, key ``live_grant:<agent>``), next to the
orders they allow, so a grant for one exchange allows nothing on another.

Orders the person places or adopts (agent id ``person``) need no grant: the person chose the
live venue.
"""

from __future__ import annotations

from app.domain.agents import agent_key
from app.domain.errors import AccessDeniedError
from app.store.order_journal import OrderJournal
from app.trading.live_account import PERSON, LiveGrant

_PREFIX = "live_grant:"
__all__ = ["PERSON", "LiveGrant", "LiveGrants"]

class LiveGrants:
    """The grants of one exchange's account."""

    def __init__(self, journal: OrderJournal, venue: str) -> None:
        self.journal = journal
        self.venue = venue

    def grant(self, agent_id: str, by: str, now_ms: int) -> LiveGrant:
        by = " ".join(by.split()) or PERSON
        self.journal.set_meta(self.venue, {
            _PREFIX + agent_key(agent_id): f"{now_ms}|{by}|{agent_id}"})
        return LiveGrant(agent_id, by, now_ms)

    def revoke(self, agent_id: str) -> None:
        self.journal.set_meta(self.venue, {_PREFIX + agent_key(agent_id): ""})

    def get(self, agent_id: str) -> LiveGrant | None:
        raw = self.journal.meta(self.venue, _PREFIX + agent_key(agent_id))
        if not raw:
            return None
        when, by, named = raw.split("|", 2)
        return LiveGrant(named, by, int(when))

    def allows(self, agent_id: str) -> bool:
        return agent_key(agent_id) == PERSON or self.get(agent_id) is not None

    def check(self, agent_id: str) -> None:
        """Refuse an order of an agent the person has not allowed to trade live here.

        Raises:
            AccessDeniedError: naming the agent, the exchange and how the person allows it.
        """
        if self.allows(agent_id):
            return
        raise AccessDeniedError(
            f"Agent {agent_id!r} may not trade live on {self.venue}: this is a LIVE account "
            "with real money, and the person has not marked this agent 'may trade live'. The "
            "order was not sent. Tell the person (notify_user) if you think it should be; only "
            "they can allow it (Agents panel > May trade live, or kestrel run --allow-live).",
            details={"agent_id": agent_id, "venue": self.venue, "needs": "may_trade_live"},
        )
