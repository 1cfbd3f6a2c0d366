"""Asking the reference evaluator, in its own interpreter, for verdicts (tests/support/oracle_values.py), and
comparing them with ours."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

BRIDGE = Path(__file__).with_name("oracle_values.py")


def ask_oracle(oracle_python: Path, request: dict[str, Any]) -> list[dict[str, Any]]:
    """The reference's verdicts for `request` (see tests/support/oracle_values.py for its modes)."""
    done = subprocess.run(
        [str(oracle_python), str(BRIDGE)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    verdicts: list[dict[str, Any]] = json.loads(done.stdout)
    return verdicts


def report_differences(
    label: str, cases: list[dict[str, Any]], oracle: list[dict[str, Any]], ours: list[Any]
) -> list[str]:
    """One line per case where our (status, score) differs from the oracle's; prints the agreement."""
    differences = []
    for case, theirs, mine in zip(cases, oracle, ours, strict=True):
        if (theirs["status"], theirs["score"]) != tuple(mine):
            differences.append(
                f"task {case['task_id']} [{case['label']}] response={json.dumps(case['response'])[:300]}: "
                f"oracle {theirs['status']}/{theirs['score']} ({theirs['detail'][:200]}), "
                f"ours {mine[0]}/{mine[1]}"
            )
    agreed = len(cases) - len(differences)
    print(f"{label} agreement: {agreed}/{len(cases)}")
    print(f"{label} oracle verdicts: {dict(Counter(v['status'] for v in oracle))}")
    return differences
