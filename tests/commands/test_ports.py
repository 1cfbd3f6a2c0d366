"""`serve`'s ports as a user gives them: `0` lets the operating system pick (the real ports then in the
banner and `/health`), `off` opens none, and one port given twice is refused before anything listens."""

from __future__ import annotations

import argparse
import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.serve_process import NAVIGATED, NAVIGATION, finish
from webarena_live.commands.ports import OFF, port_number, resolve_ports
from webarena_live.demo import site as demo_site

CLI = Path(sys.executable).parent / "webarena-live"


@pytest.fixture(scope="module")
def shop() -> Iterator[str]:
    server = demo_site.serve("127.0.0.1", 0)
    yield server.url
    server.shutdown()


def _args(**ports: int) -> argparse.Namespace:
    values = {"port": 8080, "session_port": 8082, "control_port": 8081, "web_port": 8083, "web": False}
    return argparse.Namespace(listen_host="127.0.0.1", **{**values, **ports})


def test_port_numbers_zero_and_off():
    assert port_number("0") == 0 and port_number("8080") == 8080
    assert port_number("off", may_be_off=True) == OFF == port_number("None", may_be_off=True)
    with pytest.raises(argparse.ArgumentTypeError, match="not a port number: 'off'"):
        port_number("off")  # the proxy port cannot be left out
    with pytest.raises(argparse.ArgumentTypeError, match="out of range"):
        port_number("70000")


def test_zero_gets_a_free_port_and_off_the_addons_none():
    args = _args(port=0, session_port=OFF, control_port=0)
    assert resolve_ports(args) is None
    assert args.port > 0 and args.control_port > 0 and args.port != args.control_port
    assert args.session_port == 0  # the addon's options say "none" with 0
    for port in (args.port, args.control_port):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))  # free: serve can take it


@pytest.mark.parametrize(
    ("ports", "told"),
    [
        ({"session_port": 8080}, "--port and --session-port are both 8080"),
        ({"control_port": 8082}, "--session-port and --control-port are both 8082"),
        ({"web": True, "web_port": 8081}, "--control-port and --web-port are both 8081"),
    ],
)
def test_one_port_given_twice_is_refused(ports, told):
    args = _args(**ports)
    problem = resolve_ports(args)
    assert problem is not None and problem.startswith(told), problem


def test_two_zeros_or_two_offs_are_no_clash():
    args = _args(session_port=OFF, control_port=OFF)
    assert resolve_ports(args) is None and (args.session_port, args.control_port) == (0, 0)
    args = _args(port=0, session_port=0, control_port=0)
    assert resolve_ports(args) is None and len({args.port, args.session_port, args.control_port}) == 3


def _serve(tmp_path: Path, shop: str, *flags: str) -> tuple[subprocess.Popen[str], list[str]]:
    """`serve FLAGS` with the demo shop mapped; the process and its banner's lines."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"environments": {"__SHOPPING__": {"urls": [shop]}}}))
    process = subprocess.Popen(
        [str(CLI), "serve", "--config", str(config), "--quiet", "--set", f"confdir={tmp_path / 'conf'}",
         "--set", f"webarena_journal_dir={tmp_path / 'journal'}", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    # the banner's last line: the HTTPS CA of one process, the journal of a front of workers
    while not any("HTTPS CA" in line or ("journal " in line and "workers" in lines[0]) for line in lines):
        line = process.stdout.readline()
        assert line and time.monotonic() < deadline, "".join(lines) + (process.stdout.read() or "")
        lines.append(line)
    return process, lines


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)


def _banner_port(lines: list[str], label: str) -> int | None:
    for line in lines:
        if line.strip().startswith(label):
            found = re.search(r"http://[\d.]+:(\d+)", line)
            assert found, line
            return int(found.group(1))
    return None


def _banner_ports(banner: list[str]) -> tuple[int | None, ...]:
    return tuple(_banner_port(banner, label) for label in ("proxy port", "session port", "control API"))


def _health_ports(health: dict[str, int]) -> tuple[int, ...]:
    return health["proxy_port"], health["session_port"], health["control_port"]


def test_serve_on_ports_the_system_picks_names_them_and_works(tmp_path, shop):
    process, banner = _serve(tmp_path, shop, "--port", "0", "--session-port", "0", "--control-port", "0")
    try:
        proxy, session, control = _banner_ports(banner)
        assert proxy and session and control and len({proxy, session, control}) == 3, banner
        assert ":0 " not in "".join(banner) and ":0/" not in "".join(banner)
        health = requests.get(f"http://127.0.0.1:{control}/health", timeout=10).json()
        assert _health_ports(health) == (proxy, session, control)
        base = f"http://127.0.0.1:{control}"
        assert requests.post(f"{base}/sessions", json={"task_id": 1003, "session": "s"}, timeout=10).ok
        # the session port challenges (407) as its number says, the proxy port takes credentials up front
        challenged = requests.get(f"{shop}/", proxies={"http": f"http://127.0.0.1:{session}"}, timeout=10)
        assert challenged.status_code == 407
        on_proxy = {"http": f"http://s:x@127.0.0.1:{proxy}"}
        assert requests.get(
            f"{shop}/enamel-camp-mug.html", proxies=on_proxy, headers=NAVIGATION, timeout=10
        ).ok
        verdict = finish(base, "s", NAVIGATED).json()
        assert verdict["status"] == "success", verdict
    finally:
        _stop(process)


def test_off_opens_no_session_port_and_no_control_port(tmp_path, shop):
    process, banner = _serve(tmp_path, shop, "--port", "0", "--session-port", "off", "--control-port", "off")
    try:
        proxy = _banner_port(banner, "proxy port")
        assert proxy and _banner_port(banner, "session port") is None, banner
        assert any(
            line.strip() == "control API   http://webarena-live.invalid/ through the proxy" for line in banner
        )
        # the control API answers through the proxy only, and names the ports in use
        health = requests.get(
            "http://webarena-live.invalid/health", proxies={"http": f"http://127.0.0.1:{proxy}"}, timeout=10
        ).json()
        assert (
            health["proxy_port"] == proxy and health["session_port"] is None and "control_port" not in health
        )
    finally:
        _stop(process)


def test_one_port_twice_is_refused_before_anything_listens(tmp_path, shop):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [str(CLI), "serve", "--port", str(port), "--session-port", str(port), "--control-port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.strip() == (
        f"webarena-live serve: --port and --session-port are both {port}: each needs a port of its own "
        "(0 lets the operating system pick one; --session-port off opens none)"
    )


def test_workers_on_ports_the_system_picks(tmp_path, shop):
    process, banner = _serve(
        tmp_path, shop, "--workers", "2", "--port", "0", "--session-port", "0", "--control-port", "0",
        "--web", "--web-port", "0",
    )  # fmt: skip
    try:
        proxy, session, control = _banner_ports(banner)
        assert proxy and session and control, banner
        health = requests.get(f"http://127.0.0.1:{control}/health", timeout=10).json()
        assert _health_ports(health) == (proxy, session, control)
        assert len(health["workers"]) == 2
        # each worker's mitmweb on a port of its own, named in the banner, answering there
        # (with the token mitmproxy 11.1 and later ask for: `?token=...`)
        found = [m for line in banner for m in re.findall(r"mitmweb (http://[\d.]+:(\d+)/\S*)", line)]
        webs = [int(port) for _url, port in found]
        assert len(webs) == 2 and len(set(webs)) == 2 and not {proxy, session, control} & set(webs), banner
        for url, _port in found:
            assert requests.get(url.rstrip(","), timeout=10).status_code == 200
    finally:
        _stop(process)
    refused = subprocess.run(
        [str(CLI), "serve", "--workers", "2", "--port", "0", "--control-port", "off"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2 and "--workers needs the control port" in refused.stderr, refused.stderr
