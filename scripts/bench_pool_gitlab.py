#!/usr/bin/env python
"""The GitLab-shaped run of scripts/bench_pool.py (`--site gitlab`): what the pool costs on a site that
reads by POST.

The site is scripts/support/gitlab_app.py (a graphql-core endpoint; sign-in by form; issue lists that load by
GraphQL query POSTs; issues created by GraphQL mutation), `--replicas` copies each with a reset endpoint
taking `--reset-seconds`. The task mix: a third of the tasks create an issue (mutate), the others count
the open issues (retrieve) or open the list (navigate); every agent signs in by the form and loads the
list by two GraphQL requests, as the page's script does. Two judgements of what changes a copy, under
`--isolation readers` and `exclusive`:

- by method (what the pool did before: every POST a change; here a site-map rule `"changes": [{"path":
  ".*"}]` says so),
- by what a request does (`webarena_live.replicas.changes`: the queries and the sign-in read).

Targets, by what a request does: the reading tasks cost no reset and are never exposed; each mutating
task costs one reset.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts.support: the site

from bench_pool_common import arguments, run_agents, slow_reset

from scripts.support.gitlab_app import (
    CREATE,
    ISSUES_QUERY,
    MUTATED,
    NAVIGATED,
    PASSWORD,
    PROJECT,
    USER,
    GitLabServer,
    Site,
)

TASKS = json.loads((Path(__file__).resolve().parent.parent / "tests" / "gitlab" / "tasks.json").read_text())
KINDS = {task["task_id"]: task for task in TASKS}


def task_mix(count: int) -> list[dict[str, Any]]:
    """`count` tasks: every third creates an issue of its own title, the others count or navigate."""
    tasks = []
    for index in range(count):
        kind = (9403, 9402, 9401)[index % 3]
        task = json.loads(json.dumps(KINDS[kind]))
        task["task_id"] = 6000 + index
        if kind == 9403:
            title = f"bench issue {index}"
            task["intent"] = f"Create an issue titled '{title}' in the a11y/trails repository"
            task["eval"][1]["expected"]["post_data"]["$.variables.input.title"] = title
        tasks.append(task)
    return tasks


def agent(control: str, task: dict[str, Any], think: float) -> dict[str, Any]:
    """One episode by plain HTTP: sign in, open the list, its two GraphQL requests, maybe a mutation."""
    name = f"agent-{task['task_id']}"
    body = {"task_id": task["task_id"], "session": name, "wait": 600, "restart": True}
    started = requests.post(f"{control}/sessions", json=body, timeout=900).json()
    base = started["replicas"]["__GITLAB__"]
    http = requests.Session()
    http.proxies = {"http": started["proxy"]}
    http.headers["Accept"] = "text/html"
    http.post(f"{base}/users/sign_in", data={"user[login]": USER, "user[password]": PASSWORD}, timeout=60)
    page = f"{base}/{PROJECT}/-/issues/?state=opened"
    http.get(page, timeout=60)
    headers = {"Content-Type": "application/json", "Referer": page}

    def graphql(document: Any) -> Any:
        return http.post(f"{base}/api/graphql", data=json.dumps(document), headers=headers, timeout=60).json()

    variables = {"fullPath": PROJECT, "state": "opened", "labels": []}
    me = "query currentUser { currentUser { username } }"
    graphql([{"operationName": "getIssues", "query": ISSUES_QUERY, "variables": variables},
             {"operationName": "currentUser", "query": me}])  # fmt: skip
    counted = graphql(
        {"operationName": "countIssues", "query": ISSUES_QUERY, "variables": {"fullPath": PROJECT}}
    )
    time.sleep(think)
    expected = task["eval"][0]["expected"]["task_type"]
    if expected == "mutate":
        title = task["eval"][1]["expected"]["post_data"]["$.variables.input.title"]
        graphql({"operationName": "createIssue", "query": CREATE,
                 "variables": {"input": {"projectPath": PROJECT, "title": title}}})  # fmt: skip
        answer: dict[str, Any] = dict(MUTATED)
    elif expected == "navigate":
        answer = dict(NAVIGATED)
    else:
        count = counted["data"]["project"]["issues"]["count"]
        answer = {"task_type": "retrieve", "status": "SUCCESS", "retrieved_data": [count]}
    result = requests.post(f"{control}/sessions/{name}/finish", json=answer, timeout=120).json()
    return {"task_id": task["task_id"], "status": result["status"], "mutating": expected == "mutate",
            "exposed": bool(result.get("interference", {}).get("exposed"))}  # fmt: skip


@dataclass
class Outcome:
    name: str
    seconds: float
    resets: int
    failures: int
    exposed_readers: int
    exposed_writers: int
    reads_by_rule: dict[str, int]


def run_setup(name: str, tasks: list[dict[str, Any]], *, isolation: str, by_method: bool, replicas: int,
              agents: int, think: float, reset_seconds: float, workdir: Path) -> Outcome:  # fmt: skip
    sites = [GitLabServer(Site()) for _ in range(replicas)]
    # by method: every POST a change, as the pool judged before
    entry: dict[str, Any] = {"changes": [{"path": ".*"}]} if by_method else {}
    run = run_agents(
        workdir / name,
        "__GITLAB__",
        [(site, slow_reset(site.site.restore, reset_seconds)) for site in sites],
        entry,
        tasks,
        lambda control, task: agent(control, task, think),
        isolation=isolation,
        agents=agents,
    )
    exposed = [r for r in run.results if r["exposed"]]
    return Outcome(
        name, run.seconds, run.resets, sum(r["status"] != "success" for r in run.results),
        sum(not r["mutating"] for r in exposed), sum(r["mutating"] for r in exposed),
        run.site.get("reads_by_rule", {}),
    )  # fmt: skip


def main(args: Any, workdir: Path) -> int:
    tasks = task_mix(args.tasks)
    mutating = sum(t["eval"][0]["expected"]["task_type"] == "mutate" for t in tasks)
    print(f"GitLab-shaped: {len(tasks)} tasks ({mutating} mutating), {args.agents} agents, "
          f"{args.replicas} replicas, resets of {args.reset_seconds:g} s, {args.think:g} s of thinking "
          "per task", flush=True)  # fmt: skip
    common = {"replicas": args.replicas, "agents": args.agents, "think": args.think,
              "reset_seconds": args.reset_seconds, "workdir": workdir}  # fmt: skip
    runs = [
        run_setup(
            f"{isolation}, {'by method' if by_method else 'by what it does'}",
            tasks,
            isolation=isolation,
            by_method=by_method,
            **common,
        )
        for isolation in ("readers", "exclusive")
        for by_method in (True, False)
    ]
    print(
        "\n| set-up | wall s | resets | failed verdicts | exposed readers | exposed writers | reads by rule |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for run in runs:
        rules = ", ".join(f"{rule} {count}" for rule, count in sorted(run.reads_by_rule.items())) or "-"
        print(f"| {run.name} | {run.seconds:.1f} | {run.resets} | {run.failures} | {run.exposed_readers} | "
              f"{run.exposed_writers} | {rules} |")  # fmt: skip
    for run in runs:
        if "what it does" in run.name:
            print(f"{run.name}: resets {run.resets} (target {mutating}, one per mutating task), exposed "
                  f"readers {run.exposed_readers} (target 0)")  # fmt: skip
    return 0


if __name__ == "__main__":  # the same as `bench_pool.py --site gitlab`
    with tempfile.TemporaryDirectory(prefix="bench-pool-gitlab-") as tmp:
        raise SystemExit(main(arguments(__doc__ or "", ["--site", "gitlab", *sys.argv[1:]]), Path(tmp)))
