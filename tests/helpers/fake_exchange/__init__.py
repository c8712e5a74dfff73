"""A fake Binance and OKX on 127.0.0.1 for ccxt, with a settable fake now and injected faults.

See ``server.py`` for the API; ``tests/data/ccxt/README.md`` for where its data comes from.
"""

from tests.helpers.fake_exchange.server import FakeExchangeServer, Fault, Request
from tests.helpers.fake_exchange.tape import MINUTE, FakeNow, Tape

__all__ = ["MINUTE", "Fault", "FakeExchangeServer", "FakeNow", "Request", "Tape"]
