"""A 401 for a missing or a wrong control token says where the token comes from: a real `webarena-live
serve` given its token in `WEBARENA_LIVE_CONTROL_TOKEN`, asked on its control port and through the proxy
at the reserved host, and the front of `serve --workers` (its own check)."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from tests.support.serve_process import launch_serve, shop
from webarena_live.addresses.credentials import CONTROL_TOKEN_ENV

__all__ = ["shop"]

TOKEN = "s3cret-of-the-test"


@pytest.mark.parametrize("fleet", [(), ("--workers", "2")], ids=["one process", "a fleet's front"])
def test_a_401_names_the_variable_the_token_comes_from(
    tmp_path: Path, shop: str, fleet: tuple[str, ...]
) -> None:
    served = launch_serve(
        tmp_path, "--set", f"confdir={tmp_path / 'conf'}", "--quiet", *fleet, env={CONTROL_TOKEN_ENV: TOKEN}
    )
    try:
        asked = [(served.control, {})]
        if not fleet:  # the reserved host through the proxy: the same guard
            asked.append(("http://webarena-live.invalid", {"http": served.proxy_url}))
        for base, proxies in asked:
            for authorization, opening in ((None, "this control API needs its token: "),
                                           ("Bearer wrong", "wrong control token; ")):  # fmt: skip
                headers = {"Authorization": authorization} if authorization else {}
                reply = requests.get(f"{base}/sessions", headers=headers, proxies=proxies, timeout=30)
                assert reply.status_code == 401, (base, reply.text)
                assert reply.json()["error"] == "unauthorized"
                detail = reply.json()["detail"]
                assert detail.startswith(opening), detail
                assert "Authorization: Bearer <control token>" in detail and f"${CONTROL_TOKEN_ENV}" in detail
            right = {"Authorization": f"Bearer {TOKEN}"}
            assert requests.get(f"{base}/sessions", headers=right, proxies=proxies, timeout=30).ok
    finally:
        served.stop()
