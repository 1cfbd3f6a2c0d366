"""HAR 1.2 entries shaped like Chromium's: the request headers a real browser sends.

Chromium marks what a request is for with `sec-fetch-*` headers: a clicked
link or a typed URL is `dest=document, mode=navigate, user=?1`; a fetch/XHR is
`dest=empty, mode=cors`; a script or stylesheet is `mode=no-cors`. The
evaluators tell navigations from the rest by exactly these headers, so the
generated traces carry them as Chromium would.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
)
DOCUMENT_ACCEPT = (
    "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
    "application/signed-exchange;v=b3;q=0.7"
)
JSON_ACCEPT = "application/json, text/javascript, */*; q=0.01"

CLOCK_START_MS = 1_700_000_000_000
_clock = {"ms": CLOCK_START_MS}


def reset_clock() -> None:
    """Timestamps start over, so that a suite's files do not depend on what the process generated before."""
    _clock["ms"] = CLOCK_START_MS


def _started() -> str:
    # Deterministic, increasing timestamps keep generated files byte-identical between runs.
    _clock["ms"] += 137
    seconds, ms = divmod(_clock["ms"], 1000)
    import datetime

    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms:03d}Z"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _headers(pairs: dict[str, str | None]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in pairs.items() if value is not None]


def _query_string(url: str) -> list[dict[str, str]]:
    from urllib.parse import parse_qsl

    return [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)]


def entry(
    method: str,
    url: str,
    *,
    request_headers: dict[str, str | None],
    status: int = 200,
    post_data: dict[str, Any] | None = None,
    response_mime: str = "text/html; charset=UTF-8",
    response_text: str | None = None,
    response_base64: bool = False,
    response_cookies: list[dict[str, Any]] | None = None,
    redirect_url: str = "",
) -> dict[str, Any]:
    """One HAR entry; `post_data` is a HAR postData object ({"mimeType", "text"})."""
    response_headers: dict[str, str | None] = {"Content-Type": response_mime, "Server": "nginx"}
    if redirect_url:
        response_headers["Location"] = redirect_url
    for cookie in response_cookies or []:
        response_headers.setdefault("Set-Cookie", f"{cookie['name']}={cookie['value']}; path=/")
    content: dict[str, Any] = {"size": 0, "mimeType": response_mime}
    if response_text is not None:
        content["size"] = len(response_text.encode())
        if response_base64:
            content["text"] = base64.b64encode(response_text.encode()).decode()
            content["encoding"] = "base64"
        else:
            content["text"] = response_text
    request: dict[str, Any] = {
        "method": method,
        "url": url,
        "httpVersion": "HTTP/1.1",
        "headers": _headers(request_headers),
        "queryString": _query_string(url),
        "cookies": [],
        "headersSize": -1,
        "bodySize": len(post_data["text"].encode()) if post_data else 0,
    }
    if post_data is not None:
        request["postData"] = post_data
    return {
        "startedDateTime": _started(),
        "time": 23.5,
        "request": request,
        "response": {
            "status": status,
            "statusText": _STATUS_TEXT.get(status, ""),
            "httpVersion": "HTTP/1.1",
            "headers": _headers(response_headers),
            "cookies": response_cookies or [],
            "content": content,
            "redirectURL": redirect_url,
            "headersSize": -1,
            "bodySize": content["size"],
        },
        "cache": {},
        "timings": {
            "blocked": 0.4,
            "dns": -1,
            "connect": -1,
            "send": 0.1,
            "wait": 20.0,
            "receive": 3.0,
            "ssl": -1,
        },
    }


_STATUS_TEXT = {
    200: "OK",
    201: "Created",
    204: "No Content",
    302: "Found",
    400: "Bad Request",
    404: "Not Found",
}


def navigation(
    url: str, *, referer: str | None = None, status: int = 200, redirect_url: str = "", user: bool = True
) -> dict[str, Any]:
    """A top-level document load, as Chromium sends it after a click or a typed URL."""
    return entry(
        "GET",
        url,
        request_headers={
            "Accept": DOCUMENT_ACCEPT,
            "Accept-Language": "en-US,en;q=0.9",
            "Referer": referer,
            "Sec-Fetch-Dest": "document",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-Site": "same-origin" if referer else "none",
            "Sec-Fetch-User": "?1" if user else None,
            "Upgrade-Insecure-Requests": "1",
            "User-Agent": USER_AGENT,
        },
        status=status,
        response_text=None if redirect_url else "<!doctype html><html><body>page</body></html>",
        redirect_url=redirect_url,
    )


def form_submit(
    method: str,
    url: str,
    post_data: dict[str, Any] | None,
    *,
    referer: str | None,
    status: int,
    redirect_url: str = "",
    response_cookies: list[dict[str, Any]] | None = None,
    extra_headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An HTML form submitted by the browser (a document request with a body)."""
    return entry(
        method,
        url,
        request_headers={
            "Accept": DOCUMENT_ACCEPT,
            "Content-Type": post_data["mimeType"] if post_data else None,
            "Origin": _origin(url),
            "Referer": referer,
            "Sec-Fetch-Dest": "document",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-Site": "same-origin",
            "Sec-Fetch-User": "?1",
            "User-Agent": USER_AGENT,
            **(extra_headers or {}),
        },
        status=status,
        post_data=post_data,
        redirect_url=redirect_url,
        response_cookies=response_cookies,
    )


def xhr(
    method: str,
    url: str,
    *,
    referer: str | None,
    status: int = 200,
    post_data: dict[str, Any] | None = None,
    response_json: Any = None,
    response_base64: bool = False,
    response_cookies: list[dict[str, Any]] | None = None,
    extra_headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A fetch/XHR call from page scripts, answered with JSON."""
    return entry(
        method,
        url,
        request_headers={
            "Accept": JSON_ACCEPT,
            "Content-Type": post_data["mimeType"] if post_data else None,
            "Origin": _origin(url) if method != "GET" else None,
            "Referer": referer,
            "Sec-Fetch-Dest": "empty",
            "Sec-Fetch-Mode": "cors",
            "Sec-Fetch-Site": "same-origin",
            "User-Agent": USER_AGENT,
            "X-Requested-With": "XMLHttpRequest",
            **(extra_headers or {}),
        },
        status=status,
        post_data=post_data,
        response_mime="application/json",
        response_text=json.dumps(response_json if response_json is not None else {"ok": True}),
        response_base64=response_base64,
        response_cookies=response_cookies,
    )


def asset(url: str, *, referer: str) -> dict[str, Any]:
    """A static asset (script, stylesheet, image or font) the page pulls in."""
    kind = url.rsplit(".", 1)[-1]
    dest = {"js": "script", "css": "style", "woff2": "font"}.get(kind, "image")
    mime = {"js": "application/javascript", "css": "text/css", "woff2": "font/woff2", "png": "image/png"}
    return entry(
        "GET",
        url,
        request_headers={
            "Accept": "*/*" if dest != "image" else "image/avif,image/webp,image/apng,image/*,*/*;q=0.8",
            "Referer": referer,
            "Sec-Fetch-Dest": dest,
            "Sec-Fetch-Mode": "no-cors" if dest != "font" else "cors",
            "Sec-Fetch-Site": "same-origin",
            "User-Agent": USER_AGENT,
        },
        response_mime=mime.get(kind, "application/octet-stream"),
    )


def form_body(fields: dict[str, str]) -> dict[str, Any]:
    from urllib.parse import urlencode

    return {"mimeType": "application/x-www-form-urlencoded", "text": urlencode(fields)}


def json_body(document: Any) -> dict[str, Any]:
    return {"mimeType": "application/json", "text": json.dumps(document)}


def multipart_body(
    fields: dict[str, str], boundary: str = "----WebKitFormBoundary7MA4YWxkTrZu0gW"
) -> dict[str, Any]:
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields.items()
    ]
    return {
        "mimeType": f"multipart/form-data; boundary={boundary}",
        "text": "".join(parts) + f"--{boundary}--\r\n",
    }


def har_document(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "webarena-live conformance generator", "version": "1"},
            "pages": [],
            "entries": entries,
        }
    }


def browsing_noise(base: str, count: int) -> list[dict[str, Any]]:
    """`count` entries of browsing unrelated to any task: pages, assets, JSON XHRs, form and JSON posts."""
    entries: list[dict[str, Any]] = []
    page = f"{base}/"
    for i in range(count):
        kind = i % 10
        if kind == 0:
            page = f"{base}/catalog/category/view/id/{i}?p={i % 7}"
            entries.append(navigation(page, referer=f"{base}/"))
        elif kind in (1, 2, 3, 4):
            ext = ("js", "css", "png", "woff2")[kind - 1]
            entries.append(asset(f"{base}/static/frontend/v{i}/asset{i}.{ext}", referer=page))
        elif kind in (5, 6, 7):
            entries.append(xhr("GET", f"{base}/customer/section/load/?sections=cart&_={i}", referer=page))
        elif kind == 8:
            body = form_body({"form_key": "abc", "q": f"query {i}"})
            entries.append(form_submit("POST", f"{base}/search/suggest/{i}", body, referer=page, status=200))
        else:
            body = json_body({"addressInformation": {"n": i}})
            entries.append(
                xhr("POST", f"{base}/rest/V1/guest-carts/{i}/totals", referer=page, post_data=body)
            )
    return entries
