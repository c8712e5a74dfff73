"""The per-agent opt-in of a live account: a grant per agent and exchange, the person's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.ccxt.live_grants import LiveGrants
from app.domain.errors import AccessDeniedError
from app.store.order_journal import OrderJournal


def test_an_agent_is_refused_until_the_person_allows_it_and_again_once_revoked(
    tmp_path: Path,
) -> None:
    with OrderJournal(tmp_path / "kestrel.db") as journal:
        grants = LiveGrants(journal, "binance")
        with pytest.raises(AccessDeniedError, match="may not trade live on binance") as caught:
            grants.check("trader-1")
        assert caught.value.details["needs"] == "may_trade_live"
        grant = grants.grant("Trader-1", "the person", 1_700_000_000_000)
        grants.check("trader-1")  # ids compare case-insensitively
        assert grants.get("TRADER-1") == grant
        assert grant.describe() == "allowed by the person at 2023-11-14T22:13:20Z"
        grants.revoke("trader-1")
        assert grants.get("trader-1") is None
        with pytest.raises(AccessDeniedError):
            grants.check("trader-1")


def test_a_grant_on_one_exchange_allows_nothing_on_another(tmp_path: Path) -> None:
    with OrderJournal(tmp_path / "kestrel.db") as journal:
        LiveGrants(journal, "binance").grant("trader-1", "the person", 0)
        with pytest.raises(AccessDeniedError, match="on okx"):
            LiveGrants(journal, "okx").check("trader-1")


def test_the_persons_own_orders_need_no_grant(tmp_path: Path) -> None:
    with OrderJournal(tmp_path / "kestrel.db") as journal:
        LiveGrants(journal, "binance").check("person")
