"""Where the oracle (webarena-verified in its own venv) and its official dataset are.

Shared by the test fixtures, the conformance suite's command line and the
benchmark scripts, which all run the oracle only as a separate process.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def default_oracle_python() -> Path:
    """`$WEBARENA_ORACLE`, else the repository's `.oracle-venv`, else the system-wide `/opt/oracle`."""
    configured = os.environ.get("WEBARENA_ORACLE")
    if configured:
        return Path(configured)
    local = REPO / ".oracle-venv" / "bin" / "python"
    return local if local.exists() else Path("/opt/oracle/bin/python")


def oracle_version(oracle_python: Path) -> str:
    """The installed version of webarena-verified, as its own interpreter reports it."""
    code = "import importlib.metadata as m; print(m.version('webarena-verified'))"
    out = subprocess.run([str(oracle_python), "-c", code], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def official_dataset(oracle_python: Path) -> Path:
    """The 812-task dataset file shipped inside the oracle's package."""
    code = "import webarena_verified, os; print(os.path.dirname(webarena_verified.__file__))"
    out = subprocess.run([str(oracle_python), "-c", code], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip()) / "assets" / "dataset" / "webarena-verified.json"
