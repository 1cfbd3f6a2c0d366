"""The files of sessions finished on other machines, carried into the front's output directory.

With `--ray` each worker writes a finished session's files on its own node; the front reads them
back (`ServeWorker.read_outputs`, through Ray, within `READ_DEADLINE`) and writes them here in the
reference's layout with the evaluator's `place_run`. See docs/architecture.md, Ray.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from webarena_live.evaluator import (
    ATTEMPT_FILE,
    ATTEMPTS_DIR,
    EARLIER_ATTEMPT,
    aside_dir,
    place_run,
    task_dir,
)


@dataclass
class CarriedOutputs:
    """Where the files of sessions finished on other machines go (`serve --output-dir` of the front),
    and how they are read from the worker that wrote them."""

    output_dir: Path
    worker_dir: Callable[[int], str]
    """A worker's own output folder, on its node."""
    read: Callable[[int, list[str]], Awaitable[dict[str, bytes]]]
    """The bytes of the given files from worker `index`; raises `TimeoutError` past its deadline."""

    async def carry(self, index: int, session: str, written: dict[str, str]) -> tuple[Path, str] | None:
        """The files a worker wrote for `session`'s finished attempt, written here in the same layout (an
        earlier attempt here moved aside first, as the worker did there): the task folder here and the
        attempt's id. None when they are no longer where `written` says: moved aside there by a later
        finish, whose own files may stand there now (ask again)."""
        files = {name: path for name, path in written.items() if name != EARLIER_ATTEMPT}
        contents = await self.read(index, list(files.values()))
        if set(contents) != set(files.values()) or ATTEMPT_FILE not in files:
            return None
        by_name = {Path(path).name: contents[path] for path in files.values()}
        record = json.loads(by_name[ATTEMPT_FILE])
        if record.get("session") != session:  # another session's finish took the task folder meanwhile
            return None
        directory = task_dir(self.output_dir, int(record["task_id"]), record.get("run"))
        if ATTEMPTS_DIR in Path(files[ATTEMPT_FILE]).parts:  # a later finish there moved it aside already
            place_run(aside_dir(directory), by_name)
        else:
            place_run(directory, by_name)
        return directory, str(record["attempt"])

    def local(self, index: int, written: dict[str, str]) -> dict[str, str]:
        """A worker's paths of a session's files as their paths here (for its views)."""
        root = Path(self.worker_dir(index))
        local = {}
        for name, path in written.items():
            try:
                local[name] = str(self.output_dir / Path(path).relative_to(root))
            except ValueError:
                local[name] = path
        return local
