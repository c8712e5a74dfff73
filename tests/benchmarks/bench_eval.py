"""Benchmark: ``kestrel eval`` of the rule engine and of a recorded model, and its offline replay.

Run on demand (not collected by pytest):

    .venv/bin/python tests/benchmarks/bench_eval.py [--bars 48] [--blind]

The model is ``PromptRuleModel`` behind the fake OpenAI-compatible server (real HTTP, the real
SDK): it decides as the rule engine would from what it is sent, and every fourth answer first
breaks the protocol (a wrapped call, a cut-off call, two calls), so the report shows refusals by
error code and the calls they cost. It prints each report's table, then the time of the
replay of the recorded run as a ratio of the recorded run's (the baseline, measured in the same
run), and checks that the replay wrote the identical report.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.config import LLMSettings  # noqa: E402
from app.runtime.evaluation import STANDARD_WINDOWS, EvalOptions, load_plan, run_eval  # noqa: E402
from tests.helpers.fake_llm_servers import FakeOpenAIServer  # noqa: E402
from tests.helpers.prompt_rule_model import PromptRuleModel  # noqa: E402


def _timed(options: EvalOptions) -> tuple[float, object]:
    started = time.perf_counter()
    report = asyncio.run(run_eval(options))
    return time.perf_counter() - started, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bars", type=int, default=48)
    parser.add_argument("--blind", action="store_true")
    args = parser.parse_args(argv)
    windows = [replace(w, bars=args.bars) for w in STANDARD_WINDOWS]
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as folder:
        out = Path(folder)
        rules_s, rules = _timed(EvalOptions(LLMSettings(provider="rule-engine"), out / "rules",
                                            windows=windows, blind=args.blind))
        print(rules.table(), "\n")  # type: ignore[attr-defined]
        model = PromptRuleModel(malformed_every=4)
        with FakeOpenAIServer(default=model) as server:
            subject = LLMSettings(provider="openai-compatible", base_url=server.base_url,
                                  model="gpt-4o-mini", max_retries=0)
            recorded_s, recorded = _timed(EvalOptions(subject, out / "model", windows=windows,
                                                      blind=args.blind))
        print(recorded.table(), "\n")  # type: ignore[attr-defined]
        replay = load_plan(out / "model")
        replayed_s, _ = _timed(replay)
        same = all((out / "model" / name).read_bytes() == (replay.out_dir / name).read_bytes()
                   for name in ("eval.json", "eval.md"))
        print(f"rule engine eval: {rules_s:.1f} s; recorded model eval (baseline): "
              f"{recorded_s:.1f} s ({model.calls} model calls, {model.malformed} malformed); "
              f"replay: {replayed_s / recorded_s:.2f}x the baseline's time; identical report: "
              f"{same}")
        return 0 if same else 1


def test_eval_replays_a_recorded_run_identically() -> None:
    assert main(["--bars", "12"]) == 0


if __name__ == "__main__":
    sys.exit(main())
