"""Crash safety. A real `webarena-live serve` is killed with SIGKILL in the middle
of a session while an agent is still sending requests; after a restart on the same output
directory the session's journal holds every exchange the agent saw completed, the session resumes
from it (`"resume_journal": true`) and finishes with the verdict the reference gives, and the
journal also evaluates offline. Killing the proxy while it writes outputs never leaves a half file.
"""

from __future__ import annotations

import json
import random
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from tests.site.harness import ProxyProcess, start_proxy, write_config
from tests.support.addon_helpers import MUTATE_TASK, NAVIGATE_TASK, RETRIEVE_TASK, oracle_verdict, write_tasks
from webarena_live.evaluator.evaluate import evaluate_task
from webarena_live.evaluator.har import load_trace, trace_to_har
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.runs.recovery import find_journal

MUTATE_DONE = {"task_type": "MUTATE", "status": "SUCCESS", "retrieved_data": None}


class Shop(BaseHTTPRequestHandler):
    """Pages, and the cart form the mutate task expects (POST /cart/add answered by a 302)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(200, f"<html><body>{self.path}</body></html>".encode())

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(302, b"", (("Location", "/cart"), ("Set-Cookie", "cart=A7; Path=/")))


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def files(workdir: Path, shop: str) -> tuple[Path, Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    return write_tasks(workdir), write_config(workdir / "sites.json", {"__SHOPPING__": {"urls": [shop]}})


def kill(proxy: ProxyProcess) -> None:
    proxy.process.send_signal(signal.SIGKILL)
    assert proxy.process.wait(timeout=20) == -signal.SIGKILL


def agent(proxy: ProxyProcess, session: str) -> requests.Session:
    client = requests.Session()
    client.trust_env = False
    client.proxies = {"http": f"http://{session}:pw@127.0.0.1:{proxy.port}"}
    client.headers["Accept"] = "text/html"
    return client


def test_sigkill_mid_session_then_resume_from_the_journal(tmp_path, shop, oracle_python):
    tasks, config = files(tmp_path, shop)
    proxy = start_proxy(tmp_path / "proxy", tasks=tasks, config=config)
    completed: list[str] = []
    try:
        assert (
            proxy.control.post("/sessions", {"task_id": MUTATE_TASK, "session": "crashy"}).status_code == 200
        )
        client = agent(proxy, "crashy")
        assert client.get(f"{shop}/", timeout=10).ok
        done = client.post(f"{shop}/cart/add", data={"sku": "A7", "qty": "2"}, timeout=10)
        assert done.ok and done.url == f"{shop}/cart"  # the POST, its 302 and the GET it led to
        completed += [f"{shop}/", f"{shop}/cart/add", f"{shop}/cart"]
        # The agent keeps browsing while the proxy dies under it.
        stop = threading.Event()

        def browse() -> None:
            for number in range(10_000):
                if stop.is_set():
                    return
                url = f"{shop}/page/{number}"
                try:
                    if client.get(url, timeout=5).ok:
                        completed.append(url)
                except requests.RequestException:
                    return

        browser = threading.Thread(target=browse)
        browser.start()
        time.sleep(0.5)
        kill(proxy)
        stop.set()
        browser.join(timeout=30)
    finally:
        proxy.stop()
    assert len(completed) > 5, "the agent was mid-session when the proxy died"

    # Every exchange the agent saw completed is in the journal, in order (the one in flight at the
    # kill may be there too: it is journaled before its answer goes out).
    journal_dir = tmp_path / "proxy" / "out" / ".journal"
    journal = find_journal(journal_dir, "crashy", MUTATE_TASK)
    journaled = [event.url for event in load_trace(journal)]
    assert journaled[: len(completed)] == completed and len(journaled) <= len(completed) + 1
    assert all(json.loads(line) for line in journal.read_text().splitlines())  # no torn line

    # Offline: the journal is a trace, evaluated like a HAR; the reference agrees on it.
    task = load_tasks(tasks)[MUTATE_TASK]
    site_map = SiteMap.load(config)
    offline = evaluate_task(task, MUTATE_DONE, load_trace(journal), site_map=site_map)
    assert offline.status.value == "success"
    offline_dir = tmp_path / "offline" / str(MUTATE_TASK)
    offline_dir.mkdir(parents=True)
    (offline_dir / "agent_response.json").write_text(json.dumps(MUTATE_DONE))
    (offline_dir / "network.har").write_text(json.dumps(trace_to_har(load_trace(journal))))
    assert oracle_verdict(oracle_python, tasks, MUTATE_TASK, offline_dir, shop) == {
        "status": "success",
        "score": 1.0,
    }

    # Restarted on the same output directory: resume the session from its journal and finish it.
    restarted = start_proxy(tmp_path / "proxy", tasks=tasks, config=config)
    try:
        body = {"task_id": MUTATE_TASK, "session": "crashy", "resume_journal": True}
        resumed = restarted.control.post("/sessions", body)
        assert resumed.status_code == 200 and resumed.json()["resumed_events"] == len(journaled), resumed.text
        assert agent(restarted, "crashy").get(f"{shop}/after-restart", timeout=10).ok
        events = restarted.control.trace("crashy")
        assert [event["url"] for event in events] == [*journaled, f"{shop}/after-restart"]
        result = restarted.control.finish("crashy", MUTATE_DONE)
        assert result["status"] == "success"
        task_dir = restarted.output_dir / str(MUTATE_TASK)
        assert oracle_verdict(oracle_python, tasks, MUTATE_TASK, task_dir, shop) == {
            "status": "success",
            "score": 1.0,
        }
        # The new run's journal is complete on its own: a second crash would lose nothing either.
        newest = find_journal(journal_dir, "crashy", MUTATE_TASK)
        assert newest != journal and len(load_trace(newest)) == len(journaled) + 1
    finally:
        restarted.stop()


def finish_loop(
    proxy: ProxyProcess, shop: str, session: str, task_id: int, stop: threading.Event, tally: list[int]
) -> int:
    """Start, browse a little, finish; again and again until stopped or the proxy is gone."""
    answers = {
        NAVIGATE_TASK: {"task_type": "NAVIGATE", "status": "SUCCESS", "retrieved_data": None},
        MUTATE_TASK: MUTATE_DONE,
        RETRIEVE_TASK: {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": ["Blue Mug"]},
    }
    finished = 0
    client = agent(proxy, session)
    try:
        while not stop.is_set() and finished < 500:
            proxy.control.post("/sessions", {"task_id": task_id, "session": session})
            for number in range(20):  # a trace big enough that writing its HAR takes a while
                client.get(f"{shop}/products/{number}", timeout=5)
            proxy.control.post(f"/sessions/{session}/finish", answers[task_id])
            finished += 1
            tally.append(task_id)
    except requests.RequestException:
        pass  # the proxy was killed
    return finished


@pytest.mark.parametrize("round_", range(3))
def test_sigkill_while_writing_outputs_never_leaves_a_half_file(tmp_path, shop, round_):
    tasks, config = files(tmp_path, shop)
    proxy = start_proxy(tmp_path / "proxy", tasks=tasks, config=config)
    stop = threading.Event()
    tally: list[int] = []
    try:
        with ThreadPoolExecutor(6) as pool:
            loops = [
                pool.submit(finish_loop, proxy, shop, f"writer-{index}", task_id, stop, tally)
                for index, task_id in enumerate([NAVIGATE_TASK, MUTATE_TASK, RETRIEVE_TASK] * 2)
            ]
            deadline = time.monotonic() + 60
            while len(tally) < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            # Then at an arbitrary moment, with six clients busy starting, browsing and finishing.
            time.sleep(random.Random(round_).uniform(0.0, 0.5))
            kill(proxy)
            stop.set()
            finished = sum(loop.result(timeout=60) for loop in loops)
    finally:
        proxy.stop()
    assert finished >= 3, "outputs were being written when the proxy died"
    out = tmp_path / "proxy" / "out"
    for task_id in (NAVIGATE_TASK, MUTATE_TASK, RETRIEVE_TASK):
        task_dir = out / str(task_id)
        if not (task_dir / "eval_result.json").exists():
            continue
        # Every file under its final name is whole; only hidden temporaries can be cut short.
        har = json.loads((task_dir / "network.har").read_text())
        assert len(har["log"]["entries"]) >= 20
        assert json.loads((task_dir / "eval_result.json").read_text())["task_id"] == task_id
        json.loads((task_dir / "agent_response.json").read_text())
    for journal in (out / ".journal").glob("*.jsonl"):
        lines = journal.read_text().splitlines()
        assert all(json.loads(line) for line in lines[:-1])
        assert len(load_trace(journal)) >= len(lines) - 1
