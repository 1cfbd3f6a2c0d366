"""A lease that ended stays ended: across a restart of `serve`, and at the finish.

A session's lease ends before its finish three ways: it stays idle past `--lease-timeout`, it is
abandoned (`POST /sessions/{s}/abandon`), or (under `--workers`) its worker is lost. Another session
then takes the replica. `serve` is killed (SIGKILL) and started again on the same output directory:
the ended session is listed as resumable, and resuming it must give it its lease back ended — its new
address answers 410 itself, the replica is nobody's to it, the counter is left as it was, and its
finish says `lease_ended` with the reason. A session whose lease timed out before it captured anything
finishes with `lease_ended` too, not with a `no_events` refusal that blames its traffic.

Real `serve` processes (in one process and with `--workers 2`), one replica of a real counter site
with a real reset endpoint (`tests/support/counter_replicas.py`), requests through the sessions' own
proxy addresses; the replica's own counters are the oracle.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.site.harness import ProxyProcess, start_proxy
from tests.support.counter_replicas import DEMO_TASKS, READ, READ_TOO, Counter, counter_config, counters
from tests.support.serve_process import PATIENCE, wait_until

pytestmark = pytest.mark.timeout(300)

MODES = {"one process": (), "two workers": ("--workers", "2")}
RETRIEVED: dict[str, Any] = {"task_type": "RETRIEVE", "status": "SUCCESS", "retrieved_data": [34.99]}
"""READ's final answer (the Aurora Desk Lamp's price): the verdict does not matter here, its fields do."""


def serve(workdir: Path, config: Path, *more: str) -> ProxyProcess:
    return start_proxy(
        workdir, tasks=DEMO_TASKS, config=config, extra_args=["--isolation", "exclusive", *more]
    )


def kill(proxy: ProxyProcess) -> None:
    """SIGKILL: nothing said on the way out (a fleet's workers end with their front)."""
    assert proxy.process is not None
    try:
        proxy.process.send_signal(signal.SIGKILL)
        proxy.process.wait(timeout=60)
    finally:
        proxy.stop()


def start(proxy: ProxyProcess, task_id: int, session: str, **more: Any) -> dict[str, Any]:
    body = {"task_id": task_id, "session": session, **more}
    reply = requests.post(f"{proxy.control_url}/sessions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    started: dict[str, Any] = reply.json()
    return started


def through(started: dict[str, Any]) -> dict[str, str]:
    return {"http": started["proxy"]}


def view(proxy: ProxyProcess, session: str) -> dict[str, Any]:
    reply = requests.get(f"{proxy.control_url}/sessions/{session}", timeout=30)
    assert reply.status_code == 200, reply.text
    found: dict[str, Any] = reply.json()
    return found


def listed(proxy: ProxyProcess) -> dict[str, dict[str, Any]]:
    sessions = requests.get(f"{proxy.control_url}/sessions", timeout=30).json()["sessions"]
    return {entry["session"]: entry for entry in sessions}


def health(proxy: ProxyProcess) -> dict[str, Any]:
    found: dict[str, Any] = requests.get(f"{proxy.control_url}/health", timeout=30).json()
    return found


def holders(proxy: ProxyProcess) -> list[str]:
    """Who `/health`'s pool says leases the one replica."""
    sessions: list[str] = health(proxy)["pool"]["sites"]["__SHOPPING__"]["replicas"][0]["sessions"]
    return sessions


def ended(proxy: ProxyProcess, session: str) -> None:
    """Wait until the session's lease ended, as the pool (`/health`) and then the session (its view)
    say: a look at the session is a control call, which counts as use while the lease holds."""
    wait_until(f"{session}'s lease ended in the pool", lambda: session not in holders(proxy))
    wait_until(f"{session}'s lease ended in its view", lambda: "lease_ended" in view(proxy, session))


# --- ways a lease ends before its finish ------------------------------------------------------------


def idle_out(proxy: ProxyProcess, session: str) -> None:
    """`--lease-timeout 3`: the session sends nothing more; its lease ends on its own."""
    ended(proxy, session)


def abandon(proxy: ProxyProcess, session: str) -> None:
    reply = requests.post(
        f"{proxy.control_url}/sessions/{session}/abandon", json={"reason": "gave up"}, timeout=30
    )
    assert reply.status_code == 200 and reply.json()["lease_ended"] == "abandoned", reply.text
    ended(proxy, session)


def lose(proxy: ProxyProcess, session: str) -> None:
    """The session's worker dies while its journal cannot be read (a garbled line in the middle, as
    `tests/fleet/test_faults.py` does): the front cannot resume it there and reports it `lost`, which
    ends its lease. Then the journal is whole again (the disk came back), as it was before: the
    session is resumable after a restart."""
    started = view(proxy, session)
    journal = Path(started["journal"])
    whole = journal.read_bytes()
    last = whole.splitlines(keepends=True)[-1]
    journal.write_bytes(whole + b"{not json\n" + last)
    worker = health(proxy)["workers"][started["worker"]]
    os.kill(worker["pid"], signal.SIGKILL)
    wait_until(f"{session} lost", lambda: listed(proxy).get(session, {}).get("state") == "lost")
    assert listed(proxy)[session].get("reason"), listed(proxy)[session]  # it says why
    wait_until(f"{session}'s lost lease ended", lambda: session not in holders(proxy))
    journal.write_bytes(whole)


ENDS: dict[str, tuple[str, tuple[str, ...], Callable[[ProxyProcess, str], Any]]] = {
    "timeout": ("timeout", ("--lease-timeout", "3"), idle_out),
    "abandoned": ("abandoned", (), abandon),
}


def end_then_restart_then_resume(
    tmp_path: Path, replica: Counter, args: tuple[str, ...], end: Callable[[ProxyProcess, str], Any]
) -> tuple[ProxyProcess, dict[str, Any], requests.Response]:
    """A reads once, its lease ends (`end`), B takes the replica and reads; `serve` is killed and
    started again on the same output directory, where A is listed resumable and resumed from its
    journal. Returns the second `serve` (running), A's resume and A's POST through its new address."""
    config = counter_config(tmp_path / "sites.json", [replica])
    first = serve(tmp_path / "serve", config, *args)
    try:
        a = start(first, READ, "A")
        assert a["replicas"]["__SHOPPING__"] == replica.url
        assert requests.get(f"{replica.url}/", proxies=through(a), timeout=30).status_code == 200
        end(first, "A")
        b = start(first, READ_TOO, "B", wait=PATIENCE)  # the replica is free again: B takes it
        assert b["replicas"]["__SHOPPING__"] == replica.url and holders(first) == ["B"]
        assert requests.get(f"{replica.url}/", proxies=through(b), timeout=30).status_code == 200
    finally:
        kill(first)
    second = serve(tmp_path / "serve", config, *args)
    try:
        resumable = listed(second).get("A", {})
        assert resumable.get("state") == "resumable" and resumable.get("task_id") == READ, listed(second)
        body: dict[str, Any] = {"task_id": READ, "session": "A", "resume_journal": True}
        resumed = requests.post(f"{second.control_url}/sessions", json=body, timeout=60)
        assert resumed.status_code == 200, resumed.text
        posted = requests.post(f"{replica.url}/add", proxies=through(resumed.json()), timeout=30)
        return second, resumed.json(), posted
    except BaseException:
        second.stop()
        raise


def check_still_ended(
    proxy: ProxyProcess, replica: Counter, resumed: dict[str, Any], posted: requests.Response, reason: str
) -> None:
    """After the restart A's lease is as it ended: said so, nobody's replica to A, nothing forwarded,
    and its finish says `lease_ended` with the reason."""
    seen = {
        "lease_ended": resumed.get("lease_ended") or view(proxy, "A").get("lease_ended"),
        "A leases the replica": "A" in holders(proxy),
        "A's POST answered": posted.status_code,
        "the counter": replica.value,
        "POSTs that reached it": replica.site.posts,
    }
    assert seen == {
        "lease_ended": reason,
        "A leases the replica": False,
        "A's POST answered": 410,
        "the counter": 0,
        "POSTs that reached it": 0,
    }, posted.text[:300]
    assert "lease has ended" in posted.text and reason in posted.text
    finish = requests.post(f"{proxy.control_url}/sessions/A/finish", json=RETRIEVED, timeout=60)
    assert finish.status_code == 200, finish.text
    assert finish.json()["lease_ended"] == reason, finish.text
    assert replica.site.posts == 0 and replica.value == 0


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("how", list(ENDS))
def test_a_lease_that_ended_stays_ended_after_a_restart(tmp_path: Path, how: str, mode: str) -> None:
    reason, flags, end = ENDS[how]
    with counters(1, delay=0.3) as (replica,):
        proxy, resumed, posted = end_then_restart_then_resume(tmp_path, replica, (*flags, *MODES[mode]), end)
        try:
            check_still_ended(proxy, replica, resumed, posted, reason)
        finally:
            proxy.stop()


def test_a_lost_session_s_lease_stays_ended_after_a_restart(tmp_path: Path) -> None:
    """`--workers 2`: the lease of a session reported `lost` (its worker died and could not resume it)."""
    with counters(1, delay=0.3) as (replica,):
        proxy, resumed, posted = end_then_restart_then_resume(tmp_path, replica, MODES["two workers"], lose)
        try:
            check_still_ended(proxy, replica, resumed, posted, "lost")
        finally:
            proxy.stop()


# --- a finish after the lease ended, with nothing captured --------------------------------------------


@pytest.mark.parametrize("mode", list(MODES))
def test_a_finish_after_the_lease_timed_out_with_nothing_captured_says_lease_ended(
    tmp_path: Path, mode: str
) -> None:
    with counters(1) as (replica,):
        config = counter_config(tmp_path / "sites.json", [replica])
        proxy = serve(tmp_path / "serve", config, "--lease-timeout", "2", *MODES[mode])
        try:
            idle = start(proxy, READ, "idle")
            idle_out(proxy, "idle")  # nothing sent before its lease ended
            page = requests.get(f"{replica.url}/", proxies=through(idle), timeout=30)
            assert page.status_code == 410 and "--lease-timeout" in page.text, page.text[:300]
            assert replica.site.requests == 0  # refused by the proxy: it never reached the site
            assert view(proxy, "idle")["refused_after_lease_end"] == 1
            finish = requests.post(f"{proxy.control_url}/sessions/idle/finish", json=RETRIEVED, timeout=60)
            assert finish.status_code == 200, f"{finish.status_code} {finish.text}"
            result = finish.json()
            assert result["lease_ended"] == "timeout" and result.get("error") != "no_events", result
        finally:
            proxy.stop()
