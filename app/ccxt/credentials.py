"""An exchange's API keys, from the OS keyring (or ``KESTREL_<NAME>`` where there is none).

Keys are read here and handed to the ccxt exchange object, nowhere else: never logged (the
``SecretStore`` registers each value read with the log redactor), never written to the workspace
or a settings file. A missing key is an ``OperationalError`` that says exactly how to set it, and
when this machine has no keyring backend (keyring's ``fail`` backend on a headless Linux), it says
so and names the environment variables to use instead, rather than failing obscurely.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.errors import OperationalError
from app.secrets import SecretStore, env_var_name

# exchanges whose API also needs a passphrase (ccxt's ``password``)
NEEDS_PASSWORD = frozenset({"okx", "kucoin", "bitget", "coinbaseexchange"})


@dataclass(frozen=True, slots=True)
class ApiKeys:
    """ccxt's ``apiKey``, ``secret`` and (some exchanges) ``password``; repr hides them."""

    api_key: str
    secret: str
    password: str | None = None

    def __repr__(self) -> str:
        return "ApiKeys(***)"

    def to_ccxt(self) -> dict[str, str]:
        out = {"apiKey": self.api_key, "secret": self.secret}
        if self.password:
            out["password"] = self.password
        return out


def key_names(exchange_id: str) -> dict[str, str]:
    """The secret names of one exchange's keys, e.g. ``exchange.binance.api_key``."""
    names = {"api_key": f"exchange.{exchange_id}.api_key",
             "secret": f"exchange.{exchange_id}.secret"}
    if exchange_id in NEEDS_PASSWORD:
        names["password"] = f"exchange.{exchange_id}.password"
    return names


def load_keys(exchange_id: str, secrets: SecretStore) -> ApiKeys:
    """The exchange's keys.

    Raises:
        OperationalError: a key is missing (naming it, the keyring entry and the environment
            variable), or the keyring refused to read.
    """
    names = key_names(exchange_id)
    values = {field: secrets.get(name) for field, name in names.items()}
    missing = [field for field, value in values.items() if not value]
    if missing:
        keyring_ok, keyring_state = secrets.available()
        wanted = ", ".join(names[f] for f in missing)
        env = ", ".join(env_var_name(names[f]) for f in missing)
        if keyring_ok:
            how = (f"Store them in the OS keyring ({keyring_state}) under the service "
                   f"{secrets.service!r} in Settings > Exchanges, or set {env} in the "
                   "environment before starting Kestrel.")
        else:
            how = (f"This machine has no OS keyring: {keyring_state}. Kestrel never writes keys "
                   f"to a file, so set the environment variables {env} before starting Kestrel "
                   "(or install a keyring such as GNOME Keyring or KWallet with a D-Bus session "
                   "and store them there).")
        raise OperationalError(
            f"Live trading on {exchange_id} needs its API keys, and {wanted} "
            f"{'is' if len(missing) == 1 else 'are'} not set. {how} Use keys with trading "
            "permission and no withdrawal permission."
        )
    return ApiKeys(values["api_key"] or "", values["secret"] or "", values.get("password"))
