"""The page-load part of bench_workers.py: real Chromium on a real DokuWiki, through plain mitmdump, a
session's own address and its PAC file (see bench_workers.py for what is measured and the targets)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench_common as bench
from playwright.async_api import async_playwright

from scripts.support import wiki_app as app
from scripts.support.site_config import write_config
from webarena_live.demo.command import CHROMIUM_ARGS

TASKS = bench.REPO / "tests" / "wiki" / "tasks.json"
HOSTNAMES = bench.REPO / "tests" / "site" / "hostnames_script.py"
SHOP_PAGES = [
    "/",
    "/catalogsearch/result/?q=mug",
    "/enamel-camp-mug.html",
    "/catalogsearch/result/?q=lamp",
    "/",
]
PAGES = [
    "/doku.php?id=start",
    "/doku.php?id=trails:overview",
    "/doku.php?id=trails:ridge_loop",
    "/doku.php?id=trails:lakeside_path",
    "/doku.php?id=trails:falcon_crag",
    "/doku.php?id=start",
]


async def browse(base: str, proxy_args: list[str]) -> dict[str, float]:
    """One fresh Chromium loads `PAGES`: median seconds per page load, requests that reached the network."""
    async with async_playwright() as playwright:
        args = [*CHROMIUM_ARGS, *proxy_args, "--host-resolver-rules=MAP *.test 127.0.0.1"]
        browser = await playwright.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        try:
            page = await browser.new_page()
            cdp = await page.context.new_cdp_session(page)
            counts = {"sent": 0, "cached": 0}
            cdp.on("Network.requestWillBeSent", lambda _: counts.__setitem__("sent", counts["sent"] + 1))
            cdp.on(
                "Network.requestServedFromCache", lambda _: counts.__setitem__("cached", counts["cached"] + 1)
            )
            await cdp.send("Network.enable")
            times = []
            for path in PAGES:
                started = time.perf_counter()
                await page.goto(base + path, wait_until="load")
                times.append(time.perf_counter() - started)
            return {"load_s": bench.median(times), "requests": counts["sent"] - counts["cached"]}
        finally:
            await browser.close()


def _session(proxy: bench.Proxy, name: str) -> str:
    body = {"task_id": 9201, "session": name, "restart": True}
    started = bench.control(proxy.control_port, "POST", "/sessions", body)
    return str(started["proxy"])


def pages(*, rounds: int) -> None:
    assert app.installed(), app.INSTALL_HINT
    os.sched_setaffinity(0, set(bench.HELPER_CPUS))  # Chromium and the wiki inherit it
    work = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    with app.run_dokuwiki(work / "dokuwiki", bench.free_port()) as wiki:
        loopback, named = wiki.base_url, wiki.base_url.replace("127.0.0.1", "wiki.test")
        config = write_config(work / "sites.json", {"__WIKIPEDIA__": {"urls": [named]}})
        serve_options = [f"webarena_tasks={TASKS}", f"webarena_config={config}", f"scripts={HOSTNAMES}"]
        figures: dict[str, list[dict[str, float]]] = {"mitmdump": [], "address": [], "pac": [], "bare": []}
        with (
            bench.Proxy(serve=False) as baseline,
            bench.Proxy(serve=True, serve_options=serve_options) as serve,
        ):
            bypass = "--proxy-bypass-list=<-loopback>"
            for index in range(rounds + 1):  # the first round warms both up and is not counted
                runs: dict[str, Any] = {
                    "mitmdump": ([f"--proxy-server=http://127.0.0.1:{baseline.port}", bypass], loopback),
                    "address": ([f"--proxy-server={_session(serve, 'address')}", bypass], loopback),
                }
                _session(serve, "pac")
                pac_url = f"http://127.0.0.1:{serve.control_port}/sessions/pac/proxy.pac"
                runs["pac"] = ([f"--proxy-pac-url={pac_url}"], named)
                runs["bare"] = ([f"--proxy-server={_session(serve, 'bare')}"], named)
                for name, (proxy_args, base) in runs.items():
                    pid = baseline.pid if name == "mitmdump" else serve.pid
                    cpu = bench.cpu_seconds(pid)
                    result = asyncio.run(browse(base, proxy_args))
                    result["cpu_ms"] = (bench.cpu_seconds(pid) - cpu) / len(PAGES) * 1000
                    if index:
                        figures[name].append(result)
                        line = (
                            f"{result['load_s'] * 1000:7.1f} ms per page, {result['requests']:3.0f} requests"
                        )
                        print(
                            f"  round {index} {name:8}: {line}, proxy CPU {result['cpu_ms']:6.1f} ms per page"
                        )

    def med(name: str, key: str) -> float:
        return bench.median([r[key] for r in figures[name]])

    rows = [
        [
            name,
            f"{med(name, 'load_s') * 1000:.1f}",
            f"{med(name, 'requests'):.0f}",
            f"{med(name, 'cpu_ms'):.1f}",
        ]
        for name in figures
    ]
    bench.print_table(["through", "ms per page load", "requests", "proxy CPU ms per page"], rows)

    load = med("address", "load_s") / med("mitmdump", "load_s")
    requests = f"{med('address', 'requests'):.0f} vs {med('mitmdump', 'requests'):.0f}"
    print(f"page load, session address / mitmdump: {load:.2f}x (target <= 1.05x)")
    print(f"requests that reached the network, session address vs mitmdump: {requests} (target: equal)")
    cpu = med("pac", "cpu_ms") / med("bare", "cpu_ms")
    print(f"proxy CPU per page load, PAC / bare address: {cpu:.2f}x (target <= 0.4x)")
