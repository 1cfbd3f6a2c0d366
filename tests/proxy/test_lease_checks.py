"""A request held against its session's lease (`proxy/lease_checks.py`): the per-request answer from the
request's origin alone (`inside`) never says more than the whole URL says (`SiteMap.replicas_of`), and
says as much whenever the replicas are bare origins, so `check` counts and refuses exactly what it did
when it read every request's URL.

Real mitmproxy requests, real site maps and leases.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy import http
from mitmproxy.test import tflow

from webarena_live.evaluator import SiteMap
from webarena_live.proxy.capture import request_url
from webarena_live.proxy.lease_checks import REFUSED_KEY, check, inside
from webarena_live.replicas import Lease

ORIGINS = {
    "shopping": [["http://127.0.0.1:7770", "http://shop.test"], ["http://127.0.0.1:7771"]],
    "gitlab": [["https://git.test"], ["https://git.test:8443"]],
    "wikipedia": [["http://[::1]:7772"], ["http://SHOP.test:7773"]],
}
"""Two replicas a site, each of bare origins (a second name, a port, IPv6, a host in capitals)."""
WITH_PATH = {**ORIGINS, "shopping_admin": [["http://127.0.0.1:7780/admin"], ["http://127.0.0.1:7781/admin"]]}
"""The same with replicas that live under a path: then only the whole URL can answer."""


def site_map(sites: dict[str, list[list[str]]]) -> SiteMap:
    environments = {site: {"replicas": [{"urls": urls} for urls in copies]} for site, copies in sites.items()}
    return SiteMap.from_dict({"environments": environments})


def request(url: str, path: bytes | None = None, host: tuple[str, int] | None = None) -> http.Request:
    made = http.Request.make("GET", url)
    if path is not None:  # a request target no URL parser would write (`*`, no leading slash)
        made.data.path = path
    if host is not None:  # as a Host header or a CONNECT gives it: any case, IPv6, a default port
        made.data.host, made.data.port = host
    return made


def held_by_url(sites: SiteMap, lease: Lease, made: http.Request) -> bool:
    """What the proxy answered before: the replicas the whole URL is on, held or not."""
    return any(lease.holds(site, index) for site, index in sites.replicas_of(request_url(made)))


hosts = st.sampled_from([
    "http://127.0.0.1:7770", "http://127.0.0.1:7771", "http://shop.test", "http://SHOP.test",
    "http://shop.test:80", "https://git.test", "https://git.test:443", "https://git.test:8443",
    "http://git.test", "http://127.0.0.1:7780", "http://127.0.0.1:7781", "http://elsewhere.test",
])  # fmt: skip
paths = st.sampled_from(["/", "/p/1?q=2", "/admin", "/admin/orders", "/adminx", "/?x#y", ""])
targets = st.none() | st.sampled_from([b"*", b"admin", b"?x=1"])
raw_hosts = st.none() | st.sampled_from(
    [("SHOP.test", 80), ("shop.test", 80), ("::1", 7772), ("SHOP.test", 7773), ("shop.test", 7773),
     ("GIT.test", 443), ("127.0.0.1", 7771)]
)  # fmt: skip
leases = st.fixed_dictionaries({site: st.sampled_from([0, 1]) for site in WITH_PATH})
"""Which replica of each site the session holds."""


@settings(max_examples=600, deadline=None)
@given(
    layout=st.sampled_from([ORIGINS, WITH_PATH]),
    origin=hosts,
    path=paths,
    target=targets,
    raw_host=raw_hosts,
    held=leases,
)
def test_the_answer_from_the_origin_is_the_answer_from_the_whole_url(
    layout: dict[str, list[list[str]]],
    origin: str,
    path: str,
    target: bytes | None,
    raw_host: tuple[str, int] | None,
    held: dict[str, int],
) -> None:
    sites, lease = site_map(layout), Lease(dict(held), {})
    made = request(origin + path, target, raw_host)
    by_url = held_by_url(sites, lease, made)
    by_origin = inside(sites, lease, made.data)
    assert not by_origin or by_url  # it never lets in what the URL would not
    if layout is ORIGINS and made.data.path[:1] == b"/":
        assert by_origin == by_url  # and where it answers at all, it answers alike


def context_of(sites: SiteMap) -> Any:
    return SimpleNamespace(site_map=sites)  # all `check` reads of the control context


def session_of(lease: Lease) -> Any:
    return SimpleNamespace(attempt=SimpleNamespace(lease=lease))


@settings(max_examples=200, deadline=None)
@given(layout=st.sampled_from([ORIGINS, WITH_PATH]), origin=hosts, path=paths, held=leases)
def test_check_counts_and_refuses_what_the_whole_url_is_outside_of(
    layout: dict[str, list[list[str]]], origin: str, path: str, held: dict[str, int]
) -> None:
    sites, lease = site_map(layout), Lease(dict(held), {})
    flow = tflow.tflow(req=request(origin + path))
    check(context_of(sites), session_of(lease), flow, confine=True)
    refused = flow.metadata.get(REFUSED_KEY, False)
    outside = not held_by_url(sites, lease, flow.request)
    assert refused == outside and lease.outside == int(outside)
    if refused:
        assert flow.response is not None and flow.response.status_code == 403
        assert lease.recent_outside[-1].startswith(f"GET {flow.request.url} (")


def test_a_replica_held_is_in_and_the_other_is_counted_with_why() -> None:
    sites, lease = site_map(ORIGINS), Lease({"shopping": 1, "gitlab": 0}, {})
    held = tflow.tflow(req=request("http://127.0.0.1:7771/cart"))
    other = tflow.tflow(req=request("http://127.0.0.1:7770/cart"))
    for flow in (held, other):
        check(context_of(sites), session_of(lease), flow, confine=False)
    assert inside(sites, lease, held.request.data) and not inside(sites, lease, other.request.data)
    assert lease.outside == 1 and other.response is None  # counted, not refused, without --confine
    assert list(lease.recent_outside) == [
        "GET http://127.0.0.1:7770/cart (replica 0 of __SHOPPING__; the session holds replica 1)"
    ]
