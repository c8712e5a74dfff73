"""Every money setting has a range, and a value outside it is refused with the reason the range
is there: at the settings file's reading, and by every command (exit 2), never a traceback."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.config import Settings, settings_from_mapping
from app.domain.errors import OperationalError
from tests.helpers.cli import run_cli

TOO_MUCH = ("money is kept to 8 decimal places within 28 significant digits, so amounts above "
            "1000000000000 (a trillion) cannot be computed exactly")
BAD = [
    ("[paper]\ninitial_cash = 100000000000000000000", "paper.initial_cash",
     "less than or equal to 1000000000000", TOO_MUCH),
    ("[paper]\ninitial_cash = 0", "paper.initial_cash", "greater than 0",
     "a paper account needs some cash to trade"),
    ('[paper]\ninitial_cash = "0.000000001"', "paper.initial_cash",
     "no more than 8 decimal places", "money is kept to 8 decimal places"),
    ("[paper]\nfee_rate = 0.5", "paper.fee_rate", "less than or equal to 0.1",
     "0.1, 10% of every trade, is already far above any exchange's"),
    ("[paper]\nfee_rate = -0.001", "paper.fee_rate", "greater than or equal to 0",
     "a fee is paid by the account, never to it"),
    ("[paper]\nslippage_bps = 5000", "paper.slippage_bps", "less than or equal to 1000",
     "1000 (10% off every fill) is beyond any market's"),
    ("[paper]\nslippage_bps = -1", "paper.slippage_bps", "greater than or equal to 0",
     "slippage makes a fill worse, never better"),
    ("[approval]\nabove_quote = 10000000000000", "approval.above_quote",
     "less than or equal to 1000000000000", TOO_MUCH),
    ("[approval]\nabove_quote = 0", "approval.above_quote", "greater than 0",
     "every order is worth more than nothing"),
    ("[agents]\nrun_budget_usd = 10000000000000", "agents.run_budget_usd",
     "less than or equal to 1000000000000", TOO_MUCH),
    ("[agents]\nrun_budget_usd = 0", "agents.run_budget_usd", "greater than 0",
     "a budget of nothing would refuse every model call"),
    ("[risk.max_order_notional]\nlimit = 10000000000000", "risk.max_order_notional.limit",
     "less than or equal to 1000000000000", TOO_MUCH),
    ("[risk.max_order_notional]\nlimit = 0", "risk.max_order_notional.limit", "greater than 0",
     "no order could pass it; to lift the limit, set enabled = false"),
    ("[risk.min_cash_reserve]\namount = 10000000000000", "risk.min_cash_reserve.amount",
     "less than or equal to 1000000000000", TOO_MUCH),
    ("[risk.min_cash_reserve]\namount = -5", "risk.min_cash_reserve.amount",
     "greater than or equal to 0", "a reserve of cash cannot be below nothing"),
    ("[risk.agent_budget]\ndefault = 10000000000000", "risk.agent_budget.default",
     "less than or equal to 1000000000000", TOO_MUCH),
    ("[risk.agent_budget]\ndefault = -1", "risk.agent_budget.default",
     "greater than or equal to 0", "an allotment cannot be below nothing"),
    ("[risk.agent_budget.allotments]\ntrader-1 = 10000000000000",
     "risk.agent_budget.allotments.trader-1", "less than or equal to 1000000000000", TOO_MUCH),
    ("[risk.agent_budget.allotments]\ntrader-1 = -3", "risk.agent_budget.allotments.trader-1",
     "greater than or equal to 0", "an allotment cannot be below nothing"),
    ("[exchanges.binance]\nstop_limit_band = 0.5", "exchanges.binance.stop_limit_band",
     "less than 0.2", "would let a stop sell far below the price it protects"),
]
IDS = [f"{where}:{bound.split()[0]}" for _, where, bound, _ in BAD]


@pytest.mark.parametrize(("toml", "where", "bound", "why"), BAD, ids=IDS)
def test_a_money_setting_out_of_range_is_refused_with_its_reason(tmp_path, toml, where, bound,
                                                                 why):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = workspace / "settings.toml"
    settings.write_text(toml + "\n", encoding="utf-8")
    done = run_cli("run", "--workspace", workspace, "--for", "1h")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"kestrel: {settings}: '{where}': "), line
    assert f"should be {bound}" in line or f"should have {bound}" in line, line
    assert why in line.partition(f"{bound}: ")[2], line
    assert "Decimal(" not in line


def test_the_largest_amounts_in_range_are_kept_exactly():
    top = Decimal(10) ** 12
    settings = settings_from_mapping({
        "paper": {"initial_cash": "1000000000000", "fee_rate": "0.1", "slippage_bps": 1000},
        "approval": {"above_quote": "999999999999.99999999"},
        "risk": {"agent_budget": {"allotments": {"trader-1": "1000000000000"}, "default": 0}},
    })
    assert settings.paper.initial_cash == top
    assert settings.approval.above_quote == top - Decimal("0.00000001")
    assert settings.risk.agent_budget.allotments["trader-1"] == top


def test_every_money_setting_has_a_range_with_reasons():
    """A money field added without a range (or without saying why) is caught here."""
    money = {
        ("paper", "initial_cash"), ("paper", "fee_rate"), ("paper", "slippage_bps"),
        ("approval", "above_quote"), ("agents", "run_budget_usd"),
        ("risk.max_order_notional", "limit"), ("risk.min_cash_reserve", "amount"),
        ("risk.agent_budget", "default"), ("risk.agent_budget", "allotments"),
    }
    for section, name in money:
        model: type = Settings
        for part in section.split("."):
            model = model.model_fields[part].annotation  # type: ignore[attr-defined]
        info = model.model_fields[name]  # type: ignore[attr-defined]
        extra = info.json_schema_extra
        assert isinstance(extra, dict) and extra.get("why_low") and extra.get("why_high"), name


def test_a_refusal_names_every_bad_value_at_once():
    with pytest.raises(OperationalError) as refused:
        settings_from_mapping({"paper": {"initial_cash": 10**20, "fee_rate": 2}})
    message = str(refused.value)
    assert "'paper.initial_cash'" in message and "'paper.fee_rate'" in message
