"""Check a built Kestrel bundle the way a person would, running only the bundled executable.

    python packaging/check_bundle.py [--only NAME]... [--list] BINARY

Each check runs the bundle (never this checkout's code) as a new user: a fresh HOME, no display,
no Kestrel variables, its own temporary workspaces, and the current directory outside the
checkout. What answers it over the network is the project's own fakes, served from this process
on 127.0.0.1: the fake Binance (``tests/helpers/fake_exchange``), the fake Telegram Bot API
(``tests/helpers/fake_telegram``), the fake OpenAI and Anthropic servers
(``tests/helpers/fake_llm_servers``); the MCP check is the MCP SDK's client, here, spawning the
bundle over stdio. This script runs with the checkout's environment (``.venv``) for those.

Every check prints what it ran and what it saw; a failure prints why and the end of the
command's output, the remaining checks still run, and the exit code is 1 (0 when all passed,
2 on a usage error).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests.helpers: the fakes the checks run against

from app import __version__  # noqa: E402
from app.store.texts import install  # noqa: E402

OWNER = 4242  # the Telegram user allowed to command the bot
ANALYST = "AnalystAgent_Trend_v1"
LIVE_SETUP = "watch BTC/USDT on 1m every 1m with a trend analyst and a trader"


class CheckFailed(Exception):
    """What a check found wrong."""


@dataclass
class Check:
    name: str
    what: str
    run: Callable[[Context], list[str]]  # the lines worth showing of what it saw


@dataclass
class Context:
    binary: Path
    scratch: Path  # this run's temporary folder; everything the checks write is under it

    def folder(self, name: str) -> Path:
        path = self.scratch / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def environment(self, **extra: str) -> dict[str, str]:
        """A new user's environment: a fresh HOME (so no preferences, keyring or caches of this
        machine's user), no display, no KESTREL_* or Qt settings of the caller."""
        home = self.folder("home")
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "TZ")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                   XDG_DATA_HOME=str(home / ".local/share"),
                   XDG_CACHE_HOME=str(home / ".cache"), MPLCONFIGDIR=str(home / ".mpl"),
                   NUMBA_CACHE_DIR=str(home / ".cache/numba"),
                   # no OS keyring on a CI machine; secrets come from KESTREL_* variables
                   PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
        env.update(extra)
        return env

    def run(self, *args: str | Path, timeout: float = 300, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        command = [str(self.binary), *map(str, args)]
        print(f"   $ kestrel {shlex.join(command[1:])}", flush=True)
        try:
            return subprocess.run(  # noqa: S603 - the bundle under test
                command, capture_output=True, text=True, timeout=timeout,
                cwd=self.folder("cwd"), env=env or self.environment(), check=False)
        except subprocess.TimeoutExpired as exc:
            raise CheckFailed(f"it did not finish within {timeout:g} s; its output so far:\n"
                              f"{_tail(_text(exc.stdout) + _text(exc.stderr))}") from None


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join("   | " + line for line in text.rstrip().splitlines()[-lines:])


def expect(done: subprocess.CompletedProcess[str], code: int = 0) -> str:
    """The command's standard output, once it exited with ``code``."""
    if done.returncode != code:
        raise CheckFailed(f"exit code {done.returncode}, expected {code}; its output:\n"
                          f"{_tail(done.stdout + done.stderr)}")
    return done.stdout


def require(condition: bool, message: str, output: str = "") -> None:
    if not condition:
        raise CheckFailed(message + (f"; its output:\n{_tail(output)}" if output else ""))


def from_checkout(*args: str | Path) -> str:
    """What this checkout's own ``kestrel`` prints, to compare the bundle's with."""
    done = subprocess.run(  # noqa: S603 - this environment's interpreter and the app
        [sys.executable, "-m", "app", *map(str, args)], capture_output=True, text=True,
        timeout=300, cwd=REPO, check=False)
    if done.returncode != 0:
        raise CheckFailed(f"the checkout itself failed (exit {done.returncode}):\n"
                          f"{_tail(done.stdout + done.stderr)}")
    return done.stdout


# -- the checks -------------------------------------------------------------------------------


def check_version(ctx: Context) -> list[str]:
    out = expect(ctx.run("--version", timeout=60)).strip()
    require(out == f"kestrel {__version__}", f"it says {out!r}, the checkout is {__version__}")
    return [out]


def check_desktop_entry(ctx: Context) -> list[str]:
    bundle = ctx.binary.parent
    for name in ("kestrel.desktop", "kestrel.svg", "kestrel.png", "install-desktop-entry.sh"):
        require((bundle / name).is_file(), f"{bundle / name} is missing from the bundle")
    data = ctx.folder("xdg-data")
    script = bundle / "install-desktop-entry.sh"
    print(f"   $ XDG_DATA_HOME={data} {script}", flush=True)
    done = subprocess.run(  # noqa: S603 - the bundle's own script
        [str(script)], capture_output=True, text=True, timeout=60, check=False,
        env=ctx.environment(XDG_DATA_HOME=str(data)))
    said = expect(done).strip()
    entry = data / "applications" / "kestrel.desktop"
    require(entry.is_file(), f"{entry} was not written", said)
    values = dict(line.split("=", 1) for line in entry.read_text(encoding="utf-8").splitlines()
                  if "=" in line and not line.startswith("#"))
    require(entry.read_text(encoding="utf-8").startswith("[Desktop Entry]\n"),
            f"{entry} does not start with [Desktop Entry]")
    for key, wanted in (("Type", "Application"), ("Name", "Kestrel"), ("Icon", "kestrel"),
                        ("Exec", f'"{ctx.binary.resolve()}"')):
        require(values.get(key) == wanted, f"{entry}: {key}={values.get(key)!r}, not {wanted!r}")
    for icon in ("scalable/apps/kestrel.svg", "256x256/apps/kestrel.png"):
        require((data / "icons" / "hicolor" / icon).is_file(), f"the icon {icon} was not installed")
    return [said, f"Exec={values['Exec']}"]


def check_self_test(ctx: Context) -> list[str]:
    out = expect(ctx.run("--self-test", "--self-test-timeout", "240", timeout=300))
    for needed in ("desk open offscreen", "first fill after", "window icon", "tokenizer",
                   "bundle complete", "passed in"):
        require(needed in out, f"the self-test did not say {needed!r}", out)
    return [line for line in out.splitlines() if line.startswith("kestrel self-test:")]


def check_eval(ctx: Context) -> list[str]:
    run = ctx.scratch / "eval-run"
    out = expect(ctx.run("eval", "--provider", "rule-engine", "--windows", "1", "--bars", "4",
                         "--no-progress", "--workspace", ctx.folder("eval-ws"), "--out", run))
    try:
        report = json.loads((run / "eval.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckFailed(f"no readable eval.json: {exc}") from exc
    total = report["total"]["figures"]
    require(total["tasks"] > 0 and total["decisions"] == total["tasks"],
            f"the rule engine decided {total['decisions']} of {total['tasks']} tasks", out)
    require(total["agreement_pct"] == 100.0,
            f"the rule engine agreed with itself on {total['agreement_pct']}% of the bars", out)
    for name in ("eval.md", "eval.png"):
        require((run / name).is_file() and (run / name).stat().st_size > 0, f"no {name}", out)
    return [line for line in out.splitlines() if line.startswith(("window ", "falling", "all "))]


def check_llm_sdks(ctx: Context) -> list[str]:
    """An eval of a model behind each SDK the bundle carries, on the project's fake servers: the
    OpenAI SDK (an OpenAI-compatible server) and Anthropic's, each bar decided as the rule
    engine decides it."""
    from tests.helpers.fake_llm_servers import FakeAnthropicServer, FakeOpenAIServer
    from tests.helpers.prompt_rule_model import PromptRuleModel

    key = "sk-ant-bundle-check"
    shown: list[str] = []
    for vendor in ("openai-compatible", "anthropic"):
        model = PromptRuleModel()
        run = ctx.scratch / f"eval-{vendor}"
        server = (FakeOpenAIServer(default=model) if vendor == "openai-compatible"
                  else FakeAnthropicServer(api_key=key, default=model))
        with server:
            url = server.base_url if vendor == "openai-compatible" else server.root_url
            print(f"   fake {vendor} server on {url}", flush=True)
            out = expect(ctx.run(
                "eval", "--provider", vendor, "--base-url", url, "--model", "house-model-7",
                *(["--api-key-name", "eval_anthropic"] if vendor == "anthropic" else []),
                "--windows", "1", "--bars", "4", "--no-progress", "--max-retries", "0",
                "--workspace", ctx.folder(f"eval-{vendor}-ws"), "--out", run,
                env=ctx.environment(KESTREL_EVAL_ANTHROPIC=key)))
        try:
            total = json.loads((run / "eval.json").read_text(encoding="utf-8"))["total"]["figures"]
        except (OSError, ValueError, KeyError) as exc:
            raise CheckFailed(f"{vendor}: no readable eval.json: {exc}") from exc
        require(model.calls > 0 and total["model_calls"] == model.calls,
                f"{vendor}: the fake server answered {model.calls} calls, the report counts "
                f"{total['model_calls']}", out)
        require(total["decisions"] == total["tasks"] > 0 and total["agreement_pct"] == 100.0,
                f"{vendor}: {total['decisions']} decisions of {total['tasks']} tasks, "
                f"{total['agreement_pct']}% agreement", out)
        shown.append(f"{vendor}: {model.calls} calls through the SDK, {total['decisions']} "
                     "decisions, 100% agreement with the rule engine")
    return shown


def check_prompt(ctx: Context) -> list[str]:
    out = expect(ctx.run("prompt", ANALYST, "--workspace", ctx.folder("prompt-ws")))
    mine = from_checkout("prompt", ANALYST, "--workspace", ctx.folder("prompt-ws-checkout"))
    require("Available Tools" in out and "calculate_technical_indicator" in out,
            "the prompt has no Available Tools section", out)
    require(out == mine, "the bundle's prompt differs from the checkout's")
    return [f"{len(out.splitlines())} lines, {len(out)} characters, the same as the checkout's",
            out.splitlines()[0][:100]]


def check_indicator_tool(ctx: Context) -> list[str]:
    call = ("<calculate_technical_indicator><symbol>BTC/USD</symbol><interval>1d</interval>"
            "<indicator_name>SMA</indicator_name></calculate_technical_indicator>")
    at = "2019-01-01T00:00:00Z"
    out = expect(ctx.run("tool", "--workspace", ctx.folder("tool-ws"), "--at", at, call))
    mine = from_checkout("tool", "--workspace", ctx.folder("tool-ws-checkout"), "--at", at, call)
    require("<status>success</status>" in out and "<point " in out, "no SMA values", out)
    require(out == mine, "the bundle's result differs from the checkout's", out)
    return [line.strip() for line in out.splitlines() if "<point " in line][:2]


def check_live_paper(ctx: Context) -> list[str]:
    from tests.helpers.fake_exchange import FakeExchangeServer
    from tests.helpers.fake_exchange.__main__ import point_workspace
    from tests.helpers.fake_exchange.tape import wall_ms

    workspace = ctx.folder("live-ws")
    now = wall_ms()
    with FakeExchangeServer(now) as server:
        server.now.run_with_wall_clock(now)
        point_workspace(workspace, server)
        print(f"   fake Binance on {server.base_url}", flush=True)
        done = ctx.run("run", "--workspace", workspace, "--venue", "live-paper", "--exchange",
                       "binance", "--for", "10s", "--setup", LIVE_SETUP, timeout=180)
        klines = server.count("binance", "klines")
    out = expect(done)
    require("Paper on live quotes (binance)" in out, "it did not open paper on binance", out)
    analysis = [line for line in out.splitlines() if "Trend Analyst: BTC/USDT 1m:" in line]
    require(bool(analysis), "the Trend Analyst made no analysis of the live candles", out)
    require(klines > 0, "the bundle never asked the fake exchange for candles", out)
    return [out.splitlines()[0], analysis[0], f"{klines} candle requests reached the fake "
            "exchange"]


def check_mcp_serve(ctx: Context) -> list[str]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    workspace = ctx.folder("mcp-ws")
    args = ["mcp-serve", "--workspace", str(workspace), "--agent", "bundle-check"]
    print(f"   MCP client spawns: kestrel {shlex.join(args)}", flush=True)
    params = StdioServerParameters(command=str(ctx.binary), args=args, env=ctx.environment(),
                                   cwd=str(ctx.folder("cwd")))

    async def session() -> list[str]:
        async with Client(stdio_client(params), cache=None) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            for name in ("get_current_ticker_info", "calculate_technical_indicator",
                         "create_order", "write_note"):
                require(name in tools, f"the server does not list {name}: {tools}")
            ticker = await client.call_tool("get_current_ticker_info", {"symbols": ["BTC/USD"]})
            text = ticker.content[0].text
            require("<status>success</status>" in text and not ticker.is_error,
                    "the ticker call failed", text)
            order = await client.call_tool(
                "create_order", {"symbol": "BTC/USD", "side": "BUY", "quote_amount": 500})
            placed = order.content[0].text
            require("<status>success</status>" in placed, "the order was not placed", placed)
            return [f"{len(tools)} tools listed", "get_current_ticker_info: success",
                    "create_order BUY 500 USD of BTC/USD: success"]

    try:
        lines = asyncio.run(asyncio.wait_for(session(), 180))
    except TimeoutError:
        raise CheckFailed("the MCP session did not finish within 180 s") from None
    except CheckFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - the client's own errors, said as they are
        raise CheckFailed(f"the MCP client failed: {type(exc).__name__}: {exc}") from exc
    with install(sqlite3.connect(workspace / "kestrel.db")) as db:
        audited = db.execute("SELECT agent_id, tool_name, status FROM tool_calls "
                             "ORDER BY id").fetchall()
    require(audited == [("bundle-check", "get_current_ticker_info", "success"),
                        ("bundle-check", "create_order", "success")],
            f"the audit trail holds {audited}")
    return [*lines, "both calls in the workspace's audit trail"]


def check_telegram(ctx: Context) -> list[str]:
    from tests.helpers.fake_telegram import FakeTelegram

    workspace = ctx.folder("telegram-ws")
    with FakeTelegram() as bot_api:
        (workspace / "settings.toml").write_text(
            f"[telegram]\nenabled = true\nallowed_user_ids = [{OWNER}]\n"
            f'api_base_url = "{bot_api.base_url}"\n', encoding="utf-8")
        print(f"   fake Telegram Bot API on {bot_api.base_url}", flush=True)
        env = ctx.environment(KESTREL_TELEGRAM_BOT_TOKEN=bot_api.token)
        command = [str(ctx.binary), "run", "--workspace", str(workspace), "--for", "4h",
                   "--speed", "600"]
        print(f"   $ kestrel {shlex.join(command[1:])}", flush=True)
        with tempfile.TemporaryFile("w+") as output:
            process = subprocess.Popen(  # noqa: S603 - the bundle under test
                command, stdout=output, stderr=subprocess.STDOUT, text=True, env=env,
                cwd=ctx.folder("cwd"))
            try:
                polling = _wait(lambda: "getUpdates" in bot_api.methods() or
                                process.poll() is not None, 120)
                require(polling and process.poll() is None,
                        f"the bot never polled for updates; calls: {bot_api.methods()}")
                bot_api.push_text(OWNER, OWNER, "/status")
                answered = _wait(lambda: bool(bot_api.in_chat(OWNER)) or
                                 process.poll() is not None, 60)
                require(answered and bool(bot_api.in_chat(OWNER)),
                        f"/status got no answer; calls: {bot_api.methods()}")
                code = process.wait(timeout=180)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            output.seek(0)
            said = output.read()
    require(code == 0, f"kestrel run exited with {code}", said)
    require("Telegram: not started" not in said, "Telegram did not start", said)
    reply = bot_api.in_chat(OWNER)[0]
    require(reply.startswith("Kestrel · PAPER · market time"), f"/status answered {reply!r}")
    return [f"bot calls: {', '.join(sorted(set(bot_api.methods())))}",
            "/status answered: " + " | ".join(reply.splitlines()[:2])]


def _wait(condition: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


CHECKS = [
    Check("version", "kestrel --version", check_version),
    Check("desktop", "the desktop entry and icon install for a user", check_desktop_entry),
    Check("self-test", "the desk opens offscreen and the demo reaches its first fill "
          "(kestrel --self-test, without a display)", check_self_test),
    Check("eval", "kestrel eval --provider rule-engine over 1 window of 4 bars", check_eval),
    Check("llm-sdks", "kestrel eval through the OpenAI and Anthropic SDKs against the fake "
          "servers", check_llm_sdks),
    Check("prompt", f"kestrel prompt {ANALYST}", check_prompt),
    Check("tool", "kestrel tool: an indicator (pandas-ta) on the bundled data",
          check_indicator_tool),
    Check("live-paper", "kestrel run --venue live-paper against the fake Binance",
          check_live_paper),
    Check("mcp-serve", "kestrel mcp-serve answering the MCP SDK's client over stdio",
          check_mcp_serve),
    Check("telegram", "kestrel run with Telegram on, answering /status on the fake Bot API",
          check_telegram),
]


@contextmanager
def scratch_folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kestrel-bundle-check-",
                                     ignore_cleanup_errors=True) as folder:
        yield Path(folder)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="check_bundle.py", description=__doc__.split("\n")[0])
    parser.add_argument("binary", type=Path, help="the bundle's kestrel executable")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        choices=[c.name for c in CHECKS], help="run only this check (repeatable)")
    args = parser.parse_args(argv)
    if not (args.binary.is_file() and os.access(args.binary, os.X_OK)):
        parser.error(f"{args.binary} is not an executable file: build the bundle first "
                     "(bash packaging/build.sh)")
    chosen = [c for c in CHECKS if not args.only or c.name in args.only]
    failed: list[str] = []
    started = time.monotonic()
    with scratch_folder() as scratch:
        ctx = Context(args.binary.resolve(), scratch)
        for number, check in enumerate(chosen, 1):
            print(f"== check {number}/{len(chosen)} {check.name}: {check.what}", flush=True)
            began = time.monotonic()
            try:
                shown = check.run(ctx)
            except CheckFailed as exc:
                print(f"   FAILED ({time.monotonic() - began:.1f} s): {exc}", flush=True)
                failed.append(check.name)
                continue
            for line in shown:
                print(f"   {line}")
            print(f"   ok ({time.monotonic() - began:.1f} s)", flush=True)
    took = time.monotonic() - started
    if failed:
        print(f"bundle check FAILED: {', '.join(failed)} ({len(failed)} of {len(chosen)} "
              f"checks, {took:.0f} s)", file=sys.stderr)
        return 1
    print(f"bundle check passed: {len(chosen)} checks in {took:.0f} s ({args.binary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
