"""What the Settings dialog asks of an exchange before any venue is open on it.

The keyring names of an exchange's API keys, what the exchange offers through ccxt, and a test
connection (its markets and one ticker). The runtime is the one layer that names the live adapter,
so the window asks here rather than importing it.
"""

from __future__ import annotations

from app.ccxt.credentials import key_names
from app.ccxt.probe import (
    ProbeResult,
    describe_abilities,
    exchange_abilities,
    probe_exchange_blocking,
)

__all__ = [
    "ProbeResult", "describe_abilities", "exchange_abilities", "key_names",
    "probe_exchange_blocking",
]
