"""Harbor: a task's verifier writes the session's reward where Harbor reads it, and a task folder per
WebArena-Verified task.

`verify` is `webarena-live verify`'s work: it finishes the session with the agent's answer file (or
reads the verdict of a finished session) and writes `reward.txt` (the score) and `reward.json` (a flat
object of numbers, as Harbor requires: `reward`, `success`, and each evaluator's score by its name)
with `eval_result.json` beside them. A session that cannot be judged, or whose verdict is masked,
writes no reward file and exits non-zero with the reason: Harbor then reports the trial as an error
instead of scoring it 0.

`export` is `webarena-live export harbor`'s work: `DIR/webarena-live-<task_id>/` holding
`instruction.md`, `task.toml`, `environment/` (a Dockerfile with webarena-live, and the script
Harbor's healthcheck runs to start the session before the agent) and `<task>/tests/test.sh` (which runs
`webarena-live verify`). Needs no package beyond webarena-live.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from webarena_live.evaluator import Task, WebArenaLiveError, load_tasks
from webarena_live.rewards.harbor_wheel import write_wheel
from webarena_live.rewards.reward import Reward
from webarena_live.rewards.scoring import score

VERIFIER_DIR = "/logs/verifier"
ANSWER_FILE = "/logs/agent/answer.json"
SESSION_FILE = "/opt/webarena-live/session.json"
REWARD_FILES = ("reward.txt", "reward.json")
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def read_answer(path: Path) -> Any:
    """The agent's final response from its file: JSON when it parses, else its text as written (which
    the evaluator reads as the reference does: a ```json fence inside, or a failure)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def reward_numbers(reward: Reward) -> dict[str, float]:
    """`reward.json`: the score, whether it is a success, and each evaluator's score by its name
    (numbered from the second of a name on)."""
    result = reward.result or {}
    numbers = {"reward": float(reward.value or 0.0), "success": 1.0 if reward.status == "success" else 0.0}
    for evaluator in result.get("evaluators_results") or []:
        name = _NAME.sub("_", str(evaluator.get("evaluator_name") or "evaluator"))
        key, n = name, 1
        while key in numbers:
            n += 1
            key = f"{name}_{n}"
        numbers[key] = float(evaluator.get("score") or 0.0)
    return numbers


def default_out() -> Path:
    """Where `verify` writes without `--out`: Harbor's verifier folder inside its container (Harbor
    creates it), else the directory it is run in (never a folder at a host's filesystem root)."""
    harbor = Path(VERIFIER_DIR)
    return harbor if harbor.is_dir() else Path.cwd()


def verify(
    session: str,
    answer: Path | None,
    *,
    control: str | None,
    token: str | None,
    out: Path,
    mask_site_errors: bool = True,
) -> tuple[int, str]:
    """Write the session's reward files into `out`: (exit status, the line to print).
    `mask_site_errors=False` writes the plain score of a session whose sites answered failures."""
    for name in REWARD_FILES:  # a stale reward must not stand in for this session's
        (out / name).unlink(missing_ok=True)
    if answer is not None and not answer.is_file():
        final: Any = ""  # no answer written: the agent gave none, judged as such
    else:
        final = read_answer(answer) if answer is not None else None
    reward = score(session, final, control=control, token=token, mask_site_errors=mask_site_errors)
    if reward.masked or reward.value is None:
        return 1, f"webarena-live verify: no reward for session {session!r}: {reward.kind}: {reward.reason}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval_result.json").write_text(json.dumps(reward.result, indent=2) + "\n")
    (out / "reward.json").write_text(json.dumps(reward_numbers(reward)) + "\n")
    (out / "reward.txt").write_text(f"{reward.value:g}\n")
    return 0, f"session {session}: {reward.status}, reward {reward.value:g} (written to {out})"


def export(
    tasks: str | None,
    out: Path,
    *,
    task_ids: list[int] | None,
    image: str,
    control: str,
    requirement: str | None = None,
) -> list[Path]:
    """A Harbor task folder per task of the dataset `tasks` (or those of `task_ids`), in `out`. The
    environments install webarena-live from its wheel, written beside the tasks and into each task's
    build context (`environment/`), or, with `requirement`, from that pip requirement instead."""
    dataset = load_tasks(tasks)
    chosen = task_ids if task_ids is not None else list(dataset)
    missing = [task_id for task_id in chosen if task_id not in dataset]
    if missing:
        raise WebArenaLiveError(f"task(s) {missing} not in the dataset {dataset.source}")
    wheel = write_wheel(out) if requirement is None else None
    written = []
    for task_id in chosen:
        folder = out / f"webarena-live-{task_id}"
        _write_task(
            folder, dataset[task_id], image=image, control=control, wheel=wheel, requirement=requirement
        )
        written.append(folder)
    return written


def _write_task(
    folder: Path, task: Task, *, image: str, control: str, wheel: Path | None, requirement: str | None
) -> None:
    (folder / "environment").mkdir(parents=True, exist_ok=True)
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "instruction.md").write_text(_instruction(task))
    (folder / "task.toml").write_text(_task_toml(task, control))
    if wheel is not None:  # the build context is environment/: the wheel must be inside it
        shutil.copyfile(wheel, folder / "environment" / wheel.name)
    install = f"/opt/webarena-live/{wheel.name}" if wheel is not None else (requirement or "")
    (folder / "environment" / "Dockerfile").write_text(_dockerfile(image, install, wheel))
    (folder / "environment" / "start_session.sh").write_text(_start_script(task))
    (folder / "tests" / "test.sh").write_text(_test_script())
    for script in (folder / "environment" / "start_session.sh", folder / "tests" / "test.sh"):
        script.chmod(0o755)


def _instruction(task: Task) -> str:
    return (
        f"{task.intent}\n\n"
        "## How to work on this task\n\n"
        f"Your browsing is evaluated live by webarena-live. Your session's proxy address and start "
        f"URLs are in `{SESSION_FILE}` (`proxy`, `start_urls`): send every request of your browser or "
        "HTTP client through that proxy, and start from those URLs.\n\n"
        f"When you are done, write your final response as JSON to `{ANSWER_FILE}`:\n\n"
        "```json\n"
        '{"task_type": "RETRIEVE | NAVIGATE | MUTATE", "status": "SUCCESS | NOT_FOUND_ERROR | '
        'ACTION_NOT_ALLOWED_ERROR | PERMISSION_DENIED_ERROR | DATA_VALIDATION_ERROR | UNKNOWN_ERROR", '
        '"retrieved_data": [...] or null, "error_details": null}\n'
        "```\n\n"
        "`retrieved_data` holds what a RETRIEVE task asks for (a list); it is null for the other kinds.\n"
    )


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string


def _task_toml(task: Task, control: str) -> str:
    env = {
        "WEBARENA_LIVE_CONTROL": f"${{WEBARENA_LIVE_CONTROL:-{control}}}",
        "WEBARENA_LIVE_CONTROL_TOKEN": "${WEBARENA_LIVE_CONTROL_TOKEN:-}",
        # empty: each trial starts a session of its own (start_session.sh names it)
        "WEBARENA_LIVE_SESSION": "${WEBARENA_LIVE_SESSION:-}",
    }
    env_line = ", ".join(f"{key} = {_toml_string(value)}" for key, value in env.items())
    keywords = ", ".join(_toml_string(word) for word in ("webarena", "webarena-live", *task.sites))
    return (
        'schema_version = "1.4"\n\n'
        "[task]\n"
        f'name = "webarena-live/task-{task.task_id}"\n'
        f"description = {_toml_string(task.intent)}\n"
        f"keywords = [{keywords}]\n\n"
        "[metadata]\n"
        f"webarena_task_id = {task.task_id}\n"
        f"intent_template_id = {task.intent_template_id}\n"
        f"sites = [{', '.join(_toml_string(site) for site in task.sites)}]\n\n"
        "[verifier]\n"
        "timeout_sec = 120.0\n\n"
        "[agent]\n"
        "timeout_sec = 1800.0\n\n"
        "[environment]\n"
        "build_timeout_sec = 600.0\n"
        "cpus = 1\n"
        "memory_mb = 2048\n"
        f"env = {{ {env_line} }}\n"
        "# Starts the session before the agent does anything (Harbor runs it until it passes once).\n"
        'healthcheck = { command = "bash /opt/webarena-live/start_session.sh", retries = 3 }\n'
    )


def _dockerfile(image: str, install: str, wheel: Path | None) -> str:
    copy = f"COPY {wheel.name} /opt/webarena-live/{wheel.name}\n" if wheel is not None else ""
    return (
        f"FROM {image}\n"
        "RUN apt-get update && apt-get install -y --no-install-recommends curl \\\n"
        "    && rm -rf /var/lib/apt/lists/*\n"
        f"{copy}"
        f"RUN pip install --no-cache-dir {shlex.quote(install)}\n"
        "COPY start_session.sh /opt/webarena-live/start_session.sh\n"
        "RUN mkdir -p /logs/agent\n"
    )


def _start_script(task: Task) -> str:
    return f"""#!/bin/bash
# Starts this trial's webarena-live session (Harbor's healthcheck runs it before the agent starts) and
# leaves the session's name, proxy address and start URLs where the instruction says. Each trial has a
# session of its own: $WEBARENA_LIVE_SESSION when set, else harbor-{task.task_id}-<random>, so trials
# run in parallel never restart each other's. Run again in the same container, it keeps the session
# it started.
set -euo pipefail
control="${{WEBARENA_LIVE_CONTROL:?WEBARENA_LIVE_CONTROL names the control API}}"
out="${{WEBARENA_LIVE_SESSION_FILE:-{SESSION_FILE}}}"
if [ -s "$out" ]; then
    exit 0
fi
session="${{WEBARENA_LIVE_SESSION:-harbor-{task.task_id}-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \\n')}}"
mkdir -p "$(dirname "$out")"
auth=()
if [ -n "${{WEBARENA_LIVE_CONTROL_TOKEN:-}}" ]; then
    auth=(-H "Authorization: Bearer $WEBARENA_LIVE_CONTROL_TOKEN")
fi
body="{{\\"task_id\\": {task.task_id}, \\"session\\": \\"$session\\"}}"
curl -fsS -X POST "$control/sessions" "${{auth[@]}}" -H 'content-type: application/json' -d "$body" \\
    -o "$out.part"
mv "$out.part" "$out"
"""


def _test_script() -> str:
    return f"""#!/bin/bash
# Harbor's verifier: the trial's verdict as /logs/verifier/reward.txt and reward.json. A session that
# cannot be judged writes no reward file and exits non-zero with the reason. The session is the one
# start_session.sh started (its file), unless $WEBARENA_LIVE_SESSION names it.
set -uo pipefail
file="${{WEBARENA_LIVE_SESSION_FILE:-{SESSION_FILE}}}"
pick='import json, sys; print(json.load(open(sys.argv[1]))["session"])'
session="${{WEBARENA_LIVE_SESSION:-$(python3 -c "$pick" "$file")}}"
exec webarena-live verify --session "$session" \\
    --answer "${{WEBARENA_LIVE_ANSWER:-{ANSWER_FILE}}}" \\
    --out "${{WEBARENA_LIVE_VERIFIER_DIR:-{VERIFIER_DIR}}}"
"""
