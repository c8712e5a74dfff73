"""The ``kestrel backtest`` sub-command: its arguments and its handler (``app.cli.main`` mounts it).

``add_backtest_arguments(parser)`` declares the options; ``backtest_command(args)`` runs and
returns the exit code: 0 done, 1 the run stopped early (the strategy could not go on, or an
unexpected error: the report of the bars it ran is kept and the message says where), 2 bad input
(an unusable data file, invalid parameters or risk file, an ``--out`` folder it must not write:
a workspace, another command's output, a folder with other files), with one clear line on
standard error instead of a traceback.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from pydantic import ValidationError

from app import yamltext
from app.backtest.report import summary_table
from app.backtest.sma_cross import SmaCross
from app.backtest.strategy import Strategy
from app.cli.common import check_cash, print_gaps
from app.config import PaperSettings
from app.config.risk import RiskConfig, all_in_backtest_config
from app.domain.errors import DataFileError, KestrelError
from app.domain.numbers import NumberSyntaxError, parse_decimal
from app.runtime.output_folder import OutputFolderRefused, OutputKind, prepare_output_folder
from app.runtime.strategy_backtest import (
    ERROR_FILE,
    OUTPUT,
    BacktestStopped,
    RunOptions,
    run_backtest,
)

EXIT_OK = 0
EXIT_STRATEGY_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # as a shell reports a program stopped by Ctrl-C

STRATEGIES: dict[str, Callable[[argparse.Namespace], Strategy]] = {
    "sma_cross": lambda args: SmaCross(fast=args.fast, slow=args.slow),
}


def _decimal(text: str) -> Decimal:
    try:
        return parse_decimal(text)
    except NumberSyntaxError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_backtest_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``kestrel backtest``'s options on ``parser``."""
    parser.add_argument("--data", action="append", required=True, type=Path, metavar="FILE",
                        help="kline CSV (timestamp_ms,open,high,low,close,volume), named like "
                             "BTC-USDT_1h_….csv; repeat for several symbols sharing one account")
    parser.add_argument("--strategy", choices=sorted(STRATEGIES), default="sma_cross",
                        help="the strategy to replay (default: sma_cross)")
    parser.add_argument("--fast", type=int, default=10, help="sma_cross fast SMA period (10)")
    parser.add_argument("--slow", type=int, default=30, help="sma_cross slow SMA period (30)")
    parser.add_argument("--cash", type=_decimal, default=Decimal(10_000),
                        help="starting cash in the quote currency (10000)")
    parser.add_argument("--fee", type=_decimal, default=Decimal("0.001"),
                        help="maker and taker fee as a fraction (0.001 = 0.1%%)")
    parser.add_argument("--slippage-bps", type=_decimal, default=Decimal(2),
                        help="market-order slippage in basis points (2)")
    parser.add_argument("--risk-config", type=Path, metavar="YAML",
                        help="Risk Guard limits (RiskConfig keys); default: the all-in backtest "
                             "profile (position weight up to 100%%, loss halts off)")
    parser.add_argument("--allow-gaps", action="store_true",
                        help="accept data files with missing candles (refused by default)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="folder for summary.json, equity.csv, trades.csv, equity.png and "
                             "the run's ledger backtest.db (with --agents: the run's workspace); "
                             "a new or empty folder, or one this command made before, whose "
                             "files it replaces; a workspace or any other folder is refused")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    agents = parser.add_argument_group(
        "agents", "run agent templates instead of --strategy (e.g. --agents "
        "AnalystAgent_Trend_v1 TraderAgent_Default_v1)")
    agents.add_argument("--agents", nargs="+", metavar="TEMPLATE",
                        help="agent templates to run bar by bar (at least one analyst)")
    agents.add_argument("--warmup", type=int, default=60,
                        help="bars of history before the agents start (60)")
    agents.add_argument("--bars", type=int, help="bars to run after the warm-up (all)")
    agents.add_argument("--provider", choices=["rule-engine", "openai-compatible", "anthropic"],
                        help="run every agent on this provider instead of its template's")
    agents.add_argument("--model", default="", help="model for --provider")
    agents.add_argument("--base-url", default="", help="server for --provider openai-compatible")
    agents.add_argument("--api-key-name", default="",
                        help="keyring entry (or KESTREL_<NAME> variable) holding the API key")
    agents.add_argument("--blind", action="store_true",
                        help="the agents see a disguised market (neutral symbol, shifted dates, "
                             "rescaled prices); orders execute and the report is in real terms")
    agents.add_argument("--yes", action="store_true",
                        help="start a run that calls a language model without asking")


def _risk_config(path: Path | None) -> RiskConfig:
    if path is None:
        return all_in_backtest_config()
    try:
        raw = yamltext.load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ValueError(f"cannot read the risk config {path}: {exc.strerror or exc}") from exc
    except yamltext.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must hold a mapping of RiskConfig keys")
    return RiskConfig.model_validate(raw)


def backtest_command(args: argparse.Namespace) -> int:
    """Run ``kestrel backtest``; print the summary and the output files; return the exit code.

    Every error ends here as one line on standard error, never as a traceback; a run that
    stopped part-way has already written the report of the bars it ran and says where.
    """
    try:
        if args.agents:
            from app.cli.agents import agents_backtest_command

            return agents_backtest_command(args)
        return _strategy_command(args)
    except BacktestStopped as exc:
        print(f"kestrel backtest: {exc}", file=sys.stderr)
        return EXIT_STRATEGY_FAILED
    except KeyboardInterrupt:
        print(f"kestrel backtest: interrupted; the report of the bars that ran (if any) is in "
              f"{args.out}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except DataFileError as exc:
        print(f"kestrel backtest: bad data file: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValidationError as exc:
        print(f"kestrel backtest: invalid risk config: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (KestrelError, ValueError) as exc:
        print(f"kestrel backtest: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"kestrel backtest: cannot write to {args.out}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - a bug still reaches the person as words
        where = _write_error(args.out, exc, _output_kind(args))
        print(f"kestrel backtest: the run failed on an unexpected error ({type(exc).__name__}: "
              f"{exc}); {where}", file=sys.stderr)
        return EXIT_STRATEGY_FAILED


def _write_error(out: Path, error: BaseException, kind: OutputKind) -> str:
    """Keep an unexpected error's traceback in the output folder; say where it is.

    Only in a folder this command may write (``app.runtime.output_folder``): an error that came
    before the folder was checked must not drop a file into a workspace or someone's folder.
    """
    try:
        prepare_output_folder(out, kind, replace=False)
        (out / ERROR_FILE).write_text("".join(traceback.format_exception(error)),
                                      encoding="utf-8")
    except OutputFolderRefused:
        return f"its details were not written: {out} is not this command's output folder"
    except OSError as exc:
        return f"its details could not be written to {out} ({exc.strerror or exc})"
    return f"details in {out / ERROR_FILE}"


def _output_kind(args: argparse.Namespace) -> OutputKind:
    if args.agents:
        from app.runtime.agent_backtest import OUTPUT as AGENTS_OUTPUT

        return AGENTS_OUTPUT
    return OUTPUT


def _strategy_command(args: argparse.Namespace) -> int:
    check_cash(args.cash)
    if not 0 <= args.fee <= Decimal("0.1"):
        raise ValueError(f"--fee must be a fraction in [0, 0.1] (0.001 = 0.1% of each fill; "
                         f"10% is already far above any exchange's), got {args.fee}")
    if not 0 <= args.slippage_bps <= 1000:
        raise ValueError(f"--slippage-bps must be within 0..1000, got {args.slippage_bps}")
    strategy = STRATEGIES[args.strategy](args)
    options = RunOptions(
        paper=PaperSettings(initial_cash=args.cash, fee_rate=args.fee,
                            slippage_bps=args.slippage_bps),
        risk=_risk_config(args.risk_config),
        out_dir=args.out,
        allow_gaps=args.allow_gaps,
        progress=not args.no_progress,
        report_partial=True,
    )
    result = run_backtest(args.data, strategy, options)
    print(summary_table(result))
    stats = result.stats
    print(f"\n{result.time_ms.size} bars in {stats['seconds']} s "
          f"({stats['bars_per_second']} bars/s); risk rejections: {stats['risk_rejections']}; "
          f"failed tool calls: {stats['failed_tool_calls']}")
    print_gaps(result)
    print(f"report: {args.out / 'summary.json'}, equity.csv, trades.csv, equity.png "
          f"(ledger: {args.out / 'backtest.db'})")
    return EXIT_OK

