"""The journal's lines of one loop turn, written together before any of their answers goes on
(`runs/journal.py`: `gathered_writes`, `TurnWrites`); through a real `webarena-live serve`, every
answer an agent gets has its line in the journal already."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from tests.site.harness import start_proxy, write_config
from tests.support.addon_helpers import NAVIGATE_TASK, write_tasks
from webarena_live.evaluator import NetworkEvent
from webarena_live.evaluator.har import load_trace
from webarena_live.runs.journal import Journal, TurnWrites, gathered_writes
from webarena_live.runs.recovery import find_journal


def event(number: int) -> NetworkEvent:
    return NetworkEvent(method="GET", url=f"http://shop.test/page/{number}", status=200)


def urls(path: Path) -> list[str]:
    return [found.url for found in load_trace(path)] if path.exists() else []


def test_gathered_lines_wait_for_the_end_and_go_in_one_write_per_journal(tmp_path):
    first, second = Journal(tmp_path / "a.jsonl"), Journal(tmp_path / "b.jsonl")
    first.write(event(0))  # outside: written at once
    assert urls(first.path) == ["http://shop.test/page/0"] and first.lines == 1
    writes: list[tuple[str, int]] = []
    for journal in (first, second):
        journal._append = counted(journal, writes)  # type: ignore[method-assign]
    with gathered_writes():
        for number in (1, 2, 3):
            first.write(event(number))
        second.write(event(9))
        with gathered_writes():  # inside another: the outer one writes
            second.write(event(10))
        assert urls(first.path) == ["http://shop.test/page/0"] and not second.path.exists()
        assert writes == []
    assert writes == [("a.jsonl", 3), ("b.jsonl", 2)]
    assert urls(first.path) == [f"http://shop.test/page/{n}" for n in range(4)] and first.lines == 4
    assert urls(second.path) == ["http://shop.test/page/9", "http://shop.test/page/10"]
    assert second.lines == 2


def counted(journal: Journal, writes: list[tuple[str, int]]) -> Callable[[bytes, int], None]:
    """`journal._append`, noting (file name, lines) of each call: one call is one `write`."""
    real = journal._append

    def append(data: bytes, lines: int) -> None:
        writes.append((journal.path.name, lines))
        real(data, lines)

    return append


def test_a_broken_journal_in_a_gathered_turn_costs_the_others_nothing(tmp_path, caplog):
    (tmp_path / "blocked").write_text("a file where the journal's directory would be")
    broken, fine = Journal(tmp_path / "blocked" / "x.jsonl"), Journal(tmp_path / "ok.jsonl")
    with caplog.at_level(logging.ERROR), gathered_writes():
        broken.write(event(1))
        fine.write(event(2))
    assert urls(fine.path) == ["http://shop.test/page/2"] and broken.lines == 0
    assert "journal" in caplog.text and "stopped" in caplog.text


def test_a_turn_is_recorded_after_it_and_each_answer_waits_for_its_line(tmp_path):
    journals = {"a": Journal(tmp_path / "a.jsonl"), "b": Journal(tmp_path / "b.jsonl")}
    seen_at_release: list[tuple[list[str], list[str]]] = []

    def record(item: tuple[str, int]) -> None:
        journals[item[0]].write(event(item[1]))

    turns: TurnWrites[tuple[str, int]] = TurnWrites(record)

    async def flows() -> None:
        waiting = [turns.add(item) for item in (("a", 1), ("b", 2), ("a", 3))]
        assert all(future is not None and not future.done() for future in waiting)
        assert not journals["a"].path.exists()  # nothing written during the turn itself
        for future in waiting:
            assert future is not None
            future.add_done_callback(
                lambda _: seen_at_release.append((urls(journals["a"].path), urls(journals["b"].path)))
            )
        await asyncio.gather(*waiting)  # type: ignore[arg-type]
        later = turns.add(("b", 4))  # the next turn: a flush of its own
        assert later is not None and not later.done()
        await later

    asyncio.run(flows())
    both = (["http://shop.test/page/1", "http://shop.test/page/3"], ["http://shop.test/page/2"])
    assert seen_at_release == [both, both, both]  # every line down before the first answer went on
    assert urls(journals["b"].path) == ["http://shop.test/page/2", "http://shop.test/page/4"]


def test_a_cancelled_flow_or_a_failing_capture_holds_back_no_other_answer(tmp_path, caplog):
    journal = Journal(tmp_path / "j.jsonl")

    def record(number: int) -> None:
        if number == 2:
            raise ValueError("a capture that fails")
        journal.write(event(number))

    turns: TurnWrites[int] = TurnWrites(record)

    async def hook(number: int) -> None:
        written = turns.add(number)
        assert written is not None
        await written

    async def flows() -> None:
        tasks = [asyncio.create_task(hook(number)) for number in (1, 2, 3)]
        await asyncio.sleep(0)  # every hook awaits its line
        tasks[0].cancel()  # mitmproxy cancels the hook of a flow whose client left
        await asyncio.wait_for(asyncio.gather(*tasks[1:]), timeout=5)
        assert tasks[0].cancelled()

    with caplog.at_level(logging.ERROR):
        asyncio.run(flows())
    assert urls(journal.path) == ["http://shop.test/page/1", "http://shop.test/page/3"]
    assert "capturing a flow failed" in caplog.text and "a capture that fails" in caplog.text


def test_released_is_told_each_item_once_its_answer_is_released(tmp_path, caplog):
    journal = Journal(tmp_path / "j.jsonl")
    told: list[tuple[int, bool]] = []
    waiting: dict[int, asyncio.Future[None]] = {}

    def released(number: int) -> None:
        if number == 2:
            raise ValueError("an after-step that fails")
        told.append((number, waiting[number].done()))

    turns: TurnWrites[int] = TurnWrites(lambda number: journal.write(event(number)), released=released)

    async def flows() -> None:
        for number in (1, 2, 3):
            future = turns.add(number)
            assert future is not None
            waiting[number] = future
        assert told == []  # nothing before the turn's lines are down
        await asyncio.gather(*waiting.values())

    with caplog.at_level(logging.ERROR):
        asyncio.run(flows())
    assert told == [(1, True), (3, True)]  # after its answer was released; a failing one costs no other
    assert "after-step failed" in caplog.text
    told.clear()
    assert turns.add(4) is None and told == []  # outside a loop: recorded at once, nothing released


def test_outside_a_running_loop_an_item_is_recorded_at_once(tmp_path):
    journal = Journal(tmp_path / "j.jsonl")
    turns: TurnWrites[int] = TurnWrites(lambda number: journal.write(event(number)))
    assert turns.add(7) is None
    assert urls(journal.path) == ["http://shop.test/page/7"]


class Pages(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = f"<html>{self.path}</html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def pages() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_through_serve_every_answer_has_its_line_in_the_journal_already(tmp_path, pages):
    """Agents on several connections at once (so loop turns carry several flows): the moment each
    gets its answer, the journal on disk holds that exchange."""
    tasks, config = (
        write_tasks(tmp_path),
        write_config(tmp_path / "sites.json", {"__SHOPPING__": {"urls": [pages]}}),
    )
    proxy = start_proxy(tmp_path / "proxy", tasks=tasks, config=config)
    missing: list[str] = []
    try:
        assert proxy.control.post("/sessions", {"task_id": NAVIGATE_TASK, "session": "turns"}).ok
        journal_dir = tmp_path / "proxy" / "out" / ".journal"

        def agent(number: int) -> int:
            client = requests.Session()
            client.trust_env = False
            client.proxies = {"http": f"http://turns:pw@127.0.0.1:{proxy.port}"}
            for step in range(15):
                url = f"{pages}/agent/{number}/{step}"
                assert client.get(url, timeout=10).ok
                if url not in urls(find_journal(journal_dir, "turns", NAVIGATE_TASK)):
                    missing.append(url)
            return 15

        with ThreadPoolExecutor(8) as pool:
            assert sum(pool.map(agent, range(8))) == 120
        journaled = urls(find_journal(journal_dir, "turns", NAVIGATE_TASK))
    finally:
        proxy.stop()
    assert missing == []
    assert sorted(journaled) == sorted(f"{pages}/agent/{n}/{s}" for n in range(8) for s in range(15))
