"""``--venue live --exchange ID``: ``kestrel run``, ``chat`` and ``tool`` on an exchange account.

Live is opt-in twice here as in the window. The workspace: ``--venue live --exchange binance``
opens the live venue only with ``--confirm-live binance`` (the exchange named again), or, at a
terminal, the person typing the exchange's name after reading what is at stake. Each agent:
``--allow-live NAME`` marks the agent called NAME "may trade live" on that exchange (kept;
repeatable), also one that ``--setup`` or the chat creates under that name (as it is created,
before it runs); any other agent's orders are refused there. Without ``--venue``, a workspace
whose records show it trading a live account (its order journal) or live quotes (its paper
account) other than its ``[venue]`` setting says is refused with the command to use
(``chosen_venue``): a command never acts on a paper account while the person means theirs.
Before any agent starts (or a tool call acts), reconciliation settles the journal with the
exchange; open orders there that Kestrel does not know are listed, and the agents start only
once the person chose ``--adopt-unknown`` or ``--ignore-unknown`` (or answered at the terminal).
Balances that differ from what the journal explains trip the kill switch; the differences are
printed with what to do, and ``--accept-exchange-balances`` (or typing ``accept`` at the terminal)
takes the exchange's balances as the journal's baseline, on the person's word. Resetting the kill
switch stays its own act (the window, or ``/reset`` in ``kestrel chat``).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence

from app.cli.common import terminal_ask
from app.config import VenueSettings
from app.domain.errors import OperationalError
from app.events import AgentStateChanged
from app.runtime.live_startup import (
    DecideUnknown,
    UnknownOrderChoice,
)
from app.runtime.live_venue import confirmation_text
from app.runtime.venue import VenueSpec
from app.runtime.workspace_venue import RecordedVenue, recorded_venue
from app.runtime.world import World
from app.trading.live_account import ExchangeOrder
from app.workspace import Workspace

Ask = Callable[[str], str | None]


def add_venue_arguments(parser: argparse.ArgumentParser) -> None:
    """``--venue``, ``--exchange`` and ``--symbol``: which market a command opens."""
    parser.add_argument("--venue", choices=("replay", "live-paper", "live"),
                        help="replay: the offline replay of kline files; live-paper: paper "
                             "trading on an exchange's live quotes (network, no keys); live: "
                             "REAL orders on your exchange account (keys from the OS keyring; "
                             "confirm with --confirm-live); default: the workspace's [venue] "
                             "setting (replay)")
    parser.add_argument("--exchange", metavar="ID",
                        help="live kinds: the ccxt id of the exchange, e.g. binance; default: "
                             "the workspace's [venue] setting")
    parser.add_argument("--symbol", dest="symbols", action="append", default=[],
                        metavar="SYMBOL",
                        help="live kinds: a market to follow (repeatable), e.g. BTC/USDT; "
                             "default: the workspace's [venue] setting")


def add_live_arguments(parser: argparse.ArgumentParser, *, grants: bool = True) -> None:
    """The live venue's options; ``grants``: also ``--allow-live`` (a command with agents)."""
    live = parser.add_argument_group(
        "live trading (real money)",
        "Trade on a real exchange account; keys come from the OS keyring (Settings > "
        "Exchanges).")
    live.add_argument("--quote", default="USDT",
                      help="live: the account's currency; only pairs quoted in it trade (USDT)")
    live.add_argument("--confirm-live", metavar="EXCHANGE", default="",
                      help="live: confirm real-money trading by naming the exchange again; "
                           "without it, a terminal asks")
    if grants:
        live.add_argument("--allow-live", action="append", default=[], metavar="AGENT",
                          help="live: allow the agent with this name (or id) to place orders "
                               "on the exchange (kept; repeatable); an agent --setup or the "
                               "chat creates under this name is allowed as it is created")
    unknown = live.add_mutually_exclusive_group()
    unknown.add_argument("--adopt-unknown", action="store_true",
                         help="live: open orders on the exchange Kestrel does not know are "
                              "followed as yours")
    unknown.add_argument("--ignore-unknown", action="store_true",
                         help="live: such orders are left alone and never listed again")
    live.add_argument("--accept-exchange-balances", action="store_true",
                      help="live: balances the journal cannot explain (a deposit, a withdrawal, a "
                           "trade made elsewhere) are accepted as the exchange has them; the "
                           "kill switch they tripped stays tripped until you reset it")


def venue_spec(args: argparse.Namespace, settings: VenueSettings) -> VenueSpec | None:
    """The live venue the command line (over the workspace's ``[venue]`` setting) asks for;
    None for the replay.

    Raises:
        ValueError: live options given for the replay.
    """
    kind = args.venue or settings.kind
    if kind == "live":  # real money: only when asked for on the command line, confirmed
        return live_spec(args, settings)
    if kind == "replay":
        if args.exchange or args.symbols:
            raise ValueError("--exchange and --symbol choose a live market: add "
                             "--venue live-paper")
        return None
    return VenueSpec.live_paper(args.exchange or settings.exchange,
                                tuple(args.symbols) or settings.symbols)


def chosen_venue(args: argparse.Namespace, workspace: Workspace) -> VenueSpec | None:
    """``venue_spec`` for the workspace; without ``--venue``, refused when the workspace's
    records say it trades elsewhere than its ``[venue]`` setting would open (a live account,
    or paper on live quotes): the command would act on another account than the person's.

    Raises:
        OperationalError: such a refusal, with the reason and the command to use instead.
        ValueError: as ``venue_spec``.
    """
    settings = workspace.settings().venue
    if args.venue is None:
        recorded = recorded_venue(workspace)
        if recorded is not None and recorded.kind != settings.kind:
            raise OperationalError(_refusal(args, recorded, settings.kind))
    return venue_spec(args, settings)


def _refusal(args: argparse.Namespace, recorded: RecordedVenue, default: str) -> str:
    exchange = recorded.exchange
    opens = ("the offline replay's paper account" if default == "replay"
             else f"paper on {args.exchange or exchange}'s live quotes")
    extra = ["--venue", recorded.kind]
    if str(args.exchange or "").strip().lower() != exchange:
        extra += ["--exchange", exchange]
    if recorded.kind == "live":
        what = f"this workspace trades LIVE on your {exchange} account"
        extra += ["--confirm-live", exchange]
        instead = f"your {exchange} account"
    else:
        what = f"this workspace paper-trades on {exchange}'s live quotes"
        instead = "that paper account"
    argv = list(getattr(args, "argv", None) or [getattr(args, "command", None) or "COMMAND"])
    return (f"{what} ({recorded.why}); without --venue this command would act on {opens}, "
            f"not on {instead} (--venue {default} does so on purpose). To act on {instead}: "
            f"kestrel {shlex.join([*argv, *extra])}")


def live_spec(
    args: argparse.Namespace, settings: VenueSettings, ask: Ask = terminal_ask
) -> VenueSpec:
    """The live venue ``args`` ask for (``--exchange``, ``--symbol`` over the workspace's
    ``[venue]`` setting), confirmed by the flag or at the terminal.

    Raises:
        OperationalError: no exchange named.
    """
    exchange = str(args.exchange or settings.exchange or "").strip().lower()
    if not exchange:
        raise OperationalError("--venue live needs the exchange: add --exchange, e.g. binance")
    confirmed = str(getattr(args, "confirm_live", "") or "").strip().lower()
    if confirmed != exchange:
        answer = ask(f"{confirmation_text(exchange)}\nType {exchange} to trade live, anything "
                     "else to stop: ")
        confirmed = (answer or "").strip().lower()
    symbols = tuple(s.upper() for s in args.symbols) or tuple(settings.symbols)
    quote = str(getattr(args, "quote", "USDT")).upper()
    return VenueSpec.live_account(exchange, symbols, quote, confirmed=confirmed)


def unknown_decision(args: argparse.Namespace, ask: Ask = terminal_ask) -> DecideUnknown:
    """The person's decision about unknown exchange orders: the flag, else the terminal."""

    async def decide(orders: Sequence[ExchangeOrder]) -> UnknownOrderChoice | None:
        if getattr(args, "adopt_unknown", False):
            return UnknownOrderChoice.ADOPT
        if getattr(args, "ignore_unknown", False):
            return UnknownOrderChoice.IGNORE
        listed = "\n".join(f"  - {o.describe()}" for o in orders)
        answer = ask(f"Open orders on {args.exchange} that Kestrel does not know:\n{listed}\n"
                     "adopt (follow them as yours) or ignore (leave them alone)? ")
        word = (answer or "").strip().lower()
        return {"adopt": UnknownOrderChoice.ADOPT, "ignore": UnknownOrderChoice.IGNORE}.get(word)

    return decide


class LiveGrantsByName:
    """``--allow-live NAME``: the agents called NAME (or with that id) marked "may trade live"
    on the world's exchange. Those that exist are granted by ``grant_existing``; while
    ``follow`` is on, an agent created under such a name is granted as it is created, before
    it first runs: a new workspace's agents exist only once ``--setup`` (or the chat) made them.

    Raises:
        OperationalError: names given for a venue that is not a live account.
    """

    def __init__(self, world: World, names: Sequence[str],
                 by: str = "the person (--allow-live)", out: Callable[[str], None] = print
                 ) -> None:
        self.world = world
        self.names = list(names)
        self.by = by
        self.out = out
        self.matched: set[str] = set()
        live = world.venue.live
        self.grants = None if live is None else live.grants
        if self.names and (self.grants is None or world.agents is None):
            raise OperationalError("--allow-live applies to the live venue only (--venue live)")

    @property
    def pending(self) -> list[str]:
        """The names no agent had yet."""
        return [n for n in self.names if n not in self.matched]

    def grant_existing(self) -> list[str]:
        """Grant every agent of the workspace a name matches; return what was done."""
        if not self.names:
            return []
        assert self.world.agents is not None
        return [line for info in self.world.agents.manager.list_agents()
                for line in self._grant_if_named(info.agent_id, info.name)]

    def require_all(self) -> None:
        """Refuse a name that matched no agent.

        Raises:
            OperationalError: naming it and the workspace's agents.
        """
        if not self.pending:
            return
        assert self.world.agents is not None
        known = ", ".join(a.name for a in self.world.agents.manager.list_agents()) or "none yet"
        raise OperationalError(f"--allow-live {self.pending[0]}: no agent is called so "
                               f"(agents: {known})")

    def follow(self) -> None:
        if self.names:
            self.world.bus.subscribe(AgentStateChanged, self._on_agent)

    def stop(self) -> None:
        self.world.bus.unsubscribe(AgentStateChanged, self._on_agent)

    def _on_agent(self, event: AgentStateChanged) -> None:
        """An agent was created: granted now, synchronously, before its first step."""
        if event.state != "created" or self.world.agents is None:
            return
        info = self.world.agents.store.get(event.agent_id)
        if info is not None:
            for line in self._grant_if_named(info.agent_id, info.name):
                self.out(line)

    def _grant_if_named(self, agent_id: str, name: str) -> list[str]:
        named = [n for n in self.names
                 if n.casefold() in (name.casefold(), agent_id.casefold())]
        if not named or self.grants is None:
            return []
        self.matched.update(named)
        self.grants.grant(agent_id, self.by, self.world.venue.clock.now_ms())
        return [f"{name} may trade live on {self.grants.venue}"]


def live_banner(world: World) -> str:
    said = world.venue.live.startup() if world.venue.live is not None else None
    text = f"{world.venue.label}: REAL orders with REAL money."
    if said is not None:
        text += f" Start-up: {said}."
    return text


async def settle_mismatch(
    world: World, args: argparse.Namespace, ask: Ask = terminal_ask, by: str = "the person"
) -> list[str]:
    """The lines to print about balances the journal cannot explain, with what to do; the
    exchange's balances accepted when the person said so (the flag, or ``accept`` typed)."""
    live = world.venue.live
    if live is None or not live.reconciliation.mismatches:
        return []
    reconciler = live.reconciliation
    venue = reconciler.venue
    check = await reconciler.balance_check()  # read fresh: what is accepted is what is shown
    if check is None or not check.mismatches:
        return [f"The balances on {venue} agree with the journal again."]
    listed = "\n".join(f"  - {m.describe()}" for m in check.mismatches)
    lines = [f"BALANCES DIFFER on {venue} from what Kestrel's order journal explains:\n{listed}"]
    accept = getattr(args, "accept_exchange_balances", False)
    if not accept:
        answer = ask(f"{lines[0]}\nCheck the exchange's deposits, withdrawals and trade history. "
                     f"Type accept to take {venue}'s balances as right (the kill switch stays "
                     "tripped), anything else to leave them: ")
        accept = (answer or "").strip().lower() == "accept"
        if answer is not None:
            lines = []  # the person has read them at the prompt
    if accept:
        how = "--accept-exchange-balances" if getattr(args, "accept_exchange_balances", False) \
            else "typed at the terminal"
        reconciler.accept_balances(check, by=f"{by} ({how})")
        lines.append(f"Accepted {venue}'s balances as the journal's new starting point "
                     "(recorded). The kill switch stays tripped: reset it in the window or with "
                     "/reset in kestrel chat when you are satisfied.")
        return lines
    lines.append(
        "What to do: check the exchange's deposits, withdrawals and trade history for these "
        "differences. If the exchange is right, accept its balances: in the window (the kill "
        "switch banner > Accept the exchange's balances) or kestrel run --venue live "
        "--accept-exchange-balances; then reset the kill switch (the window, or /reset in "
        "kestrel chat). Until then the Risk Guard refuses every new order.")
    return lines
