"""Faults made on purpose (`serve --faults FILE`, or a session's own `faults` at `POST /sessions`): what
the plan says, and which request draws which fault. Pure: no IO but reading the file, no mitmproxy (the
proxy's side is `proxy/faults.py`; the control API reads a start's `faults` with `parse_faults`).

A fault file is a JSON object: a `seed` and `rules`, tried in order for each request to a site of the
map; the first rule that matches the request and draws under its `probability` decides its fault:

    {"seed": 7, "rules": [
        {"site": "__GITLAB__", "path": "^/api/", "methods": ["POST"], "probability": 0.2,
         "fault": "status", "status": 503, "body": "<h1>busy</h1>"},
        {"site": "__SHOPPING__", "probability": 0.1, "fault": "latency", "seconds": 2},
        {"probability": 0.05, "fault": "drop"},
        {"path": "\\.html$", "probability": 0.1, "fault": "slow_body", "bytes_per_second": 4096}]}

`status` answers with that status and page instead of the site; `drop` closes the connection without
an answer; `latency` waits `seconds` before sending the request on; `slow_body` holds the site's answer
back as long as its body takes at `bytes_per_second` (mitmproxy sends a buffered answer whole).

Reproducible: a draw depends on the seed, the session, the request's method and URL as the site map
writes it (`__GITLAB__/a/b`: the same on any replica, port or deployment) and how many requests of that
method and URL the session sent before (`draw`), never on the order in which sessions' requests arrive
or on a random generator's state, so the same seed and the same traffic give the same faults, however
the sessions interleave.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from webarena_live.evaluator import WebArenaLiveError, placeholder, site_key, unknown_site_problem

FAULT_KEY = "webarena_fault"
"""`flow.metadata` key of a flow faulted on purpose (`proxy/faults.py`): the fault's record. Whoever
reports answers to a copy's health (`replicas/health.py`) skips these flows."""
KINDS = ("latency", "status", "drop", "slow_body")
DEFAULT_PAGE = "<!doctype html><title>Fault injected</title><h1>{status}</h1><p>webarena-live --faults</p>"


class FaultsError(WebArenaLiveError):
    """A fault file or `faults` body that cannot be used; one line per mistake, each naming its field."""


def _site(name: str) -> str:
    if problem := unknown_site_problem(name):
        raise ValueError(problem)
    return site_key(name)


def _pattern(text: str) -> str:
    try:
        re.compile(text)
    except re.error as error:
        raise ValueError(f"{text!r} is not a regular expression: {error}") from None
    return text


def _method(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z]+", name):
        raise ValueError(f"{name!r} is not an HTTP method such as GET or POST")
    return name.upper()


class FaultRule(BaseModel):
    """One rule of a fault file: which requests (`site`, `path`, `methods`), how often and what fault."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fault: Literal["latency", "status", "drop", "slow_body"]
    probability: float = Field(ge=0, le=1)
    site: Annotated[str, AfterValidator(_site)] | None = None
    """A site of the map (`__GITLAB__` or `gitlab`); None: every site."""
    path: Annotated[str, AfterValidator(_pattern)] = ""
    """A regular expression searched in the request's path and query on its site (`/a/b?c=d`)."""
    methods: tuple[Annotated[str, AfterValidator(_method)], ...] = ()
    """The methods it applies to; empty: every method."""
    seconds: float | None = Field(default=None, gt=0, le=600)
    status: int | None = Field(default=None, ge=400, le=599)
    body: str | None = None
    content_type: str = "text/html; charset=utf-8"
    bytes_per_second: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _what_the_fault_needs(self) -> FaultRule:
        needs = {"latency": "seconds", "slow_body": "bytes_per_second"}.get(self.fault)
        if needs and getattr(self, needs) is None:
            raise ValueError(f'a "{self.fault}" fault needs "{needs}"')
        given = [
            key for key in ("seconds", "status", "body", "bytes_per_second") if getattr(self, key) is not None
        ]
        allowed = {
            "latency": {"seconds"},
            "status": {"status", "body"},
            "drop": set(),
            "slow_body": {"bytes_per_second"},
        }
        if extra := [key for key in given if key not in allowed[self.fault]]:
            raise ValueError(f'a "{self.fault}" fault takes no {", ".join(map(repr, extra))}')
        return self

    def matches(self, site: str, path: str, method: str) -> bool:
        return (
            (self.site is None or self.site == site)
            and (not self.methods or method.upper() in self.methods)
            and (not self.path or re.search(self.path, path) is not None)
        )


class FaultPlan(BaseModel):
    """A fault file: the seed of every draw and the rules, tried in order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    rules: tuple[FaultRule, ...] = Field(min_length=1)


def plan_summary(plan: FaultPlan, source: str) -> dict[str, Any]:
    """What `/health` says of the proxy's plan (`faults`): its seed, how many rules of each kind, and
    where it came from (the `--faults` file)."""
    kinds: dict[str, int] = {}
    for rule in plan.rules:
        kinds[rule.fault] = kinds.get(rule.fault, 0) + 1
    return {"seed": plan.seed, "rules": len(plan.rules), "kinds": kinds, "source": source}


def plan_line(summary: dict[str, Any]) -> str:
    """The banner's line of a loaded plan (`plan_summary`)."""
    kinds = ", ".join(f"{count} {kind}" for kind, count in summary["kinds"].items())
    rules = "1 rule" if summary["rules"] == 1 else f"{summary['rules']} rules"
    return f"  faults        seed {summary['seed']}, {rules} ({kinds}) from {summary['source']}"


def _line(error: Any) -> str:
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    elif error["type"] == "too_short" and tuple(error["loc"]) == ("rules",):
        message = "must list at least one rule"
    return f"{where or '(faults)'}: {message}"


def parse_faults(data: Any, *, source: str = "faults") -> FaultPlan:
    """The plan a fault file's content (or a `faults` body) gives; `FaultsError` with one line per
    mistake, each naming its field (`rules[1].probability: ...`)."""
    if not isinstance(data, dict):
        raise FaultsError(f'{source}: must be a JSON object such as {{"seed": 1, "rules": [...]}}')
    try:
        return FaultPlan.model_validate(data)
    except ValidationError as error:
        errors = error.errors()
        if any(len(item["loc"]) > 1 and item["loc"][0] == "rules" for item in errors):
            # rules that are all wrong leave none, which pydantic also calls too short: not one more mistake
            errors = [
                item for item in errors if not (item["type"] == "too_short" and item["loc"] == ("rules",))
            ]
        raise FaultsError("\n".join(f"{source}: {_line(item)}" for item in errors)) from None


def read_faults(path: str | Path) -> FaultPlan:
    """The plan of the fault file at `path`; `FaultsError` naming the file when it cannot be used."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise FaultsError(f"{file}: cannot read the fault file: {error.strerror or error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise FaultsError(f"{file}: the fault file is not valid JSON: {error}") from None
    return parse_faults(data, source=str(file))


_DERENDERED = re.compile(r"__([A-Za-z0-9_]+?)__(.*)", re.DOTALL)


def site_and_path(derendered: str) -> tuple[str, str] | None:
    """(site key, path and query below the site's base URL) of a URL the site map derendered
    (`__GITLAB__/a/b?c`), None for a URL on no site of the map."""
    found = _DERENDERED.fullmatch(derendered)
    if found is None:
        return None
    return site_key(found.group(1)), found.group(2) or "/"


def draw(seed: int, session: str, method: str, url: str, seen: int, rule: int) -> float:
    """A number in [0, 1) for rule `rule` and the `seen`-th earlier request of `method` `url` (as the
    site map writes it) in `session`: a hash, so the same inputs draw the same number in any process and
    any order."""
    key = json.dumps([seed, session, method.upper(), url, seen, rule]).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2.0**64


def choose(
    plan: FaultPlan, *, session: str, method: str, url: str, seen: int, site: str, path: str
) -> tuple[int, FaultRule] | None:
    """The rule (its index) whose fault this request draws, or None: the first rule that matches the
    request (`site`: its site's key; `path`: its path and query there) and draws under its probability."""
    for index, rule in enumerate(plan.rules):
        if (
            rule.matches(site, path, method)
            and draw(plan.seed, session, method, url, seen, index) < rule.probability
        ):
            return index, rule
    return None


def fault_record(index: int, rule: FaultRule, *, method: str, url: str, site: str) -> dict[str, Any]:
    """A fault as the session, its finish, `attempt.json` and the report list it. `failing`: it makes
    the answer a failing one (an error status, no answer), which `site_errors` then does not count; a
    `latency` becomes one as it ends when its client gave up on it (`proxy/faults.py`: `client_gave_up`)."""
    record: dict[str, Any] = {
        "rule": index,
        "fault": rule.fault,
        "site": placeholder(site),
        "method": method,
        "url": url,
    }
    if rule.fault == "status":
        record["status"] = fault_status(rule)
    elif rule.fault == "latency":
        record["seconds"] = rule.seconds
    elif rule.fault == "slow_body":
        record["bytes_per_second"] = rule.bytes_per_second
    record["failing"] = rule.fault in ("status", "drop") and record.get("status", 0) in (
        0,
        500,
        502,
        503,
        504,
    )
    return record


def fault_status(rule: FaultRule) -> int:
    return rule.status if rule.status is not None else 503


def fault_page(rule: FaultRule) -> bytes:
    """The body a `status` fault answers with."""
    text = rule.body if rule.body is not None else DEFAULT_PAGE.format(status=fault_status(rule))
    return text.encode("utf-8")
