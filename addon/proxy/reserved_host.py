"""The control app through the proxy: requests to `http://webarena-live.invalid/` are answered in place.

mitmproxy hosts the app (`mitmproxy.addons.asgiapp.serve`) on the flow, in
the proxy's loop; the caller's session, known from its proxy credentials, is
passed in a header the addon sets (and removes from what the client sent).
mitmproxy buffers the whole answer, so an event stream served this way is the
snapshot so far and ends (addon/control/streams.py).
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from mitmproxy import http
from mitmproxy.addons import asgiapp
from starlette.types import ASGIApp, Receive, Scope, Send

from webarena_live.control.app import CALLER_HEADER
from webarena_live.control.errors import error_response
from webarena_live.control.middleware import COMMON_HEADERS, MAX_CONTROL_BODY


async def serve_on_flow(app: ASGIApp, flow: http.HTTPFlow, *, caller: str | None) -> None:
    """Answer `flow` with `app`; `caller` is the session of the proxy credentials, if any."""
    request = flow.request
    request.headers.pop(CALLER_HEADER, None)  # only this addon names the caller
    if caller:
        request.headers[CALLER_HEADER] = quote(caller)
    raw_path, _, query = request.data.path.partition(b"?")

    async def as_sent(scope: Scope, receive: Receive, send: Send) -> None:
        # mitmproxy's scope quotes the path a second time and decodes the query; give the app the
        # request target as the client sent it, as uvicorn does on the control port.
        path = unquote(raw_path.decode("latin-1"))
        await app({**scope, "path": path, "raw_path": raw_path, "query_string": query}, receive, send)

    await asgiapp.serve(as_sent, flow)


def answer_too_large(flow: http.HTTPFlow) -> None:
    """The app's JSON 413, answered from the request's headers (its declared length is over the cap)."""
    detail = f"request body over {MAX_CONTROL_BODY} bytes"
    reply = error_response(413, "too_large", detail, method=flow.request.method, path=flow.request.path)
    headers = [*reply.raw_headers, (b"cache-control", b"no-store"), *COMMON_HEADERS]
    flow.response = http.Response.make(413, bytes(reply.body), headers)
