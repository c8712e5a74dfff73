"""Property: whatever sequence of orders an agent sends, no balance ever goes negative."""

from __future__ import annotations

import asyncio
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.domain.errors import ToolError
from app.domain.trading import OrderType, Side
from app.trading.port import OrderRequest
from tests.unit.exchange.support import SYMBOL, make_rig

D = Decimal

actions = st.lists(
    st.tuples(
        st.sampled_from(list(Side)),
        st.sampled_from(list(OrderType)),
        st.decimals(min_value=D("0.001"), max_value=D("3"), places=3),
        st.decimals(min_value=D("6000"), max_value=D("9000"), places=0),
        st.integers(min_value=0, max_value=3),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions)
def test_random_order_flow_never_overdraws_any_asset(flow):
    rig = make_rig(visible=1, cash="20000")
    for side, kind, qty, px, advance in flow:
        price = px if kind in (OrderType.LIMIT, OrderType.STOP_LIMIT) else None
        stop = px if kind in (OrderType.STOP, OrderType.STOP_LIMIT) else None
        try:
            asyncio.run(rig.broker.create_order(
                OrderRequest("a1", SYMBOL, side, kind, qty, price=price, stop_price=stop)
            ))
        except ToolError:
            pass  # refused orders are expected; what matters is the book
        rig.step(advance)
        snap = rig.broker.snapshot()
        for asset, total in snap["balances"].items():
            assert total >= 0, (asset, total)
            assert snap["reserved"].get(asset, D(0)) <= total
