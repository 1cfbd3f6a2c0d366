"""The standalone NeMo-Gym resources server (`create_app`) on a real socket: `POST /verify` in NeMo-Gym's
shape answers the verdict's reward, and a masked sample with `mask_sample` and its failure's kind and
reason. (The same over nemo-gym's own server classes: tests/rewards/test_nemogym.py.)"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import uvicorn

from tests.support.rewards import PLANS, run_http_agent
from tests.support.serve_process import Served
from webarena_live.launch import free_ports
from webarena_live.rewards.nemogym import create_app

pytestmark = pytest.mark.timeout(300)


def verify_request(session: str, text: str) -> dict[str, Any]:
    """A NeMo-Gym verify body: the create params, an OpenAI Responses-API response, the row's own field."""
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "the task's intent"}]},
        "response": {
            "id": "resp_1",
            "created_at": 0,
            "model": "policy",
            "object": "response",
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
        },
        "webarena_session": session,
    }


@pytest.fixture(scope="module")
def resources_server(served: tuple[Served, Path]) -> Iterator[str]:
    (port,) = free_ports(1)
    server = uvicorn.Server(
        uvicorn.Config(create_app(served[0].control), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_verify_answers_the_verdicts_reward(
    served: tuple[Served, Path], shop: str, resources_server: str
) -> None:
    for label, plan in PLANS.items():
        run_http_agent(served[0].control, shop, f"gym-{label}", plan)
        text = plan.answer if isinstance(plan.answer, str) else json.dumps(plan.answer)
        body = verify_request(f"gym-{label}", text)
        reply = requests.post(f"{resources_server}/verify", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        answer = reply.json()
        assert {k: answer[k] for k in body} == body  # the request echoed
        assert (answer["reward"], answer["mask_sample"], answer["failure_kind"]) == (
            plan.score,
            False,
            None,
        ), label


def test_a_masked_sample_says_so(resources_server: str) -> None:
    reply = requests.post(f"{resources_server}/verify", json=verify_request("gym-nobody", "{}"), timeout=60)
    answer = reply.json()
    assert answer["mask_sample"] is True and answer["failure_kind"] == "webarena_live:unknown_session"
    assert "gym-nobody" in answer["failure_reason"]
    missing = requests.post(f"{resources_server}/verify", json={"responses_create_params": {}}, timeout=60)
    assert missing.status_code == 422 and "webarena_session" in missing.json()["detail"]
