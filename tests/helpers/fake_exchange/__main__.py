"""Run the fake exchange as a process, on the wall clock, for a person to look at the window.

    python -m tests.helpers.fake_exchange --workspace /tmp/ws [--seconds 600]

It starts the fake Binance and OKX on a free port of 127.0.0.1, writes the workspace's
``settings.toml`` so both exchanges point at it and the workspace opens on paper on binance's
live quotes, prints the address, and serves until stopped (Ctrl+C) or ``--seconds`` pass.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from app.config import Settings
from app.ui.settings_io import save_settings
from app.workspace import Workspace
from tests.helpers.fake_exchange.client import fake_settings
from tests.helpers.fake_exchange.server import FakeExchangeServer
from tests.helpers.fake_exchange.tape import wall_ms


def point_workspace(folder: Path, server: FakeExchangeServer, venue: str = "binance") -> None:
    """Write ``folder``'s settings: every fake venue's URLs, and live-paper on ``venue``."""
    Workspace.at(folder).ensure()
    exchanges = {
        name: fake_settings(server, name).model_dump(mode="json", exclude_defaults=True)
        for name in ("binance", "okx")
    }
    settings = Settings.model_validate({
        "exchanges": exchanges,
        "venue": {"kind": "live-paper", "exchange": venue, "symbols": ["BTC/USDT", "ETH/USDT"]},
    })
    save_settings(folder / "settings.toml", settings)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.fake_exchange")
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--venue", default="binance", choices=("binance", "okx"))
    parser.add_argument("--seconds", type=float, default=3600.0)
    args = parser.parse_args()
    now = wall_ms()
    with FakeExchangeServer(now) as server:
        server.now.run_with_wall_clock(now)
        point_workspace(args.workspace, server, args.venue)
        print(f"fake exchange on {server.base_url}; {args.workspace} opens on paper on "
              f"{args.venue}'s live quotes", flush=True)
        try:
            time.sleep(args.seconds)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
