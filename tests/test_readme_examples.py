"""The README's session example runs as written: the demo shop, `webarena-live serve`, a curl session.

The two fenced blocks after `<!-- example: serve-demo-shop -->` and
`<!-- example: curl-session -->` are taken from README.md, their ports swapped
for free ones, and run with bash in a fresh directory, with `webarena-live` and
`python` of this environment first on PATH.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from webarena_live.launch import free_ports

README = Path(__file__).resolve().parent.parent / "README.md"
PORTS = ("7770", "8080", "8081", "8082")


def example(name: str) -> str:
    """The fenced block right after the `<!-- example: NAME ... -->` marker."""
    match = re.search(rf"<!-- example: {name}\b[^>]*-->\n```\w*\n(.*?)```", README.read_text(), re.S)
    assert match, f"README.md has no example {name!r}"
    return match.group(1)


def with_free_ports(script: str, ports: dict[str, str]) -> str:
    return re.sub(r"\b(7770|8080|8081|8082)\b", lambda m: ports[m.group(1)], script)


def test_readme_curl_session_runs_as_written(tmp_path: Path) -> None:
    ports = dict(zip(PORTS, map(str, free_ports(len(PORTS))), strict=True))
    serve = with_free_ports(example("serve-demo-shop"), ports)
    # serve's default ports appear in the README only implicitly: name them for the free ones.
    serve = serve.replace(
        "webarena-live serve ",
        f"webarena-live serve --port {ports['8080']} --control-port {ports['8081']} "
        f"--session-port {ports['8082']} --set confdir={tmp_path / 'conf'} ",
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    server = subprocess.Popen(
        ["bash", "-c", serve], cwd=tmp_path, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:  # a person types the second block later; the test waits for the shop and the proxy
                shop = requests.get(f"http://127.0.0.1:{ports['7770']}/", timeout=1)
                if shop.ok and requests.get(f"http://127.0.0.1:{ports['8081']}/health", timeout=1).ok:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, "the shop or serve did not come up"
            time.sleep(0.2)
        session = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", with_free_ports(example("curl-session"), ports)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert session.returncode == 0, session.stderr
    started, result, listing = _split_outputs(session.stdout)
    assert json.loads(started)["task_id"] == 1003
    verdict = json.loads(result)
    assert verdict["status"] == "success" and verdict["score"] == 1, json.dumps(verdict)[:3000]
    assert listing.split() == ["agent_response.json", "eval_result.json", "network.har"]


def _split_outputs(stdout: str) -> tuple[str, str, str]:
    """The start answer, the finish answer (JSON documents) and the `ls` listing, in that order."""
    decoder = json.JSONDecoder()
    started, end = decoder.raw_decode(stdout)
    rest = stdout[end:].lstrip()
    result, end = decoder.raw_decode(rest)
    return json.dumps(started), json.dumps(result), rest[end:]
