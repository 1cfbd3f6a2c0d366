"""The routers carry their rules (control/app.py, fleet/front/app.py): every documented route of the
control API refuses a request without its token or from a web page (the guard is each router's
dependency) and documents those refusals; no router is bare; and every call the fleet's front makes to
a worker goes through `WorkerLink` (fleet/front/link.py)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.support.addon_helpers import write_tasks
from tests.support.control_in_process import handle_request
from webarena_live.control.app import openapi_document
from webarena_live.control.context import ControlContext
from webarena_live.control.guard import is_public
from webarena_live.control.responses import GUARDED
from webarena_live.evaluator.tasks import load_tasks
from webarena_live.runs.sessions import SessionStore
from webarena_live.runs.settings import RunSettings

ADDON = Path(__file__).resolve().parents[2] / "addon"
TOKEN = "routers-token"


@pytest.fixture
def guarded(tmp_path: Path) -> ControlContext:
    sessions = SessionStore(RunSettings())  # no outputs: GET /report answers its 409
    return ControlContext(tasks=load_tasks(write_tasks(tmp_path)), sessions=sessions, token=TOKEN)


def _operations() -> list[tuple[str, str]]:
    paths = openapi_document()["paths"]
    return [(method.upper(), path) for path, methods in paths.items() for method in methods]


@pytest.mark.parametrize(("method", "path"), _operations())
def test_every_documented_route_is_guarded(guarded: ControlContext, method: str, path: str) -> None:
    target = path.replace("{session}", "nobody").replace("{task_id}", "1")
    if is_public(target):
        assert handle_request(guarded, method, target).status not in (401, 403)
        return
    operation = openapi_document()["paths"][path][method.lower()]
    assert {str(status) for status in GUARDED} <= set(operation["responses"])
    reply = handle_request(guarded, method, target)
    assert (reply.status, json.loads(reply.body)["error"]) == (401, "unauthorized")
    page = handle_request(guarded, method, target, headers={"origin": "http://shop.test"})
    assert (page.status, json.loads(page.body)["error"]) == (403, "page_request_refused")
    # with the token the guard lets it through: whatever the route answers, not the guard's refusal
    allowed = handle_request(guarded, method, target, authorization=f"Bearer {TOKEN}")
    assert allowed.status not in (401, 403)


def test_no_bare_router_and_no_raw_worker_calls_outside_the_link() -> None:
    for path in [*(ADDON / "control").glob("*.py"), *(ADDON / "fleet").rglob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "APIRouter":
                assert node.args or node.keywords, f"{path}:{node.lineno}: a bare APIRouter()"
            if path.name != "link.py" and isinstance(node, ast.Attribute) and node.attr == "http":
                named = getattr(node.value, "attr", getattr(node.value, "id", ""))
                assert named != "link", (
                    f"{path}:{node.lineno}: the link's raw client, not a WorkerLink method"
                )
