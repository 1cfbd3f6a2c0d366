"""`webarena-live serve`'s start-up: what stops it, told in one line each (a busy control port, an
unreadable task file, a config's mistakes, an unknown flag), and a port another program takes between
its draw and the child's bind, drawn again. The real CLI in a subprocess."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.site.harness import free_port
from tests.support.addon_helpers import write_config, write_tasks
from webarena_live.launch import LaunchError, Ports, ServeProcess, free_ports

CLI = Path(sys.executable).parent / "webarena-live"


def test_busy_control_port_fails_startup_with_a_message(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        done = subprocess.run(
            [str(CLI), "serve", "--tasks", str(write_tasks(tmp_path)), "--config",
             str(write_config(tmp_path, "http://127.0.0.1:9")), "--port", str(free_port()),
             "--session-port", str(free_port()), "--control-port", str(busy), "--set", f"confdir={tmp_path}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    assert f"cannot open the control port {busy}" in done.stdout + done.stderr
    assert "session port" not in done.stdout  # no banner for a proxy that is not serving


def test_unreadable_task_file_is_reported(tmp_path):
    done = subprocess.run([str(CLI), "serve", "--tasks", str(tmp_path / "missing.json")],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "missing.json: cannot read task file" in done.stderr


def test_startup_mistakes_are_one_line_each_and_nothing_starts(tmp_path, official_dataset):
    afile = tmp_path / "afile"
    afile.write_text("keep")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"url": ["127.0.0.1:18000"]}}}))
    done = subprocess.run(
        [str(CLI), "serve", "--tasks", str(official_dataset), "--config", str(config),
         "--output-dir", str(afile), "--port", str(free_port()), "--session-port", str(free_port()),
         "--control-port", str(free_port())],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and all(line.startswith("webarena-live serve: ") for line in lines), lines
    text = done.stderr
    assert "unknown key 'url' (did you mean 'urls'?)" in text and f"{afile} is not a directory" in text
    assert afile.read_text() == "keep"
    bare = subprocess.run([str(CLI), "serve", "--tasks", str(official_dataset), "--port", str(free_port())],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bare.returncode == 2
    assert "no --config given: no URLs for __GITLAB__, which 204 task(s) use" in bare.stderr
    assert len(bare.stderr.splitlines()) == 6  # one per site the official tasks use


def test_a_mistake_is_told_alone(tmp_path):
    """Nothing is said of a dataset before the mistake that stops the start, and a config that is not
    JSON is one line, not also a missing site per task; an unknown flag is named by its subcommand,
    with the flag it resembles."""
    ports = [
        "--port",
        str(free_port()),
        "--session-port",
        str(free_port()),
        "--control-port",
        str(free_port()),
    ]
    missing = subprocess.run([str(CLI), "serve", "--tasks", str(tmp_path / "nope.json"), *ports],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert missing.returncode == 2 and "tasks from" not in missing.stdout + missing.stderr
    assert missing.stderr.splitlines() == [
        f"webarena-live serve: {tmp_path / 'nope.json'}: cannot read task file: No such file or directory"
    ]
    broken = tmp_path / "broken.json"
    broken.write_text('{"environments": {')
    syntax = subprocess.run([str(CLI), "serve", "--config", str(broken), *ports],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert syntax.returncode == 2 and len(syntax.stderr.splitlines()) == 1, syntax.stderr
    assert "not valid JSON" in syntax.stderr
    typo = subprocess.run([str(CLI), "serve", "--prot", "8080"], capture_output=True, text=True, timeout=60)
    assert typo.returncode == 2
    assert typo.stderr.strip() == (
        "webarena-live serve: error: unrecognized arguments: --prot (did you mean --port?) 8080 "
        "(see webarena-live serve --help)"
    )


@pytest.mark.parametrize("which", ["proxy", "control"])
def test_a_port_taken_after_the_draw_is_drawn_again(tmp_path, which):
    """Another program binds one of the drawn ports before the child does: the start draws again and
    serves; ports the caller gave stay the caller's, and their loss is told."""
    args = ("--tasks", str(write_tasks(tmp_path)), "--config", str(write_config(tmp_path, "http://127.0.0.1:9")),
            "--set", f"confdir={tmp_path}")  # fmt: skip
    served = ServeProcess(*args, log=tmp_path / "drawn.log")
    lost = getattr(served.ports, which)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", lost))
        taken.listen()
        try:
            served.start()
            assert getattr(served.ports, which) != lost
            assert served.client.health()["status"] == "ok"
        finally:
            served.stop()
        given = ServeProcess(*args, ports=Ports(*free_ports(2), lost), log=tmp_path / "given.log")
        try:
            with pytest.raises(LaunchError, match=r"(?i)control port"):
                given.start()
        finally:
            given.stop()
