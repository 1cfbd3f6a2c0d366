"""Every command-line mistake, scripted: one clear line each, a non-zero exit, no file changed.

Each case runs the real `webarena-live` command in a directory that already
holds a finished run (`out/1003/…`) and a file named `afile`; afterwards every
file there must be as it was. Mistakes made against a running proxy (a second
start of a running session, an oversized body, a finish of a task whose folder
holds an attempt) are in tests/control/test_control.py, tests/control/test_control_server.py
and tests/runs/test_restart.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from webarena_live.evaluator.tasks import default_tasks_path
from webarena_live.launch import free_ports

CLI = str(Path(sys.executable).parent / "webarena-live")
SHOP = {"urls": ["http://127.0.0.1:7770"]}


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_text("a file, not a directory")
    run = tmp_path / "out" / "1003"
    run.mkdir(parents=True)
    (run / "agent_response.json").write_text('{"task_type": "NAVIGATE", "status": "SUCCESS"}')
    (run / "network.har").write_text('{"log": {"entries": []}}')
    (run / "eval_result.json").write_text('{"status": "success", "score": 1.0}')
    return tmp_path


def _config(workdir: Path, name: str, document: object) -> str:
    (workdir / name).write_text(json.dumps(document))
    return name


def _serve(*args: str) -> list[str]:
    port, session, control = map(str, free_ports(3))
    return ["serve", "--port", port, "--session-port", session, "--control-port", control, *args]


def _misspelled_task_site(workdir: Path) -> str:
    tasks = json.loads(default_tasks_path().read_text())
    tasks[0]["sites"] = ["shoping"]
    (workdir / "tasks.json").write_text(json.dumps(tasks))
    return "tasks.json"


def _run_of_task_5(workdir: Path) -> str:
    """A run of a task that is no demo task (and the official dataset is not installed in the tests)."""
    run = workdir / "other-out" / "5"
    run.mkdir(parents=True)
    for name in ("agent_response.json", "network.har"):
        (run / name).write_bytes((workdir / "out" / "1003" / name).read_bytes())
    return "other-out"


def _only_task_1001(workdir: Path) -> str:
    tasks = [t for t in json.loads(default_tasks_path().read_text()) if t["task_id"] == 1001]
    (workdir / "only-1001.json").write_text(json.dumps(tasks))
    return "only-1001.json"


CASES = {
    "serve: 'url' instead of 'urls'": (
        lambda w: _serve(
            "--config", _config(w, "c.json", {"environments": {"__SHOPPING__": {"url": ["x"]}}})
        ),
        ["unknown key 'url' (did you mean 'urls'?)"],
    ),
    "serve: a misspelled site": (
        lambda w: _serve("--config", _config(w, "c.json", {"environments": {"__SHOPING__": SHOP}})),
        ["'__SHOPING__' is not a WebArena site (did you mean '__SHOPPING__'?)"],
    ),
    "serve: a map without environments": (
        lambda w: _serve("--config", _config(w, "c.json", {"__SHOPPING__": SHOP})),
        ["unknown key '__SHOPPING__'", '"environments" must be an object of sites'],
    ),
    "serve: a URL without scheme": (
        lambda w: _serve(
            "--config",
            _config(w, "c.json", {"environments": {"__SHOPPING__": {"urls": ["127.0.0.1:18000"]}}}),
        ),
        ["'127.0.0.1:18000' is not an http(s) URL with a host (write http://127.0.0.1:18000)"],
    ),
    "serve: a replica's URL without scheme": (
        lambda w: _serve(
            "--config",
            _config(
                w,
                "c.json",
                {
                    "environments": {
                        "__SHOPPING__": {
                            "replicas": [
                                {"urls": ["127.0.0.1:7771"], "reset_url": "http://127.0.0.1:8871/reset"}
                            ]
                        }
                    }
                },
            ),
        ),
        ["environments.__SHOPPING__.replicas[0].urls[0]: '127.0.0.1:7771' is not an http(s) URL"],
    ),
    "serve: one URL in two replicas": (
        lambda w: _serve(
            "--config",
            _config(
                w,
                "c.json",
                {
                    "environments": {
                        "__SHOPPING__": {
                            "replicas": [
                                {
                                    "urls": ["http://127.0.0.1:7771"],
                                    "reset_url": "http://127.0.0.1:8871/reset",
                                },
                                {
                                    "urls": ["http://127.0.0.1:7771/"],
                                    "reset_url": "http://127.0.0.1:8872/reset",
                                },
                            ]
                        }
                    }
                },
            ),
        ),
        ["replicas[1]: 'http://127.0.0.1:7771/' is also a URL of environments.__SHOPPING__.replicas[0]"],
    ),
    "serve: one URL in two sites, with replicas": (
        lambda w: _serve(
            "--config",
            _config(
                w,
                "c.json",
                {
                    "environments": {
                        "__SHOPPING__": {
                            "replicas": [{"urls": ["http://127.0.0.1:7771"], "reset_url": "http://r:1/reset"}]
                        },
                        "__WIKIPEDIA__": {"urls": ["http://127.0.0.1:7771"], "reset_url": "http://r:2/reset"},
                    }
                },
            ),
        ),
        ["environments.__WIKIPEDIA__: 'http://127.0.0.1:7771' is also a URL of environments.__SHOPPING__"],
    ),
    "serve: a replica without a reset endpoint under readers": (
        lambda w: _serve(
            "--isolation",
            "readers",
            "--config",
            _config(
                w,
                "c.json",
                {
                    "environments": {
                        "__SHOPPING__": {
                            "replicas": [
                                {"urls": ["http://127.0.0.1:7771"]},
                                {"urls": ["http://127.0.0.1:7772"]},
                            ]
                        }
                    }
                },
            ),
        ),
        [
            "--isolation readers: __SHOPPING__ replica 0 (http://127.0.0.1:7771) has no reset_url",
            "--isolation readers: __SHOPPING__ replica 1 (http://127.0.0.1:7772) has no reset_url",
        ],
    ),
    "serve: an isolation that does not exist": (
        lambda w: _serve("--isolation", "strict"),
        ["--isolation 'strict': choose none, readers or exclusive"],
    ),
    "serve: a lease timeout that is no number of seconds": (
        lambda w: _serve("--lease-timeout", "soon"),
        ["--lease-timeout 'soon': a number of seconds above 0"],
    ),
    "serve: tasks whose site the map lacks": (
        lambda w: _serve(
            "--tasks", str(default_tasks_path()), "--config", _config(w, "c.json", {"environments": {}})
        ),
        ["c.json: no URLs for __SHOPPING__, which 7 task(s) use"],
    ),
    "serve: a task file naming an unknown site": (
        lambda w: _serve("--tasks", _misspelled_task_site(w)),
        ["'shoping' is not a WebArena site (did you mean 'shopping'?)"],
    ),
    "serve: --output-dir is a file": (
        lambda w: _serve("--output-dir", "afile"),
        ["output directory afile is not a directory"],
    ),
    "demo: --output-dir cannot be created": (
        lambda w: ["demo", "--output-dir", "/proc/forbidden"],
        ["output directory /proc/forbidden cannot be used"],
    ),
    "evaluate: no dataset holds the run's tasks": (
        lambda w: ["evaluate", "--output-dir", _run_of_task_5(w)],
        ["which tasks?", "nothing was written"],
    ),
    "evaluate: runs of tasks the dataset lacks": (
        lambda w: ["evaluate", "--output-dir", "out", "--tasks", _only_task_1001(w)],
        ["task(s) 1003 not in the dataset only-1001.json", "nothing was written"],
    ),
    "evaluate: an unreadable dataset": (
        lambda w: ["evaluate", "--output-dir", "out", "--tasks", "missing.json"],
        ["missing.json: cannot read task file", "nothing was written"],
    ),
    "evaluate: --task-ids naming a missing run folder": (
        lambda w: [
            "evaluate",
            "--output-dir",
            "out",
            "--tasks",
            str(default_tasks_path()),
            "--task-ids",
            "9999",
        ],
        ["no run folder out/9999", "nothing was written"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_mistake_gives_one_clear_line_per_problem_and_changes_nothing(workdir: Path, name: str) -> None:
    make_args, needles = CASES[name]
    args = make_args(workdir)
    before = _files(workdir)
    done = subprocess.run([CLI, *args], cwd=workdir, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stdout
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith(f"webarena-live {args[0]}: ") for line in lines), done.stderr
    for needle in needles:
        assert any(needle in line for line in lines), (needle, lines)
    assert _files(workdir) == before, "a refused command changed a file"
    assert "Traceback" not in done.stdout + done.stderr
