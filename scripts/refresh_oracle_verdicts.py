#!/usr/bin/env python
"""Regenerate tests/conformance/oracle_verdicts.json: the reference's verdict on every conformance case.

Run it whenever the case generator (scripts/support/conformance/) or the reference's
version changes — the conformance test fails and names this command when the
stored file is stale — and commit the file with the change:

    .venv/bin/python scripts/refresh_oracle_verdicts.py [--oracle /path/to/oracle/bin/python]

It generates every case and lets the reference's own `eval-tasks` judge all of
them, in as many parallel processes as there are CPUs (~6 minutes on 2 cores),
then prints which stored verdicts changed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # scripts.support.conformance, the corpus the tests share

from scripts.support.conformance import stored_verdicts  # noqa: E402
from scripts.support.conformance.oracle_batch import OracleBatch  # noqa: E402
from scripts.support.conformance.oracle_env import default_oracle_python, official_dataset  # noqa: E402
from scripts.support.conformance.suite import generate, generated_runs  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--oracle", type=Path, default=default_oracle_python(), help="python of the oracle's venv"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    dataset = official_dataset(args.oracle)
    fingerprint = stored_verdicts.current_fingerprint(dataset, args.oracle)
    with tempfile.TemporaryDirectory(prefix="oracle-verdicts-") as tmp:
        root = Path(tmp)
        runs = generated_runs(generate(dataset, root / "cases"))
        digests = {case_id: stored_verdicts.run_digest(run) for case_id, (_, run) in runs.items()}
        batch = OracleBatch(
            args.oracle,
            {case_id: run for case_id, (_, run) in runs.items()},
            root / "cases" / "config.json",
            root / "oracle",
            bins_per_cpu=4,
        )
        verdicts = batch.verdicts()
    cases = {
        case_id: stored_verdicts.StoredCase(kind, verdicts[case_id], digests[case_id])
        for case_id, (kind, _) in runs.items()
    }
    previous = stored_verdicts.load()[1] if stored_verdicts.STORE.exists() else {}
    stored_verdicts.write(fingerprint, cases)

    changed = [k for k in cases.keys() & previous.keys() if cases[k].verdict != previous[k].verdict]
    elapsed = time.perf_counter() - started
    print(f"wrote {stored_verdicts.STORE.relative_to(REPO)}: {len(cases)} cases in {elapsed:.0f}s")
    print("verdicts:", dict(Counter(c.verdict.status if c.verdict else "none" for c in cases.values())))
    print(f"new cases: {len(cases.keys() - previous.keys())}; gone: {len(previous.keys() - cases.keys())}")
    print(f"changed verdicts: {len(changed)}")
    for case_id in sorted(changed)[:40]:
        print(f"  {case_id} [{cases[case_id].kind}]: {previous[case_id].verdict} -> {cases[case_id].verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
