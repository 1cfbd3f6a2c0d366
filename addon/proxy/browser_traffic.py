"""The browser's own requests: update and connectivity checks, never a page's, never an event.

Chromium and Firefox talk to their makers' services by themselves (component and extension updates,
connectivity and captive-portal checks, safe-browsing lists, telemetry). Through the proxy those
requests would become events of whichever session the browser's proxy settings name — a phantom
`POST` after the agent's last one can flip a `last_event_only` check — while the reference records
its HAR from the page's browser context, which never holds them. A request is the browser's own when
it goes to one of those services (and to no site of the site map) or carries the update client's
own headers (`X-Goog-Update-*`, which only ever go to the update host); it is counted in its
session and listed, never captured.
"""

from __future__ import annotations

from webarena_live.evaluator import BoundedMemo

SERVICE_HOSTS = (
    # Chromium: component updater, extension updates, connectivity checks, safe browsing,
    # optimization hints, variations, domain reliability, downloads of components.
    "update.googleapis.com",
    "clients2.google.com",
    "clients2.googleusercontent.com",
    "clientservices.googleapis.com",
    "safebrowsing.googleapis.com",
    "safebrowsing.google.com",
    "optimizationguide-pa.googleapis.com",
    "content-autofill.googleapis.com",
    "connectivitycheck.gstatic.com",
    "beacons.gcp.gvt2.com",
    "redirector.gvt1.com",
    "edgedl.me.gvt1.com",
    "dl.google.com",
    # Firefox: captive-portal checks, remote settings, push, updates, telemetry, tracking lists.
    "detectportal.firefox.com",
    "firefox.settings.services.mozilla.com",
    "push.services.mozilla.com",
    "shavar.services.mozilla.com",
    "aus5.mozilla.org",
    "incoming.telemetry.mozilla.org",
    "content-signature-2.cdn.mozilla.net",
)
"""Hosts (and their sub-domains) that only browsers' own services use: no page, no agent, asks them."""


def _service_host(host: str) -> bool:
    host = host.lower().rstrip(".")
    return any(host == name or host.endswith("." + name) for name in SERVICE_HOSTS)


is_service_host: BoundedMemo[str, bool] = BoundedMemo(_service_host, limit=1024)
"""Whether requests to `host` are the browser's own (a memo: every flow asks once per host)."""
