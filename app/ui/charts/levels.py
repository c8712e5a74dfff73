"""The prices the chart marks on its price axis: the last price, each position's average cost, its
take profit and stop loss, and every working order (limit and stop orders waiting to fill).

Why tags on the axis rather than labelled lines: a label drawn inside the plot sits over the
newest candles, and two close prices' labels sit over each other. Here each price gets a line
across the plot (thin, no text) and a tag on the price axis; the tags are spread apart
(``spread``) so none hides another, and a price outside the visible scale keeps its tag, pinned at
the axis's edge with an arrow.

A level that is an order (a take profit, a stop loss, a working order) can be dragged to a new
price; ``move_arguments`` says what the drop asks order entry for. The chart never sends anything
itself: the drop is handed to the window's trading controls, which move the order through the one
order path (``PersonControls.modify``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

from app.domain.trading import ExitKind, Order, OrderType, Position, Side
from app.ui.charts.style import format_price, format_quantity

#: Kinds of level, in the order their tags win a contested spot on the axis.
KINDS = ("last", "stop_loss", "take_profit", "entry", "working", "drawing")
#: Kinds the price scale makes room for while the newest bar is in view (open levels).
IN_RANGE_KINDS = frozenset({"stop_loss", "take_profit", "entry", "working"})


@dataclass(frozen=True, slots=True)
class Level:
    """One marked price.

    Attributes:
        key: stable while the level is the same thing (an order id, ``avg:SYMBOL``, ``last``).
        kind: one of ``KINDS``; decides the colour and whether the scale makes room for it.
        price: the price, exact.
        tag: the axis tag's text (``TP 9,000.00``).
        color: a ``COLORS`` key or ``#rrggbb``.
        order: the order a drag moves; None: the level cannot be dragged.
        tooltip: what hovering the tag says.
    """

    key: str
    kind: str
    price: Decimal
    tag: str
    color: str
    order: Order | None = None
    tooltip: str = ""

    @property
    def movable(self) -> bool:
        return self.order is not None


def order_price(order: Order) -> Decimal | None:
    """The price an order's line sits at: a stop loss's or a stop's trigger, else its limit."""
    if order.exit_kind is ExitKind.STOP_LOSS or order.order_type in (OrderType.STOP,
                                                                     OrderType.STOP_LIMIT):
        return order.stop_price if order.stop_price is not None else order.price
    return order.price if order.price is not None else order.stop_price


def _order_kind(order: Order) -> str:
    if order.exit_kind is ExitKind.TAKE_PROFIT:
        return "take_profit"
    if order.exit_kind is ExitKind.STOP_LOSS:
        return "stop_loss"
    return "working"


def _order_tag(order: Order, price: Decimal, decimals: int) -> tuple[str, str]:
    """The tag's text and colour of an open order."""
    kind = _order_kind(order)
    shown = format_price(price, decimals)
    if kind == "take_profit":
        return f"TP {shown}", "take_profit"
    if kind == "stop_loss":
        return f"SL {shown}", "stop_loss"
    word = "Buy" if order.side is Side.BUY else "Sell"
    return f"{word} {shown}", "warning"


def order_levels(
    symbol: str,
    positions: Sequence[Position],
    orders: Sequence[Order],
    decimals: int,
    owner_name: object = None,
) -> list[Level]:
    """The average cost of ``symbol``'s position and its open exits and working orders.

    The average cost includes the buys' fees, so its line is where selling breaks even before
    that sale's fee; the fills' own prices are their markers.
    """
    levels: list[Level] = []
    for position in positions:
        if position.symbol == symbol and position.size != 0:
            shown = format_price(position.avg_price, decimals)
            levels.append(Level(
                f"avg:{symbol}", "entry", position.avg_price, f"Avg {shown}", "entry",
                tooltip=f"Average cost {shown} of the {position.size} {symbol} held "
                        "(buy fees included)"))
    for order in orders:
        if order.symbol != symbol or not order.status.is_open:
            continue
        if order.exit_kind is ExitKind.NONE and order.order_type is OrderType.MARKET:
            continue  # fills at the next bar: no price to mark
        price = order_price(order)
        if price is None:
            continue
        tag, color = _order_tag(order, price, decimals)
        name = owner_name(order.agent_id) if callable(owner_name) else order.agent_id
        tooltip = (f"{order.side.value} {order.order_type.value} "
                   f"{format_quantity(order.remaining, 6)} {symbol} at "
                   f"{format_price(price, decimals)}, {name}'s order {order.order_id}\n"
                   "Drag it to move the order (through the Risk Guard, as a new order would be)")
        levels.append(Level(order.order_id, _order_kind(order), price, tag, color, order,
                            tooltip))
    return levels


def move_arguments(order: Order, price: Decimal) -> dict[str, Decimal]:
    """What moving ``order``'s line to ``price`` asks order entry for.

    A take profit and a limit order move their limit; a stop loss and a stop their trigger; a
    stop-limit its trigger, with its limit moved by as much, so the band between them is kept.
    """
    if order.exit_kind is ExitKind.TAKE_PROFIT:
        return {"price": price}
    if order.exit_kind is ExitKind.STOP_LOSS:
        return {"stop_price": price}
    if order.order_type is OrderType.STOP:
        return {"stop_price": price}
    if order.order_type is OrderType.STOP_LIMIT:
        moved: dict[str, Decimal] = {"stop_price": price}
        if order.price is not None and order.stop_price is not None:
            moved["price"] = order.price + (price - order.stop_price)
        return moved
    return {"price": price}


def on_tick(value: float, decimals: int) -> Decimal:
    """A price read off the chart (a float in view units) as the market's exact price."""
    step = Decimal(1).scaleb(-max(decimals, 0))
    return Decimal(repr(float(value))).quantize(step, rounding=ROUND_HALF_EVEN)


def spread(wanted: Sequence[float], height: float, top: float, bottom: float) -> list[float]:
    """Centres for tags of ``height`` pixels wanted at ``wanted`` (pixels, any order), moved as
    little as possible so that no two overlap, kept within ``top..bottom`` where they fit.

    Returns the centres in the order of ``wanted``.
    """
    order = sorted(range(len(wanted)), key=lambda i: wanted[i])
    placed = [float(wanted[i]) for i in order]
    half = height / 2
    for k in range(len(placed)):  # downwards: each at least a tag below the one above
        low = top + half if k == 0 else placed[k - 1] + height
        placed[k] = max(placed[k], low)
    for k in range(len(placed) - 1, -1, -1):  # upwards: back inside the bottom edge
        high = bottom - half if k == len(placed) - 1 else placed[k + 1] - height
        placed[k] = min(placed[k], high)
    if placed and placed[0] < top + half:  # more tags than the axis holds: top-aligned
        for k in range(len(placed)):
            placed[k] = top + half + k * height
    out = [0.0] * len(wanted)
    for k, i in enumerate(order):
        out[i] = placed[k]
    return out
