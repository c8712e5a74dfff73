"""Exchange keys: from the keyring or KESTREL_<NAME>; a missing key says how to set it."""

from __future__ import annotations

import pytest
from keyring.backends import fail

from app.ccxt.credentials import key_names, load_keys
from app.domain.errors import OperationalError
from app.secrets import SecretStore
from tests.helpers.memory_keyring import MemoryKeyring


def test_keys_come_from_the_keyring_and_never_show_in_their_repr():
    ring = MemoryKeyring()
    ring.set_password("kestrel", "exchange.binance.api_key", "AK-123456789012")
    ring.set_password("kestrel", "exchange.binance.secret", "SK-123456789012")
    keys = load_keys("binance", SecretStore(backend=ring, environ={}))
    assert keys.to_ccxt() == {"apiKey": "AK-123456789012", "secret": "SK-123456789012"}
    assert "123456" not in repr(keys)


def test_without_a_keyring_backend_the_error_says_so_and_names_the_environment_variables():
    store = SecretStore(backend=fail.Keyring(), environ={})
    with pytest.raises(OperationalError) as caught:
        load_keys("binance", store)
    message = str(caught.value)
    assert "no OS keyring" in message
    assert "KESTREL_EXCHANGE_BINANCE_API_KEY" in message
    assert "KESTREL_EXCHANGE_BINANCE_SECRET" in message
    assert "never writes keys to a file" in message


def test_the_environment_fallback_works_where_there_is_no_keyring():
    store = SecretStore(backend=fail.Keyring(), environ={
        "KESTREL_EXCHANGE_OKX_API_KEY": "a" * 16, "KESTREL_EXCHANGE_OKX_SECRET": "b" * 16,
        "KESTREL_EXCHANGE_OKX_PASSWORD": "c" * 16})
    assert load_keys("okx", store).password == "c" * 16
    assert set(key_names("okx")) == {"api_key", "secret", "password"}


def test_with_a_keyring_a_missing_secret_is_named_with_both_ways_to_set_it():
    ring = MemoryKeyring()
    ring.set_password("kestrel", "exchange.binance.api_key", "AK-123456789012")
    with pytest.raises(OperationalError) as caught:
        load_keys("binance", SecretStore(backend=ring, environ={}))
    message = str(caught.value)
    assert "exchange.binance.secret is not set" in message and "api_key is" not in message
    assert "OS keyring" in message and "KESTREL_EXCHANGE_BINANCE_SECRET" in message
