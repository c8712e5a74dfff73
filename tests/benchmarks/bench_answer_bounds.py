"""Benchmark: how much of a model answer that never ends Kestrel reads, and at what cost.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_answer_bounds.py [--tokens 2048] [--timeout 120]

Each case is a fake server (``tests/helpers/fake_llm_servers.py``) sending an answer without end
to a real provider adapter through the real SDK, with the settings' defaults (2,048 output
tokens, 120 s per answer): ``text`` streams a piece of text again and again, ``pings`` streams
events without text, ``plain`` sends a JSON body whose text never closes. Each case runs in a
child process of its own, so its peak memory is its own. Printed per case: seconds until the
answer failed, characters handed to ``on_delta``, bytes the server wrote (what was read plus what
the sockets' buffers held when the connection closed), the growth of peak RSS, and the error.

Before the bounds of ``app.agents.llm.bounds``, the ``text`` case (OpenAI-compatible, one attempt
of 120 s) read 100 million characters and 311 MB from the wire, grew the process by 158 MB and
failed only at its timeout, 121 s; with the default three retries, four times over. The fakes
stop an answer at ``ENDLESS_CAP_BYTES`` (32 MiB), so running this against code without the bounds
measures up to that cap, not without end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CASES = [(vendor, kind) for vendor in ("openai", "anthropic") for kind in ("text", "pings",
                                                                            "plain")]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_case(vendor: str, kind: str, tokens: int, timeout_s: float) -> dict[str, object]:
    """One case in this process; what it read and cost."""
    from app.agents.llm.anthropic_provider import AnthropicProvider
    from app.agents.llm.openai_compat import OpenAICompatibleProvider
    from app.agents.llm.port import ChatMessage, LLMError, LLMProvider, LLMRequest
    from tests.helpers.fake_llm_servers import FakeAnthropicServer, FakeOpenAIServer, endless

    server = FakeOpenAIServer() if vendor == "openai" else FakeAnthropicServer()
    stream = kind != "plain"
    with server:
        server.script([endless("pings" if kind == "pings" else "text")])
        provider: LLMProvider
        if vendor == "openai":
            provider = OpenAICompatibleProvider(server.base_url, "key", default_model="m",
                                                timeout_s=timeout_s, max_retries=0, stream=stream)
        else:
            provider = AnthropicProvider("key", base_url=server.base_url, default_model="m",
                                         timeout_s=timeout_s, max_retries=0, stream=stream)
        request = LLMRequest(agent_id="bench", task_id="t", model="m", system="s",
                             messages=[ChatMessage("user", "go on")], max_output_tokens=tokens)
        delivered = [0]

        def on_delta(piece: str) -> None:
            delivered[0] += len(piece)

        async def ask() -> str:
            try:
                answer = await provider.complete(request, on_delta)
                return f"an answer of {len(answer.text):,} characters"
            except LLMError as exc:
                return f"{type(exc).__name__}: {exc}"
            finally:
                await provider.aclose()

        before = _peak_rss_mb()
        started = time.perf_counter()
        outcome = asyncio.run(ask())
        seconds = time.perf_counter() - started
        grown = _peak_rss_mb() - before
        written = sum(server.written)
    return {"vendor": vendor, "kind": kind, "seconds": seconds, "chars": delivered[0],
            "written": written, "rss_mb": grown, "outcome": outcome}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2048, help="max_output_tokens asked for")
    parser.add_argument("--timeout", type=float, default=120.0, help="timeout_s of the provider")
    parser.add_argument("--case", default="", help=argparse.SUPPRESS)  # vendor:kind, in a child
    options = parser.parse_args()
    if options.case:
        vendor, kind = options.case.split(":")
        print(json.dumps(run_case(vendor, kind, options.tokens, options.timeout)))
        return
    print(f"answers without end, {options.tokens:,} output tokens, timeout {options.timeout:g} s")
    print(f"{'case':<16} {'seconds':>8} {'chars read':>12} {'bytes sent':>12} {'RSS +MB':>8}")
    for vendor, kind in CASES:
        child = subprocess.run(
            [sys.executable, __file__, "--case", f"{vendor}:{kind}", "--tokens",
             str(options.tokens), "--timeout", str(options.timeout)],
            capture_output=True, text=True, check=True, cwd=REPO)
        row = json.loads(child.stdout.strip().splitlines()[-1])
        print(f"{vendor + ' ' + kind:<16} {row['seconds']:>8.1f} {row['chars']:>12,} "
              f"{row['written']:>12,} {row['rss_mb']:>8.0f}")
        print(f"    {row['outcome']}")


if __name__ == "__main__":
    main()
