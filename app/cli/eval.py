"""The ``kestrel eval`` sub-command: measure a configured model as Kestrel's Analyst and Trader.

``kestrel eval --workspace DIR --out RUN`` evaluates the model the workspace's ``[llm]`` settings
name (or ``--provider``/``--model``/``--base-url``/``--api-key-name``) over the standard market
windows (``app.runtime.evaluation``), ``--concurrency N`` of them side by side, records every
exchange with the model under ``RUN``, and prints the report's table; ``kestrel eval --replay RUN``
answers from that recording, offline, and writes the identical report. Exit codes: 0 done; 2 bad
settings or input (no model configured, a missing key, a run folder without a recording, an
``--out`` folder it must not write: a workspace, another command's output, a folder with other
files), one line on standard error; 3 the model could not be evaluated (an agent faulted: an
unreachable server, a refused key; or one of the rule engine's agents it is compared with), with
what to do, and eval.json and eval.md say STOPPED and why above the windows that ran; 130
interrupted. Any failure exits non-zero.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from app.agents.faults import EXIT_AGENT_FAULTED
from app.agents.llm.port import LLMError
from app.cli.common import EXIT_OK, EXIT_USAGE
from app.domain.errors import DataFileError, KestrelError
from app.runtime.agent_backtest import BacktestStopped

EXIT_INTERRUPTED = 130


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, metavar="DIR",
                        help="the workspace whose [llm] settings name the model (default: this "
                             "checkout's); it is only read")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="folder for the run: report (eval.json, eval.md, eval.png), "
                             "recordings and each window's backtest; a new or empty folder, or "
                             "one kestrel eval made before, whose run it replaces (a workspace "
                             "or any other folder is refused); default: eval-run, or "
                             "RUN/replay with --replay")
    parser.add_argument("--replay", type=Path, metavar="RUN",
                        help="replay a recorded run offline from its folder (no model is called)")
    parser.add_argument("--provider", choices=["rule-engine", "openai-compatible", "anthropic"],
                        help="evaluate this provider instead of the settings' [llm] provider")
    parser.add_argument("--model", default="", help="model for --provider")
    parser.add_argument("--base-url", default="", help="server for --provider openai-compatible")
    parser.add_argument("--api-key-name", default="",
                        help="keyring entry (or KESTREL_<NAME> variable) holding the API key")
    parser.add_argument("--max-retries", type=int, help="retries of a failed model call")
    parser.add_argument("--timeout", type=float, help="seconds to wait for one model answer")
    parser.add_argument("--context-tokens", type=int, metavar="N",
                        help="the server's context (prompt and answer), e.g. what "
                             "OLLAMA_CONTEXT_LENGTH gives Ollama; default: [llm] context_tokens")
    parser.add_argument("--max-output-tokens", type=int, metavar="N",
                        help="tokens kept for each answer; default: [llm] max_output_tokens")
    parser.add_argument("--tool-transport", choices=["xml", "native", "auto"],
                        help="how the model calls tools: XML in its text, the API's native tool "
                             "calls, or auto (native when the model answers natively); default: "
                             "[llm] tool_transport")
    parser.add_argument("--bars", type=int,
                        help="bars per window (default: each window's own, 48)")
    parser.add_argument("--windows", type=int,
                        help="evaluate only the first N standard windows (3)")
    parser.add_argument("--blind", action="store_true",
                        help="the model sees a disguised market: a neutral symbol (ASSET1/QUOTE), "
                             "shifted dates and rescaled prices; its orders execute for real")
    parser.add_argument("--concurrency", type=int, metavar="N",
                        help="windows run at once, their model calls paced together (one "
                             "Retry-After holds them all); default: 2 for a local server "
                             "(localhost, LM Studio, Ollama, llama.cpp), 4 for a hosted API, "
                             "every window for the rule engine or a replay; the report is the "
                             "same however many")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _subject(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from app.config import LLMSettings
    from app.workspace import Workspace

    workspace = Workspace.at(args.workspace) if args.workspace else Workspace.default()
    settings = workspace.settings().llm if workspace.settings_path.is_file() else LLMSettings()
    if args.provider:
        settings = settings.model_copy(update={
            "provider": args.provider, "model": args.model, "base_url": args.base_url,
            "api_key_name": args.api_key_name})
    updates: dict[str, Any] = {}
    if args.max_retries is not None:
        updates["max_retries"] = args.max_retries
    if args.timeout is not None:
        updates["timeout_s"] = args.timeout
    for option, key in (("context_tokens", "context_tokens"),
                        ("max_output_tokens", "max_output_tokens"),
                        ("tool_transport", "tool_transport")):
        if getattr(args, option, None) is not None:
            updates[key] = getattr(args, option)
    try:
        return LLMSettings.model_validate({**settings.model_dump(), **updates})
    except ValidationError as exc:  # one line per option, as the settings file's errors read
        problems = "; ".join(f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: "
                             f"{str(e['msg']).removeprefix('Value error, ')}"
                             for e in exc.errors())
        raise ValueError(problems) from None


def _options(args: argparse.Namespace) -> Any:
    from dataclasses import replace

    from app.runtime.evaluation import STANDARD_WINDOWS, EvalOptions, load_plan

    concurrency = getattr(args, "concurrency", None)
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"--concurrency must be at least 1, got {concurrency}")
    if args.replay is not None:
        options = load_plan(args.replay)
        if args.out is not None:
            options.out_dir = args.out
        options.concurrency = concurrency
        return options
    windows = list(STANDARD_WINDOWS[: args.windows] if args.windows else STANDARD_WINDOWS)
    if args.bars is not None:
        if args.bars < 1:
            raise ValueError(f"--bars must be at least 1, got {args.bars}")
        windows = [replace(w, bars=args.bars) for w in windows]
    return EvalOptions(subject=_subject(args), out_dir=args.out or Path("eval-run"),
                       windows=windows, cash=Decimal(10_000), blind=args.blind,
                       concurrency=concurrency)


def eval_command(args: argparse.Namespace) -> int:
    """Run ``kestrel eval``; print the report's table; return the exit code."""
    from app.runtime.evaluation import EvalStopped, run_eval

    bar = None
    out_dir: Path | None = None  # where a stopped run's report went
    try:
        options = _options(args)
        out_dir = options.out_dir
        if not args.no_progress:
            bar = _ProgressBar()
            options.progress = bar.update
        report = asyncio.run(run_eval(options))
    except EvalStopped as exc:
        _close(bar)
        if exc.report is not None and out_dir is not None:
            # STOPPED, why, the cutoff warning, the windows before
            print(exc.report.table())
            print(f"\nreport (STOPPED): {out_dir / 'eval.json'}, eval.md")
        what = ("the rule engine the model is compared with could not run" if exc.baseline
                else "the model could not be evaluated")
        print(f"kestrel eval: {what}: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAULTED
    except KeyboardInterrupt:
        _close(bar)
        print("kestrel eval: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (BacktestStopped, DataFileError, KestrelError, LLMError, ValueError) as exc:
        _close(bar)
        print(f"kestrel eval: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        _close(bar)
        print(f"kestrel eval: cannot write the run: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    _close(bar)
    print(report.table())
    source = f" (replayed from {args.replay}, no model called)" if args.replay else ""
    print(f"\nreport: {options.out_dir / 'eval.json'}, eval.md, eval.png{source}")
    if not args.replay:
        print(f"replay offline: kestrel eval --replay {options.out_dir}")
    return EXIT_OK


class _ProgressBar:
    """A bar on standard error: bars run of all (model and rule engine), and the window."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=0, unit="bar", file=sys.stderr, dynamic_ncols=True,
                        mininterval=0.2, leave=False)

    def update(self, done: int, total: int, label: str) -> None:
        if self.bar.total != total:
            self.bar.total = total
        self.bar.set_description(label, refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def _close(bar: _ProgressBar | None) -> None:
    if bar is not None:
        bar.close()
