"""The control API's request and response bodies, as pydantic models.

`/openapi.json` is generated from these. Responses are documented, not
re-validated on the way out: the routes build them from the sessions'
own JSON views, and re-validating a 10,000-event trace or a verdict on every
answer would cost the agent time for nothing. Response models allow extra
fields, so a view can grow without breaking clients that validate.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from webarena_live.replicas.reset import RESET_TIMEOUT

SessionName = Annotated[
    str,
    Path(
        description="session name (the proxy-credentials username), percent-encoded",
        # Documented, not enforced here: a name the store cannot hold is simply unknown (404).
        json_schema_extra={"minLength": 1, "maxLength": 128},
    ),
]
"""The `{session}` path parameter of the session routes."""


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(BaseModel):
    """Every refusal: a stable code and what was wrong."""

    error: str
    detail: Any


class StartSession(BaseModel):
    """Body of `POST /sessions`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: StrictInt
    session: StrictStr | None = Field(None, description="session name; default: the caller's proxy username")
    run: StrictStr | None = Field(
        None, description="the run directory the outputs go to: OUT/<run>/<task_id>/"
    )
    near: StrictStr | None = Field(
        None,
        description="the node the agent's browser runs on (a Ray node id or address): with serve --ray the "
        "session goes to a worker there, when one is up; elsewhere every worker is on this machine",
    )
    restart: StrictBool = Field(False, description="discard the events of a running session instead of 409")
    resume_journal: StrictBool = Field(
        False, description="start with the events of this session's newest journal for the task"
    )
    reset: StrictBool = Field(
        False,
        description="POST the reset_url of each of the task's sites first; starts only if all succeed",
    )
    reset_timeout: float = Field(
        RESET_TIMEOUT, gt=0, le=3600, description="seconds each site's reset may take"
    )
    wait: float = Field(
        0, ge=0, le=3600,
        description="seconds to wait for a free replica of each of the task's sites (then 503, Retry-After)",
    )  # fmt: skip
    faults: dict[str, Any] | None = Field(
        None,
        description="this session's own fault plan, in the format of serve --faults (a seed and rules): "
        "faults made on purpose in its requests to the sites, instead of the proxy's",
    )


class Started(_Open):
    """What `POST /sessions` answers: the session, its task and where the agent starts."""

    session: str
    task_id: int
    intent: str
    start_urls: list[str] = Field(description="the task's start URLs, rendered to real URLs")
    sites: list[str]
    state: str | None = None
    resumed_events: int | None = Field(None, description="events taken back from the journal, on a resume")
    proxy: str | None = Field(
        None,
        description="the session's own proxy address, http://HOST:PORT: traffic through it is this "
        "session's, with no credentials (released when the session finishes)",
    )
    worker: int | None = Field(
        None, description="the worker process that holds the session (serve --workers)"
    )


FINAL_RESPONSE_SCHEMA: dict[str, Any] = {
    "description": "the agent's final response: a JSON object (seed or dataset field names), or text "
    "holding one inside a ```json fence",
}
"""Any JSON: the evaluator judges whatever the agent answered (a malformed answer is a verdict, not a 400)."""


class Health(_Open):
    status: str
    version: str
    tasks: int
    faults: dict[str, Any] | None = Field(
        None,
        description="the proxy's fault plan (serve --faults): its seed, how many rules (and of each kind) "
        "and its source, the file's absolute path; null without one (a session's own plan is not shown here)",
    )


class TaskView(_Open):
    task_id: int
    intent_template_id: int
    sites: list[str]
    intent: str
    start_urls: list[str]
    revision: int
    results_schema: dict[str, Any] | None = Field(
        None, description="JSON Schema of the answer's `retrieved_data` (the seed's `results`)"
    )
    answer: dict[str, list[str]] | None = Field(
        None, description="the `task_type` and `status` values a final answer may give (any case)"
    )


class TaskList(_Open):
    count: int
    tasks: list[TaskView]


class SessionView(_Open):
    session: str
    state: Literal["idle", "running", "finished", "resumable"]
    """`resumable`: an unfinished run found in the journals after a restart (`GET /sessions` only)."""
    task_id: int | None = None
    counts: dict[str, int] | None = None
    faults_injected: list[dict[str, Any]] | None = None
    """The faults `serve --faults` (or the start's `faults`) made in this attempt's traffic, in order."""
    nothing_captured: str | None = Field(
        None,
        description="a running session without an event: what the proxy saw of it and what to do, the "
        "words its finish would answer with 409 no_events",
    )


class SessionList(_Open):
    sessions: list[SessionView]


class Trace(_Open):
    session: str
    count: int
    events: list[dict[str, Any]]


class Result(_Open):
    """The verdict: exactly the `eval_result.json` document."""

    task_id: int
    status: Literal["success", "failure", "error"]
    score: float
    evaluators_results: list[dict[str, Any]]
    sites_answered: bool | None = None
    """A finish's and a preview's answer only: every judged request to a mapped site got an answer."""
    unanswered: dict[str, Any] | None = None
    """With `sites_answered` false: `count` of the requests that got none, and the `first` of them."""
    site_errors: dict[str, Any] | None = None
    """A finish's and a preview's answer only: `count` of the judged requests to a mapped site that got
    a failing answer (no connection, a timeout, 500, 502-504; faults made on purpose excepted), the
    count per `origins` (one replica of a site each), and the `first` few (method, url, status, error)."""
    faults_injected: list[dict[str, Any]] | None = None
    """A finish's and a preview's answer, when the session drew faults made on purpose: each, in order."""


class Har(_Open):
    log: dict[str, Any]


class Progress(_Open):
    """What each network evaluator of the task would say now (`webarena_live.TaskProgress`)."""

    task_id: int
    events: int
    network: list[dict[str, Any]]
    last_navigation: dict[str, Any] | None = None


class RunFigures(_Open):
    """`webarena-live report --json` of the output directory (every figure; see docs/guides/read-a-run.md)."""

    tasks: int
    success: int
    rate: float
    interval: list[float]
    missing: int
    by_site: dict[str, dict[str, Any]]


class MutationSeen(_Open):
    """One mutation a proxy saw on a replica of the site map (`MutationLog.mutations_after`)."""

    seq: int
    site: str = Field(description="the site's placeholder")
    index: int = Field(description="the replica's index")
    session: str
    method: str
    url: str
    time: float


class AnswerSeen(_Open):
    """One judged answer a proxy saw from a replica (`MutationLog.answers_after`): the copy's health."""

    seq: int
    site: str = Field(description="the site's placeholder")
    index: int = Field(description="the replica's index")
    failed: bool = Field(description="no connection, a timeout, 500 or 502-504")


class Mutations(_Open):
    """`GET /mutations`: what this proxy saw change the site map's replicas, oldest first (a fleet's front
    reads its workers' answers with this model: `control/wire.py`)."""

    mutations: list[MutationSeen] = Field(
        description="a POST, PUT, PATCH or DELETE to a replica of the site map that changed it"
    )
    epoch: str | None = Field(
        None,
        description="a random token of the proxy's mutation log: another one, the sequence restarted",
    )
    active: dict[str, float] = Field(
        default_factory=dict,
        description="session -> when it last used its lease here (a request or a control call), for the "
        "sessions whose lease has not ended: a fleet's front counts --lease-timeout's idle time from it "
        "(with `active_after`: only those used since)",
    )
    now: float | None = Field(None, description="this proxy's clock at the answer: the next `active_after`")
    reads: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="per site placeholder, the requests its rules judged reads, by rule"
    )
    answers: list[AnswerSeen] = Field(
        default_factory=list,
        description="the judged answers (navigations, mutations) the replicas gave after `answers_after`",
    )


class Abandon(BaseModel):
    """Body of `POST /sessions/{s}/abandon` (optional: no body is no reason)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: StrictStr | None = Field(
        None, max_length=1000, description="why the agent or harness gives up, kept in the session's record"
    )


class Abandoned(_Open):
    """What `POST /sessions/{s}/abandon` answers: the lease ended, the replicas given back."""

    session: str
    lease_ended: str = Field(
        description="`abandoned`, or why the lease had ended already (`timeout`, `lost`)"
    )
    reason: str | None = None
    replicas: dict[str, str] = Field(description="the replicas the session held: placeholder -> URL")
