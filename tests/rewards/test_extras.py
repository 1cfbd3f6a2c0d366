"""The framework adapters are extras: `webarena_live.rewards` imports none of them, and an adapter whose
framework is missing says so in one line naming the extra (run where the frameworks are not installed)."""

from __future__ import annotations

import subprocess
import sys
from importlib.util import find_spec

import pytest

ADAPTERS = {
    "openenv_env": ("openenv", "openenv 0.10 or newer", "openenv"),
    "openenv_rubric": ("openenv", "openenv 0.10 or newer", "openenv"),
    "verifiers_rubric": ("verifiers", "verifiers", "verifiers"),
    "verifiers_v1": ("verifiers", "verifiers 0.3.1 or newer (verifiers.v1)", "verifiers"),
}


def test_the_rewards_package_imports_no_framework() -> None:
    probe = (
        "import sys, webarena_live.rewards, webarena_live.rewards.verl, webarena_live.rewards.harbor, "
        "webarena_live.rewards.nemogym; "
        "print(sorted(m for m in ('openenv', 'verifiers', 'harbor', 'nemo_gym', 'verl') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_an_adapter_without_its_framework_names_the_extra(adapter: str) -> None:
    module, package, extra = ADAPTERS[adapter]
    if find_spec(module) is not None:
        pytest.skip(f"{module} is installed here; its own venv tests the adapter")
    done = subprocess.run(
        [sys.executable, "-c", f"import webarena_live.rewards.{adapter}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"ImportError: webarena_live.rewards.{adapter} needs {package} (Python 3.12 or newer): "
        f"pip install 'webarena-live[{extra}]'"
    )
