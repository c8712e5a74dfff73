"""Start-up never pays for ccxt: the CLI and a replay world build without importing it.

ccxt takes about a second to import; only opening a live venue may load it (``app.ccxt.client``
imports it on first use). Checked in a fresh interpreter, where nothing has imported it yet.
"""

import subprocess
import sys

PROBE = """
import sys, tempfile
from pathlib import Path
import app.cli.main
import app.config
import app.ccxt.market, app.ccxt.errors, app.ccxt.rules, app.config.exchanges
from app.runtime.world import WorldOptions, build_world
from app.workspace import Workspace
with tempfile.TemporaryDirectory() as tmp:
    world = build_world(Workspace(Path(tmp)), options=WorldOptions(agents=False))
    world.close()
loaded = sorted(name for name in sys.modules if name == 'ccxt' or name.startswith('ccxt.'))
print('ccxt modules:', loaded)
"""


def test_importing_the_cli_and_building_a_replay_world_does_not_import_ccxt():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "ccxt modules: []"


def test_the_probe_would_see_ccxt_once_a_live_exchange_is_built():
    """The check above can fail: building an exchange is what loads ccxt."""
    probe = (
        "import sys\nfrom app.ccxt.client import build_exchange\nbuild_exchange('okx')\n"
        "print('ccxt' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "True"
