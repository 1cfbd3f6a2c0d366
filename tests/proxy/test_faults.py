"""Faults made on purpose (`serve --faults`, a start's `faults`): the plan's parser and draws on their own
(`runs/fault_plan.py`), then real `webarena-live serve` processes in front of a real site on 127.0.0.1
(`proxy/faults.py`): the same seed and traffic give the same faults however the sessions interleave, every
fault is listed where the agent's verdict is, and a session that drew none is written as without
`--faults`."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from tests.support.counter_replicas import READ
from tests.support.site_sessions import read, run_session, serve, site
from webarena_live.evaluator import report_run
from webarena_live.runs.fault_plan import (
    FaultPlan,
    FaultsError,
    choose,
    draw,
    fault_record,
    parse_faults,
    read_faults,
    site_and_path,
)

__all__ = ["site"]

PLAN = {
    "seed": 11,
    "rules": [
        {"site": "__SHOPPING__", "path": "^/p/", "methods": ["GET"], "probability": 0.25, "fault": "status",
         "status": 503, "body": "<h1>busy on purpose</h1>"},
        {"path": "^/p/", "probability": 0.1, "fault": "drop"},
        {"path": "^/p/", "probability": 0.15, "fault": "latency", "seconds": 0.05},
        {"path": "^/p/", "probability": 0.1, "fault": "slow_body", "bytes_per_second": 100000},
    ],
}  # fmt: skip
PAGES = [f"/p/{n}" for n in range(24)]


# --- the plan on its own -------------------------------------------------------------------------------


def test_a_plan_reads_its_rules_with_their_defaults() -> None:
    plan = parse_faults(PLAN)
    assert plan.seed == 11 and [rule.fault for rule in plan.rules] == [
        "status",
        "drop",
        "latency",
        "slow_body",
    ]
    assert plan.rules[0].site == "shopping" and plan.rules[0].methods == ("GET",)
    assert plan.rules[1].site is None and plan.rules[1].methods == ()
    assert parse_faults({"rules": [{"fault": "drop", "probability": 1}]}).seed == 0


def rule(fault: str = "drop", **more: Any) -> dict[str, Any]:
    return {"rules": [{"fault": fault, "probability": 1, **more}]}


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ([], 'faults: must be a JSON object such as {"seed": 1, "rules": [...]}'),
        ({"seed": 1}, "faults: rules: Field required"),
        ({"rules": []}, "faults: rules: must list at least one rule"),
        (rule("fire"), "faults: rules[0].fault: Input should be 'latency'"),
        (rule(probability=1.5), "faults: rules[0].probability: Input should be less"),
        ({"rules": [{"fault": "drop"}]}, "faults: rules[0].probability: Field required"),
        (rule("latency"), 'faults: rules[0]: a "latency" fault needs "seconds"'),
        (rule("slow_body"), 'needs "bytes_per_second"'),
        (rule(status=500), "a \"drop\" fault takes no 'status'"),
        (rule("status", status=200), "rules[0].status: Input should be greater"),
        (rule(site="__SHOPING__"), "(did you mean '__SHOPPING__'?)"),
        (rule(path="(["), "rules[0].path: '([' is not a regular expression"),
        (rule(methods=["G E T"]), "rules[0].methods[0]: 'G E T' is not an HTTP method"),
        (rule(chance=1), "faults: rules[0].chance: unknown key"),
        ({"sed": 1, **rule()}, "faults: sed: unknown key"),
    ],
)
def test_each_mistake_is_one_line_naming_its_field(data: Any, line: str) -> None:
    with pytest.raises(FaultsError) as caught:
        parse_faults(data)
    assert any(line in said for said in str(caught.value).splitlines()), str(caught.value)


def test_a_fault_file_that_cannot_be_read_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(FaultsError, match="cannot read the fault file"):
        read_faults(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    with pytest.raises(FaultsError, match=f"{broken}: the fault file is not valid JSON"):
        read_faults(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"rules": [{"fault": "drop", "probability": 2}]}))
    with pytest.raises(FaultsError, match=rf"{wrong}: rules\[0\]\.probability"):
        read_faults(wrong)


def test_a_derendered_url_gives_its_site_and_path() -> None:
    assert site_and_path("__SHOPPING_ADMIN__/sales/order?id=1") == ("shopping_admin", "/sales/order?id=1")
    assert site_and_path("__GITLAB__") == ("gitlab", "/")
    assert site_and_path("http://elsewhere.test/p/1") is None


@given(
    seed=st.integers(0, 2**31),
    session=st.text(max_size=12),
    url=st.text(max_size=40),
    seen=st.integers(0, 500),
)
def test_draws_are_a_function_of_their_inputs_only(seed: int, session: str, url: str, seen: int) -> None:
    first = draw(seed, session, "GET", url, seen, 0)
    assert 0.0 <= first < 1.0
    assert draw(seed, session, "get", url, seen, 0) == first  # a method in any case
    assert (
        len(
            {
                first,
                draw(seed, session, "GET", url, seen + 1, 0),
                draw(seed + 1, session, "GET", url, seen, 0),
            }
        )
        > 1
    )


def test_draws_meet_each_rules_probability_and_the_first_drawn_rule_wins() -> None:
    plan = parse_faults(PLAN)
    chosen = [
        choose(
            plan,
            session=f"s{n}",
            method="GET",
            url=f"http://h/p/{n}",
            seen=0,
            site="shopping",
            path=f"/p/{n}",
        )
        for n in range(4000)
    ]
    kinds = [found[1].fault for found in chosen if found is not None]
    # the first rule fires a quarter of the time; each later one on what the earlier ones left
    assert abs(kinds.count("status") / 4000 - 0.25) < 0.03
    assert abs(kinds.count("drop") / 4000 - 0.75 * 0.1) < 0.02
    never = choose(plan, session="s", method="GET", url="http://h/q", seen=0, site="shopping", path="/q")
    assert never is None  # no rule's path matches
    post = parse_faults(
        {"rules": [{"fault": "drop", "probability": 1, "methods": ["POST"], "site": "gitlab"}]}
    )
    assert choose(post, session="s", method="GET", url="u", seen=0, site="gitlab", path="/") is None
    assert choose(post, session="s", method="POST", url="u", seen=0, site="shopping", path="/") is None
    assert choose(post, session="s", method="post", url="u", seen=0, site="gitlab", path="/") is not None


def test_a_fault_record_says_whether_it_made_a_failing_answer() -> None:
    plan = parse_faults({"rules": [
        {"fault": "status", "probability": 1, "status": 404},
        {"fault": "status", "probability": 1},
        {"fault": "drop", "probability": 1},
        {"fault": "latency", "probability": 1, "seconds": 1},
    ]})  # fmt: skip
    records = [
        fault_record(i, rule, method="GET", url="http://h/", site="gitlab")
        for i, rule in enumerate(plan.rules)
    ]
    assert [(r["fault"], r.get("status"), r["failing"]) for r in records] == [
        ("status", 404, False), ("status", 503, True), ("drop", None, True), ("latency", None, False)
    ]  # fmt: skip
    assert records[0]["site"] == "__GITLAB__" and records[3]["seconds"] == 1


# --- real serve processes ----------------------------------------------------------------------------


def calm_name(plan: FaultPlan, site: str, paths: list[str]) -> str:
    """A session name whose requests to `paths` draw no fault under `plan`."""
    for n in range(200):
        name = f"calm-{n}"
        if all(
            choose(
                plan,
                session=name,
                method="GET",
                url=f"__SHOPPING__{path}",
                seen=0,
                site="shopping",
                path=path,
            )
            is None
            for path in paths
        ):
            return name
    raise AssertionError("no calm session name")


def har_exchanges(folder: Path) -> list[tuple[Any, ...]]:
    """What `network.har` says was sent and answered, without its times."""
    entries = read(folder, "network.har")["log"]["entries"]
    return [
        (
            e["request"]["method"],
            e["request"]["url"],
            e["response"]["status"],
            e["response"]["content"].get("text"),
        )
        for e in entries
    ]


def paths_of(faults: list[dict[str, Any]], kind: str) -> list[str]:
    return ["/" + f["url"].split("/", 3)[3] for f in faults if f["fault"] == kind]


def test_the_same_seed_and_traffic_give_the_same_faults_each_listed_and_a_calm_session_is_untouched(
    tmp_path: Path, site: str
) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps(PLAN))
    calm = calm_name(parse_faults(PLAN), site, PAGES[:6])
    runs: list[dict[str, dict[str, Any]]] = []
    for label in ("first", "second"):
        served = serve(tmp_path / label, site, "--faults", str(faults))
        try:
            if label == "first":  # one session after the other
                runs.append({name: run_session(served, name, site, PAGES) for name in ("agent-a", "agent-b")})
            else:  # the same traffic, the two sessions at once: their requests interleave
                with ThreadPoolExecutor(2) as pool:
                    both = {
                        name: pool.submit(run_session, served, name, site, PAGES)
                        for name in ("agent-a", "agent-b")
                    }
                    runs.append({name: future.result() for name, future in both.items()})
            runs[-1][calm] = run_session(served, calm, site, PAGES[:6])
        finally:
            served.stop()
    first, second = runs
    kinds = set()
    for name in ("agent-a", "agent-b"):
        made = first[name]["answer"]["faults_injected"]
        kinds |= {fault["fault"] for fault in made}
        # the same faults, listed alike in the finish, the session and attempt.json, in both runs
        assert made == second[name]["answer"]["faults_injected"]
        assert made == first[name]["view"]["faults_injected"] == first[name]["after"]["faults_injected"]
        assert made == read(first[name]["folder"], "attempt.json")["faults_injected"]
        # each is what the agent saw, and is in the trace as it saw it
        seen = first[name]["seen"]
        assert [p for p, saw in zip(PAGES, seen, strict=True) if saw == "503"] == paths_of(made, "status")
        assert [p for p, saw in zip(PAGES, seen, strict=True) if saw == "dropped"] == paths_of(made, "drop")
        trace = first[name]["trace"]
        assert ["/" + e["url"].split("/", 3)[3] for e in trace if e["status"] == 503] == paths_of(
            made, "status"
        )
        assert ["/" + e["url"].split("/", 3)[3] for e in trace if e["status"] == 0] == paths_of(made, "drop")
        assert len(trace) == len(PAGES)
        # faults made on purpose are no failure of the site
        assert first[name]["answer"]["site_errors"]["count"] == 0 and first[name]["answer"]["sites_answered"]
    assert kinds == {"status", "drop", "latency", "slow_body"}
    figures = report_run(tmp_path / "first" / "out" / "agent-a").to_dict()["faults"]
    assert figures["with_faults"]["attempts"] == 1 and figures["without_faults"]["attempts"] == 0
    assert figures["by_task"][str(READ)]["faults"] == len(first["agent-a"]["answer"]["faults_injected"])
    assert "faults" not in report_run(tmp_path / "first" / "out" / calm).to_dict()
    cli = str(Path(sys.executable).with_name("webarena-live"))
    report = [cli, "report", str(tmp_path / "first" / "out" / "agent-a")]
    table = subprocess.run(report, capture_output=True, text=True, timeout=120)
    assert "faults made on purpose: success 0/1 attempts with faults, 0/0 without" in table.stdout, (
        table.stdout
    )

    plain = serve(tmp_path / "plain", site)
    try:
        without = run_session(plain, calm, site, PAGES[:6])
    finally:
        plain.stop()
    drew_none = first[calm]
    assert "faults_injected" not in drew_none["answer"] and "faults_injected" not in drew_none["after"]
    assert drew_none["answer"] == without["answer"]
    assert read(drew_none["folder"], "eval_result.json") == read(without["folder"], "eval_result.json")
    assert read(drew_none["folder"], "agent_response.json") == read(without["folder"], "agent_response.json")
    times = ("attempt", "started", "finished")
    kept, plain_kept = (
        {k: v for k, v in read(run["folder"], "attempt.json").items() if k not in times}
        for run in (drew_none, without)
    )
    assert kept == plain_kept and "faults_injected" not in kept
    assert har_exchanges(drew_none["folder"]) == har_exchanges(without["folder"])
    assert sorted(p.name for p in drew_none["folder"].iterdir()) == sorted(
        p.name for p in without["folder"].iterdir()
    )


def test_a_start_may_bring_its_own_faults_and_a_mistaken_one_changes_nothing(
    tmp_path: Path, site: str
) -> None:
    served = serve(tmp_path / "own", site)
    try:
        bad = {
            "task_id": READ,
            "session": "own",
            "faults": {"rules": [{"fault": "status", "probability": 2}]},
        }
        refused = requests.post(f"{served.control}/sessions", json=bad, timeout=30)
        assert refused.status_code == 400 and refused.json()["error"] == "bad_faults"
        assert "faults: rules[0].probability" in refused.json()["detail"]
        assert requests.get(f"{served.control}/sessions/own", timeout=10).status_code == 404
        own = {"seed": 3, "rules": [{"path": "^/p/", "probability": 1, "fault": "status", "status": 500}]}
        ran = run_session(served, "own", site, [*PAGES[:3], "/other"], faults=own)
        assert ran["seen"] == ["500", "500", "500", "200"]
        assert [f["url"] for f in ran["answer"]["faults_injected"]] == [f"{site}{p}" for p in PAGES[:3]]
        assert ran["answer"]["site_errors"]["count"] == 0
        other = run_session(served, "other", site, PAGES[:3])  # the proxy has no plan: no fault for it
        assert other["seen"] == ["200"] * 3 and "faults_injected" not in other["answer"]
    finally:
        served.stop()


def test_faults_reach_the_workers_of_a_fleet(tmp_path: Path, site: str) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps(PLAN))
    served = serve(tmp_path / "fleet", site, "--faults", str(faults), "--workers", "2")
    try:
        ran = {name: run_session(served, name, site, PAGES) for name in ("agent-a", "agent-b")}
    finally:
        served.stop()
    one = serve(tmp_path / "one", site, "--faults", str(faults))
    try:
        alone = {name: run_session(one, name, site, PAGES) for name in ("agent-a", "agent-b")}
    finally:
        one.stop()
    for name in ran:  # the same draws on any worker as in one process
        assert ran[name]["answer"]["faults_injected"] == alone[name]["answer"]["faults_injected"]
        assert ran[name]["after"]["faults_injected"] == alone[name]["answer"]["faults_injected"]
        assert (
            read(ran[name]["folder"], "attempt.json")["faults_injected"]
            == ran[name]["answer"]["faults_injected"]
        )
    assert any(ran[name]["answer"]["faults_injected"] for name in ran)


def test_serve_refuses_a_fault_file_it_cannot_use(tmp_path: Path, site: str) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"seed": 1, "rules": [{"fault": "latency", "probability": 0.5}]}))
    with pytest.raises(Exception) as caught:
        serve(tmp_path / "refused", site, "--faults", str(faults))
    assert 'rules[0]: a "latency" fault needs "seconds"' in str(caught.value)
