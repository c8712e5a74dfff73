"""Property: whatever agents do, the Risk Guard never lets an order take the account past a limit.

A Hypothesis state machine drives the real trading tools, Risk Guard and paper broker (in-memory
ledger) over five scripted symbols: entries of every order type by several agents (their ids in
varying case), bursts of entries accepted in the same moment on a venue that answers late, cancels,
take-profit/stop-loss exits, closes, and bars that fill orders and move prices. Limits, agents and
amounts are drawn per case.

The committed exposure is computed here from the ledger's committed records and the market's last
closes, independently of the guard's own view: per symbol the position at the mark plus what its
open buys hold back; free cash after those reservations; per agent its positions at cost plus its
open buys. The properties:

- the counting limits hold at every moment, after settlement included: symbols with a position or
  an open buy stay within ``max_open_positions``, open entry orders within ``max_open_orders``;
- no order ever takes a value limit (position weight, cash reserve, agent budget) past its limit:
  after every accepted entry, the limits it concerns hold on the committed state, and nothing but
  a bar (prices moving, fills at a price other than the one reserved, fees paid) ever puts a value
  limit over. Once a bar has, the guard refuses every entry that would add to it.

Exits are never blocked, so exits (take-profit, stop-loss, close, a sell of what is held) may take
the order count past ``max_open_orders``; entries never can, so open buys alone never exceed it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from app.config.risk import RiskConfig
from app.domain.agents import agent_key
from app.domain.errors import KestrelError, RiskRejection
from app.domain.trading import Side
from app.exchange.book import quote_down
from app.exchange.paper import PaperBroker
from app.risk.config import build_guard
from app.risk.guard import MemoryDecisionRecorder
from app.tools.spec import AgentContext
from app.tools.trade_tools import TradeTools
from app.trading.port import OrderRequest
from tests.helpers.orders import order_entry
from tests.helpers.scripted_market import ScriptedMarket, make_scripted_broker, next_bar

D = Decimal
PRICES = {"BTC/USDT": D(40_000), "ETH/USDT": D(2_000), "SOL/USDT": D(100), "XRP/USDT": D("5.5"),
          "ADA/USDT": D("12.5")}
SYMBOLS = tuple(sorted(PRICES))
CASH = D(100_000)
AGENTS = ("trader-1", "TRADER-1", "Trader-2", "trader-2", "analyst")
STEP = D("0.000001")
STEPS = 18  # steps per sequence, each followed by the checks

#: What the runs did, summed over every case (printed, and checked to prove the run meaningful).
STATS: Counter[str] = Counter()


class LateVenue:
    """The paper broker behind a venue that answers each order a loop turn late, so orders placed
    together are all accepted by the guard before any reaches the broker's book."""

    def __init__(self, broker: PaperBroker) -> None:
        self._broker = broker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._broker, name)

    async def create_order(self, req: OrderRequest) -> Any:
        await asyncio.sleep(0)
        return await self._broker.create_order(req)


@dataclass(frozen=True)
class Committed:
    """The committed exposure, from the ledger and the market (not from the guard's view)."""

    equity: Decimal
    exposure: dict[str, Decimal]
    open_buys: set[str]
    held: set[str]
    entry_orders: int  # open buys: in a long-only account every sell is an exit
    all_orders: int
    free_cash: Decimal
    agent_committed: dict[str, Decimal] = field(default_factory=dict)


def committed(broker: PaperBroker, market: ScriptedMarket) -> Committed:
    snap = broker.ledger.load()
    marks = {s: market.last_close(s) for s in SYMBOLS}
    held = {s for s, p in snap.positions.items() if p.size > 0}
    cash = snap.balances.get("USDT", D(0))
    equity = quote_down(cash + sum((snap.positions[s].size * marks[s] for s in held), D(0)))
    exposure = {s: snap.positions[s].size * marks[s] if s in held else D(0) for s in SYMBOLS}
    agents: dict[str, Decimal] = {}
    for (agent, _symbol), (_size, cost) in snap.holdings.items():
        agents[agent_key(agent)] = agents.get(agent_key(agent), D(0)) + cost
    open_orders = [r for r in snap.orders if r.order.status.is_open]
    reserved = D(0)
    for record in open_orders:
        order = record.order
        if order.side is Side.BUY:
            exposure[order.symbol] += record.reserved
            reserved += record.reserved
            key = agent_key(order.agent_id)
            agents[key] = agents.get(key, D(0)) + record.reserved
    return Committed(
        equity=equity, exposure=exposure,
        open_buys={r.order.symbol for r in open_orders if r.order.side is Side.BUY},
        held=held, entry_orders=sum(1 for r in open_orders if r.order.side is Side.BUY),
        all_orders=len(open_orders), free_cash=cash - reserved, agent_committed=agents,
    )


configs = st.fixed_dictionaries({
    "max_position_weight": st.fixed_dictionaries(
        {"limit_pct": st.sampled_from(["10", "20", "35", "60"])}),
    "max_open_positions": st.fixed_dictionaries({"limit": st.integers(1, 4)}),
    "max_open_orders": st.fixed_dictionaries({"limit": st.integers(2, 8)}),
    "max_order_notional": st.fixed_dictionaries(
        {"limit": st.sampled_from(["15000", "30000", "100000"])}),
    "min_cash_reserve": st.fixed_dictionaries({
        "amount": st.sampled_from(["0", "20000", "50000"]),
        "pct_of_equity": st.sampled_from(["0", "10", "40"]),
    }),
    "agent_budget": st.fixed_dictionaries({
        "allotments": st.dictionaries(
            st.sampled_from(["trader-1", "TRADER-2", "analyst"]),
            st.sampled_from(["5000", "20000", "45000"]), max_size=3,
        ),
        "default": st.sampled_from([None, "30000"]),
    }),
    "daily_loss_limit": st.fixed_dictionaries({"enabled": st.booleans()}),
})

#: (side, order type, sized by quote amount): what an entry is, drawn in one go
KINDS = (
    ("BUY", "MARKET", True), ("BUY", "MARKET", False), ("BUY", "MARKET", True),
    ("BUY", "LIMIT", False), ("BUY", "LIMIT", True), ("BUY", "STOP", False),
    ("BUY", "STOP_LIMIT", False), ("SELL", "MARKET", False), ("SELL", "LIMIT", False),
)
entries = st.tuples(
    st.sampled_from(AGENTS),
    st.sampled_from(SYMBOLS),
    st.sampled_from(KINDS),
    st.sampled_from([1, 2, 5, 8, 12, 15, 19, 25, 35]),  # % of the starting cash
    st.integers(-11, 11),  # limit/stop price, % from the last close
).map(lambda t: {"agent": t[0], "symbol": t[1], "side": t[2][0], "order_type": t[2][1],
                 "by_quote": t[2][2], "share_pct": t[3], "offset_pct": t[4]})
moves = st.tuples(*[st.sampled_from([0, 0, 0, 1, -1, 3, -3, 8, -8]) for _ in SYMBOLS])


class GuardedAccount(RuleBasedStateMachine):
    """One account, its guard and its tools, driven by random agents and a random market."""

    @initialize(config=configs)
    def open_account(self, config: dict[str, Any]) -> None:
        self.config = RiskConfig.model_validate(config)
        self.broker, self.market, _ = make_scripted_broker(PRICES, cash=CASH)
        self.guard = build_guard(self.config, MemoryDecisionRecorder())
        tools = TradeTools(order_entry(LateVenue(self.broker), self.guard)).specs()
        self.tools = {spec.name: spec.handler for spec in tools}
        self.loop = asyncio.new_event_loop()
        self._observe()

    def teardown(self) -> None:
        if hasattr(self, "loop"):
            self.loop.close()
            self.broker.ledger.close()

    # -- limits -----------------------------------------------------------------------------

    def _over(self, state: Committed) -> set[tuple[str, str]]:
        """The value limits the committed state exceeds, as (limit, what) keys."""
        over = set()
        weight = self.config.max_position_weight
        if weight.enabled and state.equity > 0:
            for symbol, value in state.exposure.items():
                if value / state.equity * 100 > weight.limit_pct:
                    over.add(("max_position_weight", symbol))
        cash = self.config.min_cash_reserve
        if cash.enabled:
            reserve = max(cash.amount, state.equity * cash.pct_of_equity / 100)
            if state.free_cash < reserve:
                over.add(("min_cash_reserve", ""))
        budget = self.config.agent_budget
        if budget.enabled:
            allotments = {agent_key(a): v for a, v in budget.allotments.items()}
            for agent, amount in state.agent_committed.items():
                allotment = allotments.get(agent, budget.default)
                if allotment is not None and amount > allotment:
                    over.add(("agent_budget", agent))
        return over

    def _observe(self) -> None:
        """Read the committed state after a step; the next step starts from it."""
        self.state = committed(self.broker, self.market)
        self.over = self._over(self.state)

    def _touched(self, req: dict[str, Any]) -> set[tuple[str, str]]:
        """The value limits an accepted entry concerns."""
        if req["side"] != "BUY":
            return set()
        return {("max_position_weight", req["symbol"]), ("min_cash_reserve", ""),
                ("agent_budget", agent_key(req["agent"]))}

    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def open_orders(self) -> list[Any]:
        return self._run(self.broker.open_orders())

    def held_symbols(self) -> list[str]:
        return [s for s in SYMBOLS if self.broker.position_size(s) > 0]

    def _after_orders(self, before: set[tuple[str, str]], accepted: list[dict[str, Any]]) -> None:
        """Orders, cancels and exits may take no value limit over; accepted entries leave the
        limits they concern within bounds, even ones a bar had put over."""
        self._observe()
        over = self.over
        assert over <= before, f"orders took limits over: {sorted(over - before)}"
        for req in accepted:
            assert not over & self._touched(req), f"accepted {req} leaves {sorted(over)}"
            STATS["accepted entries"] += 1

    @invariant()
    def counting_limits_hold_at_every_moment(self) -> None:
        if not hasattr(self, "state"):
            return
        state = self.state
        if self.config.max_open_positions.enabled:
            assert len(state.held | state.open_buys) <= self.config.max_open_positions.limit
        if self.config.max_open_orders.enabled:
            assert state.entry_orders <= self.config.max_open_orders.limit
        STATS["states checked"] += 1

    # -- what agents do ---------------------------------------------------------------------

    def _args(self, entry: dict[str, Any]) -> dict[str, Any]:
        last = self.market.last_close(entry["symbol"])
        share = CASH * entry["share_pct"] / 100
        kind = entry["order_type"]
        at = (last * (1 + D(entry["offset_pct"]) / 100)).quantize(D("0.01"))
        at = max(at, D("0.01"))
        quantity = (share / (at if kind != "MARKET" else last)).quantize(STEP, ROUND_DOWN)
        by_quote = entry["by_quote"] and entry["side"] == "BUY"
        return {
            "symbol": entry["symbol"], "side": entry["side"], "order_type": kind,
            "quantity": None if by_quote else quantity,
            "quote_amount": share.quantize(D("0.01")) if by_quote else None,
            "price": at if kind in ("LIMIT", "STOP_LIMIT") else None,
            "stop_price": at if kind in ("STOP", "STOP_LIMIT") else None,
            "client_order_id": "", "reason": "",
        }

    async def _create(self, entry: dict[str, Any]) -> bool:
        try:
            await self.tools["create_order"](AgentContext(entry["agent"]), self._args(entry))
        except RiskRejection as exc:
            STATS[f"refused by {exc.rule}"] += 1
            return False
        except KestrelError:
            STATS["refused by the broker"] += 1
            return False
        return True

    @rule(entry=entries)
    def place_an_entry(self, entry: dict[str, Any]) -> None:
        before = self.over
        accepted = self._run(self._create(entry))
        self._after_orders(before, [entry] if accepted and entry["side"] == "BUY" else [])
        if accepted and entry["side"] == "BUY" and self.config.max_open_orders.enabled:
            # exits included, the count stood within the limit when this entry was accepted
            assert self.state.all_orders <= self.config.max_open_orders.limit

    @rule(burst=st.lists(entries, min_size=2, max_size=4))
    def place_entries_in_the_same_moment(self, burst: list[dict[str, Any]]) -> None:
        before = self.over

        async def together() -> list[bool]:
            return list(await asyncio.gather(*(self._create(e) for e in burst)))

        outcomes = self._run(together())
        STATS["bursts"] += 1
        self._after_orders(before, [e for e, ok in zip(burst, outcomes, strict=True)
                                    if ok and e["side"] == "BUY"])

    @precondition(lambda self: bool(self.open_orders()))
    @rule(pick=st.integers(0, 100), spelling=st.sampled_from([str.lower, str.upper, str.title]))
    def cancel_an_order(self, pick: int, spelling: Any) -> None:
        before = self.over
        open_now = self.open_orders()
        order = open_now[pick % len(open_now)]
        self._run(self.tools["cancel_order"](
            AgentContext(spelling(order.agent_id)),
            {"symbol": order.symbol, "order_id": order.order_id, "client_order_id": ""},
        ))
        STATS["cancels"] += 1
        self._after_orders(before, [])

    @precondition(lambda self: bool(self.held_symbols()))
    @rule(pick=st.integers(0, 100), agent=st.sampled_from(AGENTS),
          tp_pct=st.none() | st.integers(1, 15), sl_pct=st.none() | st.integers(1, 15),
          close=st.booleans())
    def protect_or_close_a_position(self, pick: int, agent: str, tp_pct: int | None,
                                    sl_pct: int | None, close: bool) -> None:
        before = self.over
        held = self.held_symbols()
        symbol = held[pick % len(held)]
        last = self.market.last_close(symbol)
        ctx = AgentContext(agent)
        try:
            if close or (tp_pct is None and sl_pct is None):
                self._run(self.tools["close_position"](ctx, {"symbol": symbol, "reason": ""}))
                STATS["closes"] += 1
            else:
                self._run(self.tools["set_position_tp_sl_orders"](ctx, {
                    "symbol": symbol,
                    "take_profit_price": None if tp_pct is None
                    else (last * (1 + D(tp_pct) / 100)).quantize(D("0.01")),
                    "stop_loss_price": None if sl_pct is None
                    else (last * (1 - D(sl_pct) / 100)).quantize(D("0.01")),
                }))
                STATS["take-profit/stop-loss exits"] += 1
        except KestrelError:
            STATS["exits the broker refused"] += 1  # e.g. a stop at a price rounding to 0
        self._after_orders(before, [])

    @rule(moves=moves)
    def a_bar_passes(self, moves: tuple[int, ...]) -> None:
        """Prices move by the given percentages (0: a flat bar); orders fill and settle."""
        fills = next_bar(self.market, self.broker,
                         {s: D(m) / 100 for s, m in zip(SYMBOLS, moves, strict=True)})
        STATS["bars"] += 1
        STATS["fills"] += len(fills)
        self._observe()
        STATS["bars leaving a value limit over"] += bool(self.over)


@pytest.mark.slow
def test_no_sequence_of_orders_fills_cancels_and_bars_takes_the_account_past_a_limit() -> None:
    """Three times the Hypothesis profile's ``max_examples`` sequences: 300 in the default ("ci")
    profile, enough for every limit to be reached, thousands with KESTREL_HYPOTHESIS=thorough (see
    tests/conftest.py)."""
    STATS.clear()
    cases = 3 * settings().max_examples
    run_state_machine_as_test(
        GuardedAccount,
        settings=settings(
            max_examples=cases, stateful_step_count=STEPS, deadline=None, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(f"\n{cases} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(STATS.items())))
    # the run was meaningful: entries were accepted and every exposure limit refused some
    assert STATS["accepted entries"] > cases
    for limit in ("max_position_weight", "max_open_positions", "max_open_orders",
                  "min_cash_reserve", "agent_budget"):
        assert STATS[f"refused by {limit}"] > 0, limit
    assert STATS["bursts"] > 0 and STATS["fills"] > 0
