"""Fuzz the control API from its own OpenAPI document with schemathesis, against a
real `webarena-live serve` on 127.0.0.1 (with a control token), on the control port and through the
proxy at the reserved host: no 5xx, every status and body as documented, and the proxy survives.

Bounded: a fixed number of generated requests per operation and generation mode, no example
database, so a run takes well under a minute.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from tests.site.harness import RESERVED_HOST, ProxyProcess, start_proxy, write_config
from tests.support import quick
from tests.support.addon_helpers import NAVIGATE_TASK, write_tasks
from webarena_live.control.app import openapi_document

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = quick.examples(40)
"""Generated requests per operation and generation mode (the run's bound; fewer in a quick run)."""

STREAMING = {"/sessions/{session}/events", "/events"}
"""Never end on the control port while sessions run, so they are exercised by the route tests, not fuzzed."""

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    workdir = tmp_path_factory.mktemp("fuzz")
    config = write_config(workdir / "sites.json", {"__SHOPPING__": {"urls": ["http://shop.test"]}})
    proxy = start_proxy(
        workdir / "proxy",
        tasks=write_tasks(workdir),
        config=config,
        extra_options=(f"webarena_control_token={TOKEN}",),
    )
    yield proxy
    proxy.stop()


KNOWN_SESSION = "fuzz-known"
KNOWN_TASK = NAVIGATE_TASK
PINNED = {"session": KNOWN_SESSION, "task_id": KNOWN_TASK}
"""Path parameters also pinned to things that exist, so the fuzz reaches past the 404s."""


def fuzz(
    schema: Any,
    mode: GenerationMode,
    send: Callable[[Any], Any],
    seen: Counter[int],
    examples: int = EXAMPLES,
) -> None:
    """Run `send(case)` on generated cases of every operation but the stream."""
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path in STREAMING:
            continue
        if mode is GenerationMode.NEGATIVE and not (
            operation.path_parameters or operation.query or operation.body
        ):
            continue  # nothing to get wrong in a request without parameters or body
        strategies = [operation.as_strategy(generation_mode=mode)]
        names = [parameter.name for parameter in operation.path_parameters]
        if names and mode is GenerationMode.POSITIVE:
            pinned = {name: PINNED[name] for name in names}
            strategies.append(operation.as_strategy(generation_mode=mode, path_parameters=pinned))
        for strategy in strategies:
            run_cases(strategy, send, seen, examples)


def run_cases(strategy: Any, send: Callable[[Any], Any], seen: Counter[int], examples: int) -> None:
    """`send` every case hypothesis draws from `strategy`, at most `examples` of them."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def one(case: Any) -> None:
        response = send(case)
        seen[response.status_code] += 1

    one()


def known_session(proxy: ProxyProcess) -> None:
    """(Re)start the pinned session on its task, with one event (a refused upstream connection)."""
    start = {"task_id": KNOWN_TASK, "session": KNOWN_SESSION, "restart": True}
    assert (
        requests.post(f"{proxy.control.base}/sessions", json=start, headers=AUTH, timeout=10).status_code
        == 200
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    proxies = {"http": f"http://{KNOWN_SESSION}:x@127.0.0.1:{proxy.port}"}
    requests.get(f"http://127.0.0.1:{closed}/", proxies=proxies, timeout=10)


def test_served_document_is_the_published_one(served):
    reply = requests.get(f"{served.control.base}/openapi.json", timeout=10)
    assert reply.status_code == 200 and reply.json() == openapi_document()
    # Public like /health: a client can discover the API before it has the token.
    assert requests.get(f"{served.control.base}/sessions", timeout=10).status_code == 401


def test_fuzz_the_control_port(served):
    schema = schemathesis.openapi.from_url(f"{served.control.base}/openapi.json")
    seen: Counter[int] = Counter()

    def positive(case: Any) -> Any:
        return case.call_and_validate(base_url=served.control.base, headers=AUTH, checks=CHECKS, timeout=30)

    def negative(case: Any) -> Any:
        return case.call_and_validate(
            base_url=served.control.base, headers=AUTH, checks=[*CHECKS, negative_data_rejection], timeout=30
        )

    known_session(served)
    fuzz(schema, GenerationMode.POSITIVE, positive, seen)
    known_session(served)
    fuzz(schema, GenerationMode.NEGATIVE, negative, seen)
    print("control port:", dict(seen))
    assert sum(seen.values()) >= quick.examples(400), seen
    assert not [status for status in seen if status >= 500], seen
    assert seen[200] >= quick.examples(20) and seen[400] and seen[404] and seen[409], (
        seen
    )  # both accepted and refused requests were made
    assert_still_serving(served)


def test_fuzz_through_the_proxy_at_the_reserved_host(served):
    """The same routes reached the other way: a client of the proxy talking to the reserved host."""
    schema = schemathesis.openapi.from_dict(openapi_document())
    proxies = {"http": served.proxy_url}
    seen: Counter[int] = Counter()

    def send(case: Any) -> Any:
        return case.call_and_validate(
            base_url=f"http://{RESERVED_HOST}", headers=AUTH, checks=CHECKS, proxies=proxies, timeout=30
        )

    known_session(served)
    fuzz(schema, GenerationMode.POSITIVE, send, seen, examples=quick.examples(15))
    print("through the proxy:", dict(seen))
    assert sum(seen.values()) >= quick.examples(60) and not [status for status in seen if status >= 500], seen
    assert_still_serving(served)


def assert_still_serving(served: ProxyProcess) -> None:
    assert served.process.poll() is None, served.log_tail()
    assert requests.get(f"{served.control.base}/health", timeout=10).json()["status"] == "ok"
    log = Path(served.log_file).read_text(errors="replace")
    assert "Traceback" not in log and "internal_error" not in log, log[-3000:]
