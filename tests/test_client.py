"""`webarena_live.client`, blocking and asyncio, against a real `webarena-live serve`."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator

import httpx
import pytest
from serve_process import shop, start_serve

from webarena_live.client import AsyncClient, Client, ControlAPIError, proxy_url
from webarena_live.evaluator.results import EvalStatus, TaskResult

__all__ = ["shop"]

NAVIGATED = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[str, str]]:
    workdir = tmp_path_factory.mktemp("client")
    process, control, proxy = start_serve(workdir, shop, workdir / "state")
    yield control, proxy.rsplit(":", 1)[1]
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)


def browse(port: str, session: str, url: str) -> None:
    with httpx.Client(proxy=proxy_url(session, port=int(port))) as agent:
        assert agent.get(url, headers={"Accept": "text/html"}).is_success


def test_blocking_client_runs_a_session(serve: tuple[str, str], shop: str) -> None:
    control, port = serve
    with Client(control) as api:
        started = api.start(1003, session="sync-agent", restart=True)
        assert started.session == "sync-agent" and started.task_id == 1003 and started.start_urls == [shop]
        browse(port, "sync-agent", f"{shop}/enamel-camp-mug.html")
        assert [event["url"] for event in api.trace("sync-agent")] == [f"{shop}/enamel-camp-mug.html"]
        result = api.finish("sync-agent", NAVIGATED)
        assert isinstance(result, TaskResult) and result.status == EvalStatus.SUCCESS and result.score == 1
        notices = list(api.events("sync-agent"))  # a finished session's stream replays and ends
        assert [n.kind for n in notices] == ["session", "event", "finished"]
        assert notices[-1].data["status"] == "success"
        assert len(api.har("sync-agent")["log"]["entries"]) == 1
        assert any(s["session"] == "sync-agent" for s in api.sessions())
        with pytest.raises(ControlAPIError) as refused:
            api.start(424242)
        assert (refused.value.status, refused.value.error) == (404, "unknown_task")


def test_async_client_runs_sessions_concurrently(serve: tuple[str, str], shop: str) -> None:
    control, port = serve

    async def one(api: AsyncClient, name: str, page: str) -> TaskResult:
        await api.start(1003, session=name, restart=True)
        await asyncio.to_thread(browse, port, name, f"{shop}/{page}")
        return await api.finish(name, NAVIGATED)

    async def main() -> list[TaskResult]:
        async with AsyncClient(control) as api:
            results = await asyncio.gather(
                *(one(api, f"async-{i}", "enamel-camp-mug.html" if i % 2 else "") for i in range(6))
            )
            notices = [n.kind async for n in api.events("async-1")]
            assert notices == ["session", "event", "finished"]
            return list(results)

    results = asyncio.run(main())
    assert [r.status for r in results] == [EvalStatus.FAILURE, EvalStatus.SUCCESS] * 3
