"""The ``kestrel sweep`` sub-command: many backtests over a grid (or a random sample) of
parameters, each a full ``kestrel backtest`` in a folder of its own, on local processes or a
Dask cluster; resumable; one table sorted by a metric beside buy-and-hold.

Exit codes: 0 every cell finished; 1 the sweep finished but some cells failed (each is in the
table with its error; ``--retry-failed`` runs them again); 2 bad input (bad ``--grid`` syntax,
an unknown parameter, strategy or template, unusable data, an ``--out`` folder holding something
else or another sweep, a cluster that cannot be used), one line on standard error, never a
traceback; 75 another process runs this sweep; 130 interrupted (what finished is kept: the same
command resumes).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.cli.common import EXIT_USAGE, EXIT_WORKSPACE_BUSY, check_cash
from app.domain.errors import KestrelError
from app.domain.numbers import NumberSyntaxError, parse_decimal

EXIT_OK = 0
EXIT_CELLS_FAILED = 1
EXIT_INTERRUPTED = 130
EXAMPLE = ("kestrel sweep --data FILE --strategy sma_cross --grid fast=5,10,20 "
           "--grid slow=30,50 --out DIR")


def _decimal(text: str) -> Decimal:
    try:
        return parse_decimal(text)
    except NumberSyntaxError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``kestrel sweep``'s options on ``parser``."""
    from app.sweep.sorting import SORT_KEYS

    parser.add_argument("--data", action="append", type=Path, default=[], metavar="FILE",
                        help="kline CSV, as for kestrel backtest (repeatable: several symbols "
                             "in one account); or sweep files with --grid data=A.csv,B.csv")
    parser.add_argument("--strategy", default="sma_cross",
                        help="the strategy whose parameters are swept (default: sma_cross)")
    parser.add_argument("--agents", nargs="+", metavar="TEMPLATE", default=[],
                        help="sweep agent templates instead (at least one analyst); --grid "
                             "then takes their settings, e.g. rsi_period=10,14 or "
                             "AnalystAgent_Trend_v1.min_confidence=0.5,0.7")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2",
                        help="a swept parameter and its values (repeatable; numbers also as "
                             "START:STOP[:STEP]): a strategy parameter (fast, slow), a template "
                             "setting, agents=A+B,C+D, provider=, model=, base_url=, "
                             "data=A.csv,B.csv, symbol=BTC/USDT,… (among --data) or "
                             "window=2019-10-01..2019-10-10,…")
    parser.add_argument("--set", dest="fixed", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="fix a parameter for every cell (the same names as --grid)")
    parser.add_argument("--sample", type=_positive, metavar="N",
                        help="run N cells drawn at random from the grid instead of all")
    parser.add_argument("--seed", type=int, default=0,
                        help="the random draw of --sample (0); the same seed draws the same "
                             "cells")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="the sweep's folder: a new or empty one, or this sweep's own, "
                             "which it resumes (another grid there is refused). Under "
                             "<workspace>/sweeps/ the desk's Backtest view lists it")
    parser.add_argument("--workers", type=_positive, metavar="N",
                        help="local processes running cells at once (default: one per "
                             "processor)")
    parser.add_argument("--cluster", metavar="tcp://HOST:8786",
                        help="run the cells on this Dask scheduler's workers instead "
                             "(pip install 'kestrel[cluster]' here and on the workers)")
    parser.add_argument("--sort", default="sharpe", metavar="METRIC",
                        help=f"order the table by this metric: {', '.join(SORT_KEYS)} "
                             "(default: sharpe; drawdown is best when lowest)")
    parser.add_argument("--heatmap", metavar="X,Y",
                        help="the two parameters of heatmap.png (default: the two swept ones, "
                             "when exactly two vary)")
    parser.add_argument("--top", type=_positive, default=10,
                        help="rows of the table printed here (10); the files hold all")
    parser.add_argument("--retry-failed", action="store_true",
                        help="run again the cells a previous run recorded as failed")
    parser.add_argument("--cash", type=_decimal, default=Decimal(10_000),
                        help="starting cash of each cell in the quote currency (10000)")
    parser.add_argument("--fee", type=_decimal, default=Decimal("0.001"),
                        help="strategy cells: maker and taker fee as a fraction (0.001)")
    parser.add_argument("--slippage-bps", type=_decimal, default=Decimal(2),
                        help="strategy cells: market-order slippage in basis points (2)")
    parser.add_argument("--risk-config", type=Path, metavar="YAML",
                        help="strategy cells: Risk Guard limits, as for kestrel backtest")
    parser.add_argument("--allow-gaps", action="store_true",
                        help="accept data files with missing candles (refused by default)")
    parser.add_argument("--warmup", type=int, default=60,
                        help="agents: bars of history before the agents start (60)")
    parser.add_argument("--bars", type=int, help="agents: bars to run after the warm-up (all)")
    parser.add_argument("--provider", choices=["rule-engine", "openai-compatible", "anthropic"],
                        help="agents: run every agent on this provider (or sweep provider=)")
    parser.add_argument("--model", default="", help="agents: model for --provider")
    parser.add_argument("--base-url", default="", help="agents: server for openai-compatible")
    parser.add_argument("--api-key-name", default="",
                        help="agents: keyring entry (or KESTREL_<NAME> variable) of the key; "
                             "on a cluster, each worker reads its own")
    parser.add_argument("--blind", action="store_true",
                        help="agents see a disguised market (as kestrel backtest --blind)")
    parser.add_argument("--yes", action="store_true",
                        help="start a sweep whose cells call a language model without asking")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a sweep as Ctrl-C does: the finished cells are kept and the table
    written (a ``kill`` from a scheduler or a shell script is a person's stop, too)."""
    def stop(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (a test calling in): leave it
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def sweep_command(args: argparse.Namespace) -> int:
    """Run ``kestrel sweep``; every error is one line on standard error, never a traceback."""
    from app.store.lock import WorkspaceBusyError
    from app.sweep.driver import SweepInterrupted
    from app.sweep.store import SweepBusy

    try:
        with _terminate_as_interrupt():
            return _sweep(args)
    except SweepInterrupted as exc:
        print(f"kestrel sweep: {exc}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("kestrel sweep: interrupted before any cell ran; nothing was kept",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except (SweepBusy, WorkspaceBusyError) as exc:
        print(f"kestrel sweep: {exc}", file=sys.stderr)
        return EXIT_WORKSPACE_BUSY
    except ValidationError as exc:
        print(f"kestrel sweep: invalid risk config: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (KestrelError, ValueError) as exc:
        print(f"kestrel sweep: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"kestrel sweep: cannot write to {args.out}: {exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_USAGE


def _sweep(args: argparse.Namespace) -> int:
    from app.sweep.driver import run_sweep
    from app.sweep.space import SweepRequest, plan_sweep
    from app.sweep.table import buy_and_hold_line, sort_key, text_table

    sort_key(args.sort)  # an unknown metric is refused before anything runs
    check_cash(args.cash)
    if not 0 <= args.fee <= Decimal("0.1"):
        raise ValueError(f"--fee must be a fraction in [0, 0.1], got {args.fee}")
    if not 0 <= args.slippage_bps <= 1000:
        raise ValueError(f"--slippage-bps must be within 0..1000, got {args.slippage_bps}")
    if args.cluster and args.workers:
        raise ValueError("--workers sets this machine's processes; with --cluster the "
                         "cluster's workers run the cells: give one of them")
    if args.cluster:
        from app.sweep.executors import require_dask

        require_dask()
    risk = None
    if args.risk_config is not None:
        from app.cli.backtest import _risk_config

        risk = _risk_config(args.risk_config).model_dump(mode="json")
    llm = {"provider": args.provider or "", "model": args.model, "base_url": args.base_url,
           "api_key_name": args.api_key_name}
    request = SweepRequest(
        data=args.data, grid=args.grid, fixed=args.fixed, strategy=args.strategy,
        agents=args.agents, sample=args.sample, seed=args.seed, cash=args.cash, fee=args.fee,
        slippage_bps=args.slippage_bps, risk=risk, allow_gaps=args.allow_gaps,
        warmup=args.warmup, bars=args.bars, llm=llm, blind=args.blind,
    )
    plan = plan_sweep(request)
    heatmap = [p.strip() for p in args.heatmap.split(",")] if args.heatmap else None
    if heatmap is not None:
        unknown = [p for p in heatmap if p not in plan.columns]
        if len(heatmap) != 2 or unknown:
            raise ValueError(f"--heatmap takes two of the swept parameters X,Y "
                             f"({', '.join(plan.columns)}), got {args.heatmap}")
    what = plan.definition.get("strategy") or "agents"
    sampled = f" (a sample of {len(plan.cells)} of {plan.grid_size:,})" if args.sample else ""
    print(f"Sweep of {what}: {len(plan.cells)} cell{'s' if len(plan.cells) != 1 else ''}"
          f"{sampled} over {', '.join(plan.columns)}, into {args.out}")
    if plan.skipped:
        first = plan.skipped[0]
        print(f"{len(plan.skipped)} combination(s) skipped, refused by the "
              f"{'templates' if plan.definition['kind'] == 'agents' else 'strategy'} "
              f"(e.g. {_params(first.labels)}: {first.reason})")
    if not _llm_cost_accepted(plan, args):
        return EXIT_CELLS_FAILED
    outcome = run_sweep(
        plan, args.out, lambda: _executor(args), sort=args.sort, heatmap=heatmap,
        progress=not args.no_progress, retry_failed=args.retry_failed,
    )
    table = outcome.table
    if outcome.reused and not outcome.ran:
        print(f"All {outcome.reused} cells had finished before: the table was written again.")
    elif outcome.reused:
        print(f"{outcome.reused} cell(s) had finished before and were kept; {outcome.ran} ran "
              f"now on {outcome.label}.")
    else:
        print(f"{outcome.ran} cell(s) ran on {outcome.label}.")
    print(f"\nBest by {table.metric} ({'higher' if table.higher_is_better else 'lower'} is "
          "better):")
    print(text_table(table, args.top))
    line = buy_and_hold_line(table.rows)
    if line:
        print(line)
    for warning in table.warnings:
        print(f"\nWARNING: {warning}.")
    for row in table.failed[:5]:
        print(f"\nFAILED {row['cell']} ({_params({c: row[c] for c in table.columns})}): "
              f"{row.get('error')}")
    if len(table.failed) > 5:
        print(f"... and {len(table.failed) - 5} more failed cells (see results.csv)")
    files = ", ".join(p.name for p in outcome.files.values())
    print(f"\ntable: {outcome.files['csv']} ({files}); each cell's report in "
          f"{args.out / 'cells'}/<cell>/")
    return EXIT_CELLS_FAILED if table.failed else EXIT_OK


def _params(labels: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in labels.items())


def _executor(args: argparse.Namespace) -> Any:
    from app.sweep.executors import DaskCluster, LocalPool

    if args.cluster:
        return DaskCluster(args.cluster)
    return LocalPool(args.workers)


def _llm_cost_accepted(plan: Any, args: argparse.Namespace) -> bool:
    """A sweep whose cells call a language model says what it will cost first, and runs only
    with ``--yes`` (as ``kestrel backtest --agents`` does for one run)."""
    if plan.definition.get("kind") != "agents":
        return True
    from app.agents.costs import PriceTable
    from app.agents.template_files import load_templates
    from app.config import LLMSettings
    from app.runtime.agent_backtest import estimate
    from app.runtime.providers import plan_for_templates

    templates = load_templates()
    prices = PriceTable.load(None)
    calls, usd, unpriced, paid = 0, Decimal(0), set(), 0
    for cell in plan.cells:
        task = cell.task
        choice = plan_for_templates([templates[t] for t in task.templates],
                                    LLMSettings(**task.llm))
        if not choice.is_llm:
            continue
        paid += 1
        rows = min(_rows(plan.blobs[d]) for _n, d in task.files)
        bars = max(0, rows - task.warmup) if task.bars is None else task.bars
        analysts = sum(1 for t in task.templates if templates[t].role.value == "analyst")
        est = estimate(bars, analysts, choice.model, prices, choice.kind)
        calls += est.calls
        if est.usd is None:
            unpriced.add(choice.model)
        else:
            usd += est.usd
    if not paid:
        return True
    cost = f"estimated cost ${usd.quantize(Decimal('0.01'))}"
    if unpriced:
        cost += f" plus the calls of {', '.join(sorted(unpriced))}, which prices.yaml lacks"
    print(f"Estimate before starting: {paid} cell(s) call a language model: about {calls:,} "
          f"model calls; {cost}")
    if not args.yes:
        print("Nothing was run. Add --yes to start this sweep.", file=sys.stderr)
        return False
    return True


def _rows(content: bytes) -> int:
    return max(0, content.count(b"\n") - 1)
