"""A session's reward: the verdict's score, or a masked sample that says why there is no usable one.

One reading of what the control API answered, shared by `score` and `ascore` and by every framework
adapter, so that each framework gets the same value for the same session. Pure: no request is made
here (docs/architecture.md, Rewards).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from webarena_live.evaluator import WebArenaLiveError

UNREACHABLE_STATUSES = frozenset({0, 502, 503, 504})
"""Statuses of an exchange the site never answered: 0 (the proxy could not reach it) and the gateway
and unavailability statuses a site behind a reverse proxy answers while it is down."""
JUDGED_TYPES = frozenset({"navigation", "mutation"})
"""The event types the evaluators judge; a failed asset or XHR does not mask a verdict."""


class Reward(BaseModel):
    """The reward of one session.

    `value` is the verdict's score; it is None only when there is no verdict at all. `masked` says the
    sample must not be trained on as the agent's doing: the environment failed (`kind` and `reason`
    say how) or the verdict was exposed to another session's changes. `result` is the verdict JSON
    (`eval_result.json`, with `interference` when the server reports it), None without a verdict.
    """

    model_config = ConfigDict(frozen=True)

    session: str
    value: float | None
    masked: bool = False
    kind: str | None = None
    """A stable code for why it is masked: the control API's error code (`unknown_session`,
    `session_lost`, `worker_unavailable`, `no_events`, ...), `control_unreachable`, `not_finished`,
    `site_unreachable`, `lease_ended`, `exposed` or `verdict_error`."""
    reason: str | None = None
    result: dict[str, Any] | None = None

    @property
    def status(self) -> str | None:
        """The verdict's status (`success`, `failure`, `error`), None without a verdict."""
        return None if self.result is None else self.result.get("status")

    def require(self) -> float:
        """The value, or `RewardUnavailable` when the sample is masked."""
        if self.masked or self.value is None:
            raise RewardUnavailable(self)
        return self.value


class RewardUnavailable(WebArenaLiveError):
    """A session has no reward to train on; `reward` says why (`kind`, `reason`)."""

    def __init__(self, reward: Reward) -> None:
        super().__init__(f"no reward for session {reward.session!r}: {reward.kind}: {reward.reason}")
        self.reward = reward


def masked(session: str, kind: str, reason: str, result: dict[str, Any] | None = None) -> Reward:
    """A masked sample; it keeps the verdict's score when there is a verdict."""
    value = None if result is None else _score(result)
    return Reward(session=session, value=value, masked=True, kind=kind, reason=reason, result=result)


def refusal(session: str, status: int, error: str, detail: Any) -> Reward:
    """The control API refused to judge the session (unknown, lost, its worker away, no events...)."""
    text = detail if isinstance(detail, str) else json.dumps(detail)
    return masked(session, error, f"the control API answered {status} {error}: {text}")


def _score(result: dict[str, Any]) -> float:
    return float(result.get("score") or 0.0)


def exposure(result: dict[str, Any]) -> str | None:
    """Why the verdict is exposed (other sessions changed its sites while it ran), None when it is not.
    A result without `interference` is not exposed (servers that do not report it)."""
    interference = result.get("interference")
    if not isinstance(interference, dict) or not interference.get("exposed"):
        return None
    mutations = interference.get("mutations") or []
    shown = ", ".join(_mutation_text(m) for m in mutations[:3]) if isinstance(mutations, list) else ""
    more = f" (+{len(mutations) - 3} more)" if isinstance(mutations, list) and len(mutations) > 3 else ""
    return f"other sessions changed the site while it ran: {shown or 'mutations reported'}{more}"


def _mutation_text(mutation: Any) -> str:
    if not isinstance(mutation, dict):
        return str(mutation)
    who = mutation.get("session")
    what = " ".join(str(mutation[key]) for key in ("method", "url") if mutation.get(key))
    return f"{what or 'a mutation'}" + (f" by {who}" if who else "")


def site_origins(health: dict[str, Any]) -> frozenset[str]:
    """The origins (`scheme://host:port`) of every site of the server's map (`GET /health`'s `sites`),
    replicas included: any URL found in it."""
    found: set[str] = set()
    pending: list[Any] = [health.get("sites") or {}]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str) and value.startswith(("http://", "https://")):
            found.add(origin(value))
    return frozenset(found)


def origin(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def unreachable_site(events: list[dict[str, Any]], origins: frozenset[str]) -> str | None:
    """Why the site was down for this session: its first navigation or mutation to a site of the map
    that the site never answered; None when every one was answered."""
    for event in events:
        if event.get("type") not in JUDGED_TYPES or event.get("status") not in UNREACHABLE_STATUSES:
            continue
        url = str(event.get("url", ""))
        if url.startswith(("http://", "https://")) and origin(url) in origins:
            said = event.get("error") or f"status {event.get('status')}"
            return f"the site did not answer {event.get('method', 'GET')} {url}: {said}"
    return None


def needs_site_check(result: dict[str, Any]) -> bool:
    """A verdict short of success may come from a site that was down; a success cannot."""
    return _score(result) < 1.0


def judged(session: str, result: dict[str, Any], site_down: str | None = None) -> Reward:
    """The reward of a verdict: its score, masked when the site was down, the verdict is exposed, or
    the evaluator itself could not judge (`error`)."""
    if site_down is not None:
        return masked(session, "site_unreachable", site_down, result)
    if isinstance(ended := result.get("lease_ended"), str):  # its replicas went on without it
        return masked(session, "lease_ended", f"the session's lease ended before its finish: {ended}", result)
    if (exposed := exposure(result)) is not None:
        return masked(session, "exposed", exposed, result)
    if result.get("status") == "error":
        why = result.get("error_msg") or _first_error(result) or "the evaluator could not judge it"
        return masked(session, "verdict_error", str(why), result)
    return Reward(session=session, value=_score(result), result=result)


def _first_error(result: dict[str, Any]) -> str | None:
    for evaluator in result.get("evaluators_results") or []:
        if isinstance(evaluator, dict) and evaluator.get("error_msg"):
            return f"{evaluator.get('evaluator_name')}: {evaluator['error_msg']}"
    return None
