"""SecretStore over real keyring backends: an in-memory one, the fail backend, an empty chainer."""

from __future__ import annotations

import keyring.backend
import keyring.errors
import pytest
from keyring.backends import chainer, fail

from app.domain.errors import OperationalError
from app.secrets import SecretStore, env_var_name, mask
from tests.helpers.memory_keyring import MemoryKeyring


class LockedKeyring(MemoryKeyring):
    def get_password(self, service: str, username: str) -> str | None:
        raise keyring.errors.KeyringLocked("the keyring is locked")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise keyring.errors.PasswordSetError("the keyring is locked")


KEY = "sk-test-0123456789abcdefa1b2"


def test_set_get_and_delete_through_a_keyring_backend() -> None:
    backend = MemoryKeyring()
    store = SecretStore(backend=backend, environ={})
    assert store.available()[0]
    store.set("openai", KEY)
    assert backend.entries == {("kestrel", "openai"): KEY}
    assert store.get("openai") == KEY
    assert store.where("openai") == "keyring"
    assert store.delete("openai") is True
    assert store.get("openai") is None
    assert store.delete("openai") is False


def test_environment_variable_is_read_before_the_keyring() -> None:
    backend = MemoryKeyring()
    store = SecretStore(backend=backend, environ={"KESTREL_OPENAI_API_KEY": "from-env"})
    store.set("openai-api.key", "from-keyring")
    assert store.get("openai-api.key") == "from-env"
    assert store.where("openai-api.key") == "environment"


def test_without_an_os_keyring_set_refuses_and_names_the_environment_variable() -> None:
    store = SecretStore(backend=fail.Keyring(), environ={})
    ok, reason = store.available()
    assert not ok and "no OS keyring" in reason
    with pytest.raises(OperationalError, match="KESTREL_ANTHROPIC_KEY") as info:
        store.set("anthropic key", KEY)
    assert "never writes keys to a file" in str(info.value)
    assert KEY not in str(info.value)


def test_without_an_os_keyring_get_still_reads_the_environment() -> None:
    store = SecretStore(backend=fail.Keyring(), environ={"KESTREL_DEEPSEEK": "env-key"})
    assert store.get("deepseek") == "env-key"
    assert store.get("missing") is None
    assert store.delete("deepseek") is False


def test_a_chainer_with_no_backends_counts_as_no_keyring() -> None:
    class EmptyChainer(chainer.ChainerBackend):
        """What keyring builds on a machine where no backend is viable."""

        backends: list[keyring.backend.KeyringBackend] = []

    store = SecretStore(backend=EmptyChainer(), environ={})
    assert store.available()[0] is False
    with pytest.raises(OperationalError, match="no OS keyring"):
        store.set("x", KEY)


def test_this_headless_machine_default_backend_is_reported_honestly() -> None:
    store = SecretStore(environ={})
    ok, reason = store.available()
    assert isinstance(ok, bool) and reason
    if not ok:
        with pytest.raises(OperationalError, match="KESTREL_PROBE"):
            store.set("probe", KEY)


def test_a_locked_keyring_gives_an_operational_error_with_the_way_out() -> None:
    store = SecretStore(backend=LockedKeyring(), environ={})
    with pytest.raises(OperationalError, match="KESTREL_OPENAI"):
        store.get("openai")
    with pytest.raises(OperationalError, match="refused to store"):
        store.set("openai", KEY)


def test_empty_values_are_not_stored() -> None:
    with pytest.raises(OperationalError, match="empty"):
        SecretStore(backend=MemoryKeyring(), environ={}).set("openai", "")


def test_entries_are_kept_per_service() -> None:
    backend = MemoryKeyring()
    SecretStore("kestrel", backend=backend, environ={}).set("k", "one-value-long")
    assert SecretStore("other", backend=backend, environ={}).get("k") is None


@pytest.mark.parametrize(
    ("name", "variable"),
    [("openai", "KESTREL_OPENAI"), ("deepseek-key", "KESTREL_DEEPSEEK_KEY"),
     ("a.b c", "KESTREL_A_B_C")],
)
def test_environment_variable_names(name: str, variable: str) -> None:
    assert env_var_name(name) == variable


def test_mask_shows_only_the_start_and_the_last_four_characters() -> None:
    assert mask("sk-proj-abcdefghijklmnopa1b2") == "sk-…a1b2"
    assert mask("short") == "………"
    assert mask("") == "(not set)"
    assert mask(None) == "(not set)"
