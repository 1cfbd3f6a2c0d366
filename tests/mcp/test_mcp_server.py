"""`webarena-live mcp` as an MCP client uses it: the SDK's `Client` spawning it over stdio, or reaching
it over streamable HTTP; the agent gets its task, browses through its session's proxy address, previews,
submits and is judged live; the reference, judging the written run, agrees. Bad input gets the control
API's own words as a tool error, and a start the API refuses stops the server with them."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import requests
from mcp import Client

from tests.mcp.agent import COMMAND, TOKEN, answer, http_server, refusal, stdio, whole_run
from tests.support.rewards import reference_verdicts
from tests.support.serve_process import Served

LAMP_PRICE = {"action": "retrieve", "status": "SUCCESS", "results": [34.99]}
WRONG_PRICE = {"action": "retrieve", "status": "SUCCESS", "results": [19.99]}
SEED_NAVIGATED = {"action": "navigate", "status": "SUCCESS", "results": None}


def test_stdio_runs_are_judged_live_and_the_reference_agrees(
    served: tuple[Served, Path], shop: str, oracle_python: Path, official_dataset: Path, tmp_path: Path
) -> None:
    server, out = served
    right = stdio(server.control, "--task", "1003", "--session", "mcp-right", "--run", "mcp-stdio")
    run = asyncio.run(whole_run(right, ("/", "/enamel-camp-mug.html"), SEED_NAVIGATED))
    task = run["task"]
    assert (task["session"], task["task_id"]) == ("mcp-right", 1003)
    assert task["intent"] == "Go to the product page of the cheapest mug in the shop."
    assert task["start_urls"] == [shop] and task["proxy"].startswith("http://127.0.0.1:")
    assert (run["preview"]["status"], run["preview"]["preview"]) == ("success", True)
    assert run["progress"]["network"], run["progress"]
    assert (run["verdict"]["status"], run["verdict"]["score"]) == ("success", 1.0)
    assert "409 different_answer" in run["again"] and "judged already" in run["again"]

    wrong = stdio(server.control, "--task", "1001", "--session", "mcp-wrong", "--run", "mcp-stdio")
    run = asyncio.run(whole_run(wrong, ("/",), WRONG_PRICE))
    assert (run["preview"]["status"], run["verdict"]["status"], run["verdict"]["score"]) == (
        "failure", "failure", 0.0,
    )  # fmt: skip

    reference = reference_verdicts(oracle_python, official_dataset, shop, out / "mcp-stdio", tmp_path)
    assert reference == {1003: ("success", 1.0), 1001: ("failure", 0.0)}


def test_streamable_http_run_is_judged_live(served: tuple[Served, Path]) -> None:
    server, out = served
    with http_server(server.control, "--task", "1001", "--session", "mcp-http", "--run", "mcp-http") as url:
        run = asyncio.run(whole_run(url, ("/", "/aurora-desk-lamp.html"), LAMP_PRICE))
    assert (run["task"]["session"], run["task"]["task_id"]) == ("mcp-http", 1001)
    assert (run["verdict"]["status"], run["verdict"]["score"]) == ("success", 1.0)
    assert (out / "mcp-http" / "1001" / "eval_result.json").is_file()


def test_bad_input_is_told_as_a_tool_error_and_loses_nothing(served: tuple[Served, Path], shop: str) -> None:
    server, _ = served

    async def agent() -> None:
        async with Client(stdio(server.control, "--task", "1003", "--session", "mcp-bad")) as client:
            told = refusal(await client.call_tool("submit_answer", {"action": "bogus", "status": "SUCCESS"}))
            assert "action" in told and "'retrieve', 'navigate' or 'mutate'" in told, told
            told = refusal(await client.call_tool("submit_answer", {**SEED_NAVIGATED, "results": "a page"}))
            assert "results" in told and "valid list" in told, told
            told = refusal(await client.call_tool("submit_answer", {"status": "SUCCESS"}))
            assert "action" in told and "required" in told.lower(), told
            # nothing browsed yet: the finish's own refusal, and what to do
            told = refusal(await client.call_tool("submit_answer", SEED_NAVIGATED))
            assert "409 no_events" in told and "browse" in told, told
            task = answer(await client.call_tool("get_task", {}))
            requests.get(f"{shop}/enamel-camp-mug.html", proxies={"http": task["proxy"]}, timeout=30,
                         headers={"Accept": "text/html"})  # fmt: skip
            verdict = answer(await client.call_tool("submit_answer", SEED_NAVIGATED))
            assert verdict["status"] == "success", verdict

        # a server for a session that does not exist answers so, and keeps answering
        async with Client(stdio(server.control, "--session", "mcp-nobody")) as client:
            told = refusal(await client.call_tool("get_task", {}))
            assert "404 unknown_session" in told and "mcp-nobody" in told, told
            assert "404 unknown_session" in refusal(await client.call_tool("get_progress", {}))

    asyncio.run(agent())
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    view = requests.get(f"{server.control}/sessions/mcp-bad", headers=bearer, timeout=10)
    assert view.json()["state"] == "finished", view.text


def test_a_refused_start_stops_the_server_with_the_apis_words(served: tuple[Served, Path]) -> None:
    server, _ = served
    base = [COMMAND, "mcp", "--control", server.control]
    unknown = subprocess.run([*base, "--task", "99999"], env=_env(TOKEN), capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert unknown.returncode == 1 and "unknown_task: task 99999" in unknown.stderr, unknown.stderr
    assert "could not start" in unknown.stderr, unknown.stderr
    no_token = subprocess.run([*base, "--task", "1003"], env=_env(None), capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert no_token.returncode == 1 and "401" in no_token.stderr, no_token.stderr
    assert "WEBARENA_LIVE_CONTROL_TOKEN" in no_token.stderr, no_token.stderr
    lonely = subprocess.run([*base, "--restart"], env=_env(TOKEN), capture_output=True, text=True, timeout=60)
    assert lonely.returncode == 2 and "--task" in lonely.stderr, lonely.stderr


def _env(token: str | None) -> dict[str, str]:
    import os

    from webarena_live.client import TOKEN_ENV

    env = {key: value for key, value in os.environ.items() if key != TOKEN_ENV}
    return {**env, TOKEN_ENV: token} if token else env
