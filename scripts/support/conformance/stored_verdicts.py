"""The reference's verdict on every generated case, stored in the repository.

Asking the reference about all ~6,400 cases costs 5-10 minutes of CPU, so its
answers live in oracle_verdicts.json, written by scripts/refresh_oracle_verdicts.py.
The file records what it was made from: a hash of the generator's sources, the
reference's version, a hash of its dataset and, per case, a digest of the two
files the reference judged. When any of them no longer matches, the file is
stale and the conformance test fails naming the refresh command: stored
verdicts never silently describe other inputs. Every test run also re-asks the
live reference about a random sample of cases (tests/evaluator/test_conformance.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from scripts.support.conformance.oracle_env import oracle_version
from scripts.support.conformance.runs import Verdict

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DATA = REPO / "tests" / "conformance"
"""Where the stored verdicts and the divergences are kept: the test suite's data, beside its tests."""
STORE = DATA / "oracle_verdicts.json"
REFRESH_COMMAND = ".venv/bin/python scripts/refresh_oracle_verdicts.py"

NOT_GENERATOR = {"__init__.py", "suite.py", "oracle_env.py", "oracle_batch.py", "progress.py"}
NOT_GENERATOR |= {"sample.py", "stored_verdicts.py"}
"""Modules of this package that run or compare cases without shaping them (left out of the hash)."""


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    generator: str
    oracle: str
    dataset: str

    def differences(self, other: Fingerprint) -> list[str]:
        return [
            f"{field.name}: stored {getattr(self, field.name)}, now {getattr(other, field.name)}"
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != getattr(other, field.name)
        ]


@dataclasses.dataclass(frozen=True)
class StoredCase:
    kind: str
    verdict: Verdict | None
    digest: str


def current_fingerprint(dataset: Path, oracle_python: Path) -> Fingerprint:
    generator = hashlib.sha256()
    for source in sorted(HERE.glob("*.py")):
        if source.name not in NOT_GENERATOR:
            generator.update(source.name.encode() + b"\0" + source.read_bytes())
    return Fingerprint(
        generator=generator.hexdigest()[:16],
        oracle=oracle_version(oracle_python),
        dataset=hashlib.sha256(dataset.read_bytes()).hexdigest()[:16],
    )


def run_digest(run: Path) -> str:
    """What the reference reads of one run: its answer file and its HAR."""
    digest = hashlib.sha256()
    for name in ("agent_response.json", "network.har"):
        digest.update((run / name).read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def load(path: Path = STORE) -> tuple[Fingerprint, dict[str, StoredCase]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    fingerprint = Fingerprint(data["generator"], data["oracle"], data["dataset"])
    cases = {
        case_id: StoredCase(kind, Verdict(status, float(score)) if status else None, digest)
        for case_id, (kind, status, score, digest) in data["cases"].items()
    }
    return fingerprint, cases


def write(fingerprint: Fingerprint, cases: dict[str, StoredCase], path: Path = STORE) -> None:
    """One case per line, in a stable order, so that a refresh reads as a short diff."""
    header = {
        "about": f"The reference's verdict on every conformance case. Written by `{REFRESH_COMMAND}`;"
        " never edit by hand. cases: 'group/task_id' -> [case, status, score, digest of the run's files].",
        **dataclasses.asdict(fingerprint),
    }
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in header.items()]
    rows = [
        f"    {json.dumps(case_id)}: {json.dumps(_row(case))}"
        for case_id, case in sorted(cases.items(), key=lambda item: _order(item[0]))
    ]
    body = ",\n".join(rows)
    path.write_text("{\n" + "\n".join(lines) + '\n  "cases": {\n' + body + "\n  }\n}\n", encoding="utf-8")


def staleness(stored: dict[str, StoredCase], current: dict[str, tuple[str, str]]) -> list[str]:
    """Why the stored cases no longer describe the generated ones (case id -> (kind, digest))."""
    reasons = []
    if missing := sorted(current.keys() - stored.keys(), key=_order):
        reasons.append(f"{len(missing)} generated cases have no stored verdict, e.g. {missing[:5]}")
    if gone := sorted(stored.keys() - current.keys(), key=_order):
        reasons.append(f"{len(gone)} stored cases are no longer generated, e.g. {gone[:5]}")
    changed = sorted(
        (
            key
            for key in stored.keys() & current.keys()
            if (stored[key].kind, stored[key].digest) != current[key]
        ),
        key=_order,
    )
    if changed:
        reasons.append(f"{len(changed)} cases have other inputs than when stored, e.g. {changed[:5]}")
    return reasons


def stale_message(reasons: list[str]) -> str:
    return (
        f"{STORE.relative_to(REPO)} is stale ({'; '.join(reasons)}).\n"
        f"Refresh it with `{REFRESH_COMMAND}` (a few minutes) and commit it with the change."
    )


def _row(case: StoredCase) -> list[str | float | None]:
    status, score = (case.verdict.status, case.verdict.score) if case.verdict else (None, None)
    return [case.kind, status, score, case.digest]


def _order(case_id: str) -> tuple[str, int]:
    group, task_id = case_id.split("/")
    return group, int(task_id)
