"""A session's reward: the verdict's score, or a masked sample that says why there is no usable one.

One reading of what the control API answered, shared by `score` and `ascore` and by every framework
adapter, so that each framework gets the same value for the same session. Pure: no request is made
here (docs/architecture.md, Rewards).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from webarena_live.evaluator import WebArenaLiveError, unanswered_events


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
    `different_answer` (the session's verdict judged another answer), `already_finished` (an older
    server would not say which answer it judged), `lease_ended`, `site_unreachable`, `site_errors`
    (its sites answered failures: 500, 502-504, no connection), `exposed` or `verdict_error`."""
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


def unreachable_site(events: list[dict[str, Any]], origins: frozenset[str]) -> str | None:
    """Why the site was down for this session: its first navigation or mutation to a site of the map
    that the site never answered (the evaluator's `unanswered_events`); None when every one was."""
    missing = unanswered_events(events, origins)
    return missing[0] if missing else None


def sent_site_check(result: dict[str, Any]) -> tuple[bool, str | None]:
    """What the finish's answer says of the sites: (whether it says anything, the first unanswered
    request's sentence or None when they all answered). Servers that send nothing (older ones) leave
    the trace to be read."""
    answered = result.get("sites_answered")
    if answered is True:
        return True, None
    if answered is False:
        unanswered = result.get("unanswered")
        first = unanswered.get("first") if isinstance(unanswered, dict) else None
        return True, str(first or "a site of the task did not answer")
    return False, None


def site_failure(result: dict[str, Any]) -> str | None:
    """Why the verdict ran on failing sites (the finish's `site_errors`: judged requests answered 500,
    502-504 or not at all), None when none failed or the server does not say."""
    errors = result.get("site_errors")
    if not isinstance(errors, dict) or not isinstance(errors.get("count"), int) or errors["count"] <= 0:
        return None
    first = (errors.get("first") or [{}])[0]
    said = first.get("error") or f"status {first.get('status')}" if isinstance(first, dict) else ""
    where = f"{first.get('method', 'GET')} {first.get('url', '')}" if isinstance(first, dict) else ""
    return f"the task's sites failed {errors['count']} judged request(s), the first {where}: {said}"


def needs_site_check(result: dict[str, Any]) -> bool:
    """A verdict short of success may come from a site that was down; a success cannot."""
    return _score(result) < 1.0


def judged(
    session: str, result: dict[str, Any], site_down: str | None = None, *, mask_site_errors: bool = True
) -> Reward:
    """The reward of a verdict: its score, masked when the session's lease had ended before the finish
    (`lease_ended`: the answer says why), the site was down, its sites answered failures (`site_errors`;
    `mask_site_errors=False` keeps the plain score), the verdict is exposed, or the evaluator itself
    could not judge (`error`)."""
    if (ended := result.get("lease_ended")) is not None:
        why = ended if isinstance(ended, str) else json.dumps(ended)
        return masked(
            session, "lease_ended", f"the session's lease ended before its finish ({why}): its "
            "address forwarded nothing after that, so the agent did not work on the sites", result,
        )  # fmt: skip
    if site_down is not None:
        return masked(session, "site_unreachable", site_down, result)
    if mask_site_errors and (failed := site_failure(result)) is not None:
        return masked(session, "site_errors", failed, result)
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
