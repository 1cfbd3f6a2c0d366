"""`scripts/bench_proxy.py`: this tree's serve beside plain mitmdump or, with `--other`, beside another
tree's serve, loaded in the same rounds; run for real, briefly (its figures are the benchmark's, not the
test's)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "bench_proxy.py"


def test_with_another_tree_its_serve_is_the_baseline_of_the_same_rounds() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--rounds", "1", "--seconds", "1", "--other", "HEAD"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.findall(r"^ +round 1 (\w+) *:", done.stdout, flags=re.MULTILINE) == ["baseline", "serve"]
    # The baseline ran the exported commit's package: checked before it started, and named.
    named = re.search(r"the baseline is the other tree's serve: HEAD, from (\S+)", done.stdout)
    assert named is not None and re.search(r"/other-tree-\w+/webarena_live$", named.group(1))
    assert "| the other tree's serve | this tree's serve" in done.stdout.replace("  ", " ")
    ratio = re.search(r"\| throughput \(req/s\) +\| [\d.]+ +\| [\d.]+ +\| ([\d.]+)x", done.stdout)
    assert ratio is not None and 0.3 < float(ratio.group(1)) < 3
    assert "| throughput (req/s) (--no-gc-tuning)" in done.stdout
    assert "plain mitmdump" not in done.stdout  # no third proxy: the two share the CPU as always


def test_each_round_starts_the_loads_from_the_next_proxy_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # The load started first has a small edge (about a percent here): rounds take turns at it.
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import bench_proxy

    started: list[int] = []

    def start_load(port: int, *_: Any, **__: Any) -> int:
        started.append(port)
        return port

    bench = bench_proxy.bench
    monkeypatch.setattr(bench, "start_load", start_load)
    monkeypatch.setattr(bench, "load_result", lambda _process, **_: {"rps": 1.0, "requests": 1})
    monkeypatch.setattr(bench, "cpu_seconds", lambda _pid: 0.0)

    def run_latency(ports: list[int], *_: Any, **__: Any) -> dict[str, list[float]]:
        return {"p50_ms": [1.0] * len(ports), "p99_ms": [2.0] * len(ports)}

    monkeypatch.setattr(bench, "run_latency", run_latency)
    proxies = {name: SimpleNamespace(port=port, pid=0) for name, port in (("a", 1), ("b", 2), ("c", 3))}
    orders = []
    for first in range(4):
        started.clear()
        figures = bench_proxy.measure(proxies, "http://x/", connections=1, seconds=0.1, first=first)
        orders.append(list(started))
        assert list(figures) == ["a", "b", "c"]  # reported in the proxies' order, whoever started first
    assert orders == [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]]
