"""Every report shows the refused orders next to the trades: a run whose orders were all refused
must never read as a clean "0 trades".

The strategy backtest's orders are refused by its Risk Guard; the agents' by the broker, their
model asking for a thousand times what the account can pay (it otherwise decides as the rule
engine does, through the OpenAI-compatible API of the fake server).
"""

from __future__ import annotations

import asyncio
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.agents.llm.port import ChatMessage
from app.backtest.report import summary_table
from app.config import LLMSettings, PaperSettings
from app.config.risk import MaxOrderNotionalConfig, RiskConfig
from app.domain.clock import ms_to_iso
from app.market.csv_loader import load_csv
from app.runtime.agent_backtest import AgentBacktestOptions, run_agent_backtest
from app.runtime.evaluation import STANDARD_WINDOWS, EvalOptions, EvalWindow, run_eval
from app.runtime.strategy_backtest import RunOptions, run_backtest
from tests.helpers.fake_llm_servers import FakeOpenAIServer
from tests.helpers.prompt_rule_model import PromptRuleModel
from tests.integration.test_strategy_backtest import Probe, write_candles, zigzag

# bars 205 to 217 of the bundled BTC/USDT file: the trend analyst signals a BUY there
SIGNAL_WARMUP, SIGNAL_BARS = 205, 12
NOTHING_TRADED = "No trade was made, but"


class OversizingModel(PromptRuleModel):
    """Decides as the rule engine would, but orders a thousand times the quantity it sized."""

    def decide(self, model: str, system: str, agent_id: str, kept: list[ChatMessage]) -> str:
        answer = super().decide(model, system, agent_id, kept)
        if "<create_order>" not in answer:
            return answer
        return re.sub(r"<quantity>([^<]+)</quantity>",
                      lambda m: f"<quantity>{Decimal(m.group(1)) * 1000}</quantity>", answer)


def _next_to_trades(figures: dict[str, Any]) -> list[str]:
    keys = list(figures)
    return keys[keys.index("trades"):keys.index("trades") + 2]


def _subject(server: FakeOpenAIServer) -> LLMSettings:
    return LLMSettings(provider="openai-compatible", base_url=server.base_url, model="gpt-4o",
                       max_retries=0, stream=False)


def test_a_strategy_whose_orders_the_risk_guard_refuses_reports_them_beside_no_trades(
    tmp_path: Path,
) -> None:
    path = write_candles(tmp_path / "BTC-USDT_1h_refused.csv", zigzag(40))
    tiny = RiskConfig(max_order_notional=MaxOrderNotionalConfig(limit=Decimal(1)))
    result = run_backtest([path], Probe(buy_at=5, sell_at=10), RunOptions(
        paper=PaperSettings(slippage_bps=Decimal(0)), risk=tiny, out_dir=tmp_path / "out"))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    strategy = summary["strategy"]
    assert _next_to_trades(strategy) == ["trades", "refused_orders"]
    assert strategy["trades"] == 0 and strategy["refused_orders"] == 2
    # the buy, refused by the guard; the close, refused for want of a position
    assert strategy["refused_orders_by"] == {"INVALID_ORDER": 1,
                                             "risk guard: max_order_notional": 1}
    assert summary["warnings"][0].startswith(NOTHING_TRADED)
    table = summary_table(result)
    assert re.search(r"^Refused orders\s+2\s+n/a$", table, re.MULTILINE), table
    assert f"WARNING: {NOTHING_TRADED} 2 order(s) were refused" in table
    assert "Refused orders by reason: INVALID_ORDER 1, risk guard: max_order_notional 1." \
        in table


def test_an_agent_backtest_reports_the_orders_its_model_had_refused(tmp_path: Path) -> None:
    with FakeOpenAIServer(default=OversizingModel()) as server:
        outcome = asyncio.run(run_agent_backtest(
            [STANDARD_WINDOWS[0].path()], AgentBacktestOptions(
                templates=["AnalystAgent_Trend_v1", "TraderAgent_Default_v1"],
                warmup_bars=SIGNAL_WARMUP, bars=SIGNAL_BARS, llm=_subject(server)),
            tmp_path / "out"))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    strategy = summary["strategy"]
    assert _next_to_trades(strategy) == ["trades", "refused_orders"]
    assert strategy["trades"] == 0 and strategy["refused_orders"] == 1
    assert strategy["refused_orders_by"] == {"INSUFFICIENT_FUNDS": 1}
    assert summary["warnings"][0].startswith(NOTHING_TRADED)
    table = summary_table(outcome.result)
    assert re.search(r"^Refused orders\s+1\s+n/a$", table, re.MULTILINE), table
    assert "Refused orders by reason: INSUFFICIENT_FUNDS 1." in table


def test_an_eval_reports_the_orders_the_model_had_refused_beside_its_trades(
    tmp_path: Path,
) -> None:
    data = STANDARD_WINDOWS[0]
    start = ms_to_iso(int(load_csv(data.path()).series.timestamp_ms[SIGNAL_WARMUP]))
    with FakeOpenAIServer(default=OversizingModel()) as server:
        report = asyncio.run(run_eval(EvalOptions(
            subject=_subject(server), out_dir=tmp_path / "run",
            windows=[EvalWindow("signal", data.file, start, SIGNAL_BARS)])))
    written = json.loads((tmp_path / "run" / "eval.json").read_text(encoding="utf-8"))
    [window] = written["windows"]
    assert _next_to_trades(window) == ["trades", "refused_orders"]
    assert window["trades"] == 0 and window["refused_orders"] == 1
    assert window["refused_orders_by"] == {"INSUFFICIENT_FUNDS": 1}
    assert written["total"]["trades"] == 0 and written["total"]["refused_orders"] == 1
    markdown = (tmp_path / "run" / "eval.md").read_text(encoding="utf-8")
    for shown in (markdown, report.table()):
        lines = [line.strip("| ") for line in shown.splitlines()]
        head = next(line for line in lines if line.startswith("window"))
        row = next(line for line in lines if line.startswith("signal"))
        named = dict(zip(*(re.split(r"\s*\|\s*|\s{2,}", line) for line in (head, row)),
                         strict=True))
        assert named["trades"] == "0" and named["refused"] == "1", shown
