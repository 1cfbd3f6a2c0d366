"""The front carrying a finished session's files from a worker's node (`fleet/front/carry.py`), read back
from real folders: a later finish of the same task there may have moved them aside and put its own in
their place between the front's two calls; the front must not take those for the session's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from webarena_live.evaluator import ATTEMPT_FILE, ATTEMPTS_DIR, RESPONSE_FILE, RESULT_FILE, TRACE_FILE
from webarena_live.fleet.front.carry import CarriedOutputs


def _attempt(folder: Path, session: str, status: str) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"attempt": f"id-{session}", "session": session, "task_id": 1003, "run": "rollout"}
    files = {ATTEMPT_FILE: json.dumps(record), RESPONSE_FILE: "{}", TRACE_FILE: "{}",
             RESULT_FILE: json.dumps({"status": status})}  # fmt: skip
    for name, text in files.items():
        (folder / name).write_text(text)
    return {name: str(folder / name) for name in files}


def _outputs(here: Path, there: Path) -> CarriedOutputs:
    async def read(index: int, paths: list[str]) -> dict[str, bytes]:
        return {path: Path(path).read_bytes() for path in paths if Path(path).is_file()}

    return CarriedOutputs(output_dir=here, worker_dir=lambda index: str(there), read=read)


def test_files_another_session_put_in_their_place_are_not_carried(tmp_path: Path) -> None:
    there, here = tmp_path / "worker", tmp_path / "front"
    written = _attempt(there / "rollout" / "1003", "episode-1", "success")  # what the worker said
    (there / "rollout" / "1003").rename(tmp_path / "moved")  # a later finish moved them aside...
    _attempt(there / "rollout" / "1003", "episode-2", "failure")  # ...and wrote its own there
    carried = _outputs(here, there)
    assert asyncio.run(carried.carry(0, "episode-1", written)) is None  # ask again
    assert not (here / "rollout" / "1003").exists()

    carried_now = asyncio.run(carried.carry(0, "episode-2", written))
    assert carried_now == (here / "rollout" / "1003", "id-episode-2")
    assert json.loads((here / "rollout" / "1003" / RESULT_FILE).read_text()) == {"status": "failure"}


def test_files_moved_aside_there_go_aside_here(tmp_path: Path) -> None:
    there, here = tmp_path / "worker", tmp_path / "front"
    _attempt(here / "rollout" / "1003", "episode-0", "success")
    aside = _attempt(there / "rollout" / ATTEMPTS_DIR / "1003" / "1", "episode-1", "success")
    assert asyncio.run(_outputs(here, there).carry(0, "episode-1", aside)) == (
        here / "rollout" / "1003",
        "id-episode-1",
    )
    kept = here / "rollout" / ATTEMPTS_DIR / "1003" / "1"
    assert json.loads((kept / ATTEMPT_FILE).read_text())["session"] == "episode-1"
    assert json.loads((here / "rollout" / "1003" / ATTEMPT_FILE).read_text())["session"] == "episode-0"
