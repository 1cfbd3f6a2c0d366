"""NeMo-Gym for real (nemo-gym 0.4.0, the newest this machine's Python 3.12/3.13.0 can install): a
resources server built on nemo-gym's own `SimpleResourcesServer`, whose `verify` is
`webarena_live.rewards.nemogym.verify_body` (the README's recipe), on a real socket. Its `/verify`
takes requests built and validated by nemo-gym's own models and answers with its response model:
the verdict's reward, and `mask_sample`/`failure_kind`/`failure_reason` for a masked sample (the
fields nemo-gym 0.7 declares on `BaseVerifyResponse`; 0.4 lacks them, so the recipe declares them).

Runs in `.venv-nemogym` (scripts/bootstrap.sh, when asked for: nemo-gym is 1.4 GB).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
import requests
import uvicorn
from fastapi import Request
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.server_utils import ServerClient

from tests.rewards.test_nemogym_app import verify_request
from tests.support.rewards import PLANS, run_http_agent
from tests.support.serve_process import Served
from webarena_live.launch import free_ports
from webarena_live.rewards.nemogym import verify_body

pytestmark = pytest.mark.timeout(300)


class WebArenaVerifyRequest(BaseVerifyRequest):
    webarena_session: str


class WebArenaVerifyResponse(BaseVerifyResponse):
    webarena_session: str
    mask_sample: bool = False
    failure_kind: str | None = None
    failure_reason: str | None = None


class WebArenaResourcesServer(SimpleResourcesServer):
    config: BaseResourcesServerConfig

    async def verify(self, request: Request, body: WebArenaVerifyRequest) -> WebArenaVerifyResponse:
        return WebArenaVerifyResponse.model_validate(await verify_body(body.model_dump(mode="json")))


@pytest.fixture(scope="module")
def resources_server(served: tuple[Served, Path], monkeypatch_module: Any) -> Iterator[str]:
    monkeypatch_module.setenv("WEBARENA_LIVE_CONTROL", served[0].control)
    (port,) = free_ports(1)
    config = BaseResourcesServerConfig(host="127.0.0.1", port=port, entrypoint="", name="webarena_live")
    app = WebArenaResourcesServer(config=config, server_client=MagicMock(spec=ServerClient)).setup_webserver()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_verify_in_nemo_gyms_own_server(
    served: tuple[Served, Path], shop: str, resources_server: str
) -> None:
    for label, plan in PLANS.items():
        run_http_agent(served[0].control, shop, f"ng-{label}", plan)
        text = plan.answer if isinstance(plan.answer, str) else json.dumps(plan.answer)
        body = WebArenaVerifyRequest.model_validate(verify_request(f"ng-{label}", text)).model_dump(
            mode="json"
        )
        reply = requests.post(f"{resources_server}/verify", json=body, timeout=60)
        assert reply.status_code == 200, reply.text
        answer = WebArenaVerifyResponse.model_validate(reply.json())
        assert (answer.reward, answer.mask_sample, answer.failure_kind) == (plan.score, False, None), label


def test_a_masked_sample_in_nemo_gyms_shape(resources_server: str) -> None:
    body = WebArenaVerifyRequest.model_validate(verify_request("ng-nobody", "{}")).model_dump(mode="json")
    answer = WebArenaVerifyResponse.model_validate(
        requests.post(f"{resources_server}/verify", json=body, timeout=60).json()
    )
    assert answer.mask_sample and answer.failure_kind == "webarena_live:unknown_session"
    assert "ng-nobody" in (answer.failure_reason or "")
