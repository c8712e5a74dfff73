"""On a machine without an OS keyring every part that needs a secret says so and names the
environment variable to set, instead of failing obscurely.

The machine is simulated as ``keyring`` itself would see it: ``PYTHON_KEYRING_BACKEND`` names
keyring's ``fail`` backend (what a headless Linux without a Secret Service gets), in the
``kestrel`` subprocesses and, loaded the same way, in this process. The model key is given the
documented way there, a ``KESTREL_<NAME>`` variable, so the agents run and reach every other
part: the SMTP password, the Telegram bot token and the MCP server's secret are missing, and each
says so where a person or the agent reads it. (The Settings dialog: ``tests/ui``.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import keyring.core
import pytest

from app.ccxt.credentials import load_keys
from app.domain.errors import OperationalError
from app.secrets import SecretStore, env_var_name
from tests.helpers.fake_llm_servers import FakeOpenAIServer
from tests.helpers.fake_smtp import QuotingSmtp
from tests.helpers.fake_telegram import FakeTelegram
from tests.helpers.paths import BTC_USDT_1H
from tests.helpers.secret_flows import (
    MCP_CALL,
    MCP_ENTRY,
    approve_leaky_tool,
    desk_settings,
    kestrel,
    model_step,
    notify_call,
    shown_results,
)

NO_KEYRING = "keyring.backends.fail.Keyring"
SAYS_SO = "No OS keyring is available on this machine"
LLM_KEY = "sk-QwErTyUiOpAsDfGhJkLzXcVbNm"


def environment(**variables: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KESTREL_", "KEYRING_"))}
    return {**env, "PYTHON_KEYRING_BACKEND": NO_KEYRING, **variables}


def test_a_backtest_whose_model_key_cannot_be_read_says_which_variable_to_set(
    tmp_path: Path,
) -> None:
    done = kestrel(
        environment(), "backtest", "--data", BTC_USDT_1H, "--agents", "AnalystAgent_Trend_v1",
        "TraderAgent_Default_v1", "--provider", "anthropic", "--model", "claude-test",
        "--base-url", "http://127.0.0.1:9", "--api-key-name", "llm.anthropic", "--yes",
        "--bars", "24", "--no-progress", "--out", tmp_path / "out")
    said = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 3, said[-2000:]  # EXIT_AGENT_FAULTED, with the reason
    assert "no API key for Anthropic" in said and SAYS_SO in said, said[-2000:]
    assert "set the environment variable KESTREL_LLM_ANTHROPIC before starting Kestrel" in said
    assert "Traceback" not in said


def test_a_run_without_a_keyring_says_for_each_missing_secret_which_variable_to_set(
    tmp_path: Path,
) -> None:
    shown: list[str] = []

    def orchestrator(body: dict[str, Any]) -> str:
        shown.append(shown_results(body))
        step = model_step(body)
        if step == 0:
            return notify_call("Checking every channel.")
        if step == 1:
            return MCP_CALL
        return "Done."

    workspace = tmp_path / "ws"
    with (FakeOpenAIServer(api_key=LLM_KEY, default=orchestrator) as model,
          FakeTelegram() as telegram, QuotingSmtp() as smtp):
        desk_settings(workspace, llm_url=model.base_url, llm_key_name="llm.openai",
                      telegram_url=telegram.base_url, smtp_port=smtp.port)
        # the person approved the tool earlier, on a machine where its secret could be read
        approve_leaky_tool(workspace, SecretStore(environ={
            env_var_name(MCP_ENTRY): "news-token-QwErTyUiOpAs"}), 0)
        run = kestrel(environment(KESTREL_LLM_OPENAI=LLM_KEY), "run", "--workspace", workspace,
                      "--data", BTC_USDT_1H, "--setup", "check the channels and the news tool",
                      "--for", "1h", "--speed", "100000")
        assert telegram.calls == [] and smtp.logins == [], "nothing was sent without a secret"
    err = run.stderr.decode()
    assert run.returncode == 0, err[-2000:]
    assert "Traceback" not in err + run.stdout.decode()
    assert len(shown) == 3, "the model key came from KESTREL_LLM_OPENAI: the agent ran"
    telegram_start = err.split("Telegram: not started: ", 1)[-1]
    assert telegram_start.startswith("Telegram is on but has no bot token: " + SAYS_SO), err
    assert "set the environment variable KESTREL_TELEGRAM_BOT_TOKEN before" in telegram_start
    notified, called = shown[1], shown[2]
    assert "EMAIL FAILED no SMTP password is stored for kestrel; " + SAYS_SO in notified
    assert "KESTREL_EMAIL_PASSWORD before starting Kestrel" in notified
    assert "TELEGRAM FAILED" in notified and "KESTREL_TELEGRAM_BOT_TOKEN" in notified
    assert f"needs the secret '{MCP_ENTRY}' (for its NEWS_TOKEN)" in called, called
    assert SAYS_SO.lower() in called.lower() and "KESTREL_MCP_LEAKY_TOKEN" in called, called


@pytest.fixture
def no_keyring_here() -> Any:
    """This process's ``keyring`` on the backend ``PYTHON_KEYRING_BACKEND`` would name."""
    saved = keyring.core._keyring_backend
    keyring.core._keyring_backend = keyring.core.load_keyring(NO_KEYRING)
    try:
        yield
    finally:
        keyring.core._keyring_backend = saved


def test_the_live_broker_s_keys_without_a_keyring_name_their_variables(
    no_keyring_here: None,
) -> None:
    store = SecretStore(environ={})
    assert store.available()[0] is False
    with pytest.raises(OperationalError) as caught:
        load_keys("okx", store)
    message = str(caught.value)
    assert "no OS keyring" in message and "never writes keys to a file" in message
    for part in ("API_KEY", "SECRET", "PASSWORD"):
        assert f"KESTREL_EXCHANGE_OKX_{part}" in message
    with_variables = SecretStore(environ={f"KESTREL_EXCHANGE_OKX_{part}": f"{part}-0123456789"
                                          for part in ("API_KEY", "SECRET", "PASSWORD")})
    assert load_keys("okx", with_variables).password == "PASSWORD-0123456789"
    with pytest.raises(OperationalError, match="KESTREL_EXCHANGE_OKX_API_KEY"):
        store.set("exchange.okx.api_key", "typed-0123456789")
