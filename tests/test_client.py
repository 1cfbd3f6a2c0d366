"""`webarena_live.client`, blocking and asyncio, against a real `webarena-live serve`."""

from __future__ import annotations

import asyncio
import multiprocessing
import pickle
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import httpx
import pytest

from tests.support.serve_process import shop, start_serve
from webarena_live.client import AsyncClient, Client, ControlAPIError, DifferentAnswer, proxy_url
from webarena_live.evaluator.results import EvalStatus, TaskResult

__all__ = ["shop"]

NAVIGATED = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, shop: str) -> Iterator[tuple[str, str]]:
    workdir = tmp_path_factory.mktemp("client")
    process, control, proxy = start_serve(workdir, shop, workdir / "state")
    yield control, proxy.rsplit(":", 1)[1]
    process.stop()


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


def test_progress_and_preview_blocking_and_async(serve: tuple[str, str], shop: str) -> None:
    """progress goes 0/1 → 1/1 as the expected page is seen; a preview is the finish's verdict, unfinished."""
    control, port = serve
    with Client(control) as api:
        api.start(1003, session="sync-preview", restart=True)
        browse(port, "sync-preview", f"{shop}/")
        before = api.progress("sync-preview")
        assert (before.events, [n.satisfied for n in before.network]) == (1, [False])
        assert api.preview("sync-preview", NAVIGATED).score == 0
        browse(port, "sync-preview", f"{shop}/enamel-camp-mug.html")
        after = api.progress("sync-preview")
        assert (after.events, [n.satisfied for n in after.network]) == (2, [True])
        preview = api.preview("sync-preview", NAVIGATED)
        assert (
            preview.preview
            and preview.status == EvalStatus.SUCCESS
            and api.session("sync-preview")["state"] == "running"
        )
        result = api.finish("sync-preview", NAVIGATED)
        assert preview.model_copy(update={"preview": False}) == result.model_copy(update={"preview": False})
        # Finished: the preview says what a second finish says (the same answer's result, or refused)
        assert api.preview("sync-preview", NAVIGATED) == result.model_copy(update={"preview": True})
        with pytest.raises(DifferentAnswer) as refused:
            api.preview("sync-preview", {**NAVIGATED, "status": "FAILURE"})
        assert (refused.value.status, refused.value.error) == (409, "different_answer")
        assert refused.value.judged == NAVIGATED

    async def main() -> None:
        async with AsyncClient(control) as api:
            await api.start(1003, session="async-preview", restart=True)
            with pytest.raises(ControlAPIError) as refused:
                await api.preview("async-preview", NAVIGATED)
            assert (refused.value.status, refused.value.error) == (409, "no_events")
            await asyncio.to_thread(browse, port, "async-preview", f"{shop}/enamel-camp-mug.html")
            progress = await api.progress("async-preview")
            assert [n.satisfied for n in progress.network] == [True]
            preview = await api.preview("async-preview", NAVIGATED)
            result = await api.finish("async-preview", NAVIGATED)
            assert preview.preview and preview.score == result.score == 1
            assert preview.model_dump(exclude={"preview"}) == result.model_dump(exclude={"preview"})

    asyncio.run(main())


def test_a_refusal_crosses_a_process_boundary_whole(serve: tuple[str, str], shop: str) -> None:
    """A refusal raised in another process (a Ray task, a pool worker) comes back pickled: it is rebuilt
    with its status, code and detail, and a different answer with the answer its verdict judged."""
    control, port = serve
    with Client(control) as api:
        with pytest.raises(ControlAPIError) as unknown:
            api.session("nobody-started-this")
        api.start(1003, session="pickled", restart=True)
        browse(port, "pickled", f"{shop}/")
        api.finish("pickled", NAVIGATED)
        with pytest.raises(DifferentAnswer) as different:
            api.finish("pickled", {**NAVIGATED, "status": "FAILURE"})
    unknown.value.add_note("raised by a worker")  # what is added after the raise travels too
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as other:
        # unpickled in a fresh interpreter, pickled again to come back
        unknown_back = other.submit(pickle.loads, pickle.dumps(unknown.value)).result()
        different_back = other.submit(pickle.loads, pickle.dumps(different.value)).result()
    assert type(unknown_back) is ControlAPIError and str(unknown_back) == str(unknown.value)
    assert (unknown_back.status, unknown_back.error) == (404, "unknown_session")
    assert unknown_back.detail == unknown.value.detail and unknown_back.__notes__ == ["raised by a worker"]
    assert type(different_back) is DifferentAnswer and different_back.judged == NAVIGATED
    assert (different_back.status, different_back.refused) == (409, different.value.refused)
