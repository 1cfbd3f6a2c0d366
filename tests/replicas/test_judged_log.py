"""The mutation log judges what it records (`MutationLog.record` with `replicas.changes`): through the
proxy's hook (`proxy.lease_checks.record`, real mitmproxy flows with their bodies), a GraphQL query and a
sign-in leave the replica clean and are counted by rule in `/health`; a mutation marks it changed and
names its sender in the others' interference. The trace's events are untouched: a POST stays a mutation
event (`event_from_flow`)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from mitmproxy.http import HTTPFlow

from tests.support.addon_helpers import make_flow
from tests.support.control_in_process import call
from webarena_live.control.authority import Authority, PoolAuthority, ToldLeases, authority_for
from webarena_live.control.context import ControlContext
from webarena_live.evaluator import SiteMap, load_tasks
from webarena_live.evaluator.classify import EventType, classify
from webarena_live.proxy.capture import event_from_flow
from webarena_live.proxy.lease_checks import record
from webarena_live.replicas import Isolation, MutationLog
from webarena_live.replicas.pool import ReplicaPool
from webarena_live.replicas.state import MUTATIONS_KEPT
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

GITLAB = "http://gitlab.test:8023"
QUERY = json.dumps({"query": 'query issues { project(fullPath: "a/b") { issues { nodes { title } } } }'})
MUTATION = json.dumps({"query": 'mutation { createIssue(input: {title: "x"}) { errors } }'})


def context(tmp_path: Path) -> ControlContext:
    site_map = SiteMap.from_config({"environments": {"__GITLAB__": {"urls": [GITLAB]}}}, source="test")
    store = SessionStore(RunSettings(site_map, output_dir=tmp_path / "out", journal_dir=tmp_path / "j"))
    pool = ReplicaPool(site_map, Isolation.NONE)
    return ControlContext(tasks=load_tasks("demo"), sessions=store, authority=PoolAuthority(pool))


def kept(site_map: SiteMap, current: Authority, *, front: bool = False) -> Authority:
    """The authority a reconfiguration to `site_map` keeps (the pool's, or a worker's log), its log
    judging by the new map as the addon has it once the options all hold (`WebArenaLive.configure`)."""
    authority = authority_for(
        site_map, front=front, isolation=Isolation.NONE, lease_timeout=None, current=current,
        state_file=Path("/nonexistent/.pool.json"),
    )  # fmt: skip
    assert authority.log is not None
    authority.log.judge_by(site_map)
    return authority


def post(path: str, body: str, content_type: str, **headers: str) -> HTTPFlow:
    """A POST as mitmproxy hands it over (with `Content-Encoding`, the body sent compressed)."""
    return make_flow(
        "POST", f"{GITLAB}{path}", headers={"Content-Type": content_type, **headers}, body=body.encode()
    )


def test_reads_by_rule_leave_the_replica_clean_and_a_mutation_changes_it(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert isinstance(ctx.authority, PoolAuthority)
    flows = [
        post(
            "/users/sign_in", "user%5Blogin%5D=root&user%5Bpassword%5D=x", "application/x-www-form-urlencoded"
        ),
        post("/api/graphql", QUERY, "application/json"),
        post("/api/graphql", QUERY, "application/json", **{"Content-Encoding": "gzip"}),  # sent compressed
        make_flow("GET", f"{GITLAB}/a/b/-/issues"),
    ]
    assert (flows[2].request.raw_content or b"")[:2] == gzip.compress(b"")[:2]
    for flow in flows:
        record(ctx, "reader", flow)
    site = ctx.authority.pool.status()["sites"]["__GITLAB__"]
    assert site["dirty"] == 0 and site["replicas"][0]["state"] == "free"
    assert site["reads_by_rule"] == {"gitlab sign-in": 1, "gitlab graphql query": 2}
    # the trace keeps the seeds' classification: a POST is a mutation event whatever the pool judged
    event = event_from_flow(flows[1])
    assert classify(event.method, {}) is EventType.MUTATION and event.method == "POST"
    record(ctx, "writer", post("/api/graphql", MUTATION, "application/json"))
    assert ctx.authority.pool.status()["sites"]["__GITLAB__"]["dirty"] == 1
    assert [m.method for m in ctx.authority.pool.replicas["gitlab"][0].mutations] == ["POST"]


def test_the_health_answer_counts_reads_by_rule(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    record(ctx, "reader", post("/api/graphql", QUERY, "application/json"))
    status, health = call(ctx, "GET", "/health")
    assert status == 200
    assert health["pool"]["sites"]["__GITLAB__"]["reads_by_rule"] == {"gitlab graphql query": 1}


def test_a_kept_log_takes_a_reconfigured_maps_rules(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert isinstance(ctx.authority, PoolAuthority) and ctx.mutations is not None
    search = post("/search", "q=x", "application/x-www-form-urlencoded")
    assert kept(ctx.site_map, ctx.authority).log is ctx.authority.pool.log
    record(ctx, "s", search)
    assert ctx.authority.pool.status()["sites"]["__GITLAB__"]["dirty"] == 1  # no rule: a change
    own = {"urls": [GITLAB], "reads": [{"method": "POST", "path": "^/search$"}]}
    changed = SiteMap.from_config({"environments": {"__GITLAB__": own}}, source="test")
    worker = ToldLeases(MutationLog(ctx.site_map))
    for log in (kept(changed, ctx.authority).log, kept(changed, worker, front=True).log):
        assert log is not None
        assert log.record(search.request.url, "s", "POST", content_type="", body=b"q=x") is None
        assert log.reads_view() == {"__GITLAB__": {"__GITLAB__ reads[0] POST ^/search$": 1}}


def test_mutations_after_a_number_are_the_newer_ones_in_order_also_once_the_oldest_are_dropped() -> None:
    site_map = SiteMap.from_config({"environments": {"__GITLAB__": {"urls": [GITLAB]}}}, source="test")
    log = MutationLog(site_map)
    urls = [f"{GITLAB}/a/b/-/issues/{i}" for i in range(5)]
    for url in urls:
        assert log.record(url, "s", "DELETE") is not None
    assert [m["url"] for m in log.mutations_after(0)] == urls
    assert [(m["seq"], m["url"]) for m in log.mutations_after(3)] == [(4, urls[3]), (5, urls[4])]
    assert log.mutations_after(5) == [] and log.mutations_after(9) == []
    kept = MUTATIONS_KEPT
    for i in range(kept):
        log.record(f"{GITLAB}/x/{i}", "s", "DELETE")
    everything = log.mutations_after(0)  # the oldest five are gone: what is kept, from the oldest kept
    assert len(everything) == kept and everything[0]["seq"] == 6 and everything[-1]["seq"] == kept + 5
    assert [m["seq"] for m in log.mutations_after(kept + 3)] == [kept + 4, kept + 5]


def test_the_answers_judged_for_a_copys_health_are_the_references_navigations_and_the_mutations(
    tmp_path: Path,
) -> None:
    """`record` judges a flow's answer by the reference's navigation rule read from the event's own
    headers (a repeated header's last value, as in the HAR), and keeps a status that came with an error."""
    from mitmproxy import flow as mflow

    from tests.support.addon_helpers import browser_headers

    ctx = context(tmp_path)
    assert ctx.mutations is not None
    page = make_flow("GET", f"{GITLAB}/a", headers=browser_headers(navigate=True), status=500)
    fetch = make_flow("GET", f"{GITLAB}/b", headers=browser_headers(navigate=False), status=500)
    repeated = make_flow("GET", f"{GITLAB}/c", status=502,
                         headers=[(b"Accept", b"*/*"), (b"accept", b"text/html")])  # fmt: skip
    cut = make_flow("GET", f"{GITLAB}/d", headers={"Accept": "text/html"}, status=200)
    cut.error = mflow.Error("client disconnected", timestamp=1_700_000_000.5)  # answered, then cut
    refused = make_flow("GET", f"{GITLAB}/e", headers={"Accept": "text/html"}, status=None,
                        error="connection refused")  # fmt: skip
    for flow in (page, fetch, repeated, cut, refused, post("/api/graphql", MUTATION, "application/json")):
        record(ctx, "s", flow)
    judged = [(answer["seq"], answer["failed"]) for answer in ctx.mutations.answers_after(0)]
    assert judged == [(1, True), (2, True), (3, False), (4, True), (5, False)]
