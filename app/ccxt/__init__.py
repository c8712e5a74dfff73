"""ccxt at Kestrel's border: build an exchange, translate its errors, serve its public market data.

Nothing here imports ccxt at module import time: ccxt takes about a second to import, and the
offline runtime and the window must start without paying for it. ``client.build_exchange`` imports
``ccxt.async_support`` on first use.
"""
