"""``kestrel run --setup`` as a person runs it: a new workspace starts where the watched symbol's
data exists, in its currency, so the agents analyse real candles and the Trader's orders can fill;
a used workspace that cannot trade the setup says why and runs nothing. ``kestrel run`` and
``kestrel chat`` say what the agents run on, and warn when a language model replays the bundled
2017-2019 market, which its training data may cover."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from tests.helpers.cli import Ran, run_cli, run_main
from tests.helpers.fake_llm_servers import FakeOpenAIServer, Reply

SETUP = "watch BTC/USDT on 1h every 1h with a trend analyst and a trader"


def kestrel(*args: str | Path, stdin: str | None = None) -> Ran:
    return run_cli(*args, stdin=stdin)


def test_a_new_workspace_watching_btc_usdt_analyses_real_candles_and_its_orders_fill(
    tmp_path: Path,
) -> None:
    done = kestrel("run", "--workspace", tmp_path / "ws", "--setup", SETUP, "--for", "8d",
                   "--speed", "1000000")
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "Offline replay from 2019-10-02T19:00:00Z" in out  # 60 hours into BTC/USDT's data
    assert "; agents on the built-in rule engine (not an LLM).\n" in out
    assert "training cutoff" not in out  # the rule engine remembers no market
    assert "0 bars visible" not in out and "no analysis" not in out
    assert len(re.findall(r"Trend Analyst: BTC/USDT 1h: (?:HOLD|BUY|SELL)", out)) >= 8 * 24
    assert "BTC/USDT 1h: BUY" in out and "fill(s)" in out, out[-3000:]
    fills = int(re.search(r"; (\d+) fills in total", out).group(1))  # type: ignore[union-attr]
    assert fills >= 1
    assert re.search(r"Balances: .*USDT \d", out), out[-500:]


def test_a_used_usd_workspace_refuses_a_btc_usdt_setup_and_says_why(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    first = kestrel("chat", "--workspace", workspace, stdin="/quit\n")
    assert first.returncode == 0, first.stderr
    assert "Try: watch BTC/USD on 1h" in first.stdout  # what this USD account can trade
    assert "Here: agents on the built-in rule engine (not an LLM)." in first.stdout
    assert "training cutoff" not in first.stdout
    done = kestrel("run", "--workspace", workspace, "--setup", SETUP, "--for", "1h")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kestrel: this workspace's paper account holds USD, so BTC/USDT (quoted in USDT) cannot "
        "be traded in it; watch a USD pair here, or use a new --workspace for it"
    ]
    assert "Offline replay" not in done.stdout


def _llm_workspace(folder: Path, base_url: str, model: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.toml").write_text(
        f'[llm]\nprovider = "openai-compatible"\nmodel = "{model}"\nbase_url = "{base_url}"\n'
        "max_retries = 0\n", encoding="utf-8")
    return folder


def test_run_on_a_language_model_names_it_and_warns_that_it_may_remember_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a proxy's alias, served by a dated OpenAI model that was trained long after 2019
    answer = Reply(text="Noted: nothing to set up yet.", model="gpt-4o-mini-2024-07-18")
    with FakeOpenAIServer(default=answer) as server:
        workspace = _llm_workspace(tmp_path / "ws", server.base_url, "house-default")
        code = run_main(["run", "--workspace", str(workspace), "--setup", SETUP, "--for", "2h",
                         "--speed", "1000000"])
        asked = len(server.bodies)
    out = capsys.readouterr().out
    assert code == 0 and asked >= 1
    assert ("Offline replay from 2019-10-02T19:00:00Z at 1e+06x; agents on "
            "openai-compatible:house-default.") in out
    assert "rule engine" not in out and "unless configured otherwise" not in out
    warnings = [line for line in out.splitlines() if line.startswith("WARNING: ")]
    # before any answer only the alias is known; once it answers, the dated model is checked
    assert warnings[0].startswith("WARNING: Kestrel does not know house-default's training "
                                  "cutoff: if its training data reaches past 2019-10-02")
    assert warnings[1].startswith("WARNING: This period starts 2019-10-02, before "
                                  "gpt-4o-mini-2024-07-18's training cutoff (2023-10-31")
    assert out.index(warnings[1]) > out.index("Balances:")  # said again after the summary
    assert "--blind" not in out  # kestrel run cannot run blind


def test_chat_with_a_language_model_warns_that_it_may_remember_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAIServer(default="Hello.") as server:
        workspace = _llm_workspace(tmp_path / "ws", server.base_url, "gpt-4o-mini")
        monkeypatch.setattr("sys.stdin", io.StringIO("/quit\n"))
        code = run_main(["chat", "--workspace", str(workspace)])
    out = capsys.readouterr().out
    assert code == 0
    assert "Talking to Orchestrator (openai-compatible:gpt-4o-mini)" in out
    assert "Here: agents on openai-compatible:gpt-4o-mini." in out
    (warning,) = [line for line in out.splitlines() if line.startswith("WARNING: ")]
    assert re.match(r"WARNING: This period starts 2019-\d\d-\d\d, before gpt-4o-mini's "
                    r"training cutoff \(2023-10-31", warning), warning
