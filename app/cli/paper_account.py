"""``kestrel reset-paper-account``: start a paper account whose stored money is out of range over.

An account opened before ``[paper] initial_cash`` was limited (or whose ledger was edited by
hand) can hold more money than Kestrel computes with exactly; valuing it failed in every command,
and removing the setting did not help, since the account already existed. Opening such a
workspace is now refused, naming the stored value (``app.exchange.paper_account``); this command
is the way on, and a careful one:

- it changes only an account that never had an order or a fill, so nothing was ever computed
  from its money; one with orders or fills stays as it is (a new workspace trades on);
- it asks first: without ``--yes`` it says what it would do and changes nothing;
- it backs the database up before changing it, so the old account can be restored
  (``kestrel restore-backup``);
- the new cash is ``[paper] initial_cash`` as the settings file says (validated, so in range),
  and everything else stays: where the replay is, the agents, their memory, the audit trail.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from app.cli.common import EXIT_OK, EXIT_TOOL_FAILED, workspace_of
from app.domain.errors import OperationalError
from app.domain.numbers import plain
from app.exchange.paper_account import stored_money_problems
from app.store.backups import take_backup
from app.store.ledger import Ledger
from app.workspace import Workspace


def add_reset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, metavar="DIR",
                        help="workspace folder; default: this checkout's")
    parser.add_argument("--yes", action="store_true",
                        help="do it (without: say what would be done and change nothing)")


def cmd_reset_paper_account(args: argparse.Namespace) -> int:
    """Exit 0 done (or nothing to do); 1 not confirmed, nothing changed; 2 refused (why)."""
    outcome = reset_paper_account(workspace_of(args), confirmed=args.yes)
    for line in outcome.said:
        print(line)
    if outcome.needs_yes:
        print("Nothing was changed. Add --yes to start the account over.", file=sys.stderr)
        return EXIT_TOOL_FAILED
    return EXIT_OK


@dataclass(frozen=True, slots=True)
class ResetOutcome:
    """What ``reset_paper_account`` tells the person, and whether it waits for ``--yes``."""

    said: list[str]
    needs_yes: bool = False


def reset_paper_account(workspace: Workspace, *, confirmed: bool) -> ResetOutcome:
    """Start the workspace's paper account over with ``[paper] initial_cash`` when its stored
    money is out of range (see the module docstring).

    Raises:
        OperationalError: the settings cannot be read, the account has orders or fills, or the
            backup cannot be taken (nothing is changed then).
        WorkspaceBusyError: another process holds the workspace.
    """
    cash = workspace.settings().paper.initial_cash  # validated: within range
    hold = workspace.hold_for_writing()
    try:
        ledger = Ledger(workspace.db_path)
        try:
            return _reset(workspace, ledger, cash, confirmed)
        finally:
            ledger.close()
    finally:
        hold.release()


def _reset(workspace: Workspace, ledger: Ledger, cash: Decimal, confirmed: bool) -> ResetOutcome:
    snap = ledger.load()
    if "initialized" not in snap.meta:
        return ResetOutcome(["Nothing to do: this workspace has no paper account yet."])
    problems = stored_money_problems(snap)
    if not problems:
        return ResetOutcome(["Nothing to do: the paper account's money is within range."])
    if snap.orders or snap.fill_count:
        raise OperationalError(
            f"the paper account holds {' and '.join(problems)}, and its {len(snap.orders)} "
            f"orders and {snap.fill_count} fills were made with that money: it is not started "
            "over in place. Trade paper in a new workspace (--workspace NEW_DIR); this one is "
            "kept as it is."
        )
    quote = snap.meta["quote_currency"]
    plan = (f"The paper account holds {' and '.join(problems)}. Starting it over gives it "
            f"{plain(cash)} {quote} ([paper] initial_cash); where its replay is, its agents, "
            "their memory and the audit trail stay. The database is backed up first.")
    if not confirmed:
        return ResetOutcome([plan], needs_yes=True)
    backup = take_backup(workspace.db_path, workspace.backup_dir)
    ledger.start_over(quote, cash)
    return ResetOutcome([plan, f"Backed up to {backup.path}. The paper account starts over "
                               f"with {plain(cash)} {quote}."])
