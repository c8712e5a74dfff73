"""A model server that echoes the API key in its error text must not leak it into any output.

Real subprocesses (``kestrel backtest --agents``, ``kestrel run``, ``kestrel chat``) call a local
OpenAI-compatible server that refuses the key and quotes it back, whole and masked as OpenAI does.
Then everything the runs left behind is searched as bytes for the key, any 8-character piece of
it and its masked forms: the workspace (database, WAL, memory, logs, settings), the backtest's
output folder (report, chart, its workspace) and every captured stdout and stderr. The runs also
say that their agents FAULTED, and exit with code 3.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.agents.faults import EXIT_AGENT_FAULTED
from app.domain.agents import AgentState
from app.orchestration.ids import RandomIds
from app.redaction import REDACTOR
from app.secrets import SecretStore
from tests.helpers.agents import SETUP_COMMAND, START_MS, agent_world, settle
from tests.helpers.fake_llm_servers import FakeOpenAIServer, encoded_echo
from tests.helpers.leaks import encoded_forms, encoded_leaks, files_under, leaks, read_all, search
from tests.helpers.paths import BTC_USDT_1H, REPO

KEY = "sk-LeakProbeQwZyXvBnMkJhGfDsAp"  # letters only: no 8-character piece occurs by chance
KEY_NAME = "leak.probe"
ENV = {**os.environ, "KESTREL_LEAK_PROBE": KEY}


def kestrel(*args: str | Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app", *map(str, args)], input=stdin, capture_output=True,
        timeout=300, cwd=REPO, env=ENV,
    )


def llm_settings(folder: Path, base_url: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.toml").write_text(
        '[llm]\nprovider = "openai-compatible"\nmodel = "gpt-test"\n'
        f'base_url = "{base_url}"\napi_key_name = "{KEY_NAME}"\nmax_retries = 0\n'
        'timeout_s = 20\n', encoding="utf-8")


@pytest.fixture
def echoing_server():
    server = FakeOpenAIServer(api_key="sk-the-key-the-server-wants-0000", echo_key="both")
    with server:
        yield server


def test_a_key_echoed_by_the_model_server_reaches_no_output_of_the_cli(
    tmp_path: Path, echoing_server: FakeOpenAIServer
) -> None:
    url = echoing_server.base_url
    out = tmp_path / "backtest"
    backtest = kestrel(
        "backtest", "--data", BTC_USDT_1H, "--agents", "AnalystAgent_Trend_v1",
        "TraderAgent_Default_v1", "--provider", "openai-compatible", "--model", "gpt-test",
        "--base-url", url, "--api-key-name", KEY_NAME, "--yes", "--bars", "24",
        "--no-progress", "--out", out,
    )
    workspace = tmp_path / "ws"
    llm_settings(workspace, url)
    run = kestrel("run", "--workspace", workspace, "--data", BTC_USDT_1H, "--setup",
                  SETUP_COMMAND, "--for", "2h", "--speed", "100000")
    chat = kestrel("chat", "--workspace", workspace, "--data", BTC_USDT_1H,
                   stdin=b"status\n/resume\n/quit\n")

    sent = [r for r in echoing_server.requests if r.headers.get("authorization") == f"Bearer {KEY}"]
    assert len(sent) >= 2, "the backtest and the run sent the planted key to the server"
    streams = {f"{name} {stream}": getattr(done, stream)
               for name, done in (("backtest", backtest), ("run", run), ("chat", chat))
               for stream in ("stdout", "stderr")}
    files = files_under(out, workspace)
    outputs = {**read_all(files), **streams}
    assert search(outputs, KEY) == {}
    names = {Path(f).name for f in map(str, files)}
    assert {"kestrel.db", "summary.json", "equity.png", "settings.toml"} <= names
    assert len(outputs) >= 20, f"searched only {len(outputs)} outputs"

    # the refusal went through the redactor, not around it, and every run says it failed
    assert backtest.returncode == EXIT_AGENT_FAULTED, backtest.stderr.decode()
    report = backtest.stdout.decode()
    warning = report.find("WARNING: 1 agent(s) FAULTED")
    assert 0 < warning < report.find("Final equity"), report[:600]
    assert "AnalystAgent_Trend_v1 (backtest) (analyst) FAULTED" in report
    assert "API key was refused" in report and "[redacted]" in report
    assert (out / "summary.json").read_text(encoding="utf-8").lstrip("{\n ").startswith(
        '"faults"')
    assert "Same templates on the built-in rule engine" not in report
    assert run.returncode == EXIT_AGENT_FAULTED, run.stderr.decode()
    summary = run.stdout.decode().split("\nWARNING: 1 agent(s) FAULTED", 1)
    assert len(summary) == 2, run.stdout[-800:]  # after the training-cutoff warning, if any
    assert "Orchestrator (orchestrator) FAULTED" in summary[1]
    assert "What to do: check the API key" in summary[1]
    talk = chat.stdout.decode()
    assert "Orchestrator is FAULTED and cannot answer" in talk, talk
    assert "What to do: check the API key" in talk and "/resume" in talk
    assert "Resumed Orchestrator." in talk


def faulted_run_outputs(tmp_path: Path, server: FakeOpenAIServer, key: str, careless: str,
                        ) -> dict[str, bytes]:
    """Every file of a workspace whose Orchestrator faulted on the key the server refused,
    read while the world is still open (the WAL holds the newest pages until a checkpoint), its
    log included; a careless log call writes ``careless`` there too."""
    llm_settings(tmp_path, server.base_url)
    log_file = tmp_path / "logs" / "kestrel.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.addFilter(REDACTOR)  # as setup_logging() does with its handlers
    root = logging.getLogger()
    root.addHandler(handler)
    outputs: dict[str, bytes] = {}

    async def scenario() -> None:
        world = agent_world(
            tmp_path, at_ms=START_MS, secrets=SecretStore(environ={"KESTREL_LEAK_PROBE": key}),
            ids=RandomIds(),
        )
        try:
            await world.start()
            orchestrator = await world.ensure_orchestrator()
            world.agents.manager.send_user_message(orchestrator.agent_id, SETUP_COMMAND)
            await settle(world)
            info = world.agents.store.get(orchestrator.agent_id)
            assert info.state is AgentState.FAULTED
            assert "[redacted]" in (info.fault_reason or "")
            logging.getLogger("app.test").error("fault seen: %s", careless)
            handler.flush()
            outputs.update(read_all(files_under(tmp_path)))
        finally:
            await world.aclose()

    try:
        asyncio.run(scenario())
    finally:
        root.removeHandler(handler)
        handler.close()
    assert {"kestrel.db", "kestrel.db-wal", "kestrel.log"} <= {Path(p).name for p in outputs}
    assert b"fault seen: " in outputs[str(log_file)]
    return outputs


def test_while_a_run_is_open_its_database_wal_and_log_hold_no_piece_of_the_key(
    tmp_path: Path, echoing_server: FakeOpenAIServer
) -> None:
    outputs = faulted_run_outputs(tmp_path, echoing_server, KEY, careless=KEY)
    assert b"fault seen: [redacted]" in outputs[str(tmp_path / "logs" / "kestrel.log")]
    assert {name: kinds for name, kinds in search(outputs, KEY).items()} == {}
    assert leaks(KEY.encode(), KEY), "the search itself finds the key"


ENCODED_KEY = "tok:EncProbeQwZyXvBnMkJhGfDsAp/Lm"  # ":" and "/" change when URL-encoded


def test_a_key_echoed_in_base64_reversed_hex_or_url_encoded_reaches_no_file(
    tmp_path: Path
) -> None:
    """A server that quotes the key re-encoded (base64 alone and inside Basic credentials at
    every byte offset, URL-safe base64, reversed, hex, URL-encoded) leaves none of those forms,
    whole or in pieces, in the workspace's database, WAL or log."""
    with FakeOpenAIServer(api_key="sk-the-key-the-server-wants-0000",
                          echo_key="encoded") as server:
        outputs = faulted_run_outputs(tmp_path, server, ENCODED_KEY,
                                      careless=encoded_echo(ENCODED_KEY))
        refusals = [r for r in server.requests
                    if r.headers.get("authorization") == f"Bearer {ENCODED_KEY}"]
    assert refusals, "the key really went to the server that echoed it"
    echoed = encoded_echo(ENCODED_KEY).encode()
    assert set(encoded_leaks(echoed, ENCODED_KEY)) == set(encoded_forms(ENCODED_KEY)), \
        "the echo holds every form the search looks for"
    found = {name: kinds for name, data in outputs.items()
             if (kinds := encoded_leaks(data, ENCODED_KEY))}
    assert found == {}, "\n".join(f"{name}: {', '.join(kinds)}" for name, kinds in found.items())
    assert search(outputs, ENCODED_KEY) == {}
