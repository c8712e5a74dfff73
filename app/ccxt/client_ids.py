"""Client order ids for the exchange, derived from the tool call, and each exchange's id rules.

Why derived: a task redelivered after a crash repeats its tool call with the same key, so it must
produce the same client order id, which finds the order the first attempt placed instead of
placing another. The id is a hash of the venue, the agent and the agent's own order id (the
tool-call key ``k-<task>:<step>`` or the model's ``client_order_id``), so it is short, reveals
nothing, and fits every exchange's rules at once: letters and digits only, 24 characters.

What differs per exchange is data, not code (``VENUES``): the length and characters allowed, the
ccxt parameter that carries the id on create and on lookup, and how the exchange words its refusal
of an id it has seen, which must never be taken for a refusal of the order.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from app.domain.agents import agent_key

PREFIX = "kst"
HASH_CHARS = 21  # base32 characters: 105 bits, no collision in any account's lifetime


@dataclass(frozen=True, slots=True)
class ClientIdRules:
    """One exchange's rules for client order ids, as ccxt passes them.

    Attributes:
        max_length: the longest id the exchange takes.
        pattern: the characters it takes, as a regular expression over the whole id.
        create_param: the ``params`` key of ``create_order`` that carries the id.
        lookup_param: the ``params`` key of ``fetch_order`` that finds an order by it, or
            ``None`` when the exchange cannot (then open and closed orders are scanned).
        duplicate_markers: text in the exchange's refusal of a repeated id (seen by ccxt as
            ``InvalidOrder`` on Binance: code -2010 "Duplicate order sent.").
    """

    max_length: int
    pattern: str
    create_param: str
    lookup_param: str | None
    duplicate_markers: tuple[str, ...] = ()

    def accepts(self, client_order_id: str) -> bool:
        return len(client_order_id) <= self.max_length and bool(
            re.fullmatch(self.pattern, client_order_id))


VENUES: dict[str, ClientIdRules] = {
    # newClientOrderId: up to 36 of [.A-Z:/a-z0-9_-]; looked up with origClientOrderId
    "binance": ClientIdRules(36, r"[.A-Z:/a-z0-9_-]{1,36}", "newClientOrderId",
                             "origClientOrderId", ("Duplicate order sent",)),
    # clOrdId: up to 32 letters and digits; fetchOrder takes clOrdId
    "okx": ClientIdRules(32, r"[A-Za-z0-9]{1,32}", "clOrdId", "clOrdId",
                         ("Duplicated clOrdId", "clOrdId already exists")),
}
DEFAULT_RULES = ClientIdRules(32, r"[A-Za-z0-9]{1,32}", "clientOrderId", None,
                              ("duplicate", "Duplicate"))


def rules_for(venue: str) -> ClientIdRules:
    return VENUES.get(venue, DEFAULT_RULES)


def derive(venue: str, agent_id: str, agent_order_id: str) -> str:
    """The exchange's client order id for one agent's order on ``venue``: ``kst`` + 21 base32
    characters of SHA-256 over the three, lower case (every exchange's rules take it). The agent
    id counts without regard to case, as everywhere in Kestrel (``agent_key``)."""
    owner = agent_key(agent_id)
    digest = hashlib.sha256(f"{venue}\x00{owner}\x00{agent_order_id}".encode()).digest()
    text = base64.b32encode(digest).decode("ascii").lower()[:HASH_CHARS]
    client_id = PREFIX + text
    rules = rules_for(venue)
    if not rules.accepts(client_id):  # a rule tighter than every exchange's known one
        raise ValueError(f"{venue} does not take the client order id {client_id!r}")
    return client_id
