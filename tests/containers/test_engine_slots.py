"""The test engines themselves (tests/support/engines.py): what a killed test session leaves behind (its
podman service, its running containers) is gone when the next session takes its slot."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.support import engines
from tests.support.engines import Engine
from tests.support.paths import REPO

KILLED_SESSION = textwrap.dedent("""
    import os, sys
    from tests.support import engines
    from tests.containers.test_image import run_copy, wait_ready
    with engines.slot() as place, engines.engine_in(place, 0) as engine:
        wait_ready(run_copy(engine, name="left-behind"))
        print(place, engine.process.pid, flush=True)
        os.kill(os.getpid(), 9)
""")


def test_a_killed_sessions_service_and_containers_are_gone_from_its_slot(engine: Engine) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KILLED_SESSION], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert done.returncode == -9, done.stdout + done.stderr
    place, pid = done.stdout.split()
    deadline = time.monotonic() + 20
    while Path(f"/proc/{pid}").exists():  # its service: SIGTERM when its parent died
        assert time.monotonic() < deadline, f"the killed session's podman service {pid} is still running"
        time.sleep(0.1)
    left = Engine("", *engines.storage(Path(place), 0), log=Path())
    assert left.container_names() == ["left-behind"]  # still there: conmon keeps a container running
    number = int(place.rsplit("-", 1)[1])
    with engines.slot(number) as again, engines.engine_in(again, 0) as next_engine:  # its lock died with it
        assert next_engine.container_names() == []
        assert next_engine.client().containers.list(all=True) == []
